"""Issue 41: hostile input, round 4 (env files, reserved names, the Python API, local retries, and the
cases earlier rounds left failing).

Each case is one line on stderr naming the value and the fix with the documented exit code (2 usage,
3 precondition), or a launchkit.errors exception from the Python API, with no state touched.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from conftest import Repo, run_cli
from inproc import run_main
from test_error_paths import one_line

CMD = ["--", "python", "train.py"]


# -- 1. files are read as files ------------------------------------------------------------------------


def _fifo(tmp_path) -> str:
    path = str(tmp_path / "fifo")
    os.mkfifo(path)
    return path


def _hostile_files(tmp_path) -> list[tuple[str, str]]:
    """(path, the words that name what it is): a FIFO nobody writes to, devices, a directory."""
    return [
        (_fifo(tmp_path), "is a FIFO (named pipe), not a regular file"),
        ("/dev/zero", "is a character device, not a regular file"),
        ("/dev/urandom", "is a character device, not a regular file"),
        (str(tmp_path), "is a directory, not a regular file"),
    ]


def test_env_file_that_is_not_a_regular_file_is_refused_without_reading_it(tmp_path, repo):
    for path, words in _hostile_files(tmp_path):
        # a real process: a FIFO that blocked would hang it (the timeout fails the test)
        r = run_cli("run", "--dry-run", "--env-file", path, *CMD, cwd=repo.path, timeout=60)
        one_line(r, 2, f"--env-file {path!r}: {words}", "dotenv file")


def test_secret_from_file_that_is_not_a_regular_file_is_refused(tmp_path):
    for path, words in _hostile_files(tmp_path):
        r = run_cli("secret", "set", "X", "--workspace", "ai2/w", "--from-file", path, timeout=60)
        one_line(r, 2, f"--from-file {path!r}: {words}")


def test_secret_from_stdin_has_a_size_limit(tmp_path):
    p = subprocess.run(
        f"{sys.executable} -m launchkit secret set X --workspace ai2/w < /dev/zero",
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2, p.stderr
    assert "larger than 1 MiB" in p.stderr and "Traceback" not in p.stderr


def test_a_big_env_file_is_refused_with_the_limit(tmp_path, repo):
    big = tmp_path / "big.env"
    big.write_text("A=" + "x" * (1 << 20) + "\n")
    r = run_main("run", "--dry-run", "--env-file", str(big), *CMD, cwd=repo.path)
    one_line(r, 2, "--env-file", "is larger than launchkit reads (1 MiB at most)")


def test_a_big_secret_file_is_refused_with_the_limit(tmp_path):
    big = tmp_path / "big"
    big.write_bytes(b"x" * ((1 << 20) + 1))
    r = run_main("secret", "set", "X", "--workspace", "ai2/w", "--from-file", str(big))
    one_line(r, 2, "--from-file", "1 MiB at most")


def test_one_unclosed_quote_before_60000_lines_is_one_error_fast(tmp_path, repo):
    env = tmp_path / "a.env"
    env.write_text("A=1\nB='never closed\n" + "C=3\n" * 60_000)
    started = time.process_time()
    r = run_main("run", "--dry-run", "--env-file", str(env), *CMD, cwd=repo.path)
    one_line(r, 2, f"{env}:2: B's value has no closing '")
    # CPU time, not wall time: the quadratic parser took minutes here, a linear one milliseconds
    assert time.process_time() - started < 20


@pytest.mark.parametrize(
    "data, words",
    [
        (b"A=1\nB=x\x00y\n", ":2: has a NUL byte (byte 8)"),
        (b"A=1\n\nC='x\xffy'\n", ":3: is not UTF-8 text (byte 10)"),
    ],
    ids=["nul", "not-utf8"],
)
def test_env_file_bytes_that_cannot_travel_are_refused_naming_the_line(tmp_path, repo, data, words):
    env = tmp_path / "a.env"
    env.write_bytes(data)
    for local in ([], ["--local"]):
        r = run_main("run", "--dry-run", *local, "--env-file", str(env), *CMD, cwd=repo.path)
        line = one_line(r, 2, f"{env}{words}")
        assert "x" not in line.split(words)[1].split("(")[0]  # the value is never shown


def test_secret_value_with_a_nul_byte_is_refused(tmp_path):
    f = tmp_path / "v"
    f.write_bytes(b"ab\x00cd")
    r = run_main("secret", "set", "X", "--workspace", "ai2/w", "--from-file", str(f))
    line = one_line(r, 2, "has a NUL byte (byte 3 of 5)")
    assert "abcd" not in line and "cd" not in line.split("(")[0]


def test_a_huge_pyproject_is_refused_with_the_limit(repo: Repo):
    repo.commit({"pyproject.toml": "[tool.launchkit]\n" + "# padding\n" * 500_000})
    r = run_main("run", "--dry-run", *CMD, cwd=repo.path)
    one_line(r, 2, "pyproject.toml: is larger than launchkit reads (4 MiB at most)")


# -- 2. reserved names are reserved on every path ------------------------------------------------------

RESERVED = ["LAUNCHKIT_GIT_COMMIT", "LAUNCHKIT_SLACK_WEBHOOK", "RESULTS_DIR"]


@pytest.mark.parametrize("name", RESERVED)
@pytest.mark.parametrize("dry", [["--dry-run"], ["--dry-run", "--offline"], ["--local", "--dry-run"]])
def test_env_secret_cannot_replace_launchkits_own_variables(repo, name, dry):
    r = run_main("run", *dry, "--env-secret", f"{name}=X", *CMD, cwd=repo.path)
    one_line(r, 2, f"--env-secret {name!r}: is set by launchkit itself")


@pytest.mark.parametrize(
    "table, needle",
    [
        ('[tool.launchkit.env_secrets]\nLAUNCHKIT_GIT_COMMIT = "X"\n', "LAUNCHKIT_GIT_COMMIT"),
        ('[tool.launchkit.env]\nLAUNCHKIT_GIT_COMMIT = "abc"\n', "LAUNCHKIT_GIT_COMMIT"),
        (
            '[tool.launchkit.profiles.lab]\nclusters = ["ai2/lab-*"]\nenv = { LAUNCHKIT_RUN_ID = "x" }\n',
            "LAUNCHKIT_RUN_ID",
        ),
        (
            '[tool.launchkit.profiles.lab]\nclusters = ["ai2/lab-*"]\n'
            'setup = [{ export = { LAUNCHKIT_GIT_COMMIT = "x" } }]\n',
            "LAUNCHKIT_GIT_COMMIT",
        ),
    ],
    ids=["config-env-secrets", "config-env", "profile-env", "profile-export"],
)
def test_config_and_profiles_cannot_set_launchkits_own_variables(repo: Repo, table, needle):
    repo.commit({"pyproject.toml": table})
    r = run_main("run", "--dry-run", "--offline", "--cluster", "ai2/lab-1", *CMD, cwd=repo.path)
    one_line(r, 2, needle, "set by launchkit itself")


def test_env_file_cannot_set_launchkits_own_variables(tmp_path, repo):
    env = tmp_path / "a.env"
    env.write_text("OK=1\nLAUNCHKIT_GIT_COMMIT=abc\n")
    r = run_main("run", "--dry-run", "--env-file", str(env), *CMD, cwd=repo.path)
    one_line(r, 2, f"{env}:2 'LAUNCHKIT_GIT_COMMIT': is set by launchkit itself")


MASON = ["mason", "--cluster", "ai2/jupiter", "--dry-run", "--offline"]


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--env", "LAUNCHKIT_GIT_COMMIT=abc"], "--env 'LAUNCHKIT_GIT_COMMIT': is set by launchkit itself"),
        (
            ["--secret", "LAUNCHKIT_SLACK_WEBHOOK=hook"],
            "--secret 'LAUNCHKIT_SLACK_WEBHOOK': is set by launchkit",
        ),
        (["--secret", "RESULTS_DIR=x"], "--secret 'RESULTS_DIR': is set by launchkit itself"),
        (["--env", "A B=1"], "--env 'A B': is not a valid environment variable name"),
        (["--secret", "A=has space"], "--secret A='has space': is not a valid secret name"),
        (["--task_name", "a b"], "--task_name 'a b': is not a valid task name"),
        (["--image", ""], "--image '': is not an image name"),
    ],
    ids=["env", "secret", "results-dir", "env-name", "secret-name", "task-name", "image"],
)
def test_mason_options_refused_like_runs(repo, args, needle):
    r = run_main(*MASON, *args, "--", "python", "train.py", cwd=repo.path)
    one_line(r, 2, needle)


def test_a_request_built_directly_cannot_carry_launchkits_own_variables():
    from launchkit.core.request import EnvSecret, LaunchRequest

    with pytest.raises(ValueError, match="LAUNCHKIT_GIT_COMMIT is set by launchkit itself"):
        LaunchRequest(command=["x"], env_secrets=[EnvSecret(name="LAUNCHKIT_GIT_COMMIT", secret="s")])


# -- 4. local retries back off -------------------------------------------------------------------------


def test_local_retry_waits_double_from_one_second_to_a_cap():
    from launchkit.backends.local.supervisor import RETRY_BACKOFF, RETRY_BACKOFF_CAP, backoff

    waits = [backoff(RETRY_BACKOFF, n) for n in range(1, 12)]
    assert waits == [1, 2, 4, 8, 16, 32, 60, 60, 60, 60, 60]
    assert RETRY_BACKOFF_CAP == 60 and backoff(RETRY_BACKOFF, 100_000) == 60  # no overflow
    # `--retries 100000` of a command that exits at once: attempts start at 0, 1, 3, 7, 15, ... s
    starts = [sum(waits[:n]) for n in range(len(waits))]
    assert starts[:5] == [0, 1, 3, 7, 15] and sum(1 for t in starts if t < 15) == 4  # was 51 in 15 s


def _record(rdir, jobs: list[dict]) -> None:
    import json

    os.makedirs(rdir, exist_ok=True)
    ranks = {str(j["replica"]): j for j in jobs}
    with open(os.path.join(rdir, "status.json"), "w") as f:
        json.dump({"id": "local-backoff", "status": "running", "ranks": ranks, "jobs": jobs}, f)


def test_the_supervisor_starts_a_retry_only_when_its_wait_is_over(tmp_path, monkeypatch):
    """The supervisor's own clock and pause (injected): a retry of attempt 1 is scheduled after the
    backoff and started by the wait loop once the clock reaches it; nothing is started before."""
    from launchkit.backends.local import supervisor

    monkeypatch.delenv("LAUNCHKIT_LOCAL_RETRY_BACKOFF", raising=False)
    rdir = str(tmp_path / "run")
    _record(rdir, [{"replica": 0, "attempt": 1, "status": "failed", "exit_code": 3}])
    now, paused, spawned = [1000.0], [], []

    def pause(seconds: float) -> bool:
        paused.append(seconds)
        now[0] += seconds
        return False

    sup = supervisor.Supervisor(rdir, clock=lambda: now[0], pause=pause)
    monkeypatch.setattr(
        sup, "spawn", lambda ranks, attempt, first=None: spawned.append((ranks, attempt, now[0]))
    )
    monkeypatch.setattr(
        supervisor.procs, "RunProcs", lambda *a, **k: type("P", (), {"end": lambda *_: None})()
    )
    sup.attempts, sup.count, sup.retries_left = {0: 1}, 1, 5
    for n, wait in ((1, 1.0), (2, 2.0), (3, 4.0)):
        sup.retry([0])
        assert spawned[n - 1 :] == [] and sup.pending[0][0] == now[0] + wait  # scheduled, not started
        assert sup.job(0)["retry_delay"] == wait  # recorded: follow's attempt line tells it
        sup.wait()
        assert spawned[-1] == ([0], n + 1, now[0]) and paused[-1] == wait
        sup.attempts[0] = n + 1


def test_a_stop_during_the_wait_starts_no_retry(tmp_path, monkeypatch):
    from launchkit.backends.local import supervisor

    rdir = str(tmp_path / "run")
    _record(rdir, [{"replica": 0, "attempt": 1, "status": "failed", "exit_code": 3}])
    sup = supervisor.Supervisor(rdir)
    spawned: list = []
    monkeypatch.setattr(sup, "spawn", lambda *a, **k: spawned.append(a))
    sup.pending = [(sup.clock() + 3600, [0], 2)]
    threading_timer = __import__("threading").Timer(0.2, sup.cancel.set)
    threading_timer.start()
    sup.wait()  # returns when stopped (the default pause is a wait on the stop), not in an hour
    threading_timer.join()
    assert spawned == [] and sup.pending == []


def test_the_first_wait_setting_is_checked_at_launch(repo, tmp_path):
    r = run_main(
        "run", "--local", "--no-python", "--", "true",
        cwd=repo.path,
        env={"LAUNCHKIT_LOCAL_RETRY_BACKOFF": "soon", "LAUNCHKIT_LOCAL_HOME": str(tmp_path / "lk")},
    )  # fmt: skip
    one_line(r, 2, "LAUNCHKIT_LOCAL_RETRY_BACKOFF='soon' is not a number of seconds", "0 to 60")
    assert not (tmp_path / "lk" / "runs").exists() or not os.listdir(tmp_path / "lk" / "runs")


@pytest.mark.slow
def test_local_retries_wait_and_say_so(repo, tmp_path):
    from lk_helpers import FAST_ENV

    env = {**FAST_ENV, "LAUNCHKIT_LOCAL_HOME": str(tmp_path / "lk"), "LAUNCHKIT_LOCAL_RETRY_BACKOFF": "0.2"}
    r = run_cli(
        "run", "--local", "--no-python", "--retry-on", "failure", "--retries", "3", "--follow",
        "--", sys.executable, "-c", "import sys; sys.exit(3)",
        cwd=repo.path, env=env, timeout=180,
    )  # fmt: skip
    assert r.code == 3, r.stderr
    for n, wait in ((1, "0.2 s"), (2, "0.4 s"), (3, "0.8 s")):
        assert f"attempt {n} failed with exit code 3; it is retried in {wait} (retry {n} of 3)" in r.stderr
    import glob
    import json

    (status,) = glob.glob(str(tmp_path / "lk" / "**" / "status.json"), recursive=True)
    jobs = sorted(json.load(open(status))["jobs"], key=lambda j: j["attempt"])
    assert [j["attempt"] for j in jobs] == [1, 2, 3, 4]
    for before, after, wait in zip(jobs, jobs[1:], (0.2, 0.4, 0.8), strict=False):
        assert after["started"] - before["finished"] >= wait, (before, after)  # the record's own times


# -- 3. the Python API validates like the CLI ----------------------------------------------------------


def test_api_command_given_as_a_string_is_refused():
    from launchkit import api
    from launchkit.errors import UsageError

    with pytest.raises(UsageError, match="command='echo hi': must be a list of strings, not str") as e:
        api.request("echo hi")  # type: ignore[arg-type]
    assert '["python", "train.py"]' in (e.value.hint or "")
    with pytest.raises(UsageError, match="command: 1 is not a string"):
        api.request(["echo", 1])  # type: ignore[list-item]


def test_api_every_list_option_takes_one_string_as_one_item(repo, monkeypatch):
    from launchkit import api
    from launchkit.core.run_options import RUN_OPTIONS, Kind

    monkeypatch.chdir(repo.path)
    lists = [o.name for o in RUN_OPTIONS if o.kind is Kind.LIST]
    assert "env" in lists and "cluster" in lists and len(lists) > 10
    for name in lists:  # the conversion every list option goes through
        assert api._option_value(Kind.LIST, name, "a b") == ["a b"], name
    req = api.request(["true"], env="A=1", cluster="ai2/jupiter", env_secret="HF_TOKEN")
    assert [(e.name, e.value) for e in req.launch_request.env] == [("A", "1")]
    assert req.launch_request.clusters == ["ai2/jupiter"]
    assert [s.name for s in req.launch_request.env_secrets] == ["HF_TOKEN"]


@pytest.mark.parametrize(
    "options, needle",
    [
        ({"gpus": True}, "--gpus True: not a whole number"),
        ({"gpus": 1.5}, "--gpus 1.5: not a whole number"),
        ({"gpus": -1}, "--gpus"),
        ({"cpus": float("nan")}, "--cpus nan: not a number"),
        ({"cpus": "lots"}, "--cpus 'lots': not a number"),
        ({"replicas": "x"}, "--replicas 'x': not a whole number"),
        ({"local": "yes"}, "--local 'yes': must be True or False"),
        ({"env": ["A=1", 2]}, "env: 2 is not a string"),
        ({"env": {"A": "1"}}, "must be a list of strings, not dict"),
        ({"description": ["x"]}, "--description ['x']: must be a string"),
    ],
    ids=lambda v: str(v) if isinstance(v, str) else None,
)
def test_api_values_checked_as_the_cli_checks_them(repo, monkeypatch, options, needle):
    from launchkit import api
    from launchkit.errors import UsageError

    monkeypatch.chdir(repo.path)
    with pytest.raises(UsageError) as e:
        api.request(["true"], **options)
    assert needle in e.value.message, e.value.message


def test_api_numbers_as_digits_work_as_on_the_command_line(repo, monkeypatch):
    from launchkit import api

    monkeypatch.chdir(repo.path)
    assert api.request(["true"], gpus="2").launch_request.gpus == 2
    assert api.request(["true"], task_timeout=3600).launch_request.task_timeout == 3600


def test_api_near_miss_names_are_suggested():
    from launchkit import api
    from launchkit.errors import UsageError

    with pytest.raises(UsageError, match="gpu: not an option of `launchkit run`") as e:
        api.request(["true"], gpu=8)
    assert e.value.hint == "did you mean `gpus`?"


def test_api_runs_limit_checked_before_any_state_is_touched(tmp_path, monkeypatch):
    from launchkit import api
    from launchkit.errors import UsageError

    home = tmp_path / "lk"
    monkeypatch.setenv("LAUNCHKIT_LOCAL_HOME", str(home))
    for limit in ("x", 0, -1, True, 2.5):
        for local in (True, False):
            with pytest.raises(UsageError, match="limit="):
                api.runs(local=local, limit=limit)
    with pytest.raises(UsageError, match="local='yes': must be True or False"):
        api.runs(local="yes")
    assert not home.exists()  # runs.db never opened, let alone moved aside as corrupt
    assert api.runs(local=True, limit=5) == []


def _handle(download=None):
    """A Run on a backend that must not be asked (argument errors come first), or whose results fail."""
    from types import SimpleNamespace

    from launchkit import api

    class Backend:
        def get(self, run_id):
            return SimpleNamespace(id=run_id)

        def download_results(self, info, dest):
            raise download

        def __getattr__(self, name):
            raise AssertionError(f"the backend was asked: {name}")

    return api.Run(None, Backend(), SimpleNamespace(id="local-x"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"tail": -1}, "tail=-1: must be between 0 and"),
        ({"head": "3"}, "head='3': must be a whole number"),
        ({"replica": -2}, "replica=-2"),
        ({"head": 1, "tail": 1}, "head and tail cannot be combined"),
    ],
)
def test_api_logs_arguments_refused_as_the_cli_does(kwargs, needle):
    from launchkit.errors import UsageError

    with pytest.raises(UsageError) as e:
        _handle().logs(**kwargs)
    assert needle in e.value.message
    with pytest.raises(UsageError):
        _handle().follow(tail=-1)


def test_api_results_dest_that_cannot_be_written_is_a_launchkit_error(tmp_path):
    from launchkit.errors import PreconditionError, UsageError

    missing = str(tmp_path / "no" / "such" / "dir")
    run = _handle(FileNotFoundError(2, "No such file or directory", missing))
    with pytest.raises(PreconditionError, match=f"cannot write {missing}") as e:
        run.results(dest=missing)
    assert e.value.hint == "create the directory first, or give an existing path"
    with pytest.raises(UsageError, match="dest=3: must be a path"):
        run.results(dest=3)  # type: ignore[arg-type]


def test_api_get_run_refuses_an_empty_id():
    from launchkit import api
    from launchkit.errors import UsageError

    with pytest.raises(UsageError, match="run_id='': must be a run id"):
        api.get_run("")


def test_api_events_and_wait_arguments_are_checked():
    from launchkit import api
    from launchkit.errors import UsageError

    for kwargs in ({"poll": 0}, {"poll": float("inf")}, {"progress_every": -1}, {"poll": "2"}):
        with pytest.raises(UsageError, match="must be a number of seconds"):
            _handle().events(**kwargs)
    run = _handle()
    for args, kwargs, needle in (
        (("x",), {}, "must be a list of runs"),
        ((run,), {}, "must be a list of runs"),
        ((["x"],), {}, "'x' is not a Run"),
        (([run],), {"poll": 0}, "poll=0"),
        (([run],), {"timeout": -1}, "timeout=-1"),
    ):
        with pytest.raises(UsageError, match=needle):
            api.wait(*args, **kwargs)


# -- 5. earlier cases ----------------------------------------------------------------------------------


def _planted_bells(rdir, victim_dir) -> dict[str, str]:
    """What a job (same uid) can put in its run's bells dir: links to a file and a folder of the user's
    named like a bell's temp dir, and a plain file."""
    import tempfile

    from launchkit.backends.local.bell import BELLS

    bells = os.path.join(rdir, BELLS)
    os.makedirs(bells, exist_ok=True)
    os.makedirs(victim_dir, exist_ok=True)
    victim = os.path.join(victim_dir, "s")
    with open(victim, "w") as f:
        f.write("precious")
    tmp_victim = tempfile.mkdtemp(prefix="lkb-")  # shaped exactly like a bell's temp dir
    with open(os.path.join(tmp_victim, "s"), "w") as f:
        f.write("precious")
    os.symlink(victim, os.path.join(bells, "1-aaaa"))
    os.symlink(os.path.join(tmp_victim, "s"), os.path.join(bells, "2-bbbb"))
    with open(os.path.join(bells, "3-cccc"), "w") as f:
        f.write("not a bell")
    return {"victim": victim, "tmp_victim": os.path.join(tmp_victim, "s")}


