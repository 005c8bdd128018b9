# Multi-node launchers (torchrun, accelerate, ray). See docs/multi-node.md.
# Contract: lk_wrap_command "$@" fills the global array LK_CMD with the final argv to exec.
# Inputs: LAUNCHKIT_LAUNCHER (torchrun|accelerate|ray; empty: run the command as is),
# LAUNCHKIT_RDZV_PORT, LAUNCHKIT_RDZV_ID, BEAKER_REPLICA_RANK, BEAKER_REPLICA_COUNT,
# BEAKER_LEADER_REPLICA_HOSTNAME, BEAKER_ASSIGNED_GPU_COUNT.
# Ray knobs (settable with `run --env`, unlike the reserved LAUNCHKIT_* names): LK_RAY_START_ARGS
# (added to every `ray start`), LK_RAY_HEAD_ARGS (head only), LK_RAY_WAIT (seconds to wait for the
# head and for all nodes, default 600), LK_RAY_POLL (seconds between the worker's head checks, default 5).

lk_wrap_command() {
    case ${LAUNCHKIT_LAUNCHER:-} in
        "" | none) LK_CMD=("$@") ;;
        torchrun | accelerate | ray)
            lk__topology "$LAUNCHKIT_LAUNCHER"
            "lk__wrap_$LAUNCHKIT_LAUNCHER" "$@" ;;
        *) lk_die "${LK_EXIT_INPUTS:-100}" "unknown LAUNCHKIT_LAUNCHER='$LAUNCHKIT_LAUNCHER' (expected torchrun, accelerate or ray)" ;;
    esac
}

lk__int() { [[ $2 =~ ^[0-9]+$ ]] || lk_die "${LK_EXIT_INPUTS:-100}" "$1 must be a whole number, got '$2'"; }

# Sets LK_NNODES, LK_RANK, LK_NPROC (processes per replica), LK_PORT, LK_LEADER_IP.
lk__topology() {
    LK_NNODES=${BEAKER_REPLICA_COUNT:-1} LK_RANK=${BEAKER_REPLICA_RANK:-0}
    LK_NPROC=${BEAKER_ASSIGNED_GPU_COUNT:-0} LK_PORT=${LAUNCHKIT_RDZV_PORT:-29500}
    lk__int BEAKER_REPLICA_COUNT "$LK_NNODES"
    lk__int BEAKER_REPLICA_RANK "$LK_RANK"
    lk__int BEAKER_ASSIGNED_GPU_COUNT "$LK_NPROC"
    lk__int LAUNCHKIT_RDZV_PORT "$LK_PORT"
    if ((LK_NPROC == 0)); then
        LK_NPROC=1
        lk_log "$1: no GPUs assigned, one CPU process per replica"
    fi
    if ((LK_NNODES > 1)) && [[ -z ${BEAKER_LEADER_REPLICA_HOSTNAME:-} && $1 == torchrun ]]; then
        # as gantry: without leader selection each replica runs its own single-node torchrun
        lk_log "$1: no leader selection: each of the $LK_NNODES replicas runs on its own"
        LK_NNODES=1 LK_RANK=0
    fi
    if ((LK_NNODES > 1)); then
        [[ -n ${BEAKER_LEADER_REPLICA_HOSTNAME:-} ]] ||
            lk_die "${LK_EXIT_EXEC:-109}" "$1 across $LK_NNODES replicas needs BEAKER_LEADER_REPLICA_HOSTNAME (is leader selection on?)"
        LK_LEADER_IP=$(lk__resolve_ip "$BEAKER_LEADER_REPLICA_HOSTNAME")
    else
        LK_LEADER_IP=127.0.0.1
    fi
    lk_log "$1: replica $LK_RANK of $LK_NNODES, $LK_NPROC process(es) per replica, leader $LK_LEADER_IP:$LK_PORT"
}

