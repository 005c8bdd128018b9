import yaml

from conftest import run_cli


def test_help_lists_commands():
    r = run_cli("--help")
    assert r.code == 0
    for cmd in ("run", "follow", "logs", "stop", "list", "find-gpus", "open"):
        assert cmd in r.stdout


def test_dry_run_emits_spec(repo):
    r = run_cli("run", "--dry-run", "--", "python", "train.py", "a b", cwd=repo.path)
    assert r.code == 0, r.stderr
    spec = yaml.safe_load(r.stdout)
    assert spec["tasks"][0]["arguments"] == ["python", "train.py", "a b"]


def test_missing_separator_is_usage_error(repo):
    r = run_cli("run", "--dry-run", cwd=repo.path)
    assert r.code == 2
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
