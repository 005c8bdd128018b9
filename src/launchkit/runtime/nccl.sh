# shellcheck shell=bash
# Cluster setup: the cluster profile's in-container steps (NCCL InfiniBand / TCPXO, ...).
# Contract: lk_cluster_setup is called once, after the clone and before the Python setup,
# in the entrypoint's shell (so exports reach the user command). See docs/profiles.md.
# Inputs: LAUNCHKIT_PROFILE_APPLIED (applied at launch), LAUNCHKIT_PROFILES, LAUNCHKIT_PROFILE_SETUP
# (candidates and their steps; without LAUNCHKIT_PROFILE_SETUP the candidates are built-ins whose
# steps are in the runtime's profiles.txt), LAUNCHKIT_SKIP_NCCL_SETUP, BEAKER_REPLICA_COUNT,
# BEAKER_ASSIGNED_GPU_COUNT, BEAKER_NODE_HOSTNAME.
# Host-path overrides (tests, unusual hosts): LAUNCHKIT_TCPXO_DIR, LAUNCHKIT_IB_SYSFS.
# Output: the steps' exports, and LAUNCHKIT_NODE_PROFILE (the profile this node matched).

lk__host_paths() { # rewrite well-known host paths to their overrides
    local s=$1
    [[ -n ${LAUNCHKIT_TCPXO_DIR:-} ]] && s=${s//\/var\/lib\/tcpxo\/lib64/$LAUNCHKIT_TCPXO_DIR}
    [[ -n ${LAUNCHKIT_IB_SYSFS:-} ]] && s=${s//\/sys\/class\/infiniband/$LAUNCHKIT_IB_SYSFS}
    printf '%s' "$s"
}

lk__node_matches() { # lk__node_matches KIND ARG: does this node match a profile's detection rule?
    local host=${BEAKER_NODE_HOSTNAME:-${HOSTNAME:-}} path
    case $1 in
        always) return 0 ;;
        host)
            # shellcheck disable=SC2053 # the profile's hostname rule is a glob on purpose
            [[ ${host,,} == ${2,,} ]] ;;
        path)
            path=$(lk__host_paths "$2")
            [[ -e $path ]] || return 1
            [[ ! -d $path || -n $(ls -A "$path" 2>/dev/null) ]] ;;  # an empty directory does not count
        *) return 1 ;;
    esac
}

lk__apply_step() { # lk__apply_step PROFILE VERB ARGS: export NAME=VALUE | prepend NAME PATH | source PATH
    local profile=$1 verb=$2 rest name value saved rc
    rest=$(lk__host_paths "$3")
    case $verb in
        export)
            name=${rest%%=*} value=${rest#*=}
            export "$name=$value"
            lk_log "profile $profile: export $name=$value" ;;
        prepend)
            name=${rest%% *} value=${rest#* }
            export "$name=$value${!name:+:${!name}}"
            lk_log "profile $profile: prepend $value to $name" ;;
        source)
            [[ -r $rest ]] || lk_die "${LK_EXIT_CLUSTER_SETUP:-108}" "profile $profile: $rest not found on this node" \
                "(use --skip-nccl-setup or --no-profile to launch without it)"
            saved=$(set +o)
            set +eu
            # shellcheck disable=SC1090
            source "$rest"
            rc=$?
            eval "$saved"
            ((rc == 0)) || lk_die "${LK_EXIT_CLUSTER_SETUP:-108}" "profile $profile: sourcing $rest failed (exit $rc)"
            lk_log "profile $profile: sourced $rest" ;;
        *) lk_die "${LK_EXIT_CLUSTER_SETUP:-108}" "profile $profile: unknown setup step '$verb'" ;;
    esac
}

