"""Turn raw option values (argv strings, config values) into a validated `LaunchRequest`.

Every user-facing validation message is produced here: one line naming the bad value and where it
came from (`--memory`, `'memory' in /repo/pyproject.toml [tool.launchkit]`, ...), plus a hint.
Precedence: command line > LAUNCHKIT_* environment > project config > user config.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from launchkit.core import dotenv, retrying
from launchkit.core.contract import SLACK_WEBHOOK_ENV, reserved_env
from launchkit.core.multinode import check_combinations
from launchkit.core.redact import refuse_secret_value, url_credential, url_host_only
from launchkit.core.request import (
    DatasetMount,
    EnvSecret,
    EnvVar,
    ExecMethod,
    HostMount,
    Launcher,
    LaunchRequest,
    MountMode,
    Priority,
    PythonManager,
    SecretMount,
    SweepAxis,
    Upload,
    WekaMount,
)
from launchkit.core.run_options import BY_NAME as RUN_OPTIONS_BY_NAME
from launchkit.core.run_options import RUN_OPTIONS, TRISTATE_OPTIONS, BackendChoice, config_key
from launchkit.core.tasks import ESCAPED_SEPARATOR, MAX_TASKS, expand_tasks, split_commands
from launchkit.core.units import MAX_COUNT, MAX_UINT32, UnitError, parse_duration, parse_size
from launchkit.errors import UsageError
from launchkit.runtime import RUNTIME_MOUNT
from launchkit.runtime.node.launch import matching, stallbudget
from launchkit.runtime.node.launch.notify import url_problem
from launchkit.userfile import ENV_FILE_LIMIT, read_user_file

if TYPE_CHECKING:
    from launchkit.core.configschema import Config

EXAMPLE = "launchkit run [OPTIONS] -- python train.py"
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # experiment and task names
SECRET = re.compile(r"[A-Za-z0-9_.-]+")
PY_VERSION = re.compile(r"3(\.\d+){1,2}")
MIN_JOB_PYTHON = (3, 8)  # the node runtime's syntax (runtime/node/boot.py checks it on the node)
GROUP_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?")  # PEP 735 / PEP 508 names
TORCH_BACKEND = re.compile(r"[a-z][a-z0-9.]*")
GITHUB_SHORTHAND = re.compile(r"[A-Za-z0-9-]+/[A-Za-z0-9_.-]+")  # gantry's --remote acct/repo
MODES: dict[str, MountMode] = {
    "ro": "readonly",
    "readonly": "readonly",
    "rw": "readwrite",
    "readwrite": "readwrite",
}
# Env names the spec sets itself; a user --env would silently fight with them.
UTF8_HINT = "Beaker specs are UTF-8 text; pass the value through a file instead"


def flag(opt: str) -> str:
    return "--" + opt.replace("_", "-")


class _Options:
    """Looks an option up on the command line first, then in the merged config; remembers the source."""

    def __init__(self, given: dict[str, Any], config: Config | None):
        self.given = given
        self.config = config

    def get(self, opt: str) -> tuple[Any, str]:
        value = self.given.get(opt)
        unset = (
            value is None
            or (value is False and opt not in TRISTATE_OPTIONS)
            or (isinstance(value, (list, tuple)) and not value)
        )
        if not unset:
            return value, flag(opt)
        key = config_key(opt)
        if self.config is not None and key in self.config.values:
            v, layer = self.config.values[key]
            return v, layer.where(key)
        return value, flag(opt)

    def value(self, opt: str) -> Any:
        return self.get(opt)[0]


def _fail(where: str, value: Any, problem: str, hint: str) -> UsageError:
    return UsageError(f"{where} {value!r}: {problem}", hint=hint)


def _checked(opts: _Options, opt: str, check: Callable[[Any], Any], problem: str, hint: str) -> Any:
    value, where = opts.get(opt)
    if value is None:
        return None
    try:
        ok = check(value)
    except (ValueError, TypeError):
        ok = False
    if not ok:
        raise _fail(where, value, problem, hint)
    return value


def _choice(opts: _Options, opt: str, choices: list[str]) -> str | None:
    value, where = opts.get(opt)
    if value is None:
        return None
    if str(value).lower() not in choices:
        raise _fail(where, value, "unknown value", "use one of: " + ", ".join(choices))
    return str(value).lower()


def _pattern(opts: _Options, opt: str, pattern: re.Pattern[str], what: str) -> str | None:
    value: str | None = _checked(
        opts,
        opt,
        lambda v: isinstance(v, str) and pattern.fullmatch(v),
        f"not a valid {what}",
        f"use letters, digits, '.', '_' or '-' for the {what}",
    )
    return value


def _duration(opts: _Options, opt: str, *, allow_zero: bool) -> float | None:
    value, where = opts.get(opt)
    if value is None:
        return None
    try:
        seconds = parse_duration(value)
    except UnitError as e:
        raise _fail(where, value, e.problem, e.hint) from None
    if seconds == 0 and not allow_zero:
        raise _fail(
            where, value, "must be longer than zero", "give a positive duration such as 30m, or omit it"
        )
    return seconds


def _size(opts: _Options, opt: str) -> int | None:
    value, where = opts.get(opt)
    if value is None:
        return None
    try:
        return parse_size(value)
    except UnitError as e:
        raise _fail(where, value, e.problem, e.hint) from None


def _positive(
    opts: _Options,
    opt: str,
    kind: type,
    hint: str,
    *,
    maximum: int,
    allow_zero: bool = False,
    minimum: float = 0,
) -> Any:
    value, where = opts.get(opt)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or (kind is int and value != int(value))
    ):
        raise _fail(where, value, f"must be {'an integer' if kind is int else 'a finite number'}", hint)
    if value < 0 or (value == 0 and not allow_zero):
        raise _fail(
            where, value, "must be greater than zero" if not allow_zero else "must not be negative", hint
        )
    if value > maximum:
        raise _fail(where, value, f"is too large (at most {maximum})", hint)
    if 0 < value < minimum:
        raise _fail(where, value, f"is too small (at least {minimum})", hint)
    return kind(value)


def _split_target(flag_: str, item: str, what: str) -> tuple[str, str, MountMode | None]:
    """`SOURCE:/target[:ro|rw]` -> (source, target, mode). Target must be absolute."""
    usage = f"use {flag_} {what}:/absolute/path[:ro|:rw]"
    parts = item.split(":")
    mode: MountMode | None = None
    if len(parts) >= 3 and parts[-1].lower() in MODES:
        mode = MODES[parts.pop().lower()]
    if len(parts) < 2:
        raise _fail(flag_, item, "missing the mount path", usage)
    target, source = parts[-1], ":".join(parts[:-1])
    if not source:
        raise _fail(flag_, item, f"missing the {what.lower().replace('_', ' ')}", usage)
    if not target:
        raise _fail(flag_, item, "missing the mount path", usage)
    if not target.startswith("/"):
        raise _fail(
            flag_, item, f"the mount path {target!r} is relative", f"give an absolute path such as /{target}"
        )
    return source, target, mode


def _refuse_secret_value(where: str, name: str, value: str, not_secret: set[str]) -> None:
    """--env values go into the spec: refuse_secret_value's rule, --env-not-secret for a false positive."""
    if name not in not_secret:
        fix = f"store it with `launchkit secret set {name}` and pass --env-secret {name}"
        refuse_secret_value(where, name, value, hint=f"{fix} (not a secret? --env-not-secret {name})")


