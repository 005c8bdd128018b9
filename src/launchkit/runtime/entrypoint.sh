# shellcheck shell=bash
# Main flow of the launchkit entrypoint: clone the exact commit, set up Python, exec the command.
# Inputs: LAUNCHKIT_* environment variables (see docs/runtime.md) and the user's argv as "$@".
set -euo pipefail
# shellcheck disable=SC2034 # read by lk_timing_line (lib.sh; the parts are one script)
LK_T0=$(lk_now_ms)
# shellcheck disable=SC2034 # read by lk_node_dir (lib.sh): found anew, never taken from the environment
LK_NODE_DIR=''
lk_node_dir || true # now, before any cd (the --no-python path never needs it)
# The run's hooks (node/launch/notify.py): the Slack webhook and the events URL (--notify-secret) are kept
# from every step and the command: only the runtime that posts gets them (lk_exec), on a pipe. Beaker gives
# them in the environment; a local run's supervisor on a pipe named by LAUNCHKIT_HOOKS_FD, a line each,
# read here once and closed (no environment holds them).
# shellcheck disable=SC2034 # read by lk_exec (launchers.sh; the parts are one script)
LK_SLACK_WEBHOOK=${LAUNCHKIT_SLACK_WEBHOOK:-} LK_NOTIFY_URL=${LAUNCHKIT_NOTIFY_URL:-}
if [[ ${LAUNCHKIT_HOOKS_FD:-} =~ ^[0-9]+$ ]]; then
    # shellcheck disable=SC2034 # (as above)
    IFS= read -r -u "$LAUNCHKIT_HOOKS_FD" LK_SLACK_WEBHOOK || true
    # shellcheck disable=SC2034 # (as above)
    IFS= read -r -u "$LAUNCHKIT_HOOKS_FD" LK_NOTIFY_URL || true
    exec {LAUNCHKIT_HOOKS_FD}<&-
fi
unset LAUNCHKIT_SLACK_WEBHOOK LAUNCHKIT_NOTIFY_URL LAUNCHKIT_HOOKS_FD

