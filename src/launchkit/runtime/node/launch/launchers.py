"""`launch`: the entrypoint's last step for a job with a multi-node launcher (LAUNCHKIT_LAUNCHER:
torchrun, accelerate or ray; docs/multi-node.md). It builds the launcher's argv from the replica topology
Beaker gives (BEAKER_REPLICA_COUNT/RANK, BEAKER_LEADER_REPLICA_HOSTNAME, BEAKER_ASSIGNED_GPU_COUNT) and
execs it, so the launcher gets the job's signals and its exit code is the job's; with
`--exec-method bash` or a watchdog (watchdog.py) it stays the parent and forwards signals; Ray's head
and workers are supervised (ray_cluster.py). Bash hands over with
`launch [--cwd DIR] [--t0 MS] [--timing STEP]... -- ARGV...`.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import signal
import site
import sys
import time
from typing import Callable, NamedTuple, Sequence

from ..policy import EMPTY, ENV_NOTIFY, ENV_WEBHOOK, JOB, SWEEP, Policy, PolicyError
from ..policy import ENV as POLICY_ENV
from . import EXIT_EXEC, EXIT_INPUTS, LaunchError, log, procs, restart, watchdog

TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import notify

# A feature's modules are imported where the job uses it (issue 46: no job pays for a feature it does
# not use): the posters (notify.py: http, threads) with a webhook or an events URL, Ray's
# (ray_cluster.py) for `--ray`, socket for a leader's name.

LAUNCHERS = ("torchrun", "accelerate", "ray")


def _digits(value: str, also: str = "") -> bool:
    return bool(value) and all(c in "0123456789" + also for c in value)


def _is_python(word: str) -> bool:
    """python, python3 or python3.N (the words that run a script the launchers can take over)."""
    return word in ("python", "python3") or (word.startswith("python3.") and _digits(word[8:]))


def _whole(name: str, value: str) -> int:
    if not _digits(value):
        raise LaunchError(EXIT_INPUTS, f"{name} must be a whole number, got '{value}'")
    return int(value)


def _lookup_v4(name: str) -> str | None:
    """The first IPv4 address of name, as `getent ahostsv4` gives it, or None."""
    import socket

    try:
        infos = socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)
    except OSError:
        return None
    return str(infos[0][4][0]) if infos else None


def resolve_ip(
    name: str,
    lookup: Callable[[str], str | None] = _lookup_v4,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """The leader's IP: its DNS name can take a moment to appear (1+2+...+9 s); falls back to the name."""
    if _digits(name, "."):
        return name
    for attempt in range(1, 11):
        ip = lookup(name)
        if ip:
            return ip
        if attempt < 10:
            sleep(attempt)
    log(f"warning: could not resolve {name}; using the name")
    return name


class Topology(NamedTuple):
    nnodes: int
    rank: int
    nproc: int  # processes per replica
    port: int
    leader_ip: str


def topology(launcher: str, env: dict[str, str], resolve: Callable[[str], str] = resolve_ip) -> Topology:
    nnodes = _whole("BEAKER_REPLICA_COUNT", env.get("BEAKER_REPLICA_COUNT") or "1")
    rank = _whole("BEAKER_REPLICA_RANK", env.get("BEAKER_REPLICA_RANK") or "0")
    nproc = _whole("BEAKER_ASSIGNED_GPU_COUNT", env.get("BEAKER_ASSIGNED_GPU_COUNT") or "0")
    port = _whole("LAUNCHKIT_RDZV_PORT", env.get("LAUNCHKIT_RDZV_PORT") or "29500")
    leader = env.get("BEAKER_LEADER_REPLICA_HOSTNAME") or ""
    if nproc == 0:
        nproc = 1
        log(f"{launcher}: no GPUs assigned, one CPU process per replica")
    if nnodes > 1 and not leader and launcher == "torchrun":
        # as gantry: without leader selection each replica runs its own single-node torchrun
        log(f"{launcher}: no leader selection: each of the {nnodes} replicas runs on its own")
        nnodes, rank = 1, 0
    if nnodes > 1:
        if not leader:
            raise LaunchError(
                EXIT_EXEC,
                f"{launcher} across {nnodes} replicas needs BEAKER_LEADER_REPLICA_HOSTNAME"
                " (is leader selection on?)",
            )
        ip = resolve(leader)
    else:
        ip = "127.0.0.1"
    log(f"{launcher}: replica {rank} of {nnodes}, {nproc} process(es) per replica, leader {ip}:{port}")
    return Topology(nnodes, rank, nproc, port, ip)