def _env_not_secret(opts: _Options) -> tuple[set[str], str]:
    value, where = opts.get("env_not_secret")
    names = [str(v) for v in (value or [])]
    for n in names:
        if not ENV_NAME.fullmatch(n):
            raise _fail(where, n, "is not a valid variable name", "use --env-not-secret NAME (a --env name)")
    return set(names), where


def _env_vars(opts: _Options, environ: dict[str, str], cwd: str | None = None) -> list[EnvVar]:
    """--env over --env-file (later files win) over config env; each value checked where it came from."""
    out: dict[str, EnvVar] = {}
    not_secret, not_secret_where = _env_not_secret(opts)
    value, where = opts.get("env")
    items: list[tuple[str, str | None, str]] = []  # (name, value: None copies it from here, where)
    cfg: Any = opts.config.get("env") if opts.config is not None else None
    if isinstance(value, dict):  # from config: {NAME: VALUE}
        cfg, value = value, []
    for item in value or []:
        name, sep, val = item.partition("=")
        if not name:
            raise _fail(where, item, "has no variable name", "use --env NAME=VALUE, or --env NAME to copy it")
        if not sep and not ENV_NAME.fullmatch(name):
            raise _fail(where, item, "is not a valid variable name", "use --env NAME=VALUE")
        items.append((name, val if sep else None, flag("env")))
    given = {n for n, _, _ in items}
    from_files = {n: (v, w) for n, v, w in _env_files(opts, cwd) if n not in given}  # the last one wins
    items = [(n, v, w) for n, (v, w) in from_files.items()] + items
    if isinstance(cfg, dict):  # config env stays as the base; files and command line names override it
        cfg_where = (
            opts.config.values["env"][1].where("env")
            if opts.config and "env" in opts.config.values
            else where
        )
        items = [
            (str(k), str(v), cfg_where) for k, v in cfg.items() if k not in given | set(from_files)
        ] + items
    for name, val, where in items:
        if not ENV_NAME.fullmatch(name):
            raise _fail(
                where,
                name,
                "is not a valid environment variable name",
                "use letters, digits and '_', not starting with a digit",
            )
        if val is None:  # NAME alone: its value here
            if name not in environ:
                raise _fail(
                    where,
                    name,
                    f"{name} is not set in this shell",
                    f"export {name} first or pass --env {name}=VALUE",
                )
            val = environ[name]
        if reserved_env(name):
            raise _fail(where, name, "is set by launchkit itself", "use the matching `run` option instead")
        if name in out:
            raise _fail(where, name, "is given twice", "pass each variable once")
        _refuse_secret_value(where, name, val, not_secret)
        _utf8(f"{where} {name}", val, show=False)  # also a value copied from this shell (--env NAME)
        out[name] = EnvVar(name=name, value=val)
    sweep_keys = {str(item).partition("=")[0] for item in opts.given.get("sweep") or []}
    unused = sorted(not_secret - set(out) - sweep_keys)
    if unused:
        n = unused[0]
        raise _fail(not_secret_where, n, "is not set with --env", f"pass --env {n}=VALUE, or drop it")
    return list(out.values())


def _env_files(opts: _Options, cwd: str | None) -> list[tuple[str, str | None, str]]:
    """(name, value, `FILE:LINE`) of every --env-file, in order (core/dotenv.py: the syntax)."""
    out = []
    for path in opts.given.get("env_file") or []:
        full = os.path.join(cwd or os.getcwd(), os.path.expanduser(path))
        hint = "give a dotenv file (NAME=VALUE lines)"
        data = read_user_file(full, f"--env-file {path!r}", limit=ENV_FILE_LIMIT, hint=hint)
        out += [(e.name, e.value, f"{path}:{e.line}") for e in dotenv.parse(dotenv.decode(data, path), path)]
    return out


