"""A secret printed on a progress line (issue 40 item 4): the progress token is masked wherever it is
shown or posted: `list` (table and --json) and `why` (masking.py: masked_run, with the run's secret
values), and the job's own Slack posts (node/launch/notify.py: the values of its credential-named
variables). Real local runs and a real runtime with a webhook receiver on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import run_cli
from launchkit.runtime.node.launch import notify
from lk_helpers import FAST_ENV, launched_id, policy_env
from webhook import hook_fixture  # noqa: F401 - the `hook` fixture

SECRET = "s3cr3t-Value-4242"


def test_the_jobs_stall_post_masks_a_secret_its_progress_line_quoted(tmp_path, hook):
    r, w = os.pipe()
    os.write(w, hook.url.encode())
    os.close(w)
    env = {
        "PATH": os.environ["PATH"],
        "LAUNCHKIT_LAUNCHER": "none",
        "BEAKER_EXPERIMENT_ID": "01EXP",
        "MY_API_TOKEN": SECRET,
        "TOKENIZERS_PARALLELISM": "false",
        **policy_env(stall_timeout=1, stall_grace=0, progress_patterns=[r"step \d+ \S+"]),
    }
    code = f"import time; print('step 1 {SECRET}', flush=True); time.sleep(600)"
    cmd = [
        sys.executable,
        "-m",
        "launchkit.runtime.node",
        "launch",
        "--cwd",
        str(tmp_path),
        "--webhook-fd",
        str(r),
    ]
    try:
        p = subprocess.run(
            [*cmd, "--", sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            pass_fds=(r,),
            timeout=120,
        )
    finally:
        os.close(r)
    assert p.returncode == 124, p.stderr
    stalled = [t for t in hook.texts if "stopped by launchkit" in t]
    assert len(stalled) == 1 and "step 1 ***" in stalled[0] and SECRET not in stalled[0], hook.texts
    assert "false" not in notify.secret_values(env) and SECRET in notify.secret_values(env)


@pytest.mark.slow
def test_list_and_why_mask_a_secret_on_a_progress_line(repo, marker):
    env = {**FAST_ENV, "LK_TEST_SECRET": SECRET}
    code = f"import time; print('it=7 {SECRET}', flush=True); print('ready', flush=True); time.sleep(600)  # {marker}"
    r = run_cli(
        "run", "--local", "--no-python", "--env-secret", "LK_TEST_SECRET", "--stall-timeout", "1h",
        "--progress-pattern", r"it=\d+ \S+", "--", sys.executable, "-c", code,
        cwd=repo.path, env=env, timeout=180,
    )  # fmt: skip
    assert r.code == 0, r.stderr
    run_id = launched_id(r.stderr)
    try:
        with subprocess.Popen(
            [sys.executable, "-m", "launchkit", "follow", run_id],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **env},
        ) as follow:  # its lines are in its log once `follow` shows them
            assert follow.stdout is not None
            for line in follow.stdout:
                if line.strip() == b"ready":
                    break
            follow.kill()
        r = run_cli("why", run_id, env=env, timeout=180)
        assert "last progress: it=7 *** at " in r.stdout and SECRET not in r.stdout, r.stdout
        r = run_cli("list", "--local", "--json", env=env, timeout=180)
        shown = {x["id"]: x["progress"] for x in json.loads(r.stdout)}
        assert shown[run_id]["text"] == "it=7 ***" and SECRET not in r.stdout, shown
        r = run_cli("list", "--local", env={**env, "COLUMNS": "200"}, timeout=180)
        assert "it=7 ***" in r.stdout and SECRET not in r.stdout, r.stdout
    finally:
        run_cli("stop", run_id, "--yes", env=env, timeout=180)


def test_follows_post_of_a_stall_stop_masks_the_progress_line_it_quotes(hook):
    from types import SimpleNamespace

    from launchkit.application import Application
    from launchkit.backends.protocol import Cause, EndReason
    from launchkit.core.status import RunStatus
    from launchkit.notify import SlackNotifier

    line = f"stopped by launchkit: no progress for 30m (last: it=7 {SECRET} at 12:03:10 UTC; --stall-timeout)"
    end = EndReason(kind=Cause.timeout, line=line, by="launchkit", exit_code=124)
    run = SimpleNamespace(id="01RUN", name="r", url=None, end=end, status=RunStatus.failed, exit_code=124)
    SlackNotifier(Application(), hook.url, secrets=lambda: [SECRET]).on_end(run)
    assert len(hook.texts) == 1 and "it=7 ***" in hook.texts[0] and SECRET not in hook.texts[0], hook.texts