def split_program(argv: Sequence[str]) -> tuple[str, list[str]]:
    """("script", [train.py, ARGS]) for `python train.py ARGS` or `train.py ARGS`; ("module", [pkg, ARGS])
    for `python -m pkg ARGS`; ("argv", argv) for anything else, run as is."""
    first = argv[0] if argv else ""
    if _is_python(first):
        if len(argv) > 2 and argv[1] == "-m" and argv[2]:
            return "module", list(argv[2:])
        if len(argv) > 1 and argv[1].endswith(".py"):
            return "script", list(argv[1:])
    elif first.endswith(".py"):
        return "script", list(argv)
    return "argv", list(argv)


def module_present(dotted: str, find_spec: Callable[[str], object] | None = None) -> bool:
    """Is the module installed for this interpreter? Found on disk without importing it (importing
    torch or ray would cost seconds and stay in memory for the whole job)."""
    if sys.flags.no_site:  # bash starts the runtime with -S (faster): site-packages are added only now
        site.main()
    find_spec = find_spec or importlib.util.find_spec
    top, *rest = dotted.split(".")
    try:
        spec = find_spec(top)
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    if not rest:
        return True
    paths = list(getattr(spec, "submodule_search_locations", None) or [])
    for i, part in enumerate(rest):
        last = i == len(rest) - 1
        found = []
        for base in paths:
            sub = os.path.join(base, part)
            if os.path.isdir(sub):
                found.append(sub)
            elif last and any(os.path.isfile(sub + s) for s in importlib.machinery.all_suffixes()):
                return True
        if not found:
            return False
        if last:
            return True
        paths = found
    return False


def tool(
    name: str,
    module: str,
    launcher: str,
    env: dict[str, str],
    python: str = sys.executable,
    has_module: Callable[[str], bool] = module_present,
) -> list[str]:
    """The argv prefix that runs a Python console script: itself on PATH, else `PYTHON -m MODULE`."""
    if procs.which(name, env.get("PATH", os.defpath)) is not None:
        return [name]
    if has_module(module):
        return [python, "-m", module]
    raise LaunchError(
        EXIT_EXEC,
        f"--{launcher} needs '{name}', which is not installed (add it to the project's dependencies)",
    )


def _program_tail(mode: str, prog: list[str], no_python_flag: str) -> list[str]:
    if mode == "module":
        return ["-m", *prog]
    if mode == "argv":
        return [no_python_flag, *prog]
    return prog


def wrap_torchrun(argv: Sequence[str], topo: Topology, launcher_tool: list[str], rdzv_id: str) -> list[str]:
    cmd = [*launcher_tool, f"--nproc-per-node={topo.nproc}"]
    if topo.nnodes > 1:
        cmd += [
            f"--nnodes={topo.nnodes}",
            f"--node-rank={topo.rank}",
            "--rdzv-backend=static",
            f"--rdzv-endpoint={topo.leader_ip}:{topo.port}",
            f"--rdzv-id={rdzv_id}",
            "--rdzv-conf=read_timeout=420",
        ]
    else:
        cmd.append("--standalone")
    return cmd + _program_tail(*split_program(argv), "--no-python")


def accelerate_given(argv: Sequence[str]) -> bool:
    """Is the command already `accelerate launch ...` (or `python -m accelerate.commands.launch ...`)?"""
    return (len(argv) > 1 and argv[0] == "accelerate" and argv[1] == "launch") or (
        len(argv) > 2 and _is_python(argv[0]) and argv[1] == "-m" and argv[2] == "accelerate.commands.launch"
    )