def _env_secrets(opts: _Options) -> list[EnvSecret]:
    value, where = opts.get("env_secret")
    if isinstance(value, dict):
        pairs = [(str(k), str(v)) for k, v in value.items()]
    else:
        pairs = []
        for item in value or []:
            name, sep, secret = item.partition("=")
            if not name or (sep and not secret):
                raise _fail(
                    where, item, "is malformed", "use --env-secret NAME=SECRET_NAME, or --env-secret NAME"
                )
            pairs.append((name, secret or name))
        cfg = opts.config.get("env_secrets") if opts.config is not None else None
        if isinstance(cfg, dict):
            given = {n for n, _ in pairs}
            pairs = [(str(k), str(v)) for k, v in cfg.items() if k not in given] + pairs
    out: dict[str, EnvSecret] = {}
    for name, secret in pairs:
        if not ENV_NAME.fullmatch(name):
            raise _fail(
                where,
                name,
                "is not a valid environment variable name",
                "use --env-secret NAME=SECRET_NAME with NAME made of letters, digits and '_'",
            )
        if reserved_env(name):  # a secret's value would replace launchkit's own (the pinned commit, ...)
            raise _fail(where, name, "is set by launchkit itself", "use the matching `run` option instead")
        if not SECRET.fullmatch(secret):
            raise _fail(where, secret, "is not a valid secret name", "use letters, digits, '.', '_' or '-'")
        if name in out:
            raise _fail(where, name, "is given twice", "pass each secret once")
        out[name] = EnvSecret(name=name, secret=secret)
    return list(out.values())


def _list(opts: _Options, opt: str, what: str, *, spaces: bool = False) -> list[str]:
    value, where = opts.get(opt)
    items = [value] if isinstance(value, str) else list(value or [])
    for item in items:
        if not isinstance(item, str) or not item.strip() or (not spaces and any(c.isspace() for c in item)):
            raise _fail(where, item, f"is not a valid {what}", f"give a {what} without spaces")
    return items


def build_request(
    given: dict[str, Any],
    command: list[str] | None,
    *,
    config: Config | None = None,
    environ: dict[str, str] | None = None,
    cwd: str | None = None,
    backends: BackendChoice = BackendChoice(),
) -> LaunchRequest:
    """Validate everything `run` was given and return the immutable request.

    `given` maps option names (launchkit.core.run_options) to raw values; each panel's options are
    checked by one function below, which fills `f`, the LaunchRequest fields. `backends`: the registered
    backends (the CLI's `backend_choice.registered()`), for checking `--backend`/`--local`.
    """
    environ = dict(os.environ if environ is None else environ)
    given = dict(given)
    for opt in RUN_OPTIONS:  # gantry options launchkit does not do: never accepted and ignored
        if opt.refuse and given.get(opt.name):
            raise UsageError(f"{opt.flag} is not supported: {opt.refuse}")
        if opt.deprecated and given.get(opt.name) and opt.means:  # pre-3.7 spelling: its 3.7 meaning
            new = RUN_OPTIONS_BY_NAME[opt.means]
            if given.get(new.name) not in (None, False):
                raise UsageError(f"{opt.flag} and {new.flag} mean the same: keep {new.flag}")
            given[new.name] = given[opt.name]
    f: dict[str, Any] = {"command": _command(list(given.get("extra") or []), command)}
    for name, value in given.items():  # argv's bytes that are not UTF-8 (Python keeps them as surrogates)
        if name != "env":  # values may be secrets: _env_vars names the variable only
            _utf8(flag(name), value)
    for key, (value, layer) in (config.values if config is not None else {}).items():
        _utf8(layer.where(key), value, show=key != "env")  # env values may be secrets: never shown
    opts = _Options(given, config)
    _workload(opts, f)
    _constraints(opts, f)
    _resources(opts, f)
    _inputs(opts, given, f, environ, cwd)
    _git(opts, given, f)
    _task(opts, given, f)
    _multinode(opts, given, f)
    _runtime(opts, f)
    _python(opts, given, f)
    _launch(opts, given, f, environ, backends)
    try:
        request = LaunchRequest(**{k: v for k, v in f.items() if v is not None})
    except ValidationError as e:  # a backstop: the checks above should have caught it
        err = e.errors()[0]
        loc = flag(str(err["loc"][0])) if err["loc"] else "run"
        raise UsageError(f"{loc}: {err['msg'].removeprefix('Value error, ')}") from None
    check_combinations(request)  # launcher/replica conflicts
    retrying.check(request)  # --retry-on causes no backend can honour
    _check_task_names(request)
    return request


def _utf8(where: str, value: Any, *, show: bool = True) -> None:
    """Refuse text a spec cannot carry (Beaker specs are UTF-8), as the command's arguments are."""
    for item in value.items() if isinstance(value, dict) else value if isinstance(value, list) else [value]:
        for text in item if isinstance(item, tuple) else [item]:
            if isinstance(text, str) and "\0" in text:  # from config or the API: argv cannot hold one
                hint = "remove it: no environment variable or command argument can carry a NUL byte"
                if not show:
                    raise UsageError(f"{where}: the value has a NUL byte", hint=hint)
                raise _fail(where, text, "has a NUL byte", hint)
            if isinstance(text, str) and not text.isascii():
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError:
                    if not show:
                        raise UsageError(f"{where}: the value is not valid UTF-8", hint=UTF8_HINT) from None
                    raise _fail(where, text, "is not valid UTF-8", UTF8_HINT) from None


def _command(extra: list[str], command: list[str] | None) -> list[str]:
    if command is None:
        found = f" (found {' '.join(extra)!r} without it)" if extra else ""
        raise UsageError(f"the command must come after `--`{found}", hint=f"e.g. {EXAMPLE}")
    if extra:
        raise UsageError(
            "found extra arguments before `--`: " + " ".join(repr(x) for x in extra),
            hint="flags take no value (write --allow-dirty, not --allow-dirty false); "
            "the command goes after --",
        )
    if not command or not command[0].strip():
        raise UsageError("the command after `--` is empty", hint=f"e.g. {EXAMPLE}")
    for i, arg in enumerate(command):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError(
                f"argument {i + 1} of the command is not valid UTF-8: {arg!r}", hint=UTF8_HINT
            ) from None
    return list(command)


def _workload(opts: _Options, f: dict[str, Any]) -> None:
    f["name"] = _pattern(opts, "name", NAME, "name")
    f["description"] = opts.value("description")
    for opt in ("workspace", "budget"):
        f[opt] = _checked(
            opts,
            opt,
            lambda v: isinstance(v, str) and v.strip() and " " not in v,
            f"is not a valid {opt}",
            f"use the form org/{opt}",
        )
    f["groups"] = _list(opts, "group", "group name")