def test_a_planted_bell_link_deletes_nothing_outside_the_run(tmp_path):
    from launchkit.backends.local.bell import Ringer, clear

    rdir = tmp_path / "run"
    planted = _planted_bells(str(rdir), str(tmp_path / "home" / "lkb-notes"))
    ringer = Ringer(str(rdir), start=False)
    ringer._ring_all()  # every bell rung once: none listens
    clear(rdir)  # as before the run dir is deleted
    for path in planted.values():
        assert open(path).read() == "precious", path  # the files and their folders are still there
    assert (rdir / "bells" / "3-cccc").read_text() == "not a bell"


def test_a_bells_dir_that_is_a_link_is_not_emptied(tmp_path):
    from launchkit.backends.local.bell import Ringer, clear

    rdir, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    rdir.mkdir()
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("precious")
    os.symlink(elsewhere / "keep.txt", elsewhere / "a-link")
    os.symlink(elsewhere, rdir / "bells")
    Ringer(str(rdir), start=False)._ring_all()
    clear(rdir)
    assert sorted(os.listdir(elsewhere)) == ["a-link", "keep.txt"]


@pytest.mark.slow
@pytest.mark.parametrize("name", [".", "a/..", "a//b", "/etc/x"])
def test_results_with_a_file_name_that_is_no_path_write_nothing(repo, fake_beaker, tmp_path, name):
    from fakebeaker.state import AutoRun

    fake_beaker.state.set_auto(AutoRun(start_after=0.05, run_for=0.1, lines=["x"]))
    r = run_cli("run", "--workspace", "ai2/launchkit", "--name", "res", "--follow", "--", "x", cwd=repo.path)
    assert r.code == 0, r.stderr
    exp = next(e for e in fake_beaker.state.experiments.values() if e.name == "res")
    files = fake_beaker.state.datasets[exp.tasks[0].jobs[-1].result_dataset_id].files
    files["ok.txt"] = b"fine"
    files[name] = b"x"
    out = tmp_path / "parent" / "out"
    r = run_cli("results", exp.id, "-o", str(out), cwd=repo.path, timeout=90)
    one_line(
        r, 5, f"has a file named {name!r}, which is not a path inside a directory; nothing was downloaded"
    )
    assert not (tmp_path / "parent").exists()  # no .out.part beside it, no out/ either


