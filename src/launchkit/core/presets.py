"""Presets: named team or workload conventions, applied only when asked for. Pure: no I/O.

Cluster profiles (core/profiles.py) hold what a cluster needs to work and apply by default; a preset
holds what one team or workload does on it (cache paths, bucket mounts, vLLM variables, the secrets
it expects). A preset is turned on by `--preset NAME` (repeatable), `presets = [...]` in config, a
profile table's `presets`, or a command that adds one (`launchkit mason`).

A preset has env vars, host mounts, Weka mounts and secrets (env name -> workspace secret name; the
Beaker backend adds each at submit only if the workspace has it, `<user>_NAME` preferred). Its
`by_profile` parts apply only when that cluster profile is the applied one (e.g. Weka cache paths only
on ai2-weka clusters).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from launchkit.core.contract import ENV_UV_CACHE_DIR, ENV_UV_LINK_MODE, reserved_env
from launchkit.core.redact import refuse_secret_value
from launchkit.core.request import HostMount, WekaMount
from launchkit.errors import UsageError

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SECRET_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")

# Spec -> Beaker backend contract: the presets' secrets, `ENV=SECRET` pairs joined by ',' (`ENV` alone
# when the secret has the variable's name). The backend adds each pair whose secret the workspace has
# (backends/beaker/resolve.py) and drops the variable from the spec it submits.
ENV_PRESET_SECRETS = "LAUNCHKIT_PRESET_SECRETS"


def encode_secrets(secrets: dict[str, str]) -> str:
    """LAUNCHKIT_PRESET_SECRETS's value for `secrets` (env name -> secret name)."""
    return ",".join(name if name == secret else f"{name}={secret}" for name, secret in secrets.items())


def decode_secrets(items: list[str]) -> list[tuple[str, str]]:
    """(env name, secret name) of LAUNCHKIT_PRESET_SECRETS's items (`ENV` or `ENV=SECRET`)."""
    out = []
    for item in items:
        name, _, secret = item.partition("=")
        out.append((name, secret or name))
    return out


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def mount_list(value: Any, model: type) -> Any:
    """Accept `"SRC:/DST"` strings (the CLI syntax) besides full tables."""
    if not isinstance(value, list):
        return value
    out = []
    for item in value:
        if isinstance(item, str):
            src, sep, dst = item.rpartition(":")
            if not sep or not src or not dst.startswith("/"):
                raise ValueError(f"mount {item!r} must look like SOURCE:/absolute/path")
            key = "bucket" if model is WekaMount else "host_path"
            item = {key: src, "mount_path": dst}
        out.append(item)
    return out


def refuse_secret(name: str, value: str) -> None:
    """Profiles and presets are written into the spec: refuse_secret_value's rule (a ValueError in a
    validator, reported where the profile is defined)."""
    refuse_secret_value("env", name, value, values="profile and preset values")


def refuse_reserved(name: str) -> None:
    """A variable launchkit sets itself (core/contract.py) cannot come from a profile or preset."""
    if reserved_env(name):
        raise ValueError(f"{name!r} is set by launchkit itself: use the matching `run` option instead")


def check_env(env: dict[str, str]) -> dict[str, str]:
    for name, value in env.items():
        if not ENV_NAME.match(name):
            raise ValueError(f"{name!r} is not a valid environment variable name")
        refuse_reserved(name)
        refuse_secret(name, value)
        if "$" in value:  # Beaker never expands env values: this would arrive literally
            raise ValueError(
                f"env {name}={value!r}: values are not shell-expanded; "
                "use a setup step (prepend/source) to build it inside the job"
            )
    return env


class SpecParts(Model):
    """What goes into the spec as-is: environment variables, host and Weka mounts (profiles, presets)."""

    env: dict[str, str] = {}
    mounts: list[HostMount] = []
    weka: list[WekaMount] = []

    @field_validator("mounts", mode="before")
    @classmethod
    def _host_mounts(cls, v: Any) -> Any:
        return mount_list(v, HostMount)

    @field_validator("weka", mode="before")
    @classmethod
    def _weka_mounts(cls, v: Any) -> Any:
        return mount_list(v, WekaMount)

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        return check_env(v)


class PresetPart(SpecParts):
    """What a preset (or one of its per-profile parts) adds to a job."""

    secrets: dict[str, str] = {}  # env name -> workspace secret name, added only if it exists

    @field_validator("secrets")
    @classmethod
    def _secrets(cls, v: dict[str, str]) -> dict[str, str]:
        for name, secret in v.items():
            if not ENV_NAME.match(name) or not SECRET_NAME.match(secret):
                raise ValueError(f"secret {name}={secret!r}: use ENV_NAME = SECRET_NAME")
            refuse_reserved(name)
        return v

    def __bool__(self) -> bool:
        return bool(self.env or self.mounts or self.weka or self.secrets)

    def plus(self, other: PresetPart) -> PresetPart:
        """This part with `other` on top (other's env, mount paths and secret names win)."""
        return PresetPart(
            env={**self.env, **other.env},
            mounts=list({m.mount_path: m for m in [*self.mounts, *other.mounts]}.values()),
            weka=list({w.mount_path: w for w in [*self.weka, *other.weka]}.values()),
            secrets={**self.secrets, **other.secrets},
        )

    def items(self) -> list[str]:
        """The part in words, one item each (the `launchkit added:` line, `launchkit profiles`)."""
        out = [f"{k}={v}" for k, v in self.env.items()]
        out += [f"mount {m.host_path}:{m.mount_path}" for m in self.mounts]
        out += [f"weka {w.bucket}:{w.mount_path}" for w in self.weka]
        if self.secrets:
            named = [k if k == s else f"{k} (from secret {s})" for k, s in self.secrets.items()]
            out.append(f"secret{'s' if len(named) > 1 else ''} {', '.join(named)} (if in the workspace)")
        return out