def _constraints(opts: _Options, f: dict[str, Any]) -> None:
    f["clusters"] = _list(opts, "cluster", "cluster name or glob")
    f["gpu_types"] = _list(opts, "gpu_type", "GPU type", spaces=True)
    f["interconnect"] = _choice(opts, "interconnect", ["ib", "tcpxo"])
    f["tags"] = _list(opts, "tag", "tag")
    f["hostnames"] = _list(opts, "hostname", "hostname")
    if f["hostnames"] and (f["clusters"] or f["gpu_types"] or f["tags"] or f["interconnect"]):
        other = next(
            o
            for o, k in (
                ("--cluster", "clusters"),
                ("--gpu-type", "gpu_types"),
                ("--tag", "tags"),
                ("--interconnect", "interconnect"),
            )
            if f[k]
        )
        raise UsageError(
            f"--hostname {f['hostnames'][0]!r} cannot be combined with {other}",
            hint="--hostname pins exact machines: drop it or drop the cluster filters",
        )


def _resources(opts: _Options, f: dict[str, Any]) -> None:
    f["cpus"] = _positive(  # Beaker (Kubernetes) counts CPUs in thousandths
        opts, "cpus", float, "give a number of CPUs such as 8 or 0.5", maximum=MAX_UINT32, minimum=0.001
    )
    f["gpus"] = _positive(  # 0 is gantry's "no GPUs" (written to the spec as gpuCount: 0)
        opts,
        "gpus",
        int,
        "give a GPU count (0 for none), or omit --gpus for a CPU-only job",
        maximum=MAX_UINT32,
        allow_zero=True,
    )
    f["memory"] = _size(opts, "memory")
    f["shared_memory"] = _size(opts, "shared_memory")


def _inputs(
    opts: _Options, given: dict[str, Any], f: dict[str, Any], environ: dict[str, str], cwd: str | None
) -> None:
    _images(opts, f)
    _mounts(opts, f, cwd)
    _env(opts, given, f, environ, cwd)


def _images(opts: _Options, f: dict[str, Any]) -> None:
    for opt in ("beaker_image", "docker_image"):  # '' must not quietly mean the default image
        _checked(
            opts,
            opt,
            lambda v: isinstance(v, str) and v.strip() and not any(c.isspace() for c in v),
            "is not an image name",
            f"give an image such as {'org/image' if opt == 'beaker_image' else 'python:3.12'}, or omit it",
        )
    beaker_image, docker_image = opts.get("beaker_image"), opts.get("docker_image")
    if beaker_image[0] and docker_image[0]:
        if beaker_image[1].startswith("--") == docker_image[1].startswith("--"):
            raise UsageError(
                f"{beaker_image[1]} {beaker_image[0]!r} and {docker_image[1]} {docker_image[0]!r} "
                "cannot be used together",
                hint="pick one image",
            )
        # the command line beats a config default of the other kind
        beaker_image, docker_image = (
            (beaker_image, (None, "")) if beaker_image[1].startswith("--") else ((None, ""), docker_image)
        )
    f["beaker_image"], f["docker_image"] = beaker_image[0], docker_image[0]


def _mounts(opts: _Options, f: dict[str, Any], cwd: str | None) -> None:
    f["datasets"] = []
    for item in opts.value("dataset") or []:
        src, target, mode = _split_target("--dataset", item, "NAME[:SUBPATH]")
        name, _, sub = src.partition(":")
        if not name:
            raise _fail("--dataset", item, "missing the dataset name", "use --dataset NAME[:SUBPATH]:/mount")
        if mode == "readwrite":
            raise _fail("--dataset", item, "datasets are read-only", "drop the :rw suffix")
        f["datasets"].append(DatasetMount(dataset=name, sub_path=sub or None, mount_path=target, mode=mode))
    f["mounts"] = []
    for item in opts.value("mount") or []:
        src, target, mode = _split_target("--mount", item, "HOST_PATH")
        if not src.startswith("/"):
            raise _fail(
                "--mount", item, f"the host path {src!r} is relative", "give the absolute path on the node"
            )
        f["mounts"].append(HostMount(host_path=src, mount_path=target, mode=mode))
    f["weka"] = []
    for item in opts.value("weka") or []:
        src, target, mode = _split_target("--weka", item, "BUCKET")
        f["weka"].append(WekaMount(bucket=src, mount_path=target, mode=mode))
    f["uploads"] = []
    for item in opts.value("upload") or []:
        src, target, _ = _split_target("--upload", item, "LOCAL_PATH")
        path = os.path.join(cwd or os.getcwd(), os.path.expanduser(src))
        if not os.path.exists(path):
            raise _fail(
                "--upload", item, f"{src!r} does not exist here", "give an existing local file or directory"
            )
        f["uploads"].append(Upload(local_path=os.path.abspath(path), mount_path=target))
    f["secret_mounts"] = []
    for item in opts.value("dataset_secret") or []:
        src, target, mode = _split_target("--dataset-secret", item, "SECRET")
        if not SECRET.fullmatch(src):
            raise _fail(
                "--dataset-secret", item, f"{src!r} is not a valid secret name", "use SECRET:/path/file"
            )
        if mode:
            raise _fail("--dataset-secret", item, "secret files take no mode", "drop the :ro/:rw suffix")
        f["secret_mounts"].append(SecretMount(secret=src, mount_path=target))
    groups = ("datasets", "mounts", "weka", "uploads", "secret_mounts")
    targets = [m.mount_path for group in groups for m in f[group]]
    dup = next((t for t in targets if targets.count(t) > 1), None)
    if dup:
        raise UsageError(
            f"two inputs are mounted at {dup!r}",
            hint="give each --dataset/--mount/--weka/--upload/--dataset-secret its own path",
        )

    if RUNTIME_MOUNT in targets:  # launchkit's runtime is mounted there (docs/runtime.md)
        raise UsageError(
            f"{RUNTIME_MOUNT!r} is where launchkit's runtime is mounted",
            hint="mount the input at another path",
        )


