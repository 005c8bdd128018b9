"""One secret-by-value rule for every way a value enters a job's spec (issue 31): `run --env`, config
`env`, `--sweep` values, `launchkit mason --env` (and the W&B variables it passes on), profiles and
presets. Each path refuses a token with the same words, names the variable, never quotes the value, and
has the same way out for a false positive (--env-not-secret)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from launchkit.core import mason as m
from launchkit.core.parse import build_request
from launchkit.core.presets import PresetPart
from launchkit.errors import UsageError

TOKEN = "hf_" + "a1B2c3D4e5" * 3  # a Hugging Face token's shape
SAME = "its value looks like a Hugging Face token, and"  # the rule's words, on every path
LAUNCH = m.Launch(whoami="jdoe", wandb_id="ab12cd34", now=1.0, rand=1)


def _refused(error: BaseException, name: str) -> str:
    text = str(error) + " " + str(getattr(error, "hint", "") or "")
    assert SAME in text and "written into the spec" in text, text
    assert repr(name) in text and TOKEN not in text, text
    return text


def test_run_env():
    with pytest.raises(UsageError) as e:
        build_request({"env": [f"HF_TOKEN={TOKEN}"]}, ["python", "x"], environ={})
    assert "--env-secret HF_TOKEN" in _refused(e.value, "HF_TOKEN")


def test_config_env(tmp_path):
    from launchkit.config import load_config

    (tmp_path / "pyproject.toml").write_text(f'[tool.launchkit.env]\nHF_TOKEN = "{TOKEN}"\n')
    cfg = load_config(cwd=str(tmp_path), environ={})
    with pytest.raises(UsageError) as e:
        build_request({}, ["x"], config=cfg, cwd=str(tmp_path), environ={})
    assert "pyproject.toml" in _refused(e.value, "HF_TOKEN")


def test_sweep_values():
    with pytest.raises(UsageError) as e:
        build_request({"sweep": [f"tok={TOKEN},plain"]}, ["python", "x", "{tok}"], environ={})
    assert _refused(e.value, "tok").startswith("--sweep 'tok'")
    ok = build_request({"sweep": ["lr=1e-4,3e-4"]}, ["python", "x"], environ={})
    assert [a.values for a in ok.sweep] == [["1e-4", "3e-4"]]


def test_sweep_false_positive_passes_with_env_not_secret():
    value = "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY"  # random-looking, say a dataset hash
    with pytest.raises(UsageError):
        build_request({"sweep": [f"data={value},b"]}, ["x"], environ={})
    r = build_request({"sweep": [f"data={value},b"], "env_not_secret": ["data"]}, ["x"], environ={})
    assert r.sweep[0].values == [value, "b"]


def test_mason_env():
    args = m.parse_args(["--cluster", "ai2/phobos", "--env", f"HF_TOKEN={TOKEN}"])
    with pytest.raises(UsageError) as e:
        m.to_request(args, [["true"]], LAUNCH)
    text = _refused(e.value, "HF_TOKEN")
    assert "--secret HF_TOKEN=HF_TOKEN" in text and "--env-not-secret HF_TOKEN" in text  # mason's own flag


def test_mason_env_false_positive_and_its_check():
    value = "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY"
    args = m.parse_args(["--cluster", "ai2/phobos", "--env", f"CODE={value}", "--env-not-secret", "CODE"])
    assert ("CODE", value) in [(e.name, e.value) for e in m.to_request(args, [["true"]], LAUNCH).env]
    with pytest.raises(UsageError, match="OTHER"):
        m.to_request(m.parse_args(["--cluster", "ai2/x", "--env-not-secret", "OTHER"]), [["true"]], LAUNCH)


def test_mason_passes_the_shells_wandb_variables_through_the_same_rule():
    launch = m.Launch("jdoe", "ab12cd34", 1.0, 1, environ={"WANDB_PROJECT": TOKEN})
    with pytest.raises(UsageError) as e:
        m.to_request(m.parse_args(["--cluster", "ai2/phobos"]), [["true"]], launch)
    _refused(e.value, "WANDB_PROJECT")


def test_profiles_and_presets():
    from launchkit.core.profiles import load_profiles

    with pytest.raises(ValidationError) as e:
        PresetPart(env={"HF_TOKEN": TOKEN})
    _refused(ValueError(e.value.errors()[0]["msg"]), "HF_TOKEN")  # pydantic's own text shows its input
    with pytest.raises(UsageError) as e2:
        load_profiles({"mine": {"clusters": ["ai2/x"], "env": {"HF_TOKEN": TOKEN}}})
    _refused(e2.value, "HF_TOKEN")
