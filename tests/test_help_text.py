"""Help reads as a person wrote it: values shown by a metavar in words (`--tail N`, `[ID]...`), never a
Python type (`<str>`, `<list[str]>`, `<int range>`) or doubled brackets; the root's summaries whole."""

from __future__ import annotations

import re

import pytest
import typer

from launchkit.cli.app import REGISTRY, root_group

MACHINE = re.compile(r"<(str|int|float|bool|list\[[^]]*\]|int range|float range)>|\[\[|\]\.\.\.\]|x<=")


def _helps():
    group = root_group()
    root = typer.Context(group, info_name="launchkit")
    yield "launchkit", group.get_help(root)
    for entry in REGISTRY:
        command = group.get_command(root, entry.name)
        ctx = typer.Context(command, info_name=entry.name, parent=root)
        if command.context_settings.get("help_option_names") != []:  # mason prints mason.py's own
            yield entry.name, command.get_help(ctx)
        for name, sub in getattr(command, "commands", {}).items():
            yield f"{entry.name} {name}", sub.get_help(typer.Context(sub, info_name=name, parent=ctx))


@pytest.mark.parametrize(("name", "text"), list(_helps()), ids=lambda v: v if " " not in v[:12] else None)
def test_no_python_types_in_help(name, text):
    assert not MACHINE.findall(text), (name, MACHINE.findall(text))


def test_the_root_lists_each_summary_whole():
    text = dict(_helps())["launchkit"]
    listed = " ".join(text.split("Commands:", 1)[1].split())
    for entry in REGISTRY:
        if not entry.hidden:
            assert f"{entry.name} {entry.summary}" in listed
    assert "..." not in listed  # a summary never reads as cut (issue 45: `profiles` ended in CLUSTER...)
