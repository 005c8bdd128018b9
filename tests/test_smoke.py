import pytest
import yaml

from conftest import run_cli

# (command groups such as `secret` come after plain commands: Typer lists them last)
CORE_COMMANDS = [
    "run", "follow", "logs", "stop", "list", "why", "find-gpus", "open", "profiles", "prune", "results",
    "session", "mason", "secret",
]  # fmt: skip


def listed_commands(help_text: str) -> list[str]:
    """The command names in the `Commands:` section of `launchkit --help`, in order."""
    section = help_text.split("\nCommands:\n", 1)[1]
    return [
        line.split()[0] for line in section.splitlines() if line[:2] == "  " and line[2:3] not in (" ", "")
    ]


def registered_commands() -> list[str]:
    from launchkit.cli.app import root_group

    group = root_group()
    return [name for name in group.list_commands(None) if not group.get_command(None, name).hidden]


def test_help_lists_commands():
    r = run_cli("--help")
    assert r.code == 0 and r.stderr == ""
    listed = listed_commands(r.stdout)
    assert listed == registered_commands()
    assert listed[: len(CORE_COMMANDS)] == CORE_COMMANDS  # the everyday commands first, in this order


@pytest.mark.slow
def test_dry_run_emits_spec(repo):
    r = run_cli("run", "--dry-run", "--", "python", "train.py", "a b", cwd=repo.path)
    assert r.code == 0, r.stderr
    spec = yaml.safe_load(r.stdout)
    assert spec["tasks"][0]["arguments"] == ["python", "train.py", "a b"]


@pytest.mark.slow
def test_missing_separator_is_usage_error(repo):
    r = run_cli("run", "--dry-run", cwd=repo.path)
    assert r.code == 2
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