_REPLACED = {"--num_machines", "--machine_rank", "--main_process_ip", "--main_process_port"}
_REPLACED |= {f.replace("_", "-") for f in _REPLACED}
_NUM_PROCESSES = ("--num_processes", "--num-processes")


def wrap_accelerate_given(argv: Sequence[str], topo: Topology) -> list[str]:
    """open-instruct's form keeps its flags (DeepSpeed, FSDP, mixed precision, config file) and gets only
    the topology. Among the launch flags (those before the first *.py, -m/--module or --no_python), a
    given --num_processes N counts per replica (mason's convention) and becomes N x replicas;
    --num_machines, --machine_rank, --main_process_ip and --main_process_port are replaced."""
    if argv[0] == "accelerate":
        head, rest = ["accelerate", "launch"], list(argv[2:])
    else:
        head, rest = [argv[0], "-m", "accelerate.commands.launch"], list(argv[3:])
    per, flags, i = str(topo.nproc), [], 0
    while i < len(rest):
        arg = rest[i]
        if arg.endswith(".py") or arg in ("-m", "--module", "--no_python", "--no-python"):
            break
        name, eq, value = arg.partition("=")
        if name in _NUM_PROCESSES:
            if eq:
                per = value
            else:
                per = rest[i + 1] if i + 1 < len(rest) else ""
                i += 1
        elif name in _REPLACED:
            i += 0 if eq else 1
        else:
            flags.append(arg)
        i += 1
    total = _whole("--num_processes", per) * topo.nnodes
    log(f"accelerate: the command's own launch, with the job's topology (--num_processes {total})")
    return head + [
        "--num_machines", str(topo.nnodes), "--machine_rank", str(topo.rank), "--num_processes", str(total),
        "--main_process_ip", topo.leader_ip, "--main_process_port", str(topo.port),
    ] + flags + rest[i:]  # fmt: skip


def wrap_accelerate(
    argv: Sequence[str], topo: Topology, launcher_tool: list[str], env: dict[str, str]
) -> list[str]:
    """`accelerate launch` with the topology around the command; sets ACCELERATE_USE_CPU in env on CPU."""
    prefix = launcher_tool + ["launch"] if launcher_tool == ["accelerate"] else launcher_tool
    total = topo.nnodes * topo.nproc
    cmd = prefix + [
        "--num_machines", str(topo.nnodes), "--machine_rank", str(topo.rank), "--num_processes", str(total),
        "--main_process_ip", topo.leader_ip, "--main_process_port", str(topo.port), "--dynamo_backend", "no",
    ]  # fmt: skip
    if total > 1:
        cmd.append("--multi_gpu")  # the torch.distributed launcher; on CPU, accelerate then picks gloo
        if (env.get("BEAKER_ASSIGNED_GPU_COUNT") or "0") == "0":
            env["ACCELERATE_USE_CPU"] = "true"
    return cmd + _program_tail(*split_program(argv), "--no_python")


class Plan(NamedTuple):
    """What the job runs: argv (exec'd, or run as a bash script) or, for Ray, the head or a worker."""

    argv: list[str]
    env: dict[str, str]
    ray: str | None = None  # "head" or "worker"
    ray_tool: Sequence[str] = ()
    topology: Topology | None = None


def plan(
    argv: Sequence[str],
    env: dict[str, str],
    resolve: Callable[[str], str] = resolve_ip,
    find_tool: Callable[..., list[str]] = tool,
) -> Plan:
    """The final argv and environment for LAUNCHKIT_LAUNCHER (env is a copy, changed as the job needs)."""
    env = dict(env)
    launcher = env.get("LAUNCHKIT_LAUNCHER") or ""
    if launcher in ("", "none"):
        return Plan(list(argv), env)
    if launcher not in LAUNCHERS:
        raise LaunchError(
            EXIT_INPUTS, f"unknown LAUNCHKIT_LAUNCHER='{launcher}' (expected torchrun, accelerate or ray)"
        )
    topo = topology(launcher, env, resolve)
    if launcher == "torchrun":
        found = find_tool("torchrun", "torch.distributed.run", launcher, env)
        return Plan(wrap_torchrun(argv, topo, found, env.get("LAUNCHKIT_RDZV_ID") or "launchkit"), env)
    if launcher == "accelerate":
        if accelerate_given(argv):
            return Plan(wrap_accelerate_given(argv, topo), env)
        found = find_tool("accelerate", "accelerate.commands.launch", launcher, env)
        return Plan(wrap_accelerate(argv, topo, found, env), env)
    found = find_tool("ray", "ray.scripts.scripts", launcher, env)
    env["RAY_ADDRESS"] = f"{topo.leader_ip}:{topo.port}"
    # Every node already has the job's environment; Ray's `uv run` hook (on when an ancestor process
    # is `uv run`) would start workers in another one.
    env.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    return Plan(list(argv), env, "head" if topo.rank == 0 else "worker", found, topo)


