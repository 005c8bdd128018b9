"""Round trips of `list`, submit and upload against the fake Beaker (issue 25): call counts, not timings."""

from __future__ import annotations

import json
import time

import pytest

from conftest import run_cli
from inproc import run_main
from launchkit.core.specview import SpecView
from lk_helpers import policy_env
from test_beaker_backend import spec
from timescale import scaled

WS = "ai2/launchkit"


@pytest.fixture
def backend(fake_beaker, tmp_path, monkeypatch):
    from launchkit.backends.beaker import BeakerBackend

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    b = BeakerBackend(timeout=30, workspace=WS)
    yield b
    b.close()


def _runs(fake, n: int, finished: int) -> None:
    now = time.time_ns()
    for i in range(n):
        exp = fake.state.add_experiment(
            WS,
            f"lk{i}",
            author="alice",
            description="run [launchkit]",
            created=now - (n - i) * 60_000_000_000,
        )
        if i < finished:
            fake.state.finish_job(exp.tasks[0].latest_job, i % 3)


def test_list_costs_four_calls(fake_beaker, backend):
    """org, workspace, one page of workloads, one of finished jobs (bench/bench_calls.py: the rounds)."""
    _runs(fake_beaker, 20, 10)
    from launchkit.backends.beaker import BeakerBackend

    backend.list_runs(limit=20)  # the author's name cached on disk, as in a user's second list
    fake_beaker.reset_calls()
    fresh = BeakerBackend(timeout=30, workspace=WS)  # a new process: nothing resolved yet
    rows = fresh.list_runs(limit=20)
    fresh.close()
    assert len(rows) == 20 and {r.exit_code for r in rows[10:]} == {0, 1, 2}
    # + queued rows (issue 33): the org's unscheduled jobs, then the newest 5 queued rows' events
    assert fake_beaker.total_calls <= 4 + 1 + 5, dict(fake_beaker.calls)


def test_a_first_list_asks_each_author_once_and_at_once(fake_beaker, backend):
    """The authors' names on a machine that has none cached: one GetUser per author by id (no
    ResolveUserName), all in flight together (issue 46: a cold list of 2 authors took 4 calls in 4
    rounds). The fake holds each GetUser until both are in flight."""
    now = time.time_ns()
    for i, author in enumerate(("alice", "bob", "alice")):
        exp = fake_beaker.state.add_experiment(
            WS, f"u{i}", author=author, description="run [launchkit]", created=now - (3 - i) * 60_000_000_000
        )
        fake_beaker.state.finish_job(exp.tasks[0].latest_job or fake_beaker.state.schedule_job(exp), 0)
    fake_beaker.faults.together("GetUser", 2, wait=scaled(20))
    fake_beaker.reset_calls()
    rows = backend.list_runs(limit=20)
    assert sorted(r.author for r in rows) == ["alice", "alice", "bob"]
    assert fake_beaker.calls["ResolveUserName"] == 0 and fake_beaker.calls["GetUser"] == 2, dict(
        fake_beaker.calls
    )
    assert fake_beaker.faults.met == {"GetUser": 2}


def test_list_without_queued_rows_costs_four_calls(fake_beaker, backend):
    _runs(fake_beaker, 20, 20)
    backend.list_runs(limit=20)
    fake_beaker.reset_calls()
    assert len(backend.list_runs(limit=20)) == 20
    assert fake_beaker.total_calls <= 4, dict(fake_beaker.calls)


def test_list_without_finished_statuses_reads_no_jobs(fake_beaker, backend):
    _runs(fake_beaker, 5, 2)
    fake_beaker.reset_calls()
    assert len(backend.list_runs(statuses=["running", "queued"])) == 3
    # no finished jobs read: only the queued rows' (one listing of unscheduled jobs, issue 33)
    assert fake_beaker.calls["ListJobs"] == 1, dict(fake_beaker.calls)


