"""`launchkit secret set` never prints a value it was given on the command line, in any error
(issue 21 item 2). In-process (fast tier): each path fails before Beaker is asked."""

from __future__ import annotations

import pytest

from inproc import run_main

VALUE = "hf_" + "Zq9XwV3pLm7Rt2Ks8Jd4" + "SECRETVALUE"


@pytest.mark.parametrize(
    "args",
    [
        ["secret", "set", "HF_TOKEN", VALUE],
        ["secret", "set", f"HF_TOKEN={VALUE}"],
        ["secret", "set", "HF_TOKEN", VALUE, "--workspace", "ai2/x"],
        ["secret", "set", "--workspace", "ai2/x", "HF_TOKEN", VALUE],
        ["secret", "set", "HF_TOKEN", VALUE, "more", "words"],
        ["secret", "set", "HF_TOKEN", f"--value={VALUE}"],
        ["secret", "set", "HF_TOKEN", "--", VALUE],
        ["secret", "set", f"bad name {VALUE}"],
        ["secret", "set", f"{VALUE}!"],
        ["secret", "set", VALUE],  # the value where the name goes
        ["secret", "set", f"=={VALUE}"],
        ["config", "set-gh-token", VALUE],
        ["config", "set-gh-token", VALUE, "extra"],
        ["config", "set-gh-token", f"--token={VALUE}"],
    ],
)
def test_a_value_on_the_command_line_is_refused_and_never_printed(args):
    r = run_main(*args)
    assert r.code == 2, (r.code, r.stderr)
    out = r.stdout + r.stderr
    assert "SECRETVALUE" not in out and "Zq9XwV3p" not in out
    assert r.stderr.count("\n") == 1 and "Traceback" not in out