def fmt_ms(ms: int) -> str:
    """1234 (ms) -> "1.23s" (as lib.sh's lk_fmt_ms)."""
    return f"{ms // 1000}.{(ms % 1000) // 10:02d}s"


def timing_line(t0_ms: int, timings: Sequence[str], now_ms: int) -> str:
    return f"setup done in {fmt_ms(now_ms - t0_ms)} ({', '.join(timings)})"


def job_env(environ: dict[str, str], node_dir: str, cwd: str | None) -> dict[str, str]:
    """The command's environment: without the runtime's own entry on PYTHONPATH, PWD the command's."""
    env = dict(environ)
    first, _, rest = env.get("PYTHONPATH", "").partition(os.pathsep)
    if first and os.path.realpath(first) == os.path.realpath(node_dir):  # bash put it first
        if rest:
            env["PYTHONPATH"] = rest
        else:
            del env["PYTHONPATH"]
    if cwd:
        env["PWD"] = cwd
    return env


def _exec(argv: list[str], env: dict[str, str]) -> int:
    """Replace this process by argv; returns only if that fails (127 not found, 126 not runnable)."""
    sys.stdout.flush()
    sys.stderr.flush()

    procs.restore_signals()
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as e:
        log(f"error: cannot run {argv[0]}: {e.strerror or e}")
        return 127 if isinstance(e, FileNotFoundError) else 126
    return 126  # not reached


def run(
    p: Plan,
    method: str,
    starting: Callable[[], None] = lambda: None,
    job: notify.Job | None = None,
    policy: Policy = EMPTY,
) -> int:
    """Run the plan the way the exec method says; the job's exit code. `starting()` right before the
    user's command starts (the timing line, which says that it did: backends/ending.py), never
    before a launcher setup that can still fail (a ray head) nor on a ray worker (the command runs
    on the head). `job`: the job's Slack poster (notify.Job), which keeps the runtime the parent;
    `policy`: the run's (node/policy.py), decoded once by `main`."""
    # `--exec-method bash`: the launcher line with the user's words runs as one bash script
    # (`bash -c "$*"`, as gantry), so `$BEAKER_REPLICA_RANK` in the command expands on each replica.
    argv = ["bash", "-c", " ".join(p.argv), p.argv[0]] if method == "bash" else p.argv

    try:
        watched = watchdog.settings(policy, p.env)
    except ValueError as e:
        raise LaunchError(EXIT_INPUTS, str(e)) from None
    if p.ray is not None:
        from . import ray_cluster

        assert p.topology is not None
        topo, children = p.topology, procs.Children()
        if p.ray == "head":  # the watchdog watches the driver, whose output has its tasks' (log_to_driver)
            return ray_cluster.head(
                p.ray_tool, topo.leader_ip, topo.port, topo.nnodes, argv, p.env, children, starting=starting,
                watched=watched,
            )  # fmt: skip
        return ray_cluster.worker(p.ray_tool, topo.leader_ip, topo.port, p.env, children)
    starting()
    if watched is None and (job is not None or policy.exit_restarts):  # posting the end, or restarting
        watched = watchdog.Settings(None, 0.0, [], None, None)  # the command on an exit code: the parent
    if watched is not None and job is not None and job.progress_every:  # its progress lines, as events
        patterns = watched.patterns or watchdog.progress_patterns(policy.progress_patterns)
        watched = watched._replace(patterns=patterns, report=job.progress_every)
    if watched is not None:  # the runtime stays the parent (docs/runtime.md, "Watchdog")
        try:  # the job's posts: its start once the command runs (watchdog.run tells it), never before
            tell = None if job is None else _telling(job)
            code = restart.run(argv, p.env, watched, tell=tell, left=policy.restarts, policy=policy)
        except OSError as e:
            log(f"error: cannot run {argv[0]}: {e.strerror or e}")
            code = 127 if isinstance(e, FileNotFoundError) else 126
        if job is not None:
            _helper(lambda: job.ended(code))
        return code
    if method == "bash":
        try:
            return procs.run_forwarding(argv, p.env, procs.Children())
        except OSError as e:
            log(f"error: cannot run bash: {e.strerror or e}")
            return 127
    return _exec(argv, p.env)