def test_default_names_are_free_up_front():
    from launchkit.launch import default_name

    names = {default_name("0123456789abcdef") for _ in range(50)}
    assert len(names) > 40 and all(n.startswith("launchkit-01234567-") and len(n) == 23 for n in names)


def test_submit_asks_nothing_after_the_create(fake_beaker, backend):
    """No GetUser after CreateExperiment (the author's name is cached), and one create per launch."""
    from launchkit.backends import Submission
    from launchkit.backends.beaker import BeakerBackend

    backend.submit(Submission(name="first", spec=SpecView(spec()), workspace=WS))
    fake_beaker.reset_calls()
    fresh = BeakerBackend(timeout=30, workspace=WS)  # a new process: only the on-disk caches
    run = fresh.submit(Submission(name="second", spec=SpecView(spec()), workspace=WS))
    fresh.close()
    assert run.author == "alice" and run.name == "second"
    assert fake_beaker.calls["CreateExperiment"] == 1 and fake_beaker.calls["GetUser"] == 0, dict(
        fake_beaker.calls
    )


def test_submit_sends_its_independent_lookups_together(fake_beaker, backend):
    """The workspace and the image are asked together, then the workspace's secrets and its default
    budget together (issue 46). The fake holds each call until its partners are in flight: asked one
    after another, none would be answered together."""
    from launchkit.backends import Submission

    guard = scaled(20)
    fake_beaker.faults.together(("ResolveWorkspaceName", "ResolveImageName"), 2, wait=guard)
    fake_beaker.faults.together(("ListSecrets", "GetBudget"), 2, wait=guard)
    backend.submit(
        Submission(name="first", spec=SpecView(spec(image={"beaker": "alice/base"})), workspace=WS)
    )
    want = ("ResolveWorkspaceName", "ResolveImageName", "ListSecrets", "GetBudget")
    assert fake_beaker.faults.met == dict.fromkeys(want, 1), (fake_beaker.faults.met, dict(fake_beaker.calls))
    assert fake_beaker.calls["GetImage"] == 0  # a name's id is one ResolveImageName


def test_a_warm_launch_takes_seven_calls_in_three_rounds(repo, fake_beaker):
    """`launchkit run` a second time from this machine: the workspace by its remembered id, beside it
    the image, and by the ids remembered here the workspace's secrets, its default budget and the
    runtime dataset; then the create; its workload (9 calls in 8 rounds before issue 46, then 7 in 4:
    the secrets, budget and dataset waited for the workspace). The fake holds each of the five until
    all five are in flight."""
    launch = ("run", "--yes", "--workspace", WS, "--beaker-image", "alice/base", "--", "python", "train.py")
    for _ in range(2):  # the first makes the runtime dataset; the second fills the user-name cache
        assert run_cli(*launch, cwd=repo.path, timeout=90).code == 0
    want = ("GetWorkspace", "ResolveImageName", "ListSecrets", "GetBudget", "GetDataset")
    fake_beaker.faults.together(want, len(want), wait=scaled(20))
    fake_beaker.reset_calls()
    r = run_cli(*launch, cwd=repo.path, timeout=90)
    assert r.code == 0, r.stderr
    assert fake_beaker.faults.met == dict.fromkeys(want, 1), (fake_beaker.faults.met, dict(fake_beaker.calls))
    assert fake_beaker.total_calls == 7, " ".join(f"{k}={v}" for k, v in sorted(fake_beaker.calls.items()))


def test_a_launch_asks_before_it_reads_git(repo, fake_beaker, monkeypatch):
    """The look-ups that need no spec go out when the backend is loaded (launch.plan: LooksAhead), so
    Beaker answers while git is read and the spec built: the workspace is asked before git is read."""
    import launchkit.launch as launch_mod

    read = launch_mod.read_git_state
    seen: list[dict[str, int]] = []

    def reading_git(**kw):
        deadline = time.monotonic() + scaled(30)  # a hang guard: asked ahead, the call is already out
        while not _asked_for_the_workspace(fake_beaker) and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append(dict(fake_beaker.calls))
        return read(**kw)

    monkeypatch.setattr(launch_mod, "read_git_state", reading_git)
    r = run_main("run", "--yes", "--workspace", WS, "--", "python", "train.py", cwd=repo.path)
    assert r.code == 0, r.stderr
    assert len(seen) == 1 and _asked_for_the_workspace(seen[0]), seen