lk__resolve_ip() { # the leader's IP (its DNS name can take a moment to appear); falls back to the name
    local name=$1 ip="" try
    [[ $name =~ ^[0-9.]+$ ]] && { printf '%s' "$name"; return 0; }
    for try in 1 2 3 4 5 6 7 8 9 10; do
        ip=$(getent ahostsv4 "$name" 2>/dev/null | awk 'NR == 1 { print $1 }') || true
        [[ -n $ip ]] && break
        sleep "$try"
    done
    if [[ -z $ip ]]; then
        lk_log "warning: could not resolve $name; using the name"
        ip=$name
    fi
    printf '%s' "$ip"
}

# Splits the user's argv into LK_PROG_MODE (script|module|argv) and LK_PROG (what follows):
#   python train.py ARGS -> script train.py ARGS;  python -m pkg ARGS -> module pkg ARGS;
#   train.py ARGS -> script;  anything else -> argv, run as is.
lk__program() {
    LK_PROG_MODE=argv LK_PROG=("$@")
    if [[ ${1:-} =~ ^python(3(\.[0-9]+)?)?$ ]]; then
        if [[ ${2:-} == -m && -n ${3:-} ]]; then
            LK_PROG_MODE=module LK_PROG=("${@:3}")
        elif [[ ${2:-} == *.py ]]; then
            LK_PROG_MODE=script LK_PROG=("${@:2}")
        fi
    elif [[ ${1:-} == *.py ]]; then
        LK_PROG_MODE=script
    fi
}

lk__tool() { # lk__tool NAME PYTHON_MODULE: argv prefix that runs a Python console script
    if command -v "$1" >/dev/null 2>&1; then
        LK_TOOL=("$1")
    elif command -v python >/dev/null 2>&1 && python -c "import $2" >/dev/null 2>&1; then
        LK_TOOL=(python -m "$2")
    else
        lk_die "${LK_EXIT_EXEC:-109}" "--$LAUNCHKIT_LAUNCHER needs '$1', which is not installed (add it to the project's dependencies)"
    fi
}

lk__wrap_torchrun() {
    lk__tool torchrun torch.distributed.run
    lk__program "$@"
    LK_CMD=("${LK_TOOL[@]}" "--nproc-per-node=$LK_NPROC")
    if ((LK_NNODES > 1)); then
        LK_CMD+=("--nnodes=$LK_NNODES" "--node-rank=$LK_RANK" --rdzv-backend=static
            "--rdzv-endpoint=$LK_LEADER_IP:$LK_PORT" "--rdzv-id=${LAUNCHKIT_RDZV_ID:-launchkit}"
            --rdzv-conf=read_timeout=420)
    else
        LK_CMD+=(--standalone)
    fi
    case $LK_PROG_MODE in
        script) LK_CMD+=("${LK_PROG[@]}") ;;
        module) LK_CMD+=(-m "${LK_PROG[@]}") ;;
        argv) LK_CMD+=(--no-python "${LK_PROG[@]}") ;;
    esac
}

lk__wrap_accelerate() {
    if [[ ${1:-} == accelerate && ${2:-} == launch ]] ||
        [[ ${1:-} =~ ^python(3(\.[0-9]+)?)?$ && ${2:-} == -m && ${3:-} == accelerate.commands.launch ]]; then
        lk__accelerate_given "$@"
        return
    fi
    lk__tool accelerate accelerate.commands.launch
    [[ ${LK_TOOL[0]} == accelerate ]] && LK_TOOL+=(launch)
    lk__program "$@"
    local total=$((LK_NNODES * LK_NPROC))
    LK_CMD=("${LK_TOOL[@]}" --num_machines "$LK_NNODES" --machine_rank "$LK_RANK" --num_processes "$total"
        --main_process_ip "$LK_LEADER_IP" --main_process_port "$LK_PORT" --dynamo_backend no)
    if ((total > 1)); then
        LK_CMD+=(--multi_gpu)  # the torch.distributed launcher; on CPU, accelerate then picks gloo
        [[ ${BEAKER_ASSIGNED_GPU_COUNT:-0} == 0 ]] && export ACCELERATE_USE_CPU=true
    fi
    case $LK_PROG_MODE in
        script) LK_CMD+=("${LK_PROG[@]}") ;;
        module) LK_CMD+=(-m "${LK_PROG[@]}") ;;
        argv) LK_CMD+=(--no_python "${LK_PROG[@]}") ;;
    esac
}

