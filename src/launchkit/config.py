"""Defaults for `launchkit run` from config files and the environment.

Sources, highest precedence first: the command line > `LAUNCHKIT_*` environment variables >
`[tool.launchkit]` in the project's pyproject.toml > the user config file
(`platformdirs.user_config_dir("launchkit")/config.toml`, or `$LAUNCHKIT_CONFIG`).

Reading is cheap (stdlib tomllib, no pydantic) so `run --help` can show where a default came from.
Strict validation (`validate_layers`, pydantic, unknown keys with did-you-mean) runs only for `run`.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launchkit.core.configschema import (
    ENV_PREFIX,
    GANTRY_LABEL,
    KEYS,
    PROJECT_LABEL,
    USER_LABEL,
    Config,
    Layer,
)
from launchkit.core.run_options import RUN_OPTIONS
from launchkit.errors import UsageError
from launchkit.userfile import CONFIG_FILE_LIMIT, read_user_file

__all__ = ["KEYS", "Config", "Layer", "help_defaults", "load_config", "merge", "read_layers"]

# Environment variables that set defaults. A deliberate subset: the runtime contract also uses
# LAUNCHKIT_* names inside jobs (LAUNCHKIT_TASK_NAME, LAUNCHKIT_PYTHON_VERSION, ...), and a
# launchkit started inside a job must not pick those up as its own defaults.
ENV_KEYS: tuple[str, ...] = (
    "workspace",
    "budget",
    "groups",
    "clusters",
    "gpu_types",
    "tags",
    "beaker_image",
    "docker_image",
    "priority",
    "git_token_secret",
    "profile",
    "backend",
    "torch_backend",
    "uv_cache_dir",
    "beaker_timeout",
)


def user_config_path(environ: dict[str, str] | os._Environ[str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    if environ.get("LAUNCHKIT_CONFIG"):
        return Path(environ["LAUNCHKIT_CONFIG"])
    if sys.platform == "linux":  # platformdirs' answer on Linux without its import (~4-28 ms) on every start
        base = environ.get("XDG_CONFIG_HOME", "")
        if not os.path.isabs(base):  # the XDG spec: a relative value is invalid and ignored
            base = os.path.expanduser("~/.config")
        return Path(base) / "launchkit" / "config.toml"
    from platformdirs import user_config_dir

    return Path(user_config_dir("launchkit")) / "config.toml"


def user_state_dir() -> Path:
    """launchkit's state directory (platformdirs' `user_state_dir`, imported only when asked)."""
    from platformdirs import user_state_dir as platform_state_dir

    return Path(platform_state_dir("launchkit"))


def find_pyproject(start: str | Path | None = None) -> Path | None:
    """The nearest pyproject.toml from `start` upwards, not above the git root."""
    here = Path(start or os.getcwd()).resolve()
    for d in (here, *here.parents):
        candidate = d / "pyproject.toml"
        if candidate.is_file():
            return candidate
        if (d / ".git").exists():
            return None
    return None


_toml_cache: dict[tuple[str, bool, int, int], dict[str, Any]] = {}  # (path, flag, mtime, size)


def _read_toml(path: Path, *, only_if_mentions_launchkit: bool = False) -> dict[str, Any]:
    """Parse a TOML file (cached per process). With `only_if_mentions_launchkit`, a file that never
    says "launchkit" cannot hold [tool.launchkit] and is not parsed at all (saves ~5 ms per start)."""
    try:
        st = path.stat()
    except OSError:
        st = None
    key = (str(path), only_if_mentions_launchkit, st.st_mtime_ns if st else 0, st.st_size if st else 0)
    if key in _toml_cache:
        return _toml_cache[key]
    data = read_user_file(str(path), str(path), limit=CONFIG_FILE_LIMIT, hint="check the file's permissions")
    if only_if_mentions_launchkit and b"launchkit" not in data and b"tool.gantry" not in data:
        result: dict[str, Any] = {}
    else:
        import tomllib

        try:
            result = tomllib.loads(data.decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise UsageError(f"{path} is not valid TOML: {e}", hint="fix the file's syntax") from None
        except RecursionError:  # tomllib reads nested arrays and inline tables recursively
            raise UsageError(
                f"{path} cannot be read: its arrays or inline tables nest too deeply",
                hint="flatten them: a few levels are plenty",
            ) from None
    _toml_cache[key] = result
    return result


def _normalise(table: dict[str, Any]) -> dict[str, Any]:
    return {str(k).replace("-", "_"): v for k, v in table.items()}


def read_layers(cwd: str | Path | None = None, environ: dict[str, str] | None = None) -> list[Layer]:
    """All layers, lowest precedence first. Raises UsageError for unreadable or malformed files."""
    environ = dict(os.environ if environ is None else environ)
    layers: list[Layer] = []
    upath = user_config_path(environ)
    if environ.get("LAUNCHKIT_CONFIG") and not upath.is_file():  # a typo must not go unnoticed
        raise UsageError(
            f"LAUNCHKIT_CONFIG={str(upath)!r} is not a file",
            hint="point it at an existing config.toml, or unset it to use the default user config",
        )
    if upath.is_file():
        data = _read_toml(upath)
        layers.append(Layer(USER_LABEL, str(upath), _normalise(data)))
    ppath = find_pyproject(cwd)
    if ppath is not None:
        tool = _read_toml(ppath, only_if_mentions_launchkit=True).get("tool", {})
        table = tool.get("launchkit") if isinstance(tool, dict) else None
        if table is not None:
            if not isinstance(table, dict):
                raise UsageError(
                    f"{ppath}: [tool.launchkit] must be a table, not {type(table).__name__}",
                    hint="write it as a [tool.launchkit] section with key = value lines",
                )
            layers.append(Layer(PROJECT_LABEL, str(ppath), _normalise(table)))
        elif isinstance(tool, dict) and isinstance(tool.get("gantry"), dict):
            layers.append(GantryLayer(GANTRY_LABEL, str(ppath), *gantry_values(_normalise(tool["gantry"]))))
    env_values: dict[str, Any] = {}
    for key in ENV_KEYS:
        raw = environ.get(ENV_PREFIX + key.upper())
        if raw:
            env_values[key] = [p.strip() for p in raw.split(",") if p.strip()] if KEYS[key] == "list" else raw
    if env_values:
        layers.append(Layer("environment", None, env_values))
    return layers


# gantry's own [tool.gantry] keys that launchkit has no setting for, and why
GANTRY_ONLY_KEYS = {
    "log_level": "use -v for more output",
    "quiet": "use -q",
    "callback_modules": "launchkit has no callbacks",
}


def gantry_keys() -> dict[str, str]:
    """[tool.gantry] key -> launchkit config key: option names and gantry's spellings (run_options)."""
    out: dict[str, str] = {}
    for opt in RUN_OPTIONS:
        if opt.key:
            for decl in (*opt.flags, *opt.aliases):
                name = decl.split("/")[0]
                if name.startswith("--"):
                    out[name[2:].replace("-", "_")] = opt.key
            out[opt.name] = opt.key
    return out


