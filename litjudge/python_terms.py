"""The Python API speaks Python: typed config objects taken as the tables they stand for. (Its
errors name the arguments a caller wrote, `columns=` and `values={"label": {"RIGHT": "a"}}`, from the
settings each error carries: `engine.core.errors.Setting`, `WordedError.in_python`.)"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any


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