def _env(
    opts: _Options, given: dict[str, Any], f: dict[str, Any], environ: dict[str, str], cwd: str | None
) -> None:
    f["env"] = _env_vars(opts, environ, cwd)
    f["env_secrets"] = _env_secrets(opts)
    clash = {e.name for e in f["env"]} & {s.name for s in f["env_secrets"]}
    if clash:
        name = min(clash)
        raise UsageError(f"{name!r} is given both by --env and --env-secret", hint="keep one of them")
    auto = opts.value("auto_secrets")
    f["auto_secrets"] = not given.get("no_auto_secrets") and auto is not False
    f["git_token_secret"] = _pattern(opts, "git_token_secret", SECRET, "secret name")
    for opt in ("aws_config_secret", "aws_credentials_secret", "google_credentials_secret"):
        f[opt] = _pattern(opts, opt, SECRET, "secret name")
    results = _checked(
        opts,
        "results",
        lambda v: isinstance(v, str) and v.startswith("/"),
        "is not an absolute path",
        "give an absolute path such as /results",
    )
    if results:
        f["results_dir"] = results


def _git(opts: _Options, given: dict[str, Any], f: dict[str, Any]) -> None:
    for opt in ("ref", "branch", "remote"):
        f[opt] = _checked(
            opts,
            opt,
            lambda v: isinstance(v, str) and v.strip() and "\n" not in v,
            "is empty",
            f"give a value to {flag(opt)} or omit it",
        )
    if f["remote"] and GITHUB_SHORTHAND.fullmatch(f["remote"]):
        f["remote"] = f"https://github.com/{f['remote'].removesuffix('.git')}.git"
    f["allow_dirty"] = bool(given.get("allow_dirty"))


def _task(opts: _Options, given: dict[str, Any], f: dict[str, Any]) -> None:
    f["task_name"] = _pattern(opts, "task_name", NAME, "task name") or "main"
    f["priority"] = _choice(opts, "priority", [p.value for p in Priority])
    f["task_timeout"] = _duration(opts, "task_timeout", allow_zero=False)
    f["min_runtime"] = _duration(opts, "min_runtime", allow_zero=True)
    f["no_auto_resume"] = bool(given.get("no_auto_resume"))
    f["preemptible"] = opts.value("preemptible")
    if f["preemptible"] is not None and (f["min_runtime"] is not None or f["no_auto_resume"]):
        raise UsageError(
            "--preemptible/--not-preemptible cannot be combined with --min-runtime or --no-auto-resume",
            hint="use --min-runtime (0 = preemptible at any time) instead of --preemptible",
        )
    f["retries"] = _positive(
        opts, "retries", int, "give how many times to retry, e.g. 3", maximum=MAX_COUNT, allow_zero=True
    )
    causes, where = opts.get("retry_on")
    f["retry_on"], f["retry_exit_codes"] = retrying.parse(
        [causes] if isinstance(causes, str) else causes or [], where
    )
    f["require_resume"] = bool(given.get("require_resume"))
    _several_tasks(given, f, _env_not_secret(opts)[0])


SWEEP_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _several_tasks(given: dict[str, Any], f: dict[str, Any], not_secret: set[str]) -> None:
    """--multi (commands split at `--`) and --sweep (a grid of values); docs/run.md. Sweep values go
    into the spec (LAUNCHKIT_SWEEP, task names): checked like --env values (`not_secret`: the keys
    --env-not-secret names)."""
    f["multi"] = bool(given.get("multi"))
    if f["multi"]:
        commands = split_commands(f["command"])
        for i, cmd in enumerate(commands):
            if not cmd or not cmd[0]:
                raise UsageError(
                    f"--multi: command {i + 1} of {len(commands)} is empty",
                    hint=f"write `-- cmd1 -- cmd2`; a literal `--` inside a command is {ESCAPED_SEPARATOR}",
                )
        f["command"], f["commands"] = commands[0], commands
    axes: list[SweepAxis] = []
    for item in given.get("sweep") or []:
        key, sep, values = item.partition("=")
        usage = "use --sweep KEY=V1,V2 (e.g. --sweep lr=1e-4,3e-4)"
        if not sep or not SWEEP_KEY.fullmatch(key):
            raise _fail("--sweep", item, "needs KEY=V1,V2 with KEY made of letters, digits and '_'", usage)
        vals = values.split(",")
        if not values or any(not v or any(c.isspace() for c in v) for v in vals):
            raise _fail("--sweep", item, "has an empty value or one with spaces", usage)
        if len(set(vals)) != len(vals):
            raise _fail("--sweep", item, "lists a value twice", "give each value once")
        for v in vals if key not in not_secret else ():
            refuse_secret_value(
                "--sweep",
                key,
                v,
                values="--sweep values",
                hint="store a secret with `launchkit secret set NAME` and pass --env-secret NAME, "
                f"outside the sweep (not a secret? --env-not-secret {key})",
            )
        if any(a.key.upper() == key.upper() for a in axes):
            raise _fail("--sweep", item, f"sweeps {key!r} twice", "give all its values in one --sweep")
        axes.append(SweepAxis(key=key, values=vals))
    f["sweep"] = axes
    f["sweep_experiments"] = bool(given.get("sweep_experiments"))
    if f["sweep_experiments"] and not axes:
        raise UsageError("--sweep-experiments needs --sweep", hint="add --sweep KEY=V1,V2 or drop it")
    count = len(f.get("commands") or [f["command"]])
    for a in axes:
        count *= len(a.values)
    if count > MAX_TASKS:
        raise UsageError(
            f"--multi/--sweep would launch {count} tasks (at most {MAX_TASKS})",
            hint="split the sweep over several launches",
        )


def _check_task_names(request: LaunchRequest) -> None:
    names: dict[str, str] = {}
    for t in expand_tasks(request):
        if t.name in names:
            raise UsageError(
                f"--sweep: {names[t.name]!r} and {t.label!r} give the same task name {t.name!r}",
                hint="task names keep only letters, digits, '.', '_' and '-': use values that differ there",
            )
        names[t.name] = t.label