def _telling(job: notify.Job) -> Callable[[str, str], None]:
    """The watchdog's news for the job's poster, each through _helper."""
    return lambda what, text: _helper(lambda: job.tell(what, text))


def _helper(step: Callable[[], None]) -> None:
    """A helper of the job's (its Slack posts): a crash is one line in the log, never the job's end."""
    try:
        step()
    except Exception as e:  # noqa: BLE001 - whatever it meets, the command's outcome stands
        log(f"warning: launchkit's Slack poster failed ({type(e).__name__})")


def main(args: list[str]) -> int:
    """The `launch` subcommand (see the module's docstring)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)  # until the command runs, a signal ends the job as bash's would
    cwd, t0, timings = None, None, []
    hooks_fd: int | None = None  # the pipe bash hands the hooks over on (read once the options are)
    while args and args[0] != "--":
        opt, eq, value = args[0].partition("=")
        if not eq and opt in ("--cwd", "--t0", "--timing", "--webhook-fd") and len(args) > 1:
            value, args = args[1], args[1:]
        if opt == "--cwd":
            cwd = value
        elif opt == "--webhook-fd" and value.isdigit():  # the Slack webhook, then the events URL: a line each
            hooks_fd = int(value)
        elif opt == "--t0" and value.isdigit():
            t0 = int(value)
        elif opt == "--timing":
            timings.append(value)
        else:
            log(f"error: launch: bad option {args[0]}")
            return EXIT_INPUTS
        args = args[1:]
    argv = args[1:]
    if not argv:
        log("error: launch: no command given")
        return EXIT_INPUTS
    if cwd:
        os.chdir(cwd)
    node_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = job_env(dict(os.environ), node_dir, cwd)
    try:
        policy = Policy.decode(env.get(POLICY_ENV))  # the run's policy, decoded once (node/policy.py)
    except PolicyError as e:
        log(f"error: {e}")
        return EXIT_INPUTS
    job = None
    if hooks_fd is not None or ENV_WEBHOOK in env or ENV_NOTIFY in env or policy.notify_url:
        # its poster (Slack, the events URL); the command never sees a webhook
        from . import notify

        hooks = ("", "") if hooks_fd is None else notify.read_hooks(hooks_fd)
        mode = SWEEP if policy.sweep else JOB  # (handed a hook, the job posts: a local run's is RUN alike)
        job = notify.from_env(env, hooks[0], hooks[1], policy.notify_url, mode)
    try:
        p = plan(argv, env)
        said = timing_line(t0, timings, int(time.time() * 1000)) if t0 is not None else ""
        if said and p.ray == "worker":
            log(f"ray worker: {said}")  # (not the line that says the command started: it runs on the head)

        def starting() -> None:
            if said:
                log(said)

        return run(p, os.environ.get("LAUNCHKIT_EXEC_METHOD") or "exec", starting, job, policy)
    except LaunchError as e:
        log(f"error: {e}")
        return e.code
    except Exception as e:  # noqa: BLE001 - a bug here must still name the step, not leave a bare traceback
        log(f"error: the launcher failed ({type(e).__name__}: {e})")
        return EXIT_EXEC
