"""The run's policy (runtime/node/policy.py, issue 40 item 1): one typed object, encoded once into the
spec and decoded once by each reader; no reader parses its own variables; the backends' registry rows
say which retry causes each honours, checked before anything is written (item 3: every usage check
before the first write, on the fake Beaker: a refused launch creates nothing)."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

from inproc import run_main
from launchkit.backends import registry
from launchkit.runtime import node
from launchkit.runtime.node import policy as P
from launchkit.runtime.node.policy import Policy, PolicyError

SRC = Path(__file__).resolve().parent.parent / "src" / "launchkit"
WS = "ai2/launchkit"


def test_it_round_trips_and_says_nothing_by_default():
    assert Policy().encode() is None and Policy.decode(None) == Policy() and Policy.decode("") == Policy()
    full = Policy(
        retry_on=[P.STALLED, P.PREEMPTION],  # kept in CAUSES order
        retry_cap=4,
        stall_timeout=90,
        stall_grace=0,
        inactive_timeout=1.5,
        inactive_soft_timeout=60,
        progress_patterns=[r'it="\d+"', "\n"],
        webhook_secret="HOOK",
    )
    assert full.retry_on == (P.PREEMPTION, P.STALLED)
    assert Policy.decode(full.encode()) == full
    assert full.restarts == 4 and full.grace == 0 and Policy(stall_timeout=1).grace == P.DEFAULT_GRACE


@pytest.mark.parametrize(
    ("policy", "parent"),
    [
        (Policy(stall_timeout=1), True),
        (Policy(inactive_soft_timeout=1), True),
        (Policy(webhook_secret="HOOK"), True),  # the runtime posts the job's end
        (Policy(retry_on=[P.FAILURE], retry_cap=2), False),  # Beaker's own retries: the command is exec'd
        (Policy(progress_patterns=["x"]), False),
    ],
)
def test_the_one_fact_bash_reads_is_the_encodings_prefix(tmp_path, policy, parent):
    """The bash bootstrap decides whether the runtime stays the parent by the prefix alone (real bash)."""
    value = policy.encode() or ""
    assert value.startswith(P.PARENT_PREFIX) == parent == policy.parent
    script = f'source "{SRC / "runtime" / "launchers.sh"}"; lk__policy_parent'
    r = subprocess.run(["bash", "-c", script], env={"LAUNCHKIT_POLICY": value, "PATH": "/usr/bin:/bin"},
                       capture_output=True, timeout=60)  # fmt: skip
    assert (r.returncode == 0) == parent, r.stderr


def test_a_pattern_cannot_forge_the_prefix():
    """A user's text is a JSON string: its quotes are escaped, so it never reads as the parent flag."""
    sly = Policy(progress_patterns=['{"parent":true'], retry_on=[P.FAILURE], retry_cap=1).encode() or ""
    assert not sly.startswith(P.PARENT_PREFIX) and P.PARENT_PREFIX not in sly


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("not json", "LAUNCHKIT_POLICY is not the JSON launchkit writes"),
        ("[1]", "LAUNCHKIT_POLICY is not the JSON launchkit writes"),
        ('{"retry_on":["sometimes"]}', "unknown retry cause 'sometimes'"),
        ('{"stall_timeout":-1}', "stall_timeout=-1 must be a number of seconds"),
        ('{"later":1}', "unknown field 'later'"),
    ],
)
def test_a_bad_value_is_one_line_naming_it(value, says):
    with pytest.raises(PolicyError) as e:
        Policy.decode(value)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_a_run_launched_before_the_policy_is_still_read():
    """`list`, `why` and the local supervisor read specs written by an older launchkit."""
    old = {
        "LAUNCHKIT_RETRY_ON": "preemption,stalled,bogus",
        "LAUNCHKIT_RETRY_CAP": "2",
        "LAUNCHKIT_STALL_TIMEOUT": "60",
        "LAUNCHKIT_PROGRESS_PATTERNS": "a\nb",
    }
    got = Policy.from_env(old)
    assert got == Policy(
        retry_on=[P.PREEMPTION, P.STALLED], retry_cap=2, stall_timeout=60, progress_patterns=["a", "b"]
    )
    new = Policy(stall_timeout=5).encode()
    assert Policy.from_env({**old, P.ENV: new}) == Policy(stall_timeout=5)  # the policy wins


def test_who_posts_each_event_is_one_table():
    for mode, posters in P.POSTERS.items():
        for process, events in posters.items():
            assert set(events) <= set(P.EVENTS) | set(P.STREAM_ONLY), (mode, process)
    # every event has one poster in each mode, except a failure, which two tell apart by its kind
    for mode in P.POSTERS:
        for event in (*P.EVENTS, *P.STREAM_ONLY):
            who = [p for p in (P.JOB, P.SUPERVISOR, P.FOLLOW) if P.posts(p, mode, event)]
            assert len(who) <= 1 or event == "failed", (mode, event, who)
    assert P.posts(P.FOLLOW, P.FOLLOWER, "succeeded") and not P.posts(P.FOLLOW, P.RUN, "succeeded")
    assert P.posts(P.JOB, P.JOB, "stalled") and not P.posts(P.FOLLOW, P.JOB, "stalled")
    # the stream's own kinds are posted as events only, never to Slack
    assert P.posts(P.JOB, P.JOB, "progress") and not P.slack_posts(P.JOB, P.JOB, "progress")
    assert P.slack_posts(P.JOB, P.JOB, "started")