@pytest.mark.parametrize(
    "pair",
    [
        "AUTH=s3cr3t-Pa55",
        "HF_AUTH=abc123def456",
        "AUTHORIZATION=Bearer abcdefgh12345",
        "HDR=Basic dXNlcjpwYXNz",
    ],
)
def test_env_auth_values_are_secret_values(repo, pair):
    r = run_main("run", "--dry-run", "--env", pair, *CMD, cwd=repo.path)
    name, _, value = pair.partition("=")
    line = one_line(r, 2, f"--env {name!r}: its value looks like", "--env-secret")
    assert value not in line


@pytest.mark.parametrize("pair", ["GIT_AUTHOR_NAME=someone", "AUTHOR=jane", "AUTH=/run/secrets/auth.json"])
def test_author_names_and_paths_are_not_secrets(repo, pair):
    r = run_main("run", "--dry-run", "--env", pair, *CMD, cwd=repo.path)
    assert r.code == 0, r.stderr


@pytest.mark.parametrize("command", ["why", "logs", "results", "stop", "follow"])
@pytest.mark.parametrize(
    "run_id", ["local-" + "a" * 5000, "local-../../etc", "local-a/b"], ids=["long", "up", "slash"]
)
def test_a_local_run_id_that_cannot_be_one_is_not_found(tmp_path, command, run_id):
    r = run_main(command, run_id, env={"LAUNCHKIT_LOCAL_HOME": str(tmp_path / "lk")})
    line = one_line(r, 4, "error: no local run 'local-", "see `launchkit list --local`")
    assert "cannot write" not in line and len(line) < 200