def _asked_for_the_workspace(fake_or_calls) -> bool:
    calls = getattr(fake_or_calls, "calls", fake_or_calls)
    return calls.get("ResolveWorkspaceName", 0) + calls.get("GetWorkspace", 0) > 0


def test_a_refused_launch_does_not_wait_for_what_it_asked_ahead(repo, fake_beaker, monkeypatch):
    """A launch refused after its look-ups went out (here: uncommitted changes) gives them up
    (LooksAhead.drop_ahead): the calls in flight end now, so its process exits with its own error
    though Beaker never answers (the fake holds the workspace look-up until the test ends)."""
    import threading

    import launchkit.launch as launch_mod

    (repo.path / "train.py").write_text("print('changed')\n")
    fake_beaker.faults.together("ResolveWorkspaceName", 2, wait=scaled(600))  # never met: held
    read = launch_mod.read_git_state

    def reading_git(**kw):  # once the look-up is in flight (a hang guard only)
        deadline = time.monotonic() + scaled(30)
        while not fake_beaker.faults.held("ResolveWorkspaceName") and time.monotonic() < deadline:
            time.sleep(0.01)
        return read(**kw)

    monkeypatch.setattr(launch_mod, "read_git_state", reading_git)
    before = set(threading.enumerate())
    try:
        r = run_main(
            "--beaker-timeout",
            "900",
            "run",
            "--yes",
            "--workspace",
            WS,
            "--",
            "python",
            "train.py",
            cwd=repo.path,
        )
        assert r.code == 3 and "uncommitted" in r.stderr, r.stderr
        assert fake_beaker.faults.held("ResolveWorkspaceName") == 1  # in flight, unanswered
        asking = [t for t in threading.enumerate() if t not in before and t.name.startswith("beaker")]
        for t in asking:  # what the process's exit would wait for (ThreadPoolExecutor's workers)
            t.join(scaled(30))
        assert not [t for t in asking if t.is_alive()], asking
    finally:
        fake_beaker.faults.release()


def test_a_lookup_sent_ahead_fails_where_it_is_taken(fake_beaker, backend):
    """An error of a look-up sent ahead is the one the launch would have met asking it in turn."""
    from launchkit.backends import Submission
    from launchkit.errors import NotFoundError

    with pytest.raises(NotFoundError, match="alice/no-such-image"):
        backend.submit(Submission(name="x", spec=SpecView(spec(image={"beaker": "alice/no-such-image"}))))
    assert not fake_beaker.state.experiments


def test_connection_answers_each_question_once():
    """Connection.soon/answer: one call per key whichever thread asks first; the error to every taker;
    a wait for another thread's answer bounded by the deadline (clock injected)."""
    from launchkit.backends.beaker.client import BeakerUnreachable, Connection

    conn = Connection.__new__(Connection)  # the bookkeeping only: no client needed
    now = [0.0]
    conn.clock, conn.timeout, conn.call_timeout, conn.deadline = (lambda: now[0]), 5.0, 1.0, 5.0
    conn._answers, conn._pool = {}, None
    conn._answering = __import__("threading").Lock()
    conn.beaker = type("B", (), {"config": type("C", (), {"rpc_address": "x"})()})()
    conn.rate_limited = False
    asked = []
    conn.soon("k", lambda: asked.append(1) or "v")
    assert conn.answer("k", lambda: asked.append(2) or "w") == "v" and asked == [1]
    conn.soon("bad", lambda: 1 / 0)
    for _ in range(2):
        with pytest.raises(ZeroDivisionError):
            conn.answer("bad", lambda: "never")
    release = __import__("threading").Event()
    conn.soon("slow", release.wait)
    now[0] = 100.0  # past the deadline: waiting for the background call gives up at once
    with pytest.raises(BeakerUnreachable):
        conn.answer("slow", lambda: "never")
    release.set()
    conn.forget()
    assert conn.answer("k", lambda: "again") == "again"
    conn._pool.shutdown(wait=True)