def _multinode(opts: _Options, given: dict[str, Any], f: dict[str, Any]) -> None:
    f["replicas"] = (
        _positive(opts, "replicas", int, "give the number of nodes, e.g. --replicas 2", maximum=MAX_COUNT)
        or 1
    )
    for opt in ("leader_selection", "host_networking", "propagate_failure", "propagate_preemption"):
        f[opt] = given.get(opt)
    f["synchronized_start_timeout"] = _duration(opts, "synchronized_start_timeout", allow_zero=False)
    launchers = [n for n in ("torchrun", "accelerate", "ray") if given.get(n)]
    if len(launchers) > 1:
        raise UsageError(
            f"--{launchers[0]} and --{launchers[1]} cannot be combined", hint="pick one launcher"
        )
    f["launcher"] = Launcher(launchers[0]) if launchers else Launcher.none
    f["resumable"] = bool(given.get("resumable"))
    f["profile"] = _pattern(opts, "profile", NAME, "profile name")
    f["no_profile"] = bool(given.get("no_profile"))
    f["presets"] = list(dict.fromkeys(_list(opts, "preset", "preset name")))
    if f["profile"] and f["no_profile"]:
        raise UsageError(f"--profile {f['profile']!r} cannot be combined with --no-profile", hint="keep one")
    f["skip_nccl_setup"] = bool(given.get("skip_nccl_setup"))


def _runtime(opts: _Options, f: dict[str, Any]) -> None:
    f["exec_method"] = ExecMethod(_choice(opts, "exec_method", [m.value for m in ExecMethod]) or "exec")
    f["runtime_dir"] = _checked(
        opts,
        "runtime_dir",
        lambda v: isinstance(v, str) and v.startswith("/") and len(v) > 1,
        "is not an absolute path",
        "give an absolute path in the job, e.g. /launchkit-runtime",
    )
    f["pre_setup"] = opts.value("pre_setup")
    f["post_setup"] = opts.value("post_setup")
    runtime_dir = _checked(
        opts,
        "runtime_dir",
        lambda v: isinstance(v, str) and v.startswith("/") and v.rstrip("/") and "\n" not in v,
        "is not an absolute path",
        "give an absolute path in the job, e.g. /workspace",
    )
    if runtime_dir:
        f["runtime_dir"] = runtime_dir.rstrip("/")


def _launch(
    opts: _Options, given: dict[str, Any], f: dict[str, Any], environ: dict[str, str], backends: BackendChoice
) -> None:
    f["local"] = bool(given.get("local"))
    if f["local"]:
        if backends.here and given.get("backend") not in (None, backends.here):
            backend = given["backend"]
            raise UsageError(f"--local cannot be combined with --backend {backend!r}", hint="keep one")
    elif backends.known:
        f["backend"] = _choice(opts, "backend", list(backends.known))
    elif (value := opts.value("backend")) is not None:
        f["backend"] = str(value).lower()
    for opt in ("dry_run", "offline", "yes", "json_output"):
        f[opt] = bool(given.get(opt))
    if f["offline"] and not f["dry_run"]:
        raise UsageError("--offline only applies to --dry-run", hint="add --dry-run, or drop --offline")
    f["save_spec"] = given.get("save_spec")
    f["slack_webhook_url"] = _slack_webhook_url(opts, environ)
    f["slack_webhook_secret"] = _slack_webhook_secret(opts, given)
    f["notify_url"], f["notify_secret"] = _notify(opts, given)
    _waiting(opts, given, f)


def _slack_webhook_secret(opts: _Options, given: dict[str, Any]) -> str | None:
    """--slack-webhook-secret NAME: a secret's name (the job's runtime posts, docs/notifications.md)."""
    name, where = opts.get("slack_webhook_secret")
    if name is None:
        return None
    if not isinstance(name, str) or not SECRET.fullmatch(name):
        raise _fail(where, name, "is not a valid secret name", "use letters, digits, '.', '_' or '-'")
    if given.get("ray"):
        raise UsageError(
            f"{where} is not posted from a Ray job yet (its driver runs on the head)",
            hint="drop it, and use --slack-webhook-url with --follow",
        )
    return name


def _notify(opts: _Options, given: dict[str, Any]) -> tuple[str | None, str | None]:
    """--notify-url URL (plain: it is in the spec) or --notify-secret NAME (the URL in a secret)."""
    url, where = opts.get("notify_url")
    name, named_where = opts.get("notify_secret")
    if url is not None and name is not None:
        raise UsageError(f"{where} and {named_where} both say where the run's events go", hint="keep one")
    if given.get("ray") and (url is not None or name is not None):
        raise UsageError(
            f"{where if url is not None else named_where} is not posted from a Ray job yet (its driver"
            " runs on the head)",
            hint="drop it, and follow the run: `launchkit follow ID --json`",
        )
    if name is not None:
        if not isinstance(name, str) or not SECRET.fullmatch(name):
            hint = "use letters, digits, '.', '_' or '-'"
            raise _fail(named_where, name, "is not a valid secret name", hint)
        return None, name
    if url is None:
        return None, None
    url = str(url)
    problem = url_problem(url)
    if problem is not None:
        raise UsageError(
            f"{where} {url_host_only(url)}: {problem}",
            hint="give an https:// URL (http:// only on 127.0.0.1 or localhost)",
        )
    carried = url_credential(url)
    if carried is not None:  # it would be in the spec in plain text
        raise UsageError(
            f"{where} {url_host_only(url)}: {carried}, which the spec would show in plain text",
            hint="keep the URL in a secret and give --notify-secret NAME (`launchkit secret set NAME`)",
        )
    return url, None