def gantry_values(table: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """[tool.gantry] as launchkit keys, and the gantry-only keys (launching reports them)."""
    names = gantry_keys()
    values: dict[str, Any] = {}
    ignored: list[str] = []
    for key, value in table.items():
        if key in GANTRY_ONLY_KEYS:
            ignored.append(key)
        else:
            values[names.get(key, key)] = value
    return values, ignored


@dataclass
class GantryLayer(Layer):
    """[tool.gantry]: its gantry-only keys kept beside the values, never among them (where a user's
    key of the same name would be taken for them)."""

    ignored: list[str] = field(default_factory=list)


def merge(layers: list[Layer]) -> Config:
    cfg = Config(layers)
    for layer in layers:
        for key, value in layer.values.items():
            if key in ("env", "env_secrets", "profiles") and key in cfg.values and isinstance(value, dict):
                value = {**cfg.values[key][0], **value}  # per-name merge, higher layer wins
            cfg.values[key] = (value, layer)
    return cfg


def help_defaults(cwd: str | Path | None = None) -> dict[str, tuple[Any, str]]:
    """Cheap, never-failing read for `run --help`: key -> (value, source label)."""
    try:
        cfg = merge(read_layers(cwd))
    except Exception:  # noqa: BLE001 - help never fails on a bad config; `run` reports it
        return {}
    return {k: (v, layer.label) for k, (v, layer) in cfg.values.items()}


def load_config(cwd: str | Path | None = None, environ: dict[str, str] | None = None) -> Config:
    """Read, validate (strictly) and merge all layers."""
    layers = read_layers(cwd, environ)
    validate_layers(layers)
    return merge(layers)


def validate_layers(layers: list[Layer]) -> None:
    """Strict check of each layer with pydantic: unknown keys (with did-you-mean) and wrong types."""
    if not layers:
        return
    from launchkit.core.configmodel import check_layer

    for layer in layers:
        check_layer(layer)


def gantry_notice(config: Config) -> str | None:
    """The one-line notice `run` shows when the defaults come from [tool.gantry]."""
    layer = next((x for x in config.layers if x.label == GANTRY_LABEL), None)
    if layer is None:
        return None
    msg = f"using [tool.gantry] from {layer.path} (there is no [tool.launchkit]; see docs/from-gantry.md)"
    ignored = layer.ignored if isinstance(layer, GantryLayer) else []
    if ignored:
        msg += "; not used: " + ", ".join(f"{k} ({GANTRY_ONLY_KEYS[k]})" for k in ignored)
    return msg
