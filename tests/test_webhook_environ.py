"""Secrets where the job runs (issue 40 item 4): no process between the run's start and the command
holds the webhook in its environment (/proc/PID/environ, which removing a variable from os.environ
does not change): the local supervisor gets it on a pipe, the entrypoint reads it from a pipe, and the
runtime from a pipe bash opens right before it execs it. Real local runs, read from inside the job."""

from __future__ import annotations

import pytest

from conftest import run_cli
from lk_helpers import FAST_ENV, launched_id, wait_finished
from webhook import (
    HOOK_PATH,
    hook_fixture,  # noqa: F401 - the `hook` fixture
)

pytestmark = pytest.mark.slow  # end-to-end: real processes, bash, git

# walks from the command up to the first process it cannot read, and says which hold the webhook's path
WALK = f"""
import os
pid, seen, held = os.getppid(), [], []
while pid > 1:
    try:
        environ = open(f"/proc/{{pid}}/environ", "rb").read()
        status = open(f"/proc/{{pid}}/status").read()
        name = open(f"/proc/{{pid}}/cmdline", "rb").read().split(b"\\0")[:3]
    except OSError:
        break
    seen.append(pid)
    if b"{HOOK_PATH}" in environ:
        held.append((pid, name))
    pid = int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("PPid:")))
print("ANCESTORS", len(seen), "HELD", held, flush=True)
"""


@pytest.mark.parametrize("how", ["url", "secret"])
def test_no_ancestor_of_the_command_holds_the_webhook_in_its_environment(repo, hook, how):
    repo.commit({"walk.py": WALK}, "walk")
    env = dict(FAST_ENV)
    given = ["--slack-webhook-url", hook.url]
    if how == "secret":
        env["LK_TEST_HOOK"] = hook.url
        given = ["--slack-webhook-secret", "LK_TEST_HOOK"]
    r = run_cli(
        "run", "--local", "--no-python", *given, "--", "python3", "walk.py",
        cwd=repo.path, env=env, timeout=180,
    )  # fmt: skip
    assert r.code == 0, r.stderr
    run_id = launched_id(r.stderr)
    assert wait_finished(run_id, env)["exit_code"] == 0
    log = run_cli("logs", run_id, env=env, timeout=180).stdout
    said = next(ln for ln in log.splitlines() if ln.startswith("ANCESTORS"))
    count = int(said.split()[1])
    assert count >= 2 and said.endswith("HELD []"), said  # the runtime and the supervisor at least
    texts = hook.wait_for(2)
    assert texts[0].endswith("started") and texts[1].endswith("succeeded"), texts  # it was handed over