def _slack_webhook_url(opts: _Options, environ: dict[str, str]) -> str | None:
    """--slack-webhook-url, else LAUNCHKIT_SLACK_WEBHOOK_URL, else gantry's GANTRY_SLACK_WEBHOOK_URL.
    The URL is a credential: errors show only its scheme and host."""

    url, where = opts.get("slack_webhook_url")
    if not url:
        for name in SLACK_WEBHOOK_ENV:
            if environ.get(name):
                url, where = environ[name], name
                break
    if not url:
        return None
    problem = url_problem(str(url))  # the one check, as where the job runs (node/launch/notify.py)
    if problem is not None:
        raise UsageError(
            f"{where} {url_host_only(str(url))}: {problem}",
            hint="give the Slack webhook URL (https://hooks.slack.com/services/...)",
        )
    return str(url)


def _python_manager(opts: _Options, f: dict[str, Any]) -> None:
    """--python-manager, --conda-file, --conda-env and --uv-venv (uv and conda options don't mix)."""
    manager = _choice(opts, "python_manager", [m.value for m in PythonManager])
    f["conda_file"] = _checked(
        opts,
        "conda_file",
        lambda v: isinstance(v, str) and v.strip() and "\n" not in v,
        "is empty",
        "give the environment file's path, e.g. environment.yml",
    )
    f["conda_env"] = _checked(
        opts,
        "conda_env",
        lambda v: isinstance(v, str) and (NAME.fullmatch(v) or (v.startswith("/") and "\n" not in v)),
        "is neither an environment name nor an absolute path",
        "give a conda environment name (e.g. base) or its prefix (e.g. /opt/conda/envs/train)",
    )
    f["uv_venv"] = _checked(
        opts,
        "uv_venv",
        lambda v: isinstance(v, str) and v.startswith("/") and "\n" not in v,
        "is not an absolute path",
        "give the venv's absolute path in the image, e.g. /opt/venv",
    )
    conda_opts = [o for o, k in (("--conda-file", "conda_file"), ("--conda-env", "conda_env")) if f[k]]
    if manager is None:
        manager = "conda" if conda_opts else "uv"
    f["python_manager"] = PythonManager(manager)
    used = conda_opts + [
        o
        for o, k in (
            ("--uv-venv", "uv_venv"),
            ("--system-python", "system_python"),
            ("--python-version", "python_version"),
        )
        if f[k]
    ]
    if f["no_python"] and used:
        raise UsageError(
            f"--no-python cannot be combined with {used[0]}",
            hint="drop --no-python to set up Python, or drop the Python option",
        )
    if manager == "uv" and conda_opts:
        raise UsageError(
            f"{conda_opts[0]} needs conda, but --python-manager is uv",
            hint="use --python-manager conda, or drop the conda option",
        )
    if manager == "conda":
        if f["system_python"]:  # gantry: with conda, the image's Python is its base environment
            f["conda_env"] = f["conda_env"] or "base"
            f["system_python"] = False
        for opt, key in (
            ("--uv-venv", "uv_venv"),
            ("--uv-extra", "uv_extras"),
            ("--uv-all-extras", "uv_all_extras"),
            ("--uv-group", "uv_groups"),
            ("--uv-all-groups", "uv_all_groups"),
            ("--uv-no-default-groups", "uv_no_default_groups"),
            ("--torch-backend", "torch_backend"),
        ):
            if f[key]:
                raise UsageError(
                    f"--python-manager conda cannot be combined with {opt}",
                    hint="that option is for uv; with conda use --conda-env/--conda-file",
                )
    if f["uv_venv"] and f["system_python"]:
        raise UsageError(
            "--uv-venv cannot be combined with --system-python", hint="pick the venv or the image's Python"
        )


def _groups(opts: _Options, f: dict[str, Any]) -> None:
    """--uv-group NAME (repeatable), --uv-all-groups, --uv-no-default-groups: uv's dependency groups."""
    f["uv_groups"] = _list(opts, "uv_group", "dependency group name")
    for name in f["uv_groups"]:
        if not GROUP_NAME.fullmatch(name):
            where = opts.get("uv_group")[1]
            raise _fail(where, name, "is not a dependency group name", "use its name in [dependency-groups]")
    f["uv_all_groups"] = bool(opts.value("uv_all_groups"))
    f["uv_no_default_groups"] = bool(opts.value("uv_no_default_groups"))
    if f["uv_all_groups"] and f["uv_groups"]:
        raise UsageError(
            f"--uv-all-groups cannot be combined with --uv-group {f['uv_groups'][0]!r}",
            hint="all groups already include it: keep one",
        )


def _waiting(opts: _Options, given: dict[str, Any], f: dict[str, Any]) -> None:
    """Whether `run` waits for the job, and for how long (gantry's --show-logs/--timeout semantics)."""
    follow = given.get("follow")  # True, False (--no-follow / --no-logs) or None
    raw, where = opts.get("timeout")
    timeout: float | None = None
    if raw is not None:
        if str(raw).strip() == "-1":
            timeout = -1
        else:
            timeout = _duration(opts, "timeout", allow_zero=True)
    if follow and timeout == 0:
        raise _fail(where, raw, "0 means don't wait, but --follow waits", "drop one of them")
    f["follow"] = bool(follow) or (timeout is not None and timeout != 0)
    f["show_logs"] = follow is not False
    f["timeout"] = timeout if timeout is not None and timeout > 0 else None
    f["stall_auto"] = _stall_auto(opts)
    for opt in ("start_timeout", "inactive_timeout", "inactive_soft_timeout", "stall_timeout", "stall_grace"):
        if opt != "stall_timeout" or f["stall_auto"] is None:
            f[opt] = _duration(opts, opt, allow_zero=opt == "stall_grace")
    if not f["follow"]:  # gantry ignores it when it does not wait (cli/launching.py says so)
        f["start_timeout"] = None
    f["progress_patterns"] = _patterns(opts)
    for opt in ("progress_pattern", "stall_grace"):
        if opts.value(opt) not in (None, [], ()) and f["stall_timeout"] is None and f["stall_auto"] is None:
            flag = "--" + opt.replace("_", "-")
            raise UsageError(f"{flag} applies to --stall-timeout", hint="add --stall-timeout DURATION")