def _upload_41(fake_beaker, tmp_path) -> dict[str, int]:
    from launchkit.application import Application
    from launchkit.backends.beaker.client import Connection
    from launchkit.backends.beaker.upload import Uploader, scan

    d = tmp_path / "d"
    (d / "pkg").mkdir(parents=True)
    (d / "pkg" / "__init__.py").write_bytes(b"")
    for i in range(40):
        (d / f"{i}.txt").write_text(str(i))
    tree = scan(str(d))
    conn = Connection(60)
    ws = conn.beaker.workspace.get(WS)
    fake_beaker.reset_calls()
    ds_id = Uploader(conn, Application(verbosity=-1), ws).ensure(tree)
    conn.close()
    assert len(fake_beaker.state.datasets[ds_id].files) == 41
    return dict(fake_beaker.calls)


def test_first_upload_takes_one_call_a_file(fake_beaker, tmp_path):
    """A fresh dataset: its storage asked once, one PUT a file (the empty one too), no listing before."""
    calls = _upload_41(fake_beaker, tmp_path)
    assert calls["UploadDatasetFile"] == 41 and calls["GetDatasetStorage"] == 1, dict(calls)
    assert calls["ListDatasetFiles"] == 1, dict(calls)  # the check before the commit only


def test_upload_without_beaker_pys_helper_uses_the_public_upload(fake_beaker, tmp_path, monkeypatch):
    """Another beaker-py whose private per-file helper differs: the public `dataset.upload` (2 calls)."""
    from beaker._dataset import DatasetClient

    original = DatasetClient._upload_file

    def changed(self, dataset, **kw):  # still what `dataset.upload` calls, with another signature
        return original(self, dataset, **kw)

    monkeypatch.setattr(DatasetClient, "_upload_file", changed)
    calls = _upload_41(fake_beaker, tmp_path)
    assert calls["UploadDatasetFile"] == 41 and calls["GetDatasetStorage"] == 41, dict(calls)


@pytest.mark.parametrize("with_secret", [False, True])
def test_list_masks_progress_without_a_call_for_runs_without_secrets(fake_beaker, repo, with_secret):
    """`list`'s PROGRESS column is the job's text, masked with the run's secret values (issue 40): the
    secrets a run references are read from the listing's tasks (no GetWorkload, no spec per row), and
    a value once per workspace; a run without secrets costs nothing more (issue 46)."""
    secret = "s3cr3t-Value-4242"
    fake_beaker.state.put_secret(WS, "MYTOK", secret)
    patterns = policy_env(progress_patterns=[r"step=\d+ \S+"])  # the token quotes the secret
    env = [
        {"name": "LAUNCHKIT_VERSION", "value": "1"},
        *({"name": k, "value": v} for k, v in patterns.items()),
    ]
    if with_secret:
        env.append({"name": "TOK", "secret": "MYTOK"})
    for i in range(3):
        s = spec()
        s["tasks"][0]["envVars"] = env
        exp = fake_beaker.state.add_experiment(
            WS, f"r{i}", author="alice", spec=s, description="r [launchkit]"
        )
        fake_beaker.state.append_logs(fake_beaker.state.start_job(exp), [f"step={i} {secret}"])
    assert run_cli("list", "--workspace", WS, cwd=repo.path, timeout=90).code == 0  # the user-name cache
    fake_beaker.reset_calls()
    r = run_cli("list", "--workspace", WS, "--json", cwd=repo.path, timeout=90)
    assert r.code == 0, r.stderr
    rows = json.loads(r.stdout)
    assert len(rows) == 3 and all(row["progress"] for row in rows), rows
    assert fake_beaker.calls["GetWorkload"] == 0 and fake_beaker.calls["GetExperimentYamlSpec"] == 0, dict(
        fake_beaker.calls
    )
    if with_secret:
        assert secret not in r.stdout and all("***" in row["progress"]["text"] for row in rows), rows
        assert fake_beaker.calls["GetSecretValue"] == 1, dict(fake_beaker.calls)  # one workspace, one secret
    else:
        assert fake_beaker.calls["GetSecretValue"] == 0, dict(fake_beaker.calls)


