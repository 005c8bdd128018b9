# shellcheck shell=bash
# Bytecode shared between jobs (docs/runtime.md "Bytecode cache"): functions only.
#
# Every job starts with a fresh venv without .pyc files, so Python compiles everything the command
# imports again (0.4 s for numpy and pydantic here, seconds for torch). With a uv cache directory the
# first job of a set of installed packages compiles them, with the standard library, into a tree in
# that cache, in the background; later jobs point PYTHONPYCACHEPREFIX at the tree. Its .pyc files are
# hash-checked: valid whatever the files' times (copy mode gives new ones every job) and ignored, then
# rewritten, for any file whose content differs. The checkout is checked before the command starts:
# two commits may put different files of the same size at the same path in the same second, which a
# time-checked .pyc cannot tell apart.
#
# Shared caches are writable by many users, and a .pyc runs as whoever imports it: each user has a
# tree of their own (launchkit-bytecode-v1/u<uid>/KEY), used only when lk_private_tree trusts it.

# python -S -c "$LK_SEED_BYTECODE" DIR|stdlib...: hash-checked .pyc files for every .py under each
# DIR (`stdlib`: this Python's standard library) whose cached one is missing, time-checked or stale.
LK_SEED_BYTECODE='
import importlib.util as iu, os, py_compile, sys, sysconfig
mode = py_compile.PycInvalidationMode.CHECKED_HASH
for top in sys.argv[1:]:
    skip = {".git", ".venv", "__pycache__"}
    if top == "stdlib" or top.endswith("-packages"):  # a library: its tests are not imported
        skip |= {"site-packages", "dist-packages", "test", "tests", "idlelib"}
    for d, dirs, files in os.walk(sysconfig.get_path("stdlib") if top == "stdlib" else top):
        dirs[:] = [x for x in dirs if x not in skip]
        for f in files:
            if not f.endswith(".py"):
                continue
            src = os.path.join(d, f)
            try:
                with open(src, "rb") as h:
                    want = iu.MAGIC_NUMBER + b"\3\0\0\0" + iu.source_hash(h.read())
                with open(iu.cache_from_source(src), "rb") as h:
                    if h.read(16) == want:
                        continue
            except (OSError, ValueError):
                pass
            try:
                py_compile.compile(src, invalidation_mode=mode, quiet=2)
            except OSError:
                pass
'

# lk_private_tree DIR: DIR may be trusted as a cache only this user can have written: a real directory
# (not a symlink) owned by this uid with no access at all for group or others, so nobody else can
# reach anything below it, whatever the modes of the files in it. (The check for any shared tree.)
lk_private_tree() {
    local owner mode
    [[ -d $1 && ! -L $1 ]] || return 1
    read -r owner mode < <(stat -c '%u %a' -- "$1" 2>/dev/null) || return 1
    [[ $owner == "$EUID" ]] && (((8#$mode & 8#077) == 0))
}

# lk_bytecode_cache LOG: after the install, use this package set's tree (PYTHONPYCACHEPREFIX) when
# it is complete, or start filling it (or leave everything as it is: see docs/runtime.md).
lk_bytecode_cache() {
    local log=$1 sp key dir base mine f
    [[ ${LAUNCHKIT_BYTECODE_CACHE:-1} != 0 && -n ${UV_CACHE_DIR:-} ]] || return 0
    # the user's own choice; a local run (its venv path is new every run: nothing to share)
    [[ -z ${PYTHONPYCACHEPREFIX:-}${PYTHONDONTWRITEBYTECODE:-}${LAUNCHKIT_LOCAL_RUN:-} ]] || return 0
    # only a venv made here: an image's venv or system Python has its .pyc files already
    [[ -z ${LAUNCHKIT_UV_VENV:-} && ${LAUNCHKIT_SYSTEM_PYTHON:-} != 1 && -x $LK_VENV/bin/python ]] || return 0
    sp=$(printf '%s\n' "$LK_VENV"/lib/python3*/site-packages)
    [[ -d $sp ]] || return 0
    key=$({
        printf 'launchkit-bytecode-v1\n%s\n' "$LK_VENV"
        grep -m1 '^version_info' "$LK_VENV/pyvenv.cfg" || true
        for f in "$sp"/*.dist-info; do if [[ -e $f ]]; then printf '%s\n' "${f##*/}"; fi; done
    } | sha256sum)
    # launchkit-bytecode-v1 is shared (sticky, like /tmp: nobody moves another user's tree); under it,
    # this user's private tree, made 0700 before anything goes in
    base="$UV_CACHE_DIR/launchkit-bytecode-v1"
    mine="$base/u$EUID"
    [[ -d $base ]] || { mkdir -p -- "$base" && chmod 1777 -- "$base"; } 2>/dev/null || return 0
    [[ -e $mine || -L $mine ]] || (umask 077 && mkdir "$mine") 2>/dev/null || return 0
    if ! lk_private_tree "$mine"; then
        echo "[launchkit] bytecode cache: $mine is not this user's private directory (owner $EUID, mode 0700); not used" >>"$log"
        return 0
    fi
    dir="$mine/${key:0:32}"
    mkdir -p -- "$dir" 2>/dev/null && touch -- "$dir" 2>/dev/null || return 0 # touched: in use (pruning below)
    if [[ -e $dir/.seeded ]]; then
        PYTHONPYCACHEPREFIX=$dir "$LK_VENV/bin/python" -S -c "$LK_SEED_BYTECODE" "$LAUNCHKIT_RUNTIME_DIR" \
            >>"$log" 2>&1 || return 0
        export PYTHONPYCACHEPREFIX=$dir
        # shellcheck disable=SC2034 # read by entrypoint.sh (the parts are one script)
        LK_BYTECODE=1
        echo "[launchkit] bytecode cache: $dir" >>"$log"
    else
        # Off the critical path, and nothing waits for it: after the command's own start-up (which
        # compiles what it imports meanwhile), niced. A job that ends first leaves it to the next.
        echo "[launchkit] bytecode cache: filling $dir for later jobs" >>"$log"
        (sleep "${LAUNCHKIT_BYTECODE_SEED_DELAY:-20}" &&
            PYTHONPYCACHEPREFIX=$dir nice -n 19 "$LK_VENV/bin/python" -S -c "$LK_SEED_BYTECODE" stdlib "$sp" &&
            touch "$dir/.seeded") >>"$log" 2>&1 </dev/null &
    fi
    # trees no job used for 14 days (a job whose tree goes meanwhile just compiles again)
    (find "$mine" -mindepth 1 -maxdepth 1 -type d -mtime +14 -exec rm -rf {} + >/dev/null 2>&1 </dev/null &)
}