# ---- 1. inputs: report everything that is missing at once
lk_check_inputs() {
    local -a problems=()
    [[ -n ${LAUNCHKIT_GIT_REMOTE:-} ]] || problems+=("LAUNCHKIT_GIT_REMOTE is not set")
    if [[ -z ${LAUNCHKIT_GIT_COMMIT:-} ]]; then
        problems+=("LAUNCHKIT_GIT_COMMIT is not set")
    elif [[ ! $LAUNCHKIT_GIT_COMMIT =~ ^[0-9a-fA-F]{4,64}$ ]]; then
        problems+=("LAUNCHKIT_GIT_COMMIT='$LAUNCHKIT_GIT_COMMIT' is not a commit SHA")
    fi
    (($# > 0)) || problems+=("no command given (the user's argv follows the script)")
    command -v git >/dev/null 2>&1 || problems+=("git is not installed in the image")
    case ${LAUNCHKIT_PYTHON_MANAGER:-uv} in
        uv | conda) ;;
        *) problems+=("LAUNCHKIT_PYTHON_MANAGER='$LAUNCHKIT_PYTHON_MANAGER' must be uv or conda") ;;
    esac
    if [[ -n ${LAUNCHKIT_UV_VENV:-} && $LAUNCHKIT_UV_VENV != /* ]]; then
        problems+=("LAUNCHKIT_UV_VENV='$LAUNCHKIT_UV_VENV' is not an absolute path")
    fi
    case ${LAUNCHKIT_EXEC_METHOD:-exec} in
        exec | bash) ;;
        *) problems+=("LAUNCHKIT_EXEC_METHOD='$LAUNCHKIT_EXEC_METHOD' must be exec or bash") ;;
    esac
    if [[ ${LAUNCHKIT_NO_PYTHON:-} != 1 && ${LAUNCHKIT_SYSTEM_PYTHON:-} == 1 ]] &&
        ! command -v python3 >/dev/null 2>&1 && ! command -v python >/dev/null 2>&1; then
        problems+=("LAUNCHKIT_SYSTEM_PYTHON=1 but the image has no python3")
    fi
    ((${#problems[@]})) || return 0
    printf '[launchkit] error: %s\n' "${problems[@]}" >&2 # (the format again for each one)
    lk_die "$LK_EXIT_INPUTS" "the job cannot start: ${#problems[@]} input problem(s) above"
}
lk_check_inputs "$@"

# What a spec leaves out because it is a default or follows from the rest (docs/runtime.md, contract)
lk_task_env() {
    local LC_ALL=C item key
    if [[ -n ${LAUNCHKIT_LAUNCHER:-} ]]; then
        export LAUNCHKIT_RDZV_ID=${LAUNCHKIT_RDZV_ID:-${LAUNCHKIT_RUN_ID:-launchkit}}
    fi
    if [[ -n ${LAUNCHKIT_SWEEP:-} ]]; then # k=v,k=v: LAUNCHKIT_SWEEP_<K>=v (values hold no ',')
        local -a items
        IFS=, read -ra items <<<"$LAUNCHKIT_SWEEP"
        for item in "${items[@]}"; do
            key=LAUNCHKIT_SWEEP_${item%%=*}
            key=${key^^}
            [[ $item == *=* && $key =~ ^[A-Z_][A-Z0-9_]*$ && -z ${!key+x} ]] && export "$key=${item#*=}"
        done
    fi
    if [[ -n ${LAUNCHKIT_TASK_INDEX:-} ]]; then
        export LAUNCHKIT_TASK_LABEL=${LAUNCHKIT_TASK_LABEL:-${LAUNCHKIT_SWEEP:-${LAUNCHKIT_TASK_NAME:-}}}
    fi
    return 0
}
lk_task_env
# The run's id as launchkit shows it, the same in every attempt (docs/retries.md): the experiment's id
# (a local run's, from its supervisor); else the spec's own, the launch's hash.
if [[ -n ${BEAKER_EXPERIMENT_ID:-} ]]; then export LAUNCHKIT_RUN_ID=$BEAKER_EXPERIMENT_ID; fi
RESULTS_DIR=${RESULTS_DIR:-/results}
LAUNCHKIT_RUNTIME_DIR=${LAUNCHKIT_RUNTIME_DIR:-/launchkit-runtime}
LAUNCHKIT_EXEC_METHOD=${LAUNCHKIT_EXEC_METHOD:-exec}
LK_LOG_DIR="$RESULTS_DIR/.launchkit/logs"
LK_TOOLS=${LAUNCHKIT_TOOLS_DIR:-${TMPDIR:-/tmp}/launchkit-tools}
LK_VENV=${LAUNCHKIT_UV_VENV:-$LAUNCHKIT_RUNTIME_DIR/.venv} # --uv-venv: an existing venv of the image
LK_CONDA=''
[[ ${LAUNCHKIT_NO_PYTHON:-} != 1 && ${LAUNCHKIT_PYTHON_MANAGER:-uv} == conda ]] && LK_CONDA=1
export RESULTS_DIR LAUNCHKIT_RUNTIME_DIR LAUNCHKIT_EXEC_METHOD PYTHONUNBUFFERED=${PYTHONUNBUFFERED:-1}
export PATH="$PATH:$LK_TOOLS/bin"
mkdir -p -- "$RESULTS_DIR" "$LK_LOG_DIR" "$LAUNCHKIT_RUNTIME_DIR" "$LK_TOOLS/bin" ||
    lk_die "$LK_EXIT_INPUTS" "cannot create RESULTS_DIR=$RESULTS_DIR or LAUNCHKIT_RUNTIME_DIR=$LAUNCHKIT_RUNTIME_DIR"
cd -- "$LAUNCHKIT_RUNTIME_DIR"
lk_write_credentials

# Setup failures: the EXIT trap names the failed step, shows its log and exits with its code.
LK_STEP='' LK_STEP_CODE=0 LK_STEP_LOG='' LK_PREP_PID='' LK_PROGRESS_PID='' LK_ERR=''
lk_step() { LK_STEP=$1 LK_STEP_CODE=$2 LK_STEP_LOG=${3:-}; }
lk_on_exit() {
    local rc=$?
    [[ -n $LK_PREP_PID ]] && lk_kill_tree "$LK_PREP_PID"
    [[ -n $LK_ERR ]] && exec 2>&"$LK_ERR" # (a hook that exits inside lk_install's redirection)
    [[ -z $LK_PROGRESS_PID ]] || { kill -KILL "$LK_PROGRESS_PID"; wait "$LK_PROGRESS_PID"; } 2>/dev/null || true # (lk_progress_start)
    if [[ -n $LK_STEP && $rc -ne 0 ]]; then
        [[ -n $LK_STEP_LOG ]] && lk_show_log "$LK_STEP_LOG"
        printf '[launchkit] error: %s failed (exit %d); the command was not started\n' "$LK_STEP" "$rc" >&2
        exit "$LK_STEP_CODE"
    fi
}
trap lk_on_exit EXIT
trap 'LK_STEP=; exit 143' TERM
trap 'LK_STEP=; exit 130' INT

# ---- 2. pre-setup hook
if [[ -n ${LAUNCHKIT_PRE_SETUP:-} ]]; then
    t=$(lk_now_ms)
    lk_step "pre-setup hook" "$LK_EXIT_PRE_SETUP"
    lk_run_hook "$LAUNCHKIT_PRE_SETUP"
    lk_timed pre-setup "$t"
fi

# ---- 3. things that do not need the clone run in the background: uv, the interpreter, the venv
lk_ensure_uv() {
    command -v uv >/dev/null 2>&1 && return 0
    local py
    py=$(command -v python3 || command -v python || true)
    # shellcheck disable=SC2153 # LK_PREP_LOG is set by lk_log_file (printf -v) before this runs
    if [[ -n $py ]] && lk_retry 3 "$LK_PREP_LOG.uv" "$py" -m pip install -q --disable-pip-version-check \
        --target "$LK_TOOLS/uv-pkg" uv && [[ -x $LK_TOOLS/uv-pkg/bin/uv ]]; then
        ln -sf "$LK_TOOLS/uv-pkg/bin/uv" "$LK_TOOLS/bin/uv"
        return 0
    fi
    if command -v curl >/dev/null 2>&1; then
        # shellcheck disable=SC2016
        lk_retry 5 "$LK_PREP_LOG.uv" sh -c 'curl -LsSf https://astral.sh/uv/install.sh | env UV_UNMANAGED_INSTALL="$1" sh' \
            sh "$LK_TOOLS/bin" && return 0
    fi
    echo "uv is not installed and could not be installed (pip and curl both failed)"
    return 1
}
lk_prepare_python() { # background: exit code says which step failed
    cd -- "$LK_TOOLS" # not the runtime dir: the clone may add a .python-version meanwhile
    lk_ensure_uv || exit "$LK_EXIT_UV"
    [[ ${LAUNCHKIT_SYSTEM_PYTHON:-} == 1 ]] && return 0
    if [[ -n ${LAUNCHKIT_UV_VENV:-} ]]; then
        [[ -x $LK_VENV/bin/python && -f $LK_VENV/pyvenv.cfg ]] && return 0
        echo "LAUNCHKIT_UV_VENV=$LK_VENV is not a virtual environment (no pyvenv.cfg or bin/python)"
        exit "$LK_EXIT_VENV"
    fi
    uv venv -q --allow-existing ${LAUNCHKIT_PYTHON_VERSION:+"--python=$LAUNCHKIT_PYTHON_VERSION"} -- "$LK_VENV" ||
        exit "$LK_EXIT_VENV"
}
if [[ ${LAUNCHKIT_NO_PYTHON:-} != 1 && -z $LK_CONDA ]]; then
    # A shared uv cache (--uv-cache-dir, or the cluster profile's) that is not there is not worth
    # failing the job for: uv's default cache works, only slower.
    if [[ -n ${UV_CACHE_DIR:-} ]] && ! { mkdir -p -- "$UV_CACHE_DIR" && [[ -w $UV_CACHE_DIR ]]; } 2>/dev/null; then
        lk_log "warning: UV_CACHE_DIR=$UV_CACHE_DIR is not a writable directory; using uv's default cache"
        unset UV_CACHE_DIR
    fi
    lk_log_file LK_PREP_LOG python
    LK_PREP_T=$(lk_now_ms)
    (
        trap - EXIT TERM INT
        lk_prepare_python
        lk_timed uv+venv "$LK_PREP_T"
        printf '%s\n' "${LK_TIMINGS[-1]}" >"$LK_LOG_DIR/.uv+venv.timing"
    ) >"$LK_PREP_LOG" 2>&1 &
    LK_PREP_PID=$!
fi

# ---- 4. clone exactly the commit
lk_clone() {
    local log remote sha=$LAUNCHKIT_GIT_COMMIT rc=0
    lk_log_file log clone
    lk_step clone "$LK_EXIT_CLONE" "$log"
    remote=$(lk_https_remote "$LAUNCHKIT_GIT_REMOTE")
    lk_run_logged "$log" lk_git init -q .
    lk_git remote remove origin >/dev/null 2>&1 || true
    lk_run_logged "$log" lk_git remote add -- origin "$remote"
    LK_RETRY_STOP=lk_clone_permanent lk_retry "${LAUNCHKIT_GIT_RETRIES:-5}" "$log" \
        lk_git fetch -q --no-tags --depth 1 origin "$sha" || rc=$?
    if ((rc == 2)) && lk_auth_failed "$log"; then
        lk_show_log "$log"
        lk_die "$LK_EXIT_CLONE" "cannot access $(lk_redact_url "$remote"): authentication failed" \
            "(for a private repository set GITHUB_TOKEN, or LAUNCHKIT_GIT_TOKEN for other hosts, from a secret)"
    elif ((rc == 2)); then # the server refuses fetching a SHA (or does not have it): fetch everything
        printf '[launchkit] shallow fetch of %s refused; fetching all branches and tags\n' "$sha" >>"$log"
        rc=0
        lk_retry "${LAUNCHKIT_GIT_RETRIES:-5}" "$log" lk_git fetch -q --tags origin \
            '+refs/heads/*:refs/remotes/origin/*' || rc=$?
    fi
    if ((rc != 0)); then
        lk_show_log "$log"
        lk_die "$LK_EXIT_CLONE" "could not fetch from $(lk_redact_url "$remote") after ${LAUNCHKIT_GIT_RETRIES:-5} attempts"
    fi
    if ! git rev-parse -q --verify "$sha^{commit}" >/dev/null 2>&1; then
        lk_show_log "$log"
        lk_die "$LK_EXIT_CLONE" "commit $sha is not in $(lk_redact_url "$remote") (was it pushed?)"
    fi
    lk_run_logged "$log" lk_git checkout -q -f "$sha"
    [[ -n ${LAUNCHKIT_GIT_TAG:-} && -n ${LAUNCHKIT_GIT_TAG_COMMIT:-} ]] && lk_version_tag "$log"
    if [[ -f .gitmodules ]]; then
        lk_step submodules "$LK_EXIT_SUBMODULES" "$log"
        lk_retry 3 "$log" lk_git submodule update -q --init --recursive --depth 1 --jobs 4 ||
            lk_retry 2 "$log" lk_git submodule update -q --init --recursive --jobs 4
    fi
}
# The commit's nearest version tag as launch-time `git describe` found it, recreated here (a local
# lightweight tag) so setuptools-scm, hatch-vcs and versioneer see the same version: the history
# back to the tagged commit is fetched (--depth distance+1), not every tag and branch.
lk_version_tag() {
    local log=$1 tag=$LAUNCHKIT_GIT_TAG tagged=$LAUNCHKIT_GIT_TAG_COMMIT n=${LAUNCHKIT_GIT_TAG_DISTANCE:-0}
    local max=${LAUNCHKIT_GIT_TAG_MAX_DEPTH:-5000}
    [[ $n =~ ^[0-9]+$ && $tagged =~ ^[0-9a-fA-F]{40}$ ]] || return 0
    if ! git rev-parse -q --verify "$tagged^{commit}" >/dev/null 2>&1; then
        if ((n > max)); then
            lk_log "warning: $n commits since tag $tag (more than $max): not fetched, so a version from git tags is wrong"
            return 0
        fi
        lk_retry 3 "$log" lk_git fetch -q --no-tags --depth "$((n + 1))" origin "$LAUNCHKIT_GIT_COMMIT" ||
            { lk_log "warning: could not fetch the history back to tag $tag: a version from git tags is wrong"; return 0; }
    fi
    if git rev-parse -q --verify "$tagged^{commit}" >/dev/null 2>&1; then
        lk_run_logged "$log" git tag -f -- "$tag" "$tagged" || true
    fi
}
lk_clone_permanent() { lk_auth_failed "$1" || lk_fetch_refused "$1"; }
t=$(lk_now_ms)
cd -- "$LAUNCHKIT_RUNTIME_DIR" # (a pre-setup hook may have changed directory)
lk_clone
lk_timed clone "$t"

# ---- 5. cluster setup (nccl.sh), in this shell so its exports reach the command
lk_step "cluster setup" "$LK_EXIT_CLUSTER_SETUP"
lk_cluster_setup

# ---- 6. Python environment, chosen by what the commit contains: runtime/node/environment/pyenv.py (under the
# interpreter it installs into). What stays here: the conda environment (created and activated in this
# shell, as the venv is in step 3), the custom --install command (its exports reach the command) and
# the progress lines.

# conda (LAUNCHKIT_PYTHON_MANAGER=conda): an existing env of the image (LAUNCHKIT_CONDA_ENV, a name
# or a prefix; updated from LAUNCHKIT_CONDA_FILE if given), else a new env in the runtime dir from
# the file, else a new env with python and pip. Activated in this shell.
lk_conda_env() {
    local log prefix base
    lk_log_file log conda
    lk_step "conda environment" "$LK_EXIT_VENV" "$log"
    command -v conda >/dev/null 2>&1 ||
        lk_die "$LK_EXIT_VENV" "--python-manager conda: the image has no conda (use an image with conda, or uv)"
    [[ -z ${LAUNCHKIT_CONDA_FILE:-} || -f $LAUNCHKIT_CONDA_FILE ]] ||
        lk_die "$LK_EXIT_VENV" "conda file $LAUNCHKIT_CONDA_FILE is not in commit $LAUNCHKIT_GIT_COMMIT (is it committed?)"
    if [[ -n ${LAUNCHKIT_CONDA_ENV:-} ]]; then
        prefix=$LAUNCHKIT_CONDA_ENV
        if [[ $prefix != /* ]]; then
            base=$(conda info --base 2>>"$log") || lk_die "$LK_EXIT_VENV" "conda info --base failed"
            [[ $prefix == base ]] && prefix=$base || prefix="$base/envs/$prefix"
        fi
        [[ -d $prefix ]] || lk_die "$LK_EXIT_VENV" "conda environment ${LAUNCHKIT_CONDA_ENV} not found (no $prefix)"
        if [[ -n ${LAUNCHKIT_CONDA_FILE:-} ]]; then
            lk_run_logged "$log" conda env update "--prefix=$prefix" "--file=$LAUNCHKIT_CONDA_FILE"
        fi
    else
        prefix="$LAUNCHKIT_RUNTIME_DIR/.conda-env"
        if [[ -n ${LAUNCHKIT_CONDA_FILE:-} ]]; then
            lk_run_logged "$log" conda env create "--prefix=$prefix" "--file=$LAUNCHKIT_CONDA_FILE"
        else
            lk_run_logged "$log" conda create -y "--prefix=$prefix" "python${LAUNCHKIT_PYTHON_VERSION:+=$LAUNCHKIT_PYTHON_VERSION}" pip
        fi
    fi
    local activate=''
    if activate=$(conda shell.bash activate "$prefix" 2>>"$log") && [[ -n $activate ]]; then
        set +u # activation scripts of conda packages may read unset variables
        eval "$activate"
        set -u
    else
        export PATH="$prefix/bin:$PATH" CONDA_PREFIX="$prefix" CONDA_DEFAULT_ENV="$prefix"
    fi
    unset PYTHONHOME VIRTUAL_ENV
    [[ -x $prefix/bin/python ]] || lk_die "$LK_EXIT_VENV" "conda environment $prefix has no bin/python"
    lk_log "conda environment $prefix"
}
# Long installs are not silent: runtime/node/environment/progress.py says every LAUNCHKIT_PROGRESS_SECONDS
# how long so far, with the log's last line. Started as the background process itself (no subshell
# around it), so that a plain `kill` ends it: the EXIT trap must not call functions (bash loses its
# function context when a hook's `exit` or error runs the trap from inside one). SIGKILL: a TERM sent
# before the child's exec meets this shell's TERM trap there and is lost; it ends when bash does too.
lk_progress_start() { # lk_progress_start PYTHON LABEL LOG
    [[ -n $LK_NODE_DIR ]] || return 0
    PYTHONPATH="$LK_NODE_DIR${PYTHONPATH:+:$PYTHONPATH}" "$1" -s "$LK_NODE_DIR/launchkit_node/boot.py" \
        progress "$2" "$3" "$$" </dev/null >/dev/null & # ($$: its parent, this shell; $BASHPID: the child)
    LK_PROGRESS_PID=$!
}
lk_progress_stop() { # (waited for: no line of it comes after the step)
    [[ -z $LK_PROGRESS_PID ]] || { kill -KILL "$LK_PROGRESS_PID"; wait "$LK_PROGRESS_PID"; } 2>/dev/null || true
    LK_PROGRESS_PID=''
}

# The bytecode cache (7b) applies: a venv of this job's (not conda) on a uv cache directory, not a
# local run, not turned off. Checked here too, to spare a Python start when it does not.
lk_bytecode_applies() {
    [[ ${LAUNCHKIT_NO_PYTHON:-} != 1 && -z $LK_CONDA && -n ${UV_CACHE_DIR:-} && -z ${LAUNCHKIT_LOCAL_RUN:-} ]] &&
        ! lk_off LAUNCHKIT_BYTECODE_CACHE
}
LK_BYTECODE='' LK_BYTECODE_DONE='' LK_BYTECODE_MS=0
lk_install() { # lk_install PYTHON: install into PYTHON's environment; sets LK_INSTALL_KIND
    local log py=$1 tool=uv bclog out
    [[ -n $LK_CONDA ]] && tool=pip
    lk_log_file log install
    lk_step install "$LK_EXIT_INSTALL" "$log"
    lk_progress_start "$py" install "$log"
    if [[ -n ${LAUNCHKIT_INSTALL_CMD:-} ]]; then
        exec {LK_ERR}>&2 # the job's stderr, for the EXIT trap's lines should the hook exit in the log's redirection
        { lk_run_hook "$LAUNCHKIT_INSTALL_CMD"; } >>"$log" 2>&1
        exec {LK_ERR}>&- && LK_ERR=''
        LK_INSTALL_KIND=custom
        ( lk_node "$py" freeze "$tool" >/dev/null 2>&1 </dev/null & ) # the record, off the critical path
    elif [[ -n $LK_CONDA ]]; then
        LK_INSTALL_KIND=$(lk_node "$py" conda-install "$log")
    elif [[ -z ${LAUNCHKIT_POST_SETUP:-} ]] && lk_bytecode_applies; then
        # no hook can change the venv in between: the bytecode step (7b) in the same Python process
        lk_log_file bclog bytecode
        out=$(lk_node "$py" install "$log" "$LK_VENV" --bytecode "$bclog" "$LAUNCHKIT_RUNTIME_DIR")
        # the kind, then `bytecode MS [TREE]` (pyenv.py: install): LK_BYTECODE_DONE is that word
        { IFS= read -r LK_INSTALL_KIND && read -r LK_BYTECODE_DONE LK_BYTECODE_MS LK_BYTECODE; } <<<"$out" || true
    else
        LK_INSTALL_KIND=$(lk_node "$py" install "$log" "$LK_VENV")
    fi
    # it ran the runtime (boot.py refuses a Python older than 3.8): lk_exec need not ask it again
    # shellcheck disable=SC2034 # read by lk__python (launchers.sh; the parts are one script)
    [[ -n ${LAUNCHKIT_INSTALL_CMD:-} ]] || LK_PY_RAN=$py
    lk_progress_stop
}
# A venv linked to the env store (runtime/node/environment/envstore.py) names its entry's lease file: held open here
# with a shared flock, the descriptor inherited by the command, so no prune removes the entry while
# the job runs. (flock(1) when the image has it, else the job's Python: the lock stays with the
# descriptor after either exits.)
lk_hold_lease() {
    local lease
    [[ -f $LK_VENV/.launchkit-envstore-lease ]] || return 0
    IFS= read -r lease <"$LK_VENV/.launchkit-envstore-lease" || return 0
    { exec {LK_LEASE_FD}<"$lease"; } 2>/dev/null || { lk_log "warning: cannot open the env store lease $lease"; return 0; }
    if command -v flock >/dev/null 2>&1; then
        flock -s -n "$LK_LEASE_FD" && return 0
    else
        "$LK_PY" -I -S -c 'import fcntl, sys; fcntl.flock(int(sys.argv[1]), fcntl.LOCK_SH | fcntl.LOCK_NB)' \
            "$LK_LEASE_FD" 2>/dev/null && return 0
    fi
    lk_log "warning: cannot lock the env store lease $lease: a prune may remove the entry while this job runs"
}
if [[ -n $LK_CONDA ]]; then
    t=$(lk_now_ms)
    lk_conda_env
    lk_timed conda "$t"
    t=$(lk_now_ms)
    LK_PY=python
    lk_install "$LK_PY"
    lk_timed "install[$LK_INSTALL_KIND]" "$t"
elif [[ ${LAUNCHKIT_NO_PYTHON:-} != 1 ]]; then
    lk_step "python setup" "$LK_EXIT_VENV" "$LK_PREP_LOG"
    rc=0
    wait "$LK_PREP_PID" || rc=$?
    LK_PREP_PID=''
    if ((rc != 0)); then
        lk_show_log "$LK_PREP_LOG"
        ((rc == LK_EXIT_UV)) && lk_die "$rc" "uv is not available and could not be installed"
        lk_die "$rc" "could not create the Python environment${LAUNCHKIT_PYTHON_VERSION:+ (python $LAUNCHKIT_PYTHON_VERSION)}"
    fi
    lk_prep_timing='uv+venv ?'
    IFS= read -r lk_prep_timing 2>/dev/null <"$LK_LOG_DIR/.uv+venv.timing" || true # (a read: no process)
    LK_TIMINGS+=("$lk_prep_timing")
    if [[ ${LAUNCHKIT_SYSTEM_PYTHON:-} != 1 ]]; then
        export VIRTUAL_ENV="$LK_VENV" UV_PROJECT_ENVIRONMENT="$LK_VENV" PATH="$LK_VENV/bin:$PATH"
        unset PYTHONHOME
        LK_PY="$LK_VENV/bin/python"
    else
        LK_PY=$(command -v python3 || command -v python)
    fi
    t=$(lk_now_ms)
    lk_install "$LK_PY"
    lk_hold_lease
    lk_timed "install[$LK_INSTALL_KIND]" "$((t + LK_BYTECODE_MS))" # (the bytecode step's time apart)
elif [[ -n ${LAUNCHKIT_INSTALL_CMD:-} ]]; then # --no-python --install: only the command (as gantry)
    t=$(lk_now_ms)
    lk_step install "$LK_EXIT_INSTALL"
    lk_run_hook "$LAUNCHKIT_INSTALL_CMD"
    lk_timed "install[custom]" "$t"
fi

# ---- 7. post-setup hook
if [[ -n ${LAUNCHKIT_POST_SETUP:-} ]]; then
    t=$(lk_now_ms)
    lk_step "post-setup hook" "$LK_EXIT_POST_SETUP"
    lk_run_hook "$LAUNCHKIT_POST_SETUP"
    lk_timed post-setup "$t"
fi
# ---- 7b. bytecode shared between jobs (runtime/node/environment/bytecode.py): after the hook, which may install
# more (without a hook, the install step did it: lk_install).
if [[ -z $LK_BYTECODE_DONE ]] && lk_bytecode_applies; then
    t=$(lk_now_ms)
    lk_log_file log bytecode
    LK_BYTECODE=$(lk_node "$LK_PY" bytecode "$log" "$LK_VENV" "$LAUNCHKIT_RUNTIME_DIR") || LK_BYTECODE=''
    LK_BYTECODE_MS=$(($(lk_now_ms) - t))
fi
if [[ -n $LK_BYTECODE ]]; then # (either way)
    export PYTHONPYCACHEPREFIX=$LK_BYTECODE
    LK_TIMINGS+=("bytecode $(lk_fmt_ms "$LK_BYTECODE_MS")")
fi
if [[ ${BEAKER_ASSIGNED_GPU_COUNT:-0} != 0 ]] && command -v nvidia-smi >/dev/null 2>&1; then
    lk_log_file log nvidia-smi
    ( nvidia-smi >"$log" 2>&1 </dev/null & ) # for the record only: not on the critical path
fi

# --resumable: one W&B run per launch (and task), the same through every retry and preemption restart
# of that experiment: the id comes from BEAKER_EXPERIMENT_ID, which only a new launch changes.
if [[ ${LAUNCHKIT_RESUMABLE:-} == 1 && -z ${WANDB_RUN_ID:-} ]]; then
    lk_src=${BEAKER_EXPERIMENT_ID:-}
    if [[ -z $lk_src ]]; then
        lk_log "warning: BEAKER_EXPERIMENT_ID is not set: the W&B run id comes from the spec (LAUNCHKIT_RUN_ID)"
        lk_src=${LAUNCHKIT_RUN_ID:-launchkit}
    fi
    lk_src=$(printf '%s/%s' "$lk_src" "${LAUNCHKIT_TASK_NAME:-main}" | sha256sum)
    export WANDB_RUN_ID="lk-${lk_src:0:16}" WANDB_RESUME=${WANDB_RESUME:-allow}
    lk_log "W&B run id $WANDB_RUN_ID (resumable)"
fi

# ---- 8. exec the command (launchers.sh: lk_exec); from here on the job's exit code is the command's
LK_STEP=''
trap - EXIT TERM INT
cd -- "$LAUNCHKIT_RUNTIME_DIR"
lk_exec "$@"