@pytest.mark.parametrize("json_output", [False, True], ids=["plain", "json"])
def test_a_launch_ends_without_the_interpreter_teardown(repo, fake_beaker, monkeypatch, json_output):
    """Once a run is launched (and not followed) nothing is left to tear down: main() exits at once
    (app.fast_exit, as after --follow and a dry run) instead of paying the interpreter's teardown of
    beaker-py, grpc and pydantic (~50-80 ms of a submit's wall time, issue 46)."""
    from launchkit.api import request_from_options
    from launchkit.application import Application
    from launchkit.cli.launching import launch_request

    monkeypatch.chdir(repo.path)
    app = Application(verbosity=-1)
    given = {"workspace": WS, "yes": True, "json_output": json_output}
    request = request_from_options(app, given, ["python", "train.py"]).launch_request
    assert not app.fast_exit
    launch_request(app, request)
    assert app.fast_exit and fake_beaker.calls["CreateExperiment"] == 1


CLOSE_WHILE_MAKING = """
import sys, threading, time
from beaker.config import Config
from launchkit.backends.beaker.client import _Beaker

config = Config(user_token="x", agent_address="https://127.0.0.1:9", rpc_address="127.0.0.1:9")
client = _Beaker(config, check_for_upgrades=False)
client.conn = None
done = threading.Event()

def ask():  # a look-up asked ahead: the first call makes the channel and its stub
    while not done.is_set():
        client.service

askers = [threading.Thread(target=ask) for _ in range(3)]
for t in askers:
    t.start()
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:  # the launch refused meanwhile: Connection.abandon closes the channel
    client.close()
    time.sleep(0.0005)
done.set()
for t in askers:
    t.join()
"""


def test_closing_the_channel_while_a_look_up_makes_it_never_crashes_the_process():
    """A launch refused while its look-ups asked ahead make the gRPC channel (Connection.abandon) closed
    it under them: closing a channel while its methods are being registered is a SIGSEGV in gRPC (a
    worker of the suite at load died of it). The close waits for the stub being made."""
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-c", CLOSE_WHILE_MAKING, "2"], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])


COLLECTED_WHILE_MAKING = """
import gc
from beaker.config import Config
from launchkit.backends.beaker.client import _Beaker

config = Config(user_token="x", agent_address="https://127.0.0.1:9", rpc_address="127.0.0.1:9")
for _ in range(20):
    old = _Beaker(config, check_for_upgrades=False)
    old.conn = None
    old.service
    old.cycle = old  # collected by the garbage collector only: its __del__ (close) runs there
    del old
    new = _Beaker(config, check_for_upgrades=False)
    new.conn = None
    gc.set_threshold(1)  # a collection during the next allocations: while the stub is made
    new.service
    gc.set_threshold(700)
print("made")
"""


def test_a_client_collected_while_another_makes_its_channel_closes_without_waiting_for_it():
    """A client's __del__ (beaker-py's: close) may run in the middle of another client's making of its
    channel (a garbage collection there): each client's lock is its own, so the close does not wait for
    the making (the suite at load hung there, `list` in a test, when the lock was one for all)."""
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-c", COLLECTED_WHILE_MAKING], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and r.stdout == "made\n", (r.returncode, r.stderr[-2000:])