# lk__stored_program FILE NAME...: the named profiles' blocks of FILE (the runtime's profiles.txt,
# core/profiles.py: stored_setup), in NAME order: the program setup_program makes for them at launch.
# Fails printing the first NAME that FILE lacks.
lk__stored_program() {
    local file=$1 name line cur found
    shift
    for name in "$@"; do
        cur="" found=0
        while IFS= read -r line || [[ -n $line ]]; do
            [[ $line == "profile "* ]] && cur=${line#profile } && [[ $cur == "$name" ]] && found=1
            if [[ $cur == "$name" ]]; then printf '%s\n' "$line"; fi
        done <"$file"
        ((found)) || { printf '%s\n' "$name"; return 1; }
    done
    return 0
}

lk_cluster_setup() {
    local program=${LAUNCHKIT_PROFILE_SETUP:-} line kind arg cur="" chosen="" why="" phase verb
    local host=${BEAKER_NODE_HOSTNAME:-${HOSTNAME:-unknown}}
    if [[ -z $program && -n ${LAUNCHKIT_PROFILES:-} ]]; then # built-ins: their steps travel once
        local -a names
        local stored
        read -ra names <<<"$LAUNCHKIT_PROFILES"
        stored=${LK_NODE_DIR:-}/profiles.txt # beside the script (lk_node_dir, found at its start)
        [[ -n ${LK_NODE_DIR:-} && -r $stored ]] || lk_die "${LK_EXIT_CLUSTER_SETUP:-108}" \
            "no profiles.txt beside the runtime's script: the setup of profile(s) $LAUNCHKIT_PROFILES is unknown"
        program=$(lk__stored_program "$stored" "${names[@]}") ||
            lk_die "${LK_EXIT_CLUSTER_SETUP:-108}" "profile ${program##*$'\n'}: no setup in $stored" \
                "(a spec for another launchkit's runtime? launch it again, or use --no-profile)"
    fi
    if [[ -z $program ]]; then
        if [[ -n ${LAUNCHKIT_PROFILE_APPLIED:-} ]]; then
            lk_log "cluster profile: $LAUNCHKIT_PROFILE_APPLIED (env and mounts applied at launch; no in-container steps)"
        elif ((${BEAKER_REPLICA_COUNT:-1} > 1)) && [[ -z ${LAUNCHKIT_LOCAL_RUN:-} ]]; then # single-node jobs and local runs stay quiet
            lk_log "cluster profile: none (no NCCL settings for this multi-node job; see \`launchkit profiles\`)"
        fi
        return 0
    fi
    while IFS= read -r line || [[ -n $line ]]; do  # 1st pass: the first profile this node matches
        case $line in
            "profile "*) cur=${line#profile } ;;
            "match "*)
                kind=${line#match } arg=${kind#* } kind=${kind%% *}
                if lk__node_matches "$kind" "$arg"; then
                    chosen=$cur why="$kind${arg:+ $arg}"
                    [[ $kind == always ]] && why="selected at launch"
                    break
                fi ;;
        esac
    done <<<"$program"
    if [[ -z $chosen ]]; then
        lk_log "cluster profile: no match for this node (host $host) among: ${LAUNCHKIT_PROFILES:-?}; no cluster setup"
        return 0
    fi
    export LAUNCHKIT_NODE_PROFILE=$chosen
    lk_log "cluster profile: $chosen (${why}; host $host)"
    local multi=1 multi_why=""
    if lk_on LAUNCHKIT_SKIP_NCCL_SETUP; then
        multi=0 multi_why="skipped (--skip-nccl-setup)"
    elif ((${BEAKER_REPLICA_COUNT:-1} <= 1)); then
        multi=0 multi_why="not needed (single replica)"
    elif ((${BEAKER_ASSIGNED_GPU_COUNT:-0} <= 0)); then
        multi=0 multi_why="not needed (no GPUs assigned)"
    fi
    cur=""
    local reported=0
    while IFS= read -r line || [[ -n $line ]]; do  # 2nd pass: run the chosen profile's steps in order
        case $line in
            "profile "*) cur=${line#profile } ;;
            "match "*) ;;
            *)
                [[ $cur == "$chosen" ]] || continue
                phase=${line%% *} line=${line#* } verb=${line%% *} arg=${line#* }
                if [[ $phase == multi ]] && ((multi == 0)); then
                    ((reported)) || lk_log "profile $chosen: multi-node NCCL setup $multi_why"
                    reported=1
                    continue
                fi
                lk__apply_step "$chosen" "$verb" "$arg" ;;
        esac
    done <<<"$program"
}
