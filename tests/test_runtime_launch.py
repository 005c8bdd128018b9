"""The launchers and the final exec in the node runtime (node/launch/: launchers.py, ray_cluster.py, procs.py):
argv building per launcher and topology, `ray status` parsing, Ray head/worker supervision and signal
forwarding with short-lived real child processes. The bash side is tests/test_launchers.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from launchkit.runtime.node.launch import launchers, procs, ray_cluster
from launchkit.runtime.node.launch.launchers import LaunchError, Topology
from launchkit.runtime.node.policy import Policy
from timescale import scaled

# `ray status` of ray 2.60 with a head and one worker (recorded on 127.0.0.1): the v1 autoscaler lists
# both nodes as Active, the v2 one (RAY_enable_autoscaler_v2=1, KubeRay's default) as Idle (its
# Resources block, the same as v1's, left out).
RAY_STATUS_V1 = """\
======== Autoscaler status: 2026-11-25 16:47:53.916197 ========
Node status
---------------------------------------------------------------
Active:
 1 node_5e21b1b981226f5cc46ef8a17ad4f8e53ba57460c9941983c9386b95
 1 node_8a0c2823971d647193a64065ae82c9cbace56cfee5a5dfe7631d3ce0
Pending:
 (no pending nodes)
Recent failures:
 (no failures)

Resources
---------------------------------------------------------------
Total Usage:
 0.0/2.0 CPU
 0B/32.35GiB memory
 0B/13.87GiB object_store_memory

From request_resources:
 (none)
Pending Demands:
 (no resource demands)
"""
RAY_STATUS_V2 = """\
======== Autoscaler status: 2026-11-25 16:48:20.564232 ========
Node status
---------------------------------------------------------------
Active:
 (no active nodes)
Idle:
 1 node_71efe849d64541976fd647f534c78c07a8b0c695271b8f9ae4ccd3a8
 1 node_096390ef149fe2e8febffd69eeea278d4eb7420bda183b182b1c43db
Pending:
 (no pending nodes)
Recent failures:
 (no failures)