# -- 2. a dry run refuses what the launch refuses ------------------------------------------------------

REFUSED_AT_LAUNCH = [
    (["--retry-on", "never-started"], "--retry-on never-started cannot be honoured on Beaker"),
    (["--name", "n" * 200], "--name is 200 characters; Beaker allows at most 128"),
    (["--env-secret", "LAUNCHKIT_GIT_COMMIT=X"], "is set by launchkit itself"),
]


@pytest.mark.parametrize("args, needle", REFUSED_AT_LAUNCH, ids=["retry-on", "name", "reserved"])
@pytest.mark.parametrize(
    "dry", [["--dry-run", "--offline"], ["--dry-run"]], ids=["offline", "no-credentials"]
)
def test_a_dry_run_refuses_what_the_launch_refuses(repo, args, needle, dry):
    r = run_main("run", *dry, *args, *CMD, cwd=repo.path)
    one_line(r, 2, needle)


@pytest.mark.parametrize("args, needle", REFUSED_AT_LAUNCH, ids=["retry-on", "name", "reserved"])
def test_the_launch_refuses_it_too(repo, fake_beaker, args, needle):
    r = run_main("run", "--workspace", "ai2/launchkit", *args, *CMD, cwd=repo.path)
    one_line(r, 2, needle)
    assert not fake_beaker.state.experiments