class Preset(PresetPart):
    """A named preset: its parts everywhere, plus `by_profile` parts for one cluster profile each."""

    name: str
    description: str = ""
    by_profile: dict[str, PresetPart] = {}

    def part_for(self, profile: str | None) -> PresetPart:
        """What the preset adds when `profile` is the applied cluster profile (None: none applied)."""
        base = PresetPart(env=self.env, mounts=self.mounts, weka=self.weka, secrets=self.secrets)
        extra = self.by_profile.get(profile or "")
        return base.plus(extra) if extra is not None else base


# The secrets the AI2 OE team's jobs expect (`<user>_NAME` preferred over `NAME` in the workspace).
WELL_KNOWN_SECRETS = (
    "HF_TOKEN",
    "WANDB_API_KEY",
    "BEAKER_TOKEN",
    "OPENAI_API_KEY",
    "AZURE_API_KEY",
    "AZURE_API_BASE",
    "ANTHROPIC_API_KEY",
    "SLACK_WEBHOOK_URL",
)

# A uv cache on Weka, shared by every job and replica (docs/profiles.md "Shared uv cache"). Copy
# mode: the venv is on the container's disk, another file system (no hard links across them), and
# stays whole whatever happens to the cache afterwards. The user's own uv cache replaces both.
SHARED_UV_CACHE = {ENV_UV_CACHE_DIR: "/weka/oe-adapt-default/allennlp/.cache/uv", ENV_UV_LINK_MODE: "copy"}
_HF_WEKA = "/weka/oe-adapt-default/allennlp/.cache"

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        # open-instruct's mason.py DEFAULT_ENV_VARS (HEAD; VLLM_USE_V1 and VLLM_ATTENTION_BACKEND were
        # dropped upstream), for vLLM generation under Ray: see docs/multi-node.md.
        Preset(
            name="vllm",
            description="vLLM/Ray jobs (open-instruct's mason.py defaults)",
            env={
                "RAY_CGRAPH_get_timeout": "300",
                "VLLM_DISABLE_COMPILE_CACHE": "1",
                "NCCL_DEBUG": "ERROR",
                "VLLM_LOGGING_LEVEL": "WARNING",
                "VLLM_ALLOW_INSECURE_SERIALIZATION": "1",
            },
        ),
        # What mason (open-instruct) gives every job: the team's well-known secrets, and on Weka
        # clusters the HF and uv caches on oe-adapt-default plus the team's buckets.
        Preset(
            name="ai2-oe",
            description="AI2 OE team conventions: well-known secrets; on ai2-weka the team buckets, "
            "HF and uv caches on oe-adapt-default",
            secrets={n: n for n in WELL_KNOWN_SECRETS},
            by_profile={
                "ai2-weka": PresetPart(
                    env={
                        "HF_HOME": f"{_HF_WEKA}/huggingface",
                        "HF_DATASETS_CACHE": f"{_HF_WEKA}/huggingface",
                        "HF_HUB_CACHE": f"{_HF_WEKA}/hub",
                        **SHARED_UV_CACHE,
                    },
                    weka=[
                        WekaMount(bucket=b, mount_path=f"/weka/{b}")
                        for b in ("oe-adapt-default", "oe-training-default")
                    ],
                )
            },
        ),
    )
}

# open-instruct's mason.py conventions (`launchkit mason`, docs/from-mason.md): its DEFAULT_ENV_VARS (the
# vllm preset), the well-known secrets, and on Weka clusters the HF caches and team buckets (ai2-oe's).
PRESETS["open-instruct"] = Preset(
    name="open-instruct",
    description="open-instruct's mason.py conventions: vllm env, well-known secrets, ai2-oe's Weka parts",
    env=PRESETS["vllm"].env,
    secrets=PRESETS["ai2-oe"].secrets,
    by_profile=PRESETS["ai2-oe"].by_profile,
)


class AppliedPresets(Model):
    """What the presets turned on for one job add, preset by preset (in the order turned on)."""

    parts: dict[str, PresetPart] = {}  # preset name -> its effective part for the applied profile
    skipped: list[str] = []  # per-profile parts left out, and why

    def merged(self) -> PresetPart:
        out = PresetPart()
        for part in self.parts.values():
            out = out.plus(part)
        return out


def apply_presets(names: list[tuple[str, str]], profile: str | None) -> AppliedPresets:
    """The presets `names` ((name, where it was asked for), in order; a later one wins) for a job whose
    applied cluster profile is `profile`. Unknown names are usage errors naming where they came from."""
    parts: dict[str, PresetPart] = {}
    skipped: list[str] = []
    for name, where in names:
        preset = PRESETS.get(name)
        if preset is None:
            raise UsageError(
                f"{where} {name!r}: unknown preset", hint="known presets: " + ", ".join(sorted(PRESETS))
            )
        parts[name] = preset.part_for(profile)
        skipped += [
            f"preset {name}: {p} parts not applied (profile {p} not applied)"
            for p in preset.by_profile
            if p != profile
        ]
    return AppliedPresets(parts=parts, skipped=skipped)


def preset_env(names: list[str], where: str = "--preset") -> dict[str, str]:
    """The env the named presets add everywhere (no per-profile parts), in order."""
    return apply_presets([(n, where) for n in names], None).merged().env