# The command already is `accelerate launch [FLAGS] SCRIPT ARGS` (open-instruct's form): it keeps its
# flags (DeepSpeed, FSDP, mixed precision, config file) and only gets the topology. Among the launch
# flags (those before the first *.py, -m/--module or --no_python), a given --num_processes N counts
# per replica (mason's convention) and becomes N x replicas; --num_machines, --machine_rank,
# --main_process_ip and --main_process_port are replaced by the job's.
lk__accelerate_given() {
    local -a head=() flags=()
    local per=$LK_NPROC arg
    if [[ $1 == accelerate ]]; then
        head=(accelerate launch)
        shift 2
    else
        head=("$1" -m accelerate.commands.launch)
        shift 3
    fi
    while (($#)); do
        arg=$1
        case $arg in
            *.py | -m | --module | --no_python | --no-python) break ;;
            --num_processes | --num-processes)
                per=${2:-}
                shift 2 || shift
                continue
                ;;
            --num_processes=* | --num-processes=*) per=${arg#*=} ;;
            --num_machines | --num-machines | --machine_rank | --machine-rank | --main_process_ip | \
                --main-process-ip | --main_process_port | --main-process-port)
                shift 2 || shift
                continue
                ;;
            --num_machines=* | --num-machines=* | --machine_rank=* | --machine-rank=* | --main_process_ip=* | \
                --main-process-ip=* | --main_process_port=* | --main-process-port=*) ;;
            *) flags+=("$arg") ;;
        esac
        shift
    done
    lk__int "--num_processes" "$per"
    LK_CMD=("${head[@]}" --num_machines "$LK_NNODES" --machine_rank "$LK_RANK"
        --num_processes "$((per * LK_NNODES))" --main_process_ip "$LK_LEADER_IP" --main_process_port "$LK_PORT"
        "${flags[@]}" "$@")
    lk_log "accelerate: the command's own launch, with the job's topology (--num_processes $((per * LK_NNODES)))"
}

# Ray: the head runs on rank 0 next to the driver (the user command); other ranks join as workers,
# watch the head, and exit 0 once it is gone. Both run as their own bash (exec'd by the entrypoint)
# so `ray start --block` is their child and is stopped with them.
lk__wrap_ray() {
    lk__tool ray ray.scripts.scripts
    export RAY_ADDRESS="$LK_LEADER_IP:$LK_PORT"
    # Every node already has the job's environment; Ray's `uv run` hook (on when an ancestor process
    # is `uv run`) would start workers in another one.
    export RAY_ENABLE_UV_RUN_RUNTIME_ENV=${RAY_ENABLE_UV_RUN_RUNTIME_ENV:-0}
    local funcs
    funcs=$(declare -f lk_log lk_die lk__ray_reachable lk__spawn_group lk__stop_group lk__ray_head_driver lk__ray_worker)
    if ((LK_RANK == 0)); then
        LK_CMD=(bash -c "$funcs"$'\nlk__ray_head_driver "$@"' launchkit-ray-head "$LK_LEADER_IP" "$LK_PORT"
            "$LK_NNODES" "${LK_TOOL[*]}" "$@")
    else
        LK_CMD=(bash -c "$funcs"$'\nlk__ray_worker "$@"' launchkit-ray-worker "$LK_LEADER_IP" "$LK_PORT"
            "${LK_TOOL[*]}")
    fi
}

lk__ray_reachable() { # lk__ray_reachable IP PORT: is something listening there?
    if command -v timeout >/dev/null 2>&1; then
        timeout 5 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null
    else
        bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null
    fi
}

lk__spawn_group() { # run "$@" in the background as its own process group (LK_SPAWNED = its pid)
    if command -v setsid >/dev/null 2>&1; then setsid "$@" & else "$@" & fi
    LK_SPAWNED=$!
}

