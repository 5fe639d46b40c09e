"""The Python API speaks Python: typed config objects taken as the tables they stand for, and the
engine's one-line errors (worded for a config file: `[dataset.columns]`, `[dataset.values.label]`,
`'RIGHT' = "a"`) said in the arguments a caller wrote (`columns=`, `values={"label": {"RIGHT": "a"}}`).
The console keeps the file's words; only the Python surface translates, here, in one place."""
from __future__ import annotations

import ast
import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from litjudge.engine.core.errors import ConfigError, DataError, LitjudgeError


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


def _python_string(text: str) -> str:
    """'RIGHT' (a repr) or "a" as a JSON string: "RIGHT"."""
    try:
        return json.dumps(ast.literal_eval(text), ensure_ascii=False)
    except (ValueError, SyntaxError):
        return json.dumps(text.strip("'\""))


Replacement = str | Callable[[re.Match[str]], str]
TERMS: tuple[tuple[re.Pattern[str], Replacement], ...] = (
    (re.compile(r"\[dataset\.values\.(\w+)\] renames your values \(e\.g\. ('(?:[^'\\]|\\.)*'|\"[^\"]*\") = \"([^\"]*)\"\)"),
     lambda m: f'values={{"{m[1]}": {{{_python_string(m[2])}: "{m[3]}"}}}} renames your values'),
    (re.compile(r"\[dataset\.values\.(\w+)\] renames"), r'values["\1"] renames'),
    (re.compile(r"the other way round from a rename \((\w+) = ('(?:[^'\\]|\\.)*')\)"),
     lambda m: f"the other way round from pandas' rename (columns={{\"{m[1]}\": {_python_string(m[2])}}})"),
    (re.compile(r"\[dataset\.columns\]"), "columns"),
    (re.compile(r"\[dataset\.values\]"), "values"),
    (re.compile(r" \[dataset\]"), ""),
    (re.compile(r"\bdataset\.(columns|values)\b"), r"\1"),
)


def python_words(text: str) -> str:
    for pattern, replacement in TERMS:
        text = pattern.sub(replacement, text)
    return text


def in_python_terms(exc: LitjudgeError) -> LitjudgeError:
    """The same error, said in the Python API's terms (the exception itself when nothing changes)."""
    if python_words(str(exc)) == str(exc):
        return exc
    if isinstance(exc, ConfigError):
        return ConfigError(python_words(exc.message), where=exc.where and python_words(exc.where),
                           key=exc.key and python_words(exc.key))
    if isinstance(exc, DataError):
        return DataError(python_words(exc.message), path=exc.path, row=exc.row)
    return type(exc)(python_words(str(exc)))