"""
RAY_STATUS_TYPES = (
    "Node status\n-----\nActive:\n 1 head-group\n 3 gpu-workers\nPending:\n 2 gpu-workers, launching\n"
)


def env_of(**beaker: object) -> dict[str, str]:
    return {"LAUNCHKIT_RDZV_PORT": "29123", "LAUNCHKIT_RDZV_ID": "abc"} | {
        f"BEAKER_{k.upper()}": str(v) for k, v in beaker.items()
    }


def no_resolve(name: str) -> str:
    raise AssertionError(f"resolved {name}")


# --- topology and the leader


def test_topology_defaults_to_one_cpu_process_on_one_node(capsys):
    assert launchers.topology("torchrun", {}, no_resolve) == Topology(1, 0, 1, 29500, "127.0.0.1")
    err = capsys.readouterr().err
    assert "torchrun: no GPUs assigned, one CPU process per replica" in err
    assert "torchrun: replica 0 of 1, 1 process(es) per replica, leader 127.0.0.1:29500" in err


def test_topology_across_replicas_resolves_the_leader(capsys):
    env = env_of(replica_count=4, replica_rank=2, assigned_gpu_count=8, leader_replica_hostname="lead")
    assert launchers.topology("accelerate", env, {"lead": "10.0.0.7"}.__getitem__) == Topology(
        4, 2, 8, 29123, "10.0.0.7"
    )
    assert (
        "accelerate: replica 2 of 4, 8 process(es) per replica, leader 10.0.0.7:29123"
        in capsys.readouterr().err
    )


def test_torchrun_without_leader_runs_each_replica_on_its_own(capsys):
    topo = launchers.topology(
        "torchrun", env_of(replica_count=2, replica_rank=1, assigned_gpu_count=8), no_resolve
    )
    assert topo == Topology(1, 0, 8, 29123, "127.0.0.1")
    assert "no leader selection: each of the 2 replicas runs on its own" in capsys.readouterr().err


@pytest.mark.parametrize("launcher", ["accelerate", "ray"])
def test_other_launchers_across_replicas_need_the_leader(launcher):
    with pytest.raises(LaunchError, match="needs BEAKER_LEADER_REPLICA_HOSTNAME") as e:
        launchers.topology(launcher, env_of(replica_count=2), no_resolve)
    assert e.value.code == 109


@pytest.mark.parametrize(
    "var,value",
    [("BEAKER_ASSIGNED_GPU_COUNT", "eight"), ("BEAKER_REPLICA_COUNT", "-1"), ("LAUNCHKIT_RDZV_PORT", "2e4")],
)
def test_non_numeric_topology_is_an_input_error(var, value):
    with pytest.raises(LaunchError, match=f"{var} must be a whole number, got '{value}'") as e:
        launchers.topology("torchrun", {var: value}, no_resolve)
    assert e.value.code == 100


def test_leader_name_is_retried_until_it_resolves_then_falls_back_to_the_name(capsys):
    answers, slept = iter([None, None, "10.1.2.3"]), []
    assert launchers.resolve_ip("leader", lambda _n: next(answers), slept.append) == "10.1.2.3"
    assert slept == [1, 2]
    slept.clear()
    assert launchers.resolve_ip("gone", lambda _n: None, slept.append) == "gone"
    assert slept == list(range(1, 10)) and "could not resolve gone; using the name" in capsys.readouterr().err
    assert launchers.resolve_ip("10.0.0.1", no_resolve, slept.append) == "10.0.0.1"


def test_localhost_resolves_to_its_ipv4_address():
    assert launchers.resolve_ip("localhost", sleep=lambda _s: None) == "127.0.0.1"


# --- argv per launcher


@pytest.mark.parametrize(
    "argv,mode,prog",
    [
        (["python", "train.py", "x"], "script", ["train.py", "x"]),
        (["python3.11", "-m", "pkg.train", "x"], "module", ["pkg.train", "x"]),
        (["train.py", "a b"], "script", ["train.py", "a b"]),
        (["python", "-u", "train.py"], "argv", ["python", "-u", "train.py"]),
        (["python", "-m"], "argv", ["python", "-m"]),
        (["bash", "run.sh"], "argv", ["bash", "run.sh"]),
        (["pythonx", "train.py"], "argv", ["pythonx", "train.py"]),
    ],
)
def test_program_forms(argv, mode, prog):
    assert launchers.split_program(argv) == (mode, prog)


def test_torchrun_argv_single_and_multi_node():
    one = Topology(1, 0, 8, 29123, "127.0.0.1")
    assert launchers.wrap_torchrun(["python", "-m", "pkg"], one, ["torchrun"], "abc") == [
        "torchrun", "--nproc-per-node=8", "--standalone", "-m", "pkg",
    ]  # fmt: skip
    two = Topology(2, 1, 8, 29123, "10.0.0.7")
    assert launchers.wrap_torchrun(["bash", "x.sh"], two, ["/py", "-m", "torch.distributed.run"], "abc") == [
        "/py", "-m", "torch.distributed.run", "--nproc-per-node=8", "--nnodes=2", "--node-rank=1",
        "--rdzv-backend=static", "--rdzv-endpoint=10.0.0.7:29123", "--rdzv-id=abc",
        "--rdzv-conf=read_timeout=420", "--no-python", "bash", "x.sh",
    ]  # fmt: skip


def test_accelerate_argv_and_cpu_replicas():
    env: dict[str, str] = {}
    cpu = Topology(2, 0, 1, 29123, "10.0.0.7")
    argv = launchers.wrap_accelerate(["python", "train.py"], cpu, ["accelerate"], env)
    assert argv == [
        "accelerate", "launch", "--num_machines", "2", "--machine_rank", "0", "--num_processes", "2",
        "--main_process_ip", "10.0.0.7", "--main_process_port", "29123", "--dynamo_backend", "no",
        "--multi_gpu", "train.py",
    ]  # fmt: skip
    assert env == {"ACCELERATE_USE_CPU": "true"}
    env = {"BEAKER_ASSIGNED_GPU_COUNT": "1"}
    one = launchers.wrap_accelerate(
        ["run"], Topology(1, 0, 1, 1, "127.0.0.1"), ["/py", "-m", "accelerate.commands.launch"], env
    )
    assert one[:3] == ["/py", "-m", "accelerate.commands.launch"] and one[-2:] == ["--no_python", "run"]
    assert "--multi_gpu" not in one and "ACCELERATE_USE_CPU" not in env


def test_accelerate_launch_in_the_command_gets_only_the_topology(capsys):
    topo = Topology(2, 1, 8, 29123, "10.0.0.7")
    given = [
        "python3", "-m", "accelerate.commands.launch", "--num-processes=4", "--main_process_ip", "1.2.3.4",
        "--machine-rank=9", "--config_file", "c.yaml", "-m", "pkg", "--num_processes", "3",
    ]  # fmt: skip
    assert launchers.accelerate_given(given)
    assert launchers.wrap_accelerate_given(given, topo) == [
        "python3", "-m", "accelerate.commands.launch", "--num_machines", "2", "--machine_rank", "1",
        "--num_processes", "8", "--main_process_ip", "10.0.0.7", "--main_process_port", "29123",
        "--config_file", "c.yaml", "-m", "pkg", "--num_processes", "3",
    ]  # fmt: skip
    assert "(--num_processes 8)" in capsys.readouterr().err
    assert not launchers.accelerate_given(["accelerate", "config"])
    with pytest.raises(LaunchError, match="--num_processes must be a whole number, got ''") as e:
        launchers.wrap_accelerate_given(["accelerate", "launch", "--num_processes"], topo)
    assert e.value.code == 100


# --- finding the launcher's program


def test_tool_on_path_then_as_a_module_then_a_clear_error(tmp_path):
    (tmp_path / "torchrun").write_text("#!/bin/sh\n")
    (tmp_path / "torchrun").chmod(0o755)
    env = {"PATH": str(tmp_path)}
    assert launchers.tool("torchrun", "torch.distributed.run", "torchrun", env, "/py", lambda _m: False) == [
        "torchrun"
    ]
    found = launchers.tool(
        "ray", "ray.scripts.scripts", "ray", env, "/py", lambda m: m == "ray.scripts.scripts"
    )
    assert found == ["/py", "-m", "ray.scripts.scripts"]
    with pytest.raises(LaunchError, match="--ray needs 'ray', which is not installed") as e:
        launchers.tool("ray", "ray.scripts.scripts", "ray", env, "/py", lambda _m: False)
    assert e.value.code == 109


def test_module_is_found_on_disk_without_importing_it(tmp_path):
    pkg = tmp_path / "fakepkg"
    (pkg / "commands").mkdir(parents=True)
    (pkg / "commands" / "launch.py").write_text("raise SystemExit('imported')\n")

    class Spec:
        submodule_search_locations = (str(pkg),)

    def find(name: str) -> object:
        return Spec() if name == "fakepkg" else None

    assert launchers.module_present("fakepkg.commands.launch", find)
    assert launchers.module_present("fakepkg", find)
    assert not launchers.module_present("fakepkg.commands.nope", find)
    assert not launchers.module_present("fakepkg.launch.commands", find)
    assert not launchers.module_present("fakepkg.commands.launch.sub", find)  # a module is no package
    assert not launchers.module_present("other.x", find)
    assert launchers.module_present("json.decoder") and not launchers.module_present("json.nope")


def test_module_lookup_sees_site_packages_when_started_without_them():
    """bash starts the runtime with -S: a launcher installed in site-packages (here: pytest's) is found."""
    src = str(Path(launchers.__file__).parents[4])
    code = (
        f"import sys; sys.path.insert(0, {src!r}); from launchkit.runtime.node.launch import launchers as l; "
    )
    code += "print(sys.flags.no_site, l.module_present('_pytest.config'), l.module_present('_pytest.nope'))"
    r = subprocess.run([sys.executable, "-s", "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == ["1", "True", "False"], r.stderr


# --- the plan


def test_plan_without_launcher_is_the_command_as_is():
    p = launchers.plan(["a", "b c"], {"LAUNCHKIT_LAUNCHER": "none"})
    assert p.argv == ["a", "b c"] and p.ray is None


def test_unknown_launcher_is_an_input_error():
    with pytest.raises(LaunchError, match=r"unknown LAUNCHKIT_LAUNCHER='mpirun' \(expected") as e:
        launchers.plan(["x"], {"LAUNCHKIT_LAUNCHER": "mpirun"})
    assert e.value.code == 100


def test_ray_plan_sets_the_address_and_the_role():
    base = env_of(replica_count=2, leader_replica_hostname="10.0.0.7") | {"LAUNCHKIT_LAUNCHER": "ray"}
    head = launchers.plan(
        ["python", "d.py"], base | {"BEAKER_REPLICA_RANK": "0"}, find_tool=lambda *a: ["ray"]
    )
    assert head.ray == "head" and head.argv == ["python", "d.py"] and head.ray_tool == ["ray"]
    assert head.env["RAY_ADDRESS"] == "10.0.0.7:29123" and head.env["RAY_ENABLE_UV_RUN_RUNTIME_ENV"] == "0"
    given = base | {"BEAKER_REPLICA_RANK": "1", "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "1"}
    worker = launchers.plan(["python", "d.py"], given, find_tool=lambda *a: ["ray"])
    assert worker.ray == "worker" and worker.env["RAY_ENABLE_UV_RUN_RUNTIME_ENV"] == "1"
    assert "RAY_ADDRESS" not in given  # the caller's mapping is not changed


def test_job_env_drops_the_runtime_from_pythonpath_and_sets_pwd():
    env = launchers.job_env({"PYTHONPATH": "/rt:/user/lib", "PWD": "/rt"}, "/rt", "/job")
    assert env == {"PYTHONPATH": "/user/lib", "PWD": "/job"}
    assert "PYTHONPATH" not in launchers.job_env({"PYTHONPATH": "/tmp//rt/"}, "/tmp/rt", None)
    assert launchers.job_env({"PYTHONPATH": "/rtx:/a"}, "/rt", None) == {"PYTHONPATH": "/rtx:/a"}


def test_timing_line_formats_as_the_bash_one():
    assert (
        launchers.fmt_ms(1234) == "1.23s"
        and launchers.fmt_ms(5) == "0.00s"
        and launchers.fmt_ms(61009) == "61.00s"
    )
    assert launchers.timing_line(1000, ["clone 0.03s", "install[uv.lock] 0.43s"], 1470) == (
        "setup done in 0.47s (clone 0.03s, install[uv.lock] 0.43s)"
    )


# --- ray status and settings


@pytest.mark.parametrize(
    "text,n",
    [
        (RAY_STATUS_V1, 2),
        (RAY_STATUS_V2, 2),
        (RAY_STATUS_TYPES, 4),
        ("", 0),
        ("Active:\n (no active nodes)\n", 0),
    ],
)
def test_ray_status_counts_active_and_idle_nodes(text, n):
    assert ray_cluster.count_nodes(text) == n


def test_ray_settings_from_the_environment():
    cfg = ray_cluster.settings({"LK_RAY_START_ARGS": " --num-cpus=1  --x ", "LK_RAY_POLL": "0.5"})
    assert cfg == ray_cluster.Settings(["--num-cpus=1", "--x"], [], 600.0, 0.5)
    with pytest.raises(LaunchError, match="LK_RAY_WAIT must be a number of seconds, got 'soon'") as e:
        ray_cluster.settings({"LK_RAY_WAIT": "soon"})
    assert e.value.code == 100


# --- processes: real, short-lived children


@pytest.fixture
def handlers():
    """The runtime installs signal handlers in this process: put the test process's back afterwards."""
    saved = {
        s: signal.getsignal(s)
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
    }
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def test_exit_codes_as_a_shell_reports_them():
    children = procs.Children()
    assert children.wait(procs.spawn(["sh", "-c", "exit 3"], dict(os.environ))) == 3
    assert children.wait(procs.spawn(["sh", "-c", "kill -9 $$"], dict(os.environ))) == 137


def test_stop_group_kills_what_ignores_term_after_the_grace(tmp_path):
    children = procs.Children()
    script = f"trap '' TERM; sh -c 'trap \"\" TERM; echo $$ > {tmp_path}/inner; sleep 30' & wait"
    pid = procs.spawn(["sh", "-c", script], dict(os.environ), new_group=True)
    deadline = time.monotonic() + scaled(120)
    while not (tmp_path / "inner").exists() or not (tmp_path / "inner").read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    inner = int((tmp_path / "inner").read_text())
    started = time.monotonic()
    procs.stop_group(pid, 0.4, children)
    assert time.monotonic() - started > 0.3  # TERM first, KILL only after the 0.4 s grace
    assert children.codes[pid] == 137
    assert gone(inner)  # the whole group went, not only its leader


def gone(pid: int) -> bool:
    """pid has ended (a zombie left to whoever reaps orphans counts as ended)."""
    deadline = time.monotonic() + scaled(30)
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except (FileNotFoundError, IndexError):
            return True
        time.sleep(0.02)
    return False


def test_signals_are_forwarded_to_the_command(tmp_path, handlers):
    ready = tmp_path / "ready"
    child = (
        f"trap 'exit 42' USR1; touch {ready}; for i in $(seq 6000); do sleep 0.05; done"  # (a hang: 300 s)
    )

    def signal_me() -> None:
        deadline = time.monotonic() + scaled(120)
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGUSR1)

    threading.Thread(target=signal_me, daemon=True).start()
    assert procs.run_forwarding(["sh", "-c", child], dict(os.environ), procs.Children()) == 42


@pytest.mark.parametrize("own_group", [False, True])  # launchers' bash method / Ray's driver; the watchdog
def test_a_signal_that_comes_while_the_command_starts_reaches_it(monkeypatch, handlers, own_group):
    spawned = procs.spawn

    def spawn_signalled(*args, **kwargs):  # the job is signalled after the handlers, before the child
        os.kill(os.getpid(), signal.SIGUSR1)
        return spawned(*args, **kwargs)

    monkeypatch.setattr(procs, "spawn", spawn_signalled)
    child = ["sh", "-c", "trap 'exit 42' USR1; for i in $(seq 200); do sleep 0.05; done"]
    pid = procs.spawn_forwarding(child, dict(os.environ), own_group=own_group)
    # passed on right after the start: sh takes it with its trap set, or dies of it just before
    assert procs.Children().wait(pid) in (42, 128 + signal.SIGUSR1)


# --- Ray supervision with a stand-in `ray` (a real process that runs until stopped)


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s
        time.sleep(min(s, 0.02))


@pytest.fixture
def fake_ray(tmp_path):
    ray = tmp_path / "ray"
    ray.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {tmp_path}/calls\n'
        'if [ -n "${FAKE_RAY_EXIT:-}" ]; then exit "$FAKE_RAY_EXIT"; fi\n'
        "sleep 30 & wait\n"  # stays a process with this file's path in its command line
    )
    ray.chmod(0o755)
    return ray


def started(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls").read_text().splitlines() if (tmp_path / "calls").exists() else []


def alive_groups(tmp_path: Path) -> list[str]:
    """Processes still running the stand-in (by its path on their command line)."""
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, timeout=30).stdout
    return [line for line in out.splitlines() if f"{tmp_path}/calls" in line or str(tmp_path / "ray") in line]


def test_ray_head_waits_for_every_node_then_runs_the_driver(tmp_path, fake_ray, handlers, capsys):
    answers = iter([None, None, "Active:\n 1 node_a\n", RAY_STATUS_V2])
    env = dict(os.environ) | {
        "LK_RAY_START_ARGS": "--num-cpus=1",
        "LK_RAY_HEAD_ARGS": "--include-dashboard=false",
    }
    said: list[str] = []
    rc = ray_cluster.head(
        [str(fake_ray)], "10.0.0.7", 6379, 2, ["sh", "-c", "exit 7"], env, procs.Children(), FakeClock(),
        lambda: next(answers), starting=lambda: said.append(started(tmp_path)[-1]),
    )  # fmt: skip
    assert rc == 7 and len(said) == 1  # the command-started line: once the head is up, before the driver
    assert started(tmp_path) == [
        "start --head --block --port=6379 --node-ip-address=10.0.0.7 --disable-usage-stats --num-cpus=1 "
        "--include-dashboard=false"
    ]
    err = capsys.readouterr().err
    assert "ray head at 10.0.0.7:6379 with 2 node(s); starting the driver" in err
    assert "driver exited with 7; ray head stopped" in err
    assert not alive_groups(tmp_path)


@pytest.mark.parametrize(
    ("env", "driver", "why"),
    [
        (Policy(inactive_timeout=1), "echo hi; sleep 30", "no output for 1s (--inactive-timeout)"),
        (
            Policy(stall_timeout=1, stall_grace=0),
            "echo '(pid=7) step 3'; for i in $(seq 600); do echo NCCL WARN; sleep 0.05; done",
            "no progress for 1s (last: step 3 at ",
        ),
    ],
)
def test_ray_head_runs_the_driver_under_the_watchdog(tmp_path, fake_ray, handlers, capfd, env, driver, why):
    """--ray with the watchdog's options: the head watches the driver (whose output has its Ray tasks'),
    ends it when it stalls or goes silent, stops the head, and the job's log says why near its end."""
    from launchkit.backends.beaker.backend import WATCHDOG_TAIL
    from launchkit.backends.ending import watchdog_stop
    from launchkit.runtime.node.launch import watchdog

    full = dict(os.environ)
    watched = watchdog.settings(env)
    rc = ray_cluster.head(
        [str(fake_ray)], "127.0.0.1", 1, 1, ["sh", "-c", driver], full, procs.Children(), FakeClock(),
        lambda: RAY_STATUS_V1, watched=watched,
    )  # fmt: skip
    assert rc == watchdog.EXIT_STOPPED and not alive_groups(tmp_path)
    out, err = capfd.readouterr()
    tail = (out + err).encode().splitlines()[-WATCHDOG_TAIL:]
    assert (watchdog_stop(tail) or "").startswith(why), err


def test_ray_head_goes_on_without_missing_nodes_after_the_wait(tmp_path, fake_ray, handlers, capsys):
    env = dict(os.environ) | {"LK_RAY_WAIT": "5"}
    rc = ray_cluster.head(
        [str(fake_ray)],
        "127.0.0.1",
        1,
        3,
        ["true"],
        env,
        procs.Children(),
        FakeClock(),
        lambda: RAY_STATUS_V1,
    )
    assert rc == 0
    assert "only 2 of 3 ray nodes joined within 5s; starting the driver anyway" in capsys.readouterr().err


def test_ray_head_that_never_answers_or_dies_is_exit_109(tmp_path, fake_ray, handlers):
    env = dict(os.environ) | {"LK_RAY_WAIT": "3"}
    with pytest.raises(LaunchError, match="ray head did not come up within 3s") as e:
        ray_cluster.head(
            [str(fake_ray)], "127.0.0.1", 1, 1, ["true"], env, procs.Children(), FakeClock(), lambda: None
        )
    assert e.value.code == 109 and not alive_groups(tmp_path)
    with pytest.raises(LaunchError, match=r"ray head failed to start \(exit 5\)"):
        ray_cluster.head(
            [str(fake_ray)], "127.0.0.1", 1, 1, ["true"], env | {"FAKE_RAY_EXIT": "5"}, procs.Children(),
            FakeClock(), lambda: None, starting=lambda: pytest.fail("a launcher failure is not the command's"),
        )  # fmt: skip


def test_ray_worker_joins_and_exits_0_once_the_head_is_gone(tmp_path, fake_ray, handlers, capsys):
    answers = [False, True, True, False, True, False, False]  # waits for the head; one miss is not enough
    env = dict(os.environ) | {"LK_RAY_POLL": "1"}
    clock = FakeClock()
    rc = ray_cluster.worker(
        [str(fake_ray)], "10.0.0.7", 6379, env, procs.Children(), clock, lambda: answers.pop(0)
    )
    assert rc == 0 and not answers and clock.t >= 1 + 5 * 1
    assert started(tmp_path) == ["start --address=10.0.0.7:6379 --block --disable-usage-stats"]
    err = capsys.readouterr().err
    assert (
        "ray worker joining 10.0.0.7:6379" in err
        and "ray head 10.0.0.7:6379 is gone; worker exiting 0" in err
    )
    assert not alive_groups(tmp_path)


def test_ray_worker_whose_ray_dies_under_a_live_head_is_exit_109(tmp_path, fake_ray, handlers):
    env = dict(os.environ) | {"FAKE_RAY_EXIT": "3", "LK_RAY_POLL": "0.1"}

    class Slow(FakeClock):
        def sleep(self, s: float) -> None:
            self.t += s
            assert self.t < 5, "the worker kept going"
            time.sleep(0.1)  # long enough for the stand-in to have exited

    with pytest.raises(LaunchError, match=r"ray worker stopped while the head is still up \(exit 3\)") as e:
        ray_cluster.worker([str(fake_ray)], "127.0.0.1", 1, env, procs.Children(), Slow(), lambda: True)
    assert e.value.code == 109
    with pytest.raises(LaunchError, match=r"ray head 127\.0\.0\.1:1 not reachable within 2s"):
        ray_cluster.worker(
            [str(fake_ray)],
            "127.0.0.1",
            1,
            env | {"LK_RAY_WAIT": "2"},
            procs.Children(),
            FakeClock(),
            lambda: False,
        )


# --- the hand-over: `python -m launchkit_node launch` as bash runs it


def run_launch(tmp_path: Path, argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    stub = tmp_path / "bin" / "torchrun"
    stub.parent.mkdir(exist_ok=True)
    stub.write_text('#!/bin/sh\nprintf \'%s\\n\' "$(basename "$0")" "$@" "PWD=$PWD"\nexit 3\n')
    stub.chmod(0o755)
    full = {
        "PATH": f"{stub.parent}:/usr/bin:/bin",
        "LAUNCHKIT_LAUNCHER": "torchrun",
        "BEAKER_ASSIGNED_GPU_COUNT": "2",
        **env,
    }
    cmd = [sys.executable, "-m", "launchkit.runtime.node", "launch", "--cwd", str(tmp_path), "--t0", "0"]
    return subprocess.run(
        [*cmd, "--timing", "clone 0.01s", "--", *argv], env=full, capture_output=True, text=True, timeout=60
    )


def test_launch_execs_the_launcher_with_the_timing_line_last(tmp_path):
    r = run_launch(tmp_path, ["python", "train.py", "$X"], {})
    assert r.returncode == 3, r.stderr
    assert r.stdout.splitlines() == [
        "torchrun",
        "--nproc-per-node=2",
        "--standalone",
        "train.py",
        "$X",
        f"PWD={tmp_path}",
    ]
    lines = r.stderr.splitlines()
    assert (
        "torchrun: replica 0 of 1" in lines[0]
        and "setup done in" in lines[-1]
        and "(clone 0.01s)" in lines[-1]
    )


def test_launch_with_the_bash_method_runs_the_launcher_line_as_a_script(tmp_path):
    r = run_launch(tmp_path, ["python", "train.py", "$X"], {"LAUNCHKIT_EXEC_METHOD": "bash", "X": "expanded"})
    assert r.returncode == 3, r.stderr
    assert r.stdout.splitlines()[-2:] == ["expanded", f"PWD={tmp_path}"]


def test_launch_errors_are_one_line_with_the_steps_code(tmp_path):
    r = run_launch(
        tmp_path, ["python", "train.py"], {"BEAKER_REPLICA_COUNT": "2", "LAUNCHKIT_LAUNCHER": "ray"}
    )
    assert r.returncode == 109 and r.stderr.strip().splitlines()[-1] == (
        "[launchkit] error: ray across 2 replicas needs BEAKER_LEADER_REPLICA_HOSTNAME (is leader selection on?)"
    )
    assert "Traceback" not in r.stderr and "setup done" not in r.stderr


def test_a_ray_worker_does_not_say_the_command_started(tmp_path):
    """Its command runs on the head: a worker's 109 is always the launcher's (backends/ending.py)."""
    env = {
        "BEAKER_REPLICA_COUNT": "2", "BEAKER_REPLICA_RANK": "1", "LAUNCHKIT_LAUNCHER": "ray",
        "BEAKER_LEADER_REPLICA_HOSTNAME": "127.0.0.1", "LK_RAY_WAIT": "0", "PATH": f"{tmp_path}:/usr/bin:/bin",
    }  # fmt: skip
    (tmp_path / "ray").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "ray").chmod(0o755)
    r = run_launch(tmp_path, ["python", "driver.py"], env)
    assert r.returncode == 109 and "ray worker: setup done in" in r.stderr, r.stderr
    assert not any(line.startswith("[launchkit] setup done in") for line in r.stderr.splitlines())