def _stall_auto(opts: _Options) -> tuple[float, float] | None:
    """`--stall-timeout auto` or `auto:FLOOR:CAP` (runtime/node/launch/stallbudget.py): (floor, cap)
    in seconds; None for a duration (or nothing)."""
    value, where = opts.get("stall_timeout")
    text = str(value or "").strip().lower()
    if text != "auto" and not text.startswith("auto:"):
        return None
    parts = text.split(":")[1:]
    if len(parts) not in (0, 2):
        raise _fail(where, value, "auto takes a floor and a cap, or neither", "e.g. auto, or auto:5m:2h")
    if not parts:
        return (stallbudget.FLOOR, stallbudget.CAP)
    try:
        floor, cap = (parse_duration(p) for p in parts)
    except UnitError as e:
        raise _fail(where, value, e.problem, e.hint) from None
    if not 0 < floor <= cap:
        raise _fail(where, value, "the floor must be above zero and at most the cap", "e.g. auto:5m:2h")
    return (floor, cap)


def _patterns(opts: _Options) -> list[str]:
    """--progress-pattern: regular expressions (Python's `re`, as the job's runtime reads them)."""
    value, where = opts.get("progress_pattern")
    items = [value] if isinstance(value, str) else list(value or [])
    for item in items:
        if not isinstance(item, str) or not item or "\n" in item:
            raise _fail(
                where, item, "is not a one-line pattern", "give a regular expression such as 'step=\\d+'"
            )
        try:
            re.compile(item)
        except re.error as e:
            raise _fail(
                where, item, f"is not a regular expression ({e})", "fix it (Python's re syntax)"
            ) from None
        shape = matching.unsafe(item)
        if shape is not None:  # the job's watchdog would give it up; list/why would too
            raise _fail(
                where,
                item,
                f"can take exponential time on a long line: it has {shape}",
                "write it without nested or overlapping repeats, e.g. 'step \\d+'",
            )
    return items


def too_old_python(version: str) -> bool:
    """True for a version the job's runtime cannot run under ("3.7", "3.6.15"); False if unreadable."""
    try:
        return tuple(int(x) for x in version.split(".")[:2]) < MIN_JOB_PYTHON
    except ValueError:
        return False


def _python(opts: _Options, given: dict[str, Any], f: dict[str, Any]) -> None:
    f["install"] = opts.value("install")
    f["no_python"] = bool(opts.value("no_python"))
    f["no_preflight"] = bool(opts.value("no_preflight"))
    f["system_python"] = bool(opts.value("system_python"))
    f["python_version"] = _checked(
        opts,
        "python_version",
        lambda v: PY_VERSION.fullmatch(str(v)),
        "is not a Python version",
        "use e.g. 3.12 or 3.11.9",
    )
    _checked(
        opts,
        "python_version",
        lambda v: not too_old_python(str(v)),
        "is older than launchkit's runtime supports (3.8)",
        "use e.g. 3.12 (Python 3.7 and older are past end of life)",
    )
    f["uv_extras"] = _list(opts, "uv_extra", "extra name")
    f["uv_all_extras"] = bool(opts.value("uv_all_extras"))
    f["uv_no_extras"] = bool(given.get("uv_no_extras"))
    _groups(opts, f)
    f["torch_backend"] = _pattern(
        opts, "torch_backend", TORCH_BACKEND, "torch backend (e.g. cu128, cpu, auto)"
    )
    f["uv_cache_dir"] = _checked(
        opts,
        "uv_cache_dir",
        lambda v: isinstance(v, str) and v.startswith("/"),
        "is not an absolute path",
        "give an absolute path in the job, e.g. /weka/uv-cache",
    )
    if given.get("uv_no_extras"):  # the command line beats a config default of all extras
        if given.get("uv_all_extras") or given.get("uv_extra"):
            other = "--uv-all-extras" if given.get("uv_all_extras") else "--uv-extra"
            raise UsageError(f"--uv-no-extras cannot be combined with {other}", hint="keep one")
        f["uv_all_extras"], f["uv_extras"] = False, []
    if f["uv_all_extras"] and f["uv_extras"]:
        raise UsageError(
            f"--uv-all-extras cannot be combined with --uv-extra {f['uv_extras'][0]!r}",
            hint="all extras already include it: keep one",
        )
    # gantry's default: no --uv-extra and no --uv-no-extras installs all extras
    default_all = not (f["uv_extras"] or f["uv_no_extras"] or opts.value("no_python") or f["install"])
    if f["no_python"]:
        for opt, key in (
            ("--system-python", "system_python"),
            ("--python-version", "python_version"),
            ("--uv-extra", "uv_extras"),
            ("--uv-all-extras", "uv_all_extras"),
            ("--uv-group", "uv_groups"),
            ("--uv-all-groups", "uv_all_groups"),
            ("--uv-no-default-groups", "uv_no_default_groups"),
            ("--torch-backend", "torch_backend"),
        ):
            if f[key]:
                raise UsageError(
                    f"--no-python cannot be combined with {opt}",
                    hint="drop --no-python to set up Python, or drop the Python option",
                )
    _python_manager(opts, f)
    config_off = opts.config is not None and opts.config.get(config_key("uv_all_extras")) is False
    if default_all and not config_off and f["python_manager"] is PythonManager.uv:
        f["uv_all_extras"] = True
    if f["uv_cache_dir"] and any(e.name == "UV_CACHE_DIR" for e in f["env"]):
        raise UsageError("--uv-cache-dir cannot be combined with --env UV_CACHE_DIR", hint="keep one")
    if f["torch_backend"] and any(e.name == "UV_TORCH_BACKEND" for e in f["env"]):
        raise UsageError("--torch-backend cannot be combined with --env UV_TORCH_BACKEND", hint="keep one")
    if f["system_python"] and f["python_version"]:
        raise UsageError(
            f"--system-python cannot be combined with --python-version {f['python_version']!r}",
            hint="the image's Python is used as is: drop one",
        )
