"""Strict schema of the config files (pydantic): unknown keys and wrong types are usage errors."""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from launchkit.core.configschema import KEYS, Layer
from launchkit.errors import UsageError

_TYPES: dict[str, Any] = {
    "str": str,
    "int": int,
    "float": int | float,
    "bool": bool,
    "list": list[str],
    "dict": dict[str, str],
    "duration": str | int | float,
    "profiles": dict[str, dict[str, Any]],
}
_WORDS = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "list": "a list of strings",
    "dict": "a table of strings",
    "duration": 'a duration such as "2h"',
    "profiles": "a table of profile tables ([tool.launchkit.profiles.NAME])",
}


class _Base(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


ConfigFile = create_model(  # type: ignore[call-overload]
    "ConfigFile", __base__=_Base, **{k: (_TYPES[t] | None, None) for k, t in KEYS.items()}
)


def check_layer(layer: Layer) -> None:
    try:
        ConfigFile(**layer.values)
    except ValidationError as e:
        err = e.errors()[0]
        key = str(err["loc"][0]) if err["loc"] else "?"
        if err["type"] == "extra_forbidden":
            close = difflib.get_close_matches(key, KEYS, n=1)
            hint = f"did you mean {close[0]!r}?" if close else "see docs/configuration.md for the known keys"
            raise UsageError(f"unknown key {layer.where(key)}", hint=hint) from None
        value = layer.values.get(key)
        raise UsageError(
            f"{layer.where(key)} must be {_WORDS[KEYS[key]]}, not {value!r}",
            hint="fix the value or remove the key",
        ) from None
