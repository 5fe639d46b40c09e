"""The Python API speaks Python: typed config objects taken as the tables they stand for. (Its
errors name the arguments a caller wrote, `columns=` and `values={"label": {"RIGHT": "a"}}`, from the
settings each error carries: `engine.core.errors.Setting`, `WordedError.in_python`.)"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from litjudge.engine.core.errors import ConfigError


def plain_table(value: Any, key: str) -> Any:
    """A config value as the TOML table it stands for: `EngineConfig(...)`, `SamplingConfig(...)`,
    `ApiConfig(...)` (any config dataclass) as their fields that differ from the defaults (so the
    engine validates them as if written by hand), mappings as dicts, paths as text."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            default = f.default if f.default is not dataclasses.MISSING else (
                f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING)
            field_value = getattr(value, f.name)
            if default is dataclasses.MISSING or field_value != default:
                out[f.name] = plain_table(field_value, f"{key}.{f.name}")
        return out
    if isinstance(value, Mapping):
        return {str(k): plain_table(v, f"{key}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_table(v, key) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def config_values(value: Any, key: str, where: str) -> Any:
    """A config given as a dict, as TOML would hold it: a numpy number as its Python number, and any
    other value that is no text, number, true/false, list or table one line naming its key (they
    were turned into text: bytes b"Is it good?" reached the prompt as "b'Is it good?'", and
    limit=np.int64(3) was refused as the string '3')."""
    if isinstance(value, dict):
        return {k: config_values(v, f"{key}.{k}", where) for k, v in value.items()}
    if isinstance(value, list):
        return [config_values(v, f"{key}[{i}]", where) for i, v in enumerate(value)]
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        return config_values(value.item(), key, where)
    raise ConfigError(f"{type(value).__name__} is no config value (text, a number, true or false, a list or a dict), "
                      f"got {value!r:.60}", where=where, parameter=key.removeprefix("config."))
