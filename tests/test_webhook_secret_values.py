"""Webhooks are credentials (issue 41 item 3): a Slack webhook URL (any case), and any URL under a
*WEBHOOK* name, is refused as a plain value wherever a value enters the spec, as other secret values
are (core/redact.py: secret_value_kind), in one line that never quotes it; no repr shows a URL's path."""

from __future__ import annotations

import pytest

from inproc import run_main
from launchkit.core.redact import secret_value_kind
from launchkit.gantry.callbacks import SlackCallback

REAL_SHAPE = "https://hooks.slack.com/services/T0AB12CD/B0EF34GH/abcdefghijklmnopqrstuvwx"  # the issue's


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SLACK_WEBHOOK_URL", REAL_SHAPE),
        ("NOTIFY", REAL_SHAPE),
        ("NOTIFY", REAL_SHAPE.upper()),
        ("NOTIFY", "https://Hooks.Slack.Com/services/T0AB12CD/B0EF34GH/x"),
        ("TEAMS_WEBHOOK", "https://example.webhook.office.com/webhookb2/abc"),
        ("my_webhook", "http://127.0.0.1:9/h"),
    ],
)
def test_a_webhook_is_a_secret_value(name, value):
    kind = secret_value_kind(value, name)
    assert kind is not None and "webhook" in kind and value not in kind


@pytest.mark.parametrize(("name", "value"), [("HOME_URL", "https://example.com/x"), ("WEBHOOK_RETRIES", "3")])
def test_other_urls_and_webhook_settings_are_plain_values(name, value):
    assert secret_value_kind(value, name) is None


@pytest.mark.parametrize("given", [f"SLACK_WEBHOOK_URL={REAL_SHAPE}", f"NOTIFY={REAL_SHAPE}"])
def test_run_refuses_a_webhook_as_a_plain_env_value_in_one_line(repo, given):
    r = run_main("run", "--dry-run", "--env", given, "--", "true", cwd=repo.path)
    assert r.code == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "--env-secret" in r.stderr, r.stderr
    assert "T0AB12CD" not in r.stderr + r.stdout


def test_an_env_file_webhook_is_refused_too(repo, tmp_path):
    env_file = tmp_path / "job.env"
    env_file.write_text(f"ALERTS={REAL_SHAPE}\n")
    r = run_main("run", "--dry-run", "--env-file", str(env_file), "--", "true", cwd=repo.path)
    assert r.code == 2 and "Slack webhook" in r.stderr and "T0AB12CD" not in r.stderr, r.stderr


def test_slack_callbacks_repr_shows_the_scheme_and_host_only():
    cb = SlackCallback(webhook_url=REAL_SHAPE)
    assert repr(cb) == "SlackCallback(webhook_url='https://hooks.slack.com/…')"
    assert "T0AB12CD" not in str(cb) and "T0AB12CD" not in f"{cb!r}"
