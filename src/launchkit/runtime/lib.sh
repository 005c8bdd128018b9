# Shared helpers for the launchkit entrypoint: functions and constants only (nothing runs at source time).
# shellcheck shell=bash
# The parts are joined into one script (runtime/__init__.py): names set here are read by the others.
# shellcheck disable=SC2034

# Exit codes of the setup steps (docs/runtime.md). The user command's own code is the job's code.
LK_EXIT_INPUTS=100
LK_EXIT_CLONE=101
LK_EXIT_SUBMODULES=102
LK_EXIT_PRE_SETUP=103
LK_EXIT_UV=104
LK_EXIT_VENV=105
LK_EXIT_INSTALL=106
LK_EXIT_POST_SETUP=107
LK_EXIT_CLUSTER_SETUP=108
LK_EXIT_EXEC=109

lk_log() { printf '[launchkit] %s\n' "$*" >&2; }

# LAUNCHKIT_* switches read as launchkit reads them (launchkit/envflags.py): 1/true/yes/on, 0/false/no/off
lk_on() { [[ ${!1:-} =~ ^[[:space:]]*(1|[Tt][Rr][Uu][Ee]|[Yy][Ee][Ss]|[Oo][Nn])[[:space:]]*$ ]]; } # lk_on VAR
lk_off() { [[ ${!1:-} =~ ^[[:space:]]*(0|[Ff][Aa][Ll][Ss][Ee]|[Nn][Oo]|[Oo][Ff][Ff])[[:space:]]*$ ]]; } # lk_off VAR

