"""`run`'s options come from one table (launchkit.core.run_options): the command, config keys and
parse's lookups must agree with it."""

from __future__ import annotations

from launchkit.cli.params import METAVARS
from launchkit.core.configschema import KEYS
from launchkit.core.run_options import CONFIG_KEYS, RUN_OPTIONS, TRISTATE_OPTIONS, Kind, config_key


def _run_params():
    from launchkit.cli.app import root_group

    run = root_group().get_command(None, "run")
    return {p.name: p for p in run.params if p.name not in ("extra", "help")}


def test_every_row_is_one_option_of_run_with_its_flags_panel_and_metavar():
    params = _run_params()
    assert sorted(params) == sorted(o.name for o in RUN_OPTIONS)
    for opt in RUN_OPTIONS:
        param = params[opt.name]
        declared = [f for flags in (*opt.flags, *opt.aliases) for f in flags.split("/")]
        assert sorted(param.opts + param.secondary_opts) == sorted(declared), opt.name
        assert param.rich_help_panel == opt.panel, opt.name
        assert param.metavar == (opt.metavar or METAVARS.get(opt.kind)), opt.name  # none for a flag
        assert param.help.startswith(opt.help), opt.name


def test_config_keys_are_known_config_keys():
    for opt in RUN_OPTIONS:
        if opt.key:
            assert opt.key in KEYS, opt.name
            assert CONFIG_KEYS[opt.flag] == opt.key
            assert config_key(opt.name) == opt.key
    assert config_key("auto_secrets") == "auto_secrets"  # a setting without an option


def test_tristate_options_are_the_on_off_pairs():
    assert TRISTATE_OPTIONS == {o.name for o in RUN_OPTIONS if "/" in o.flags[0]}
    assert all(o.kind is Kind.TRISTATE for o in RUN_OPTIONS if o.name in TRISTATE_OPTIONS)


def test_capabilities_not_names_decide_beaker_only_options(tmp_path, monkeypatch):
    import pytest

    from launchkit.application import Application
    from launchkit.backends import Capability, require
    from launchkit.errors import UsageError

    monkeypatch.setenv("LAUNCHKIT_LOCAL_HOME", str(tmp_path))
    from launchkit.backends.local import LocalBackend

    local = LocalBackend(Application())
    require(local, Capability.uploads, upload=["x"])  # local can
    with pytest.raises(UsageError, match="--all-replicas: only for Beaker runs"):
        require(local, Capability.all_replicas, all_replicas=True)
    require(local, Capability.all_replicas, all_replicas=False)  # not given: fine


def test_application_messages_respect_verbosity_and_colour():
    import io

    from launchkit.application import Application

    err = io.StringIO()
    app = Application(verbosity=-1, color=False, stderr=err)
    app.info("hidden")
    app.warn("hidden")
    app.debug("hidden")
    app.error("shown")
    assert err.getvalue() == "error: shown\n"
    err = io.StringIO()
    app = Application(verbosity=1, color=True, stderr=err)
    app.debug("d")
    app.info("i")
    assert err.getvalue() == "\x1b[2mdebug: \x1b[0md\ni\n"