lk__stop_group() { # lk__stop_group PID GRACE_SECONDS: TERM the group, KILL what is left after GRACE
    local pid=$1 i
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || return 0
    for ((i = 0; i < $2 * 5; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
    done
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    return 0
}

lk__ray_head_driver() { # IP PORT NNODES RAY_TOOL DRIVER_ARGV...
    local ip=$1 port=$2 nnodes=$3 ray_tool=$4 head driver="" rc waited=0 wait_max=${LK_RAY_WAIT:-600} n=0
    shift 4
    local -a ray extra
    read -r -a ray <<<"$ray_tool"
    read -r -a extra <<<"${LK_RAY_START_ARGS:-} ${LK_RAY_HEAD_ARGS:-}"
    lk__spawn_group "${ray[@]}" start --head --block --port="$port" --node-ip-address="$ip" --disable-usage-stats \
        "${extra[@]}"
    head=$LK_SPAWNED
    # Until the driver runs, a signal stops the head and ends here; afterwards it goes to the driver.
    trap 'lk__stop_group $head 5; exit 143' TERM INT HUP
    while ! "${ray[@]}" status --address="$ip:$port" >/dev/null 2>&1; do
        kill -0 "$head" 2>/dev/null || { wait "$head"; lk_die "${LK_EXIT_EXEC:-109}" "ray head failed to start (exit $?)"; }
        ((waited++ < wait_max)) || lk_die "${LK_EXIT_EXEC:-109}" "ray head did not come up within ${wait_max}s"
        sleep 1
    done
    while :; do  # the driver starts once every replica has joined
        n=$("${ray[@]}" status --address="$ip:$port" 2>/dev/null |
            awk '/^Active:/ { on = 1; next } /^[A-Z]/ { on = 0 } on && /node_/ { n++ } END { print n + 0 }') || n=0
        ((n >= nnodes)) && break
        if ((waited++ >= wait_max)); then
            lk_log "warning: only $n of $nnodes ray nodes joined within ${wait_max}s; starting the driver anyway"
            break
        fi
        sleep 1
    done
    lk_log "ray head at $ip:$port with $n node(s); starting the driver"
    "$@" &
    driver=$!
    trap 'kill -TERM $driver 2>/dev/null' TERM INT HUP
    wait "$driver" && rc=0 || rc=$?
    if kill -0 "$driver" 2>/dev/null; then wait "$driver" && rc=0 || rc=$?; fi  # interrupted by a signal
    lk__stop_group "$head" 5  # the job is over: no need for a long drain
    lk_log "driver exited with $rc; ray head stopped"
    exit "$rc"
}

lk__ray_worker() { # IP PORT RAY_TOOL
    local ip=$1 port=$2 ray_tool=$3 worker rc waited=0 wait_max=${LK_RAY_WAIT:-600} misses=0
    local -a ray extra
    read -r -a ray <<<"$ray_tool"
    read -r -a extra <<<"${LK_RAY_START_ARGS:-}"
    until lk__ray_reachable "$ip" "$port"; do
        ((waited++ < wait_max)) || lk_die "${LK_EXIT_EXEC:-109}" "ray head $ip:$port not reachable within ${wait_max}s"
        sleep 1
    done
    lk__spawn_group "${ray[@]}" start --address="$ip:$port" --block --disable-usage-stats "${extra[@]}"
    worker=$LK_SPAWNED
    trap 'lk__stop_group $worker 20; lk_log "ray worker stopped by a signal"; exit 0' TERM INT HUP
    lk_log "ray worker joining $ip:$port; it exits when the head stops"
    while ((misses < 2)); do
        sleep "${LK_RAY_POLL:-5}"
        if lk__ray_reachable "$ip" "$port"; then misses=0; else misses=$((misses + 1)); fi
        if ! kill -0 "$worker" 2>/dev/null && ((misses == 0)); then
            wait "$worker" && rc=0 || rc=$?
            lk_die "${LK_EXIT_EXEC:-109}" "ray worker stopped while the head is still up (exit $rc)"
        fi
    done
    lk__stop_group "$worker" 3  # no head to drain to: don't wait for Ray's drain timeout
    lk_log "ray head $ip:$port is gone; worker exiting 0"
    exit 0
}
