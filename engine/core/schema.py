"""Typed tables: a TOML table becomes a frozen dataclass, or fails with one line naming the file
and the full key. Unknown keys get "did you mean"; wrong types name what was expected; a range
check of the dataclass (`FieldError`) names its own field under the table's prefix."""
from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

from .errors import ConfigError, did_you_mean


class FieldError(ValueError):
    """A value out of its range, raised by a config type's checks; `build` names the full key."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(message)


def finite(x: float) -> bool:
    """Neither NaN nor infinite (TOML has both): every float setting's range check starts here."""
    return x == x and x not in (float("inf"), float("-inf"))


def check_field(ok: bool, field: str, message: str) -> None:
    if not ok:
        raise FieldError(field, message)


def _describe(annotation: Any) -> str:
    """A type as a TOML user reads it: `int`, `str or a list of str` (TOML has no null)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(annotation) if a is not type(None))
    if typing.get_origin(annotation) in (list, tuple):
        (inner, *_) = typing.get_args(annotation) or (Any,)
        return f"a list of {_describe(inner)}"
    return getattr(annotation, "__name__", str(annotation))


def _check_union(value: Any, annotation: Any, where: str, key: str) -> Any:
    """The first member type that accepts the value; `X | None` given a value gets X's own, precise error."""
    present = [a for a in typing.get_args(annotation) if a is not type(None)]
    if value is not None and len(present) == 1:
        return _check_type(value, present[0], where, key)
    for arg in typing.get_args(annotation):
        try:
            return _check_type(value, arg, where, key)
        except ConfigError:
            continue
    raise ConfigError(f"expected {_describe(annotation)}, got {type(value).__name__} {value!r}", where=where, key=key)


def _check_type(value: Any, annotation: Any, where: str, key: str) -> Any:
    origin = typing.get_origin(annotation)
    if annotation is Any:
        return value
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if origin in (typing.Union, types.UnionType):
        return _check_union(value, annotation, where, key)
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise ConfigError(f"expected a list, got {type(value).__name__} {value!r}", where=where, key=key)
        (inner, *_) = typing.get_args(annotation) or (Any,)
        items = [_check_type(v, inner, where, f"{key}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"expected a table, got {type(value).__name__}", where=where, key=key)
        return value
    if annotation is type(None):
        if value is not None:
            raise ConfigError("expected nothing", where=where, key=key)
        return value
    if isinstance(annotation, type):
        if dataclasses.is_dataclass(annotation):
            if not isinstance(value, dict):
                raise ConfigError(f"expected a table, got {type(value).__name__}", where=where, key=key)
            return build(annotation, value, where, prefix=f"{key}.")
        if not isinstance(value, annotation) or (annotation is int and isinstance(value, bool)):
            raise ConfigError(f"expected {annotation.__name__}, got {type(value).__name__} {value!r}",
                              where=where, key=key)
    return value


def build(cls: type, table: dict[str, Any], where: str, prefix: str = "", **extra: Any):
    """Build dataclass `cls` from a TOML table: unknown keys and wrong types fail, naming the key."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if f.init and f.name not in extra]
    unknown = [k for k in table if k not in names]
    if unknown:
        k = unknown[0]
        hint = did_you_mean(k, names, prefix=prefix) or f" (known: {', '.join(names)})"
        raise ConfigError(f"unknown key{hint}", where=where, key=prefix + k)
    kwargs = {k: _check_type(v, hints[k], where, prefix + k) for k, v in table.items()}
    required = [f.name for f in dataclasses.fields(cls)
                if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                and f.name not in kwargs and f.name not in extra]
    if required:
        raise ConfigError("missing required key", where=where, key=prefix + required[0])
    try:
        return cls(**kwargs, **extra)
    except FieldError as exc:
        raise ConfigError(str(exc), where=where, key=prefix + exc.field) from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc), where=where, key=prefix.rstrip(".") or None) from None
