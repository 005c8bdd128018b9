# shellcheck shell=bash
# The entrypoint's last step: run the user's command; from here on the job's exit code is the command's.
# Contract: lk_exec "$@" never returns. Inputs: LAUNCHKIT_LAUNCHER (torchrun|accelerate|ray; empty or
# none: the command as is), LAUNCHKIT_EXEC_METHOD (exec|bash), LK_T0/LK_TIMINGS (the timing line).
# With a launcher, the Python runtime (node/launch/launchers.py, docs/multi-node.md) builds its argv and execs it,
# or supervises Ray's head or worker; with a watchdog setting it runs the command under the watchdog.
# Without either, and in images without Python (--no-python), bash runs the command itself.

lk_exec() {
    local py hook cwd=$PWD
    local -a timing=()
    local watched=${LK_SLACK_WEBHOOK:-}${LK_NOTIFY_URL:-} # (entrypoint.sh) the runtime posts: it stays the parent
    lk__policy_parent && watched=policy # a watchdog, --require-resume (node/policy.py)
    # a retried attempt: the runtime checks that it resumed (watchdog.py) where a Python can
    [[ -z ${LAUNCHKIT_RESUME_FROM:-} || -n $watched ]] || { lk__python py && watched=resume; }
    if [[ -n $watched || ${LAUNCHKIT_LAUNCHER:-none} != none ]]; then
        # a launcher, or the watchdog (node/launch/watchdog.py: --stall-timeout, --inactive-timeout, Slack)
        lk__python py || lk__no_launcher_without_python
        lk_node_dir || lk_die "$LK_EXIT_INPUTS" "the runtime is incomplete: no launchkit_node package"
        [[ -n ${LK_T0:-} ]] && timing=(--t0 "$LK_T0" "${LK_TIMINGS[@]/#/--timing=}")
        # started in its own directory, so that no file of the checkout can shadow one of its modules
        cd -- "$LK_NODE_DIR" || lk_die "$LK_EXIT_INPUTS" "cannot enter $LK_NODE_DIR"
        # -S: no site-packages at start (~15 ms); node/launch/launchers.py adds them only when it looks for a module
        # the hooks on a pipe (a here-string, a line each), read once by the runtime: never in its environment
        [[ -z ${LK_SLACK_WEBHOOK:-}${LK_NOTIFY_URL:-} ]] ||
            { exec {hook}<<<"${LK_SLACK_WEBHOOK:-}"$'\n'"${LK_NOTIFY_URL:-}"; timing+=(--webhook-fd "$hook"); }
        PYTHONPATH="$LK_NODE_DIR${PYTHONPATH:+:$PYTHONPATH}" exec "$py" -s -S -m launchkit_node launch \
            --cwd "$cwd" "${timing[@]}" -- "$@"
    fi
    [[ -n ${LK_T0:-} ]] && lk_timing_line
    [[ ${LAUNCHKIT_EXEC_METHOD:-exec} == exec ]] && exec "$@"
    # bash method (gantry's): the words are joined and run as a script, `bash -c "$*"`, so
    # `$BEAKER_REPLICA_RANK`, `a && b` and globs expand in the job. bash stays the parent (reaps
    # orphans, forwards signals). A signal that arrives while the child is being started is forwarded
    # right after.
    LK_CHILD='' LK_PENDING=''
    local sig rc
    for sig in TERM INT HUP USR1 USR2; do
        # shellcheck disable=SC2064
        trap "lk__forward $sig" "$sig"
    done
    bash -c "$*" "$1" <&0 &
    LK_CHILD=$!
    [[ -z $LK_PENDING ]] || kill -s "$LK_PENDING" "$LK_CHILD" 2>/dev/null || true
    if ((BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] >= 501)); then
        while :; do # `wait -p` tells an exit (pid set) from an interruption by a forwarded signal
            LK_DONE='' rc=0
            wait -n -p LK_DONE "$LK_CHILD" || rc=$?
            [[ -z ${LK_DONE:-} ]] || exit "$rc"
        done
    fi
    while :; do
        rc=0
        wait "$LK_CHILD" || rc=$?
        kill -0 "$LK_CHILD" 2>/dev/null || exit "$rc"
    done
}

lk__forward() {
    if [[ -z $LK_CHILD ]]; then LK_PENDING=$1; return; fi
    kill -s "$1" "$LK_CHILD" 2>/dev/null || true
}

# lk__python VAR: the interpreter for the runtime, the first Python 3.8+ of `python` and `python3` on
# PATH: the job's environment's (activated), or with --no-python the image's. One call tells its
# version and its executable, which is what runs (a shim, as pyenv's, is then not resolved twice);
# the job's own Python, when `python` is the one that already ran the runtime (LK_PY_RAN, entrypoint.sh:
# lk_install; boot.py refuses one older than 3.8): the job's venv, whose executable is that path.
LK_PY_RAN=''
lk__python() {
    local name path out
    if [[ -n $LK_PY_RAN ]] && hash python 2>/dev/null && [[ ${BASH_CMDS[python]} == "$LK_PY_RAN" ]]; then
        printf -v "$1" '%s' "$LK_PY_RAN" && return 0
    fi
    for name in python python3; do
        path=$(command -v "$name") || continue
        # Python 2 and 3 alike; -S: no site-packages for a version check
        out=$("$path" -S -c 'import sys; sys.stdout.write("%d.%d %s" % (sys.version_info[0], sys.version_info[1], sys.executable))' 2>/dev/null) || continue
        [[ $out =~ ^3\.([0-9]+)\ (.*)$ ]] || continue
        ((BASH_REMATCH[1] >= 8)) || continue
        [[ -x ${BASH_REMATCH[2]} ]] && path=${BASH_REMATCH[2]}
        printf -v "$1" '%s' "$path"
        return 0
    done
    return 1
}

# lk__policy_parent: whether the run's policy (node/policy.py, LAUNCHKIT_POLICY) keeps the runtime the
# command's parent (a watchdog, a webhook secret). The one fact bash reads of it: the encoding starts
# with policy.PARENT_PREFIX exactly then; everything else in it is the Python runtime's to read.
lk__policy_parent() { [[ ${LAUNCHKIT_POLICY:-} == '{"parent":true'* ]]; }

lk__no_launcher_without_python() {
    case ${LAUNCHKIT_LAUNCHER:-none} in
        none) # the run's policy (a watchdog, --require-resume, --slack-webhook-secret, --notify-*) or a local run's webhook
            lk_die "$LK_EXIT_EXEC" "--stall-timeout, --inactive-timeout, --require-resume, Slack and event posts from the job need Python 3.8+ on PATH (python or python3) for the job's runtime" ;;
        torchrun | accelerate | ray)
            command -v "$LAUNCHKIT_LAUNCHER" >/dev/null 2>&1 &&
                lk_die "$LK_EXIT_EXEC" "--$LAUNCHKIT_LAUNCHER needs Python 3.8+ on PATH (python or python3) to start '$LAUNCHKIT_LAUNCHER'"
            lk_die "$LK_EXIT_EXEC" "--$LAUNCHKIT_LAUNCHER needs '$LAUNCHKIT_LAUNCHER', which is not installed (add it to the project's dependencies)" ;;
        *) lk_die "$LK_EXIT_INPUTS" "unknown LAUNCHKIT_LAUNCHER='$LAUNCHKIT_LAUNCHER' (expected torchrun, accelerate or ray)" ;;
    esac
}