lk_node_dir() { # sets LK_NODE_DIR: the folder holding the launchkit_node package (beside this script)
    [[ -n ${LK_NODE_DIR:-} ]] && return 0
    local here=${BASH_SOURCE[0]:-}
    [[ $here == */* ]] || here=./$here
    [[ -d ${here%/*}/launchkit_node ]] && LK_NODE_DIR=$(cd -- "${here%/*}" && pwd)
}

# lk_node PYTHON SUBCOMMAND ARGS...: run the Python runtime (runtime/node) under PYTHON, started by its
# boot.py, which any Python reads: one too old for the package is refused there in one line.
lk_node() {
    local py=$1; shift
    lk_node_dir || { printf '[launchkit] error: the runtime has no launchkit_node package beside %s\n' "${BASH_SOURCE[0]:-}" >&2; return 100; }
    PYTHONPATH="$LK_NODE_DIR${PYTHONPATH:+:$PYTHONPATH}" "$py" -s "$LK_NODE_DIR/launchkit_node/boot.py" "$@"
}
lk_die() { # lk_die EXIT_CODE MESSAGE... (clears LK_STEP so the entrypoint's EXIT trap keeps this code)
    local code=$1; shift
    LK_STEP=''
    printf '[launchkit] error: %s\n' "$*" >&2
    exit "$code"
}

lk_children() { # lk_children PID: the direct children's pids, one per line
    local f stat rest
    for f in /proc/[0-9]*/stat; do
        # a process that ended since the glob is skipped, unsaid: the redirection of errors comes first
        # (`stat=$(<"$f") 2>/dev/null` let bash's own error through, with the script's line number)
        IFS= read -r stat 2>/dev/null <"$f" || continue
        rest=${stat##*) }  # fields after "(comm)": state ppid ...
        rest=${rest#* }
        [[ ${rest%% *} == "$1" ]] && { f=${f#/proc/}; echo "${f%/stat}"; }
    done
    return 0
}

lk_kill_tree() { # lk_kill_tree PID: TERM a process and all its descendants (children first)
    local child
    for child in $(lk_children "$1"); do lk_kill_tree "$child"; done
    kill "$1" 2>/dev/null || true
}

# Milliseconds since the epoch (bash 5 has EPOCHREALTIME; older bash falls back to date).
lk_now_ms() {
    if [[ -n ${EPOCHREALTIME:-} ]]; then
        local t=${EPOCHREALTIME/[.,]/}
        printf '%s\n' "$((10#$t / 1000))"
    else
        date +%s%3N
    fi
}

# "1234" (ms) -> "1.23s"
lk_fmt_ms() { printf '%d.%02ds' "$(($1 / 1000))" "$((($1 % 1000) / 10))"; }

# Step timings, printed as one line by lk_timing_line.
LK_TIMINGS=()
lk_timed() { # lk_timed LABEL START_MS
    LK_TIMINGS+=("$1 $(lk_fmt_ms "$(($(lk_now_ms) - $2))")")
}
lk_timing_line() {
    local IFS='|' total
    total=$(lk_fmt_ms "$(($(lk_now_ms) - LK_T0))")
    local joined="${LK_TIMINGS[*]}"
    lk_log "setup done in $total (${joined//|/, })"
}

# Full logs of each setup step go to $LK_LOG_DIR/NN_name.log; shown (tail) only on failure.
LK_LOG_SEQ=0
lk_log_file() { # lk_log_file VAR NAME: sets VAR to a fresh, numbered log path
    LK_LOG_SEQ=$((LK_LOG_SEQ + 1))
    printf -v "$1" '%s/%02d_%s.log' "$LK_LOG_DIR" "$LK_LOG_SEQ" "$2"
}
lk_show_log() { # lk_show_log FILE: the end of a step's log, on stderr
    [[ -s $1 ]] || return 0
    printf '[launchkit] ---- last lines of %s\n' "$1" >&2
    tail -n "${LAUNCHKIT_LOG_TAIL:-40}" "$1" >&2
    printf '[launchkit] ----\n' >&2
}

# lk_run_logged LOGFILE CMD...: run quietly into LOGFILE; return the command's status.
lk_run_logged() {
    local log=$1; shift
    printf '$ %s\n' "$*" >>"$log"
    "$@" >>"$log" 2>&1
}

# Retry with exponential backoff: lk_retry N LOGFILE CMD... (base delay LAUNCHKIT_RETRY_DELAY, cap 30s).
# If LK_RETRY_STOP names a function that accepts an attempt's output file, a match stops retrying
# (return 2): the failure is permanent.
lk_retry() {
    local tries=$1 log=$2 n=1 delay=${LAUNCHKIT_RETRY_DELAY:-1} attempt rc; shift 2
    attempt="$log.attempt"
    while :; do
        : >"$attempt"
        rc=0
        lk_run_logged "$attempt" "$@" || rc=$?
        cat "$attempt" >>"$log"
        if ((rc == 0)); then rm -f -- "$attempt"; return 0; fi
        if [[ -n ${LK_RETRY_STOP:-} ]] && "$LK_RETRY_STOP" "$attempt"; then rm -f -- "$attempt"; return 2; fi
        rm -f -- "$attempt"
        if ((n >= tries)); then return 1; fi
        printf '[launchkit] attempt %d/%d failed (exit %d); retrying in %ss\n' "$n" "$tries" "$rc" "$delay" >>"$log"
        sleep "$delay"
        n=$((n + 1))
        delay=$(awk -v d="$delay" 'BEGIN { d = d * 2; if (d > 30) d = 30; print d }')
    done
}

# A hook is a path to a script (sourced) or a shell snippet (eval'd), run in this shell so that
# its exports reach the user command. Failures are mapped to the step's code by the EXIT trap.
lk_run_hook() {
    if [[ $1 == *.sh && -f $1 ]]; then
        # shellcheck disable=SC1090
        source "$1"
    else
        eval "$1"
    fi
    set -euo pipefail
}

# Remote URL with any userinfo stripped, for messages.
lk_redact_url() { printf '%s\n' "$1" | sed -E 's#(://)[^/@]*@#\1#'; }

# git with credential helpers that read the token from the environment at call time, so the token is
# never in argv, in logs or on disk. Each helper is scoped to one https origin (git matches scheme, host
# and port exactly): GITHUB_TOKEN to https://github.com, LAUNCHKIT_GIT_TOKEN to the job's own remote.
# A submodule or redirect on another host, or anything over plain http, is never offered a token.
lk_git() {
    local origin
    local -a cfg=(-c advice.detachedHead=false -c init.defaultBranch=main)
    if [[ -n ${GITHUB_TOKEN:-} ]]; then
        # shellcheck disable=SC2016 # expanded by the helper's shell when git calls it, not here
        cfg+=(-c 'credential.https://github.com.helper=' -c 'credential.https://github.com.helper=!f() { echo username=x-access-token; echo "password=$GITHUB_TOKEN"; }; f')
    fi
    if [[ -n ${LAUNCHKIT_GIT_TOKEN:-} ]]; then
        cfg+=(-c credential.helper=) # no helper of the image answers for any host meanwhile
        origin=$(lk_token_origin)
        if [[ -n $origin ]]; then
            # shellcheck disable=SC2016 # expanded by the helper's shell when git calls it, not here
            cfg+=(-c "credential.$origin.helper=" -c "credential.$origin.helper="'!f() { echo "username=${LAUNCHKIT_GIT_USERNAME:-x-access-token}"; echo "password=$LAUNCHKIT_GIT_TOKEN"; }; f')
        fi
    fi
    GIT_TERMINAL_PROMPT=0 git "${cfg[@]}" "$@"
}

# The https origin (https://host[:port], host lower-cased) of the job's remote, or nothing when the
# remote is not https (a token is never sent over http, nor to a local path).
lk_token_origin() {
    local url
    url=$(lk_https_remote "${LAUNCHKIT_GIT_REMOTE:-}")
    [[ $url =~ ^[Hh][Tt][Tt][Pp][Ss]://([^/@?#]*@)?([A-Za-z0-9.:_-]+)([/?#]|$) ]] || return 0
    printf 'https://%s\n' "${BASH_REMATCH[2],,}"
}

# SSH-style remotes become https when a token is given (jobs have no SSH keys).
lk_https_remote() {
    local url=$1
    if [[ -n ${GITHUB_TOKEN:-}${LAUNCHKIT_GIT_TOKEN:-} ]]; then
        if [[ $url =~ ^[A-Za-z0-9._-]+@([^:/]+):(.+)$ ]]; then
            url="https://${BASH_REMATCH[1]}/${BASH_REMATCH[2]}"
        elif [[ $url =~ ^ssh://[^@/]+@([^/:]+)(:[0-9]+)?/(.+)$ ]]; then
            url="https://${BASH_REMATCH[1]}/${BASH_REMATCH[3]}"
        fi
    fi
    printf '%s\n' "$url"
}

# Errors after which retrying the same fetch is pointless.
lk_fetch_refused() { grep -qiE "not our ref|couldn't find remote ref|unadvertised object|no such remote ref|did not send all necessary objects|upload-pack: not our|invalid refspec|not a valid object" "$1"; }
lk_auth_failed() { grep -qiE "authentication failed|could not read (username|password)|terminal prompts disabled|permission denied \(publickey|repository not found|error: 403|HTTP 403" "$1"; }

# Cloud credentials (--aws-config-secret, --aws-credentials-secret, --google-credentials-secret): each
# secret's value goes to a file only the job's user can read, under the runtime dir; the standard variable
# naming that file is exported and the value variable unset, so the command's environment never holds the
# credential itself. In a Beaker job (BEAKER_JOB_KIND set) the file is also linked where gantry puts it
# (~/.aws/config, ...) unless something is there already; local runs never touch the user's home.
# Bash, not the node runtime: --no-python jobs and the pre-setup hook need them before any Python exists.
lk_secret_file() { # lk_secret_file VALUE_VAR FILE_NAME EXPORT_VAR HOME_PATH
    local var=$1 file="$LAUNCHKIT_RUNTIME_DIR/credentials/$2" export_var=$3 home_path=$4
    [[ -n ${!var:-} ]] || return 0
    mkdir -p -- "$LAUNCHKIT_RUNTIME_DIR/credentials"
    (umask 077 && printf '%s\n' "${!var}" >"$file")
    export "$export_var=$file"
    unset "$var"
    if [[ -n ${BEAKER_JOB_KIND:-} && -n ${HOME:-} && ! -e $HOME/$home_path ]]; then
        { mkdir -p -- "$(dirname -- "$HOME/$home_path")" && ln -s -- "$file" "$HOME/$home_path"; } || true
    fi
}
lk_write_credentials() {
    lk_secret_file LAUNCHKIT_AWS_CONFIG aws-config AWS_CONFIG_FILE .aws/config
    lk_secret_file LAUNCHKIT_AWS_CREDENTIALS aws-credentials AWS_SHARED_CREDENTIALS_FILE .aws/credentials
    lk_secret_file LAUNCHKIT_GOOGLE_CREDENTIALS google-credentials.json GOOGLE_APPLICATION_CREDENTIALS \
        .google/credentials.json
    if [[ -n ${GOOGLE_APPLICATION_CREDENTIALS:-} ]] && command -v gcloud >/dev/null 2>&1; then
        gcloud auth activate-service-account --quiet --key-file="$GOOGLE_APPLICATION_CREDENTIALS" \
            >/dev/null 2>&1 || lk_log "warning: gcloud could not activate the service account"
    fi
}