def test_a_beaker_config_that_is_a_fifo_or_a_device_is_not_read(tmp_path):
    from launchkit.backends.beaker_remembered import config_value

    fifo = _fifo(tmp_path)
    for path in (fifo, "/dev/zero", str(tmp_path)):
        assert config_value("agent_address", {"BEAKER_CONFIG": path}) is None  # at once, not blocked
    good = tmp_path / "config.yml"
    good.write_text("agent_address: https://beaker.example\n")
    assert config_value("agent_address", {"BEAKER_CONFIG": str(good)}) == "https://beaker.example"


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "not-utf8"])
def test_a_python_version_file_that_is_no_version_file_is_not_read(repo: Repo, kind):
    from conftest import git

    pv = repo.path / ".python-version"
    if kind == "dev-zero":
        os.symlink("/dev/zero", pv)  # committed: git keeps links
        git(repo.path, "add", ".python-version")
        git(repo.path, "commit", "-q", "-m", "pv")
        git(repo.path, "push", "-q", "origin", "HEAD")
    elif kind == "fifo":
        os.mkfifo(pv)  # untracked: git cannot hold one, a working tree can
    else:
        repo.commit({"requirements.txt": ""})
        pv.write_bytes(b"3.\xff\n")
        git(repo.path, "add", ".python-version")
        git(repo.path, "commit", "-q", "-m", "pv")
        git(repo.path, "push", "-q", "origin", "HEAD")
    r = run_cli("run", "--dry-run", "--offline", *CMD, cwd=repo.path, timeout=120)
    assert "Traceback" not in r.stderr and r.code in (0, 2, 3), r.stderr


def test_a_nul_byte_in_a_config_env_value_is_refused_without_showing_it(repo: Repo):
    repo.commit({"pyproject.toml": '[tool.launchkit.env]\nPASSPHRASE_HINT = "abc\\u0000def"\n'})
    r = run_main("run", "--dry-run", *CMD, cwd=repo.path)
    line = one_line(r, 2, "the value has a NUL byte")
    assert "abc" not in line and "def" not in line.replace("undefined", "")