# -- nothing else parses it ---------------------------------------------------------------------------
OLD_NAMES = re.compile(r"LAUNCHKIT_(RETRY_ON|RETRY_CAP|STALL_|INACTIVE_|PROGRESS_PATTERNS|POLICY\b)")


def _strings(path: Path) -> list[tuple[int, str]]:
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    return [(t.start[0], t.string) for t in tokens if t.type == tokenize.STRING]


def test_no_cause_string_or_policy_variable_outside_the_policy_module():
    """The done-when of issue 40: the causes and the policy's variables are named in policy.py only (the
    bash bootstrap reads the one prefix: runtime/launchers.sh, lk__policy_parent)."""
    here = SRC / "runtime" / "node" / "policy.py"
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path == here:
            continue
        for line, text in _strings(path):
            if OLD_NAMES.search(text) or text.strip("\"'") in P.CAUSES:
                found.append(f"{path.relative_to(SRC)}:{line}: {text[:60]}")
    for path in sorted((SRC / "runtime").glob("*.sh")):
        for n, text in enumerate(path.read_text().splitlines(), 1):
            if (
                OLD_NAMES.search(text)
                and "lk__policy_parent" not in text
                and not text.lstrip().startswith("#")
            ):
                if "LAUNCHKIT_POLICY:-} == '{\"parent\":true'" not in text:
                    found.append(f"{path.relative_to(SRC)}:{n}: {text.strip()[:60]}")
    assert not found, found


def test_the_bash_prefix_is_the_modules():
    text = (SRC / "runtime" / "launchers.sh").read_text()
    assert f"== '{P.PARENT_PREFIX}'*" in text
    assert node.__name__ == "launchkit.runtime.node"


# -- the registry rows: which causes a backend honours, before anything is written ---------------------
def test_the_rows_say_which_causes_each_backend_honours():
    beaker, local = registry.info("beaker"), registry.info("local")
    never = Policy(retry_on=[P.NEVER_STARTED], retry_cap=2)
    local.check_retries(never)  # the supervisor tells it apart
    with pytest.raises(Exception, match="cannot be honoured on Beaker without failure") as e:
        beaker.check_retries(never)
    assert "never-started,failure" in (e.value.hint or "")
    beaker.check_retries(never.replace(retry_on=[P.NEVER_STARTED, P.FAILURE]))
    with pytest.raises(Exception, match="--retry-on node-lost cannot be honoured on local"):
        local.check_retries(Policy(retry_on=[P.NODE_LOST], retry_cap=1))


def _nothing_made(state) -> None:
    assert state.experiments == {} and state.datasets == {}, (state.experiments, state.datasets)


def test_sweep_experiments_with_follow_is_refused_before_the_runtime_dataset_is_made(repo, fake_beaker):
    r = run_main("run", "--workspace", WS, "--sweep", "seed=1,2", "--sweep-experiments", "--follow",
                 "--", "python", "train.py", "{seed}", cwd=repo.path)  # fmt: skip
    assert r.code == 2 and "--sweep-experiments cannot be combined with --follow" in r.stderr, r.stderr
    _nothing_made(fake_beaker.state)


def test_a_cause_beaker_cannot_honour_is_refused_before_anything_is_made(repo, fake_beaker):
    r = run_main(
        "run", "--workspace", WS, "--retry-on", "never-started", "--", "python", "x.py", cwd=repo.path
    )
    assert r.code == 2 and "--retry-on never-started cannot be honoured on Beaker" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    _nothing_made(fake_beaker.state)


def test_a_save_spec_of_a_refused_launch_is_not_written(repo, fake_beaker, tmp_path):
    out = tmp_path / "spec.yaml"
    r = run_main("run", "--workspace", WS, "--save-spec", str(out), "--sweep", "seed=1,2", "--sweep-experiments",
                 "--follow", "--", "python", "train.py", "{seed}", cwd=repo.path)  # fmt: skip
    assert r.code == 2, r.stderr
    assert not out.exists()
    _nothing_made(fake_beaker.state)


def test_the_runtime_refuses_a_malformed_policy_in_one_line(tmp_path):
    cmd = [sys.executable, "-m", "launchkit.runtime.node", "launch", "--cwd", str(tmp_path), "--", "true"]
    env = {"PATH": "/usr/bin:/bin", P.ENV: '{"stall_timeout":"soon"}'}
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 100, r.stderr
    assert r.stderr.strip().splitlines() == [
        "[launchkit] error: LAUNCHKIT_POLICY: stall_timeout='soon' must be a number of seconds"
    ], r.stderr


def test_the_backends_posting_modes_are_the_policys():
    """`Backend.slack_posting` answers with `Posting`, which `follow` asks the policy's POSTERS with."""
    from launchkit.backends.protocol import Posting

    assert {p.value for p in Posting} == set(P.POSTERS) == {P.FOLLOWER, P.JOB, P.RUN, P.SWEEP}
