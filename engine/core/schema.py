"""Typed tables: a TOML table becomes a frozen dataclass, or fails with one line naming the file
and the full key. Unknown keys get "did you mean"; wrong types name what was expected; a `Literal`
field takes only its values (read from the type: no check of its own); a range check of the
dataclass (`FieldError`) names its own field under the table's prefix."""
from __future__ import annotations

import dataclasses
import functools
import numbers
import types
import typing
from collections.abc import Mapping
from typing import Any

from .errors import ConfigError, LitjudgeError, did_you_mean


class FieldError(LitjudgeError, ValueError):
    """A value out of its range, raised by a config type's checks; `build` names the full key. Met
    by Python code building the dataclass itself, it names the field (and the class, when known),
    and is a LitjudgeError as every error litjudge raises on purpose (a ValueError alone, it escaped
    `except LitjudgeError`: `litjudge.EngineConfig(dtype=5)`, a hostile pass)."""

    def __init__(self, field: str, message: str, owner: str = ""):
        self.field, self.message, self.owner = field, message, owner
        super().__init__(f"{owner}({field}=...): {message}" if owner else f"{field}: {message}")


def choices(annotation: Any) -> tuple[Any, ...]:
    """The values a `Literal[...]` type allows (() for any other type): the one closed set the
    loader, a table built in Python (`check_choices`) and the configuration reference all read."""
    return typing.get_args(annotation) if typing.get_origin(annotation) is typing.Literal else ()


def refusal(value: Any, allowed: tuple[Any, ...]) -> str:
    """"" when `value` is one of `allowed` (of its type too: 5.0 is no 5, True no 1), else why not."""
    if any(type(value) is type(a) and value == a for a in allowed):
        return ""
    return f"must be one of {list(allowed)}, got {value!r}{did_you_mean(value, allowed)}"


@functools.cache
def _choice_fields(cls: Any) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    hints = typing.get_type_hints(cls)
    return tuple((f.name, choices(hints[f.name])) for f in dataclasses.fields(cls) if choices(hints[f.name]))


def check_choices(table: Any) -> None:
    """Every `Literal` field of dataclass instance `table` holds one of its values: a table built in
    Python (`EngineConfig(dtype=...)`) is held to the sets the loader reads (first of its checks)."""
    for name, allowed in _choice_fields(table.__class__):
        wrong = refusal(getattr(table, name), allowed)
        if wrong:
            raise FieldError(name, wrong, owner=type(table).__name__)


def finite(x: float) -> bool:
    """A number, neither NaN nor infinite (TOML has both): every float setting's range check starts
    here (a text, `temperature="hot"` from Python, was a TypeError at the range's comparison)."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and x == x and x not in (float("inf"), float("-inf"))


def check_field(ok: bool, field: str, message: str) -> None:
    if not ok:
        raise FieldError(field, message)


def refuse(problem: str | None, field: str) -> None:
    """A FieldError saying `problem` of `field`, where a check found one."""
    if problem:
        raise FieldError(field, problem)


def _describe(annotation: Any) -> str:
    """A type as a TOML user reads it: `int`, `str or a list of str` (TOML has no null)."""
    if choices(annotation):
        return f"one of {list(choices(annotation))}"
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
    raise ConfigError(f"expected {_describe(annotation)}, got {type(value).__name__} {value!r}", where=where, parameter=key)


def python_value(value: Any) -> Any:
    """A numpy scalar from a Python caller (np.int64(1), np.True_) as its Python value; anything else as it is."""
    return value.item() if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0 else value


def _check_type(value: Any, annotation: Any, where: str, key: str) -> Any:
    value = python_value(value)
    origin = typing.get_origin(annotation)
    if annotation is Any:
        return value
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if origin in (typing.Union, types.UnionType):
        return _check_union(value, annotation, where, key)
    if choices(annotation):
        wrong = refusal(value, choices(annotation))
        if wrong:
            raise ConfigError(wrong, where=where, parameter=key, value=value)
        return value
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise ConfigError(f"expected a list, got {type(value).__name__} {value!r}", where=where, parameter=key)
        (inner, *_) = typing.get_args(annotation) or (Any,)
        items = [_check_type(v, inner, where, f"{key}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"expected a table, got {type(value).__name__}", where=where, parameter=key)
        (_, inner) = typing.get_args(annotation) or (str, Any)
        # each entry's type too: `prompt = ["instruction"]` under [dataset.columns], or a string where
        # [dataset.values] takes a table per field, reached the loader as an internal error
        return {k: _check_type(v, inner, where, f"{key}.{k}") for k, v in value.items()}
    if annotation is type(None):
        if value is not None:
            raise ConfigError("expected nothing", where=where, parameter=key)
        return value
    if isinstance(annotation, type):
        if dataclasses.is_dataclass(annotation):
            if not isinstance(value, dict):
                raise ConfigError(f"expected a table, got {type(value).__name__}", where=where, parameter=key)
            return build(annotation, value, where, prefix=f"{key}.")
        if not isinstance(value, annotation) or (annotation is int and isinstance(value, bool)):
            raise ConfigError(f"expected {annotation.__name__}, got {type(value).__name__} {value!r}",
                              where=where, parameter=key)
    return value


@dataclasses.dataclass(frozen=True)
class Key:
    """A key a table takes beyond its dataclass's fields, declared elsewhere (a rubric question's
    `categories`, declared by its scale): the class lists them in `extra_keys()` and takes them as
    keyword arguments; the loader checks their types and the reference lists them as its fields."""

    type: Any               # as a field's annotation: tuple[str, ...], bool
    default: Any
    doc: str


def extra_keys(cls: type) -> dict[str, Key]:
    """The keys dataclass `cls` takes beyond its fields ({} for most tables)."""
    keys = getattr(cls, "extra_keys", None)
    return keys() if callable(keys) else {}


def _unknown_hint(key: str, names: list[str], elsewhere: dict[str, str], prefix: str) -> str:
    """An unknown key's hint: the closest known key (one of another kind of file's said as whose),
    else every key known."""
    hint = did_you_mean(key, [*names, *elsewhere], prefix=prefix)
    kind = next((whose for o, whose in elsewhere.items() if hint == did_you_mean(o, [o], prefix=prefix)), None)
    if hint:
        return hint[:-2] + f", {kind} key?)" if kind else hint
    owners = "; ".join(f"{whose} {', '.join(o for o in elsewhere if elsewhere[o] == whose)}"
                       for whose in dict.fromkeys(elsewhere.values()))
    return f" (known: {', '.join(names)}" + (f"; and {owners}" if owners else "") + ")"


def build(cls: type, table: dict[str, Any], where: str, prefix: str = "", elsewhere: Mapping[str, str] | None = None,
          **extra: Any):
    """Build dataclass `cls` from a TOML table: unknown keys and wrong types fail, naming the key.
    `elsewhere`: keys another kind of file holds in this table, each with whose they are ("a
    sweep's"), named where a misspelt one is closest (`[matrx]` was told only a run's keys)."""
    more = extra_keys(cls)
    hints = typing.get_type_hints(cls) | {k: key.type for k, key in more.items()}
    names = [f.name for f in dataclasses.fields(cls) if f.init and f.name not in extra] + list(more)
    unknown = [k for k in table if k not in names]
    if unknown:
        raise ConfigError(f"unknown key{_unknown_hint(unknown[0], names, dict(elsewhere or {}), prefix)}", where=where,
                          parameter=prefix + unknown[0])
    kwargs = {k: _check_type(v, hints[k], where, prefix + k) for k, v in table.items()}
    required = [f.name for f in dataclasses.fields(cls)
                if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                and f.name not in kwargs and f.name not in extra]
    # keys a table needs once it is written at all (a `[ppi]` without `labelled` was a table that
    # silently did nothing): their defaults stand only for the table left out
    if required:
        raise ConfigError("missing required key", where=where, parameter=prefix + required[0])
    unset = [k for k in getattr(cls, "required_when_written", ()) if k not in table]
    if unset:
        raise ConfigError(f"needed once [{prefix.rstrip('.')}] is written (leave the table out for none)",
                          where=where, parameter=prefix + unset[0])
    try:
        return cls(**kwargs, **extra)
    except FieldError as exc:
        raise ConfigError(exc.message, where=where, parameter=prefix + exc.field) from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc), where=where, parameter=prefix.rstrip(".") or None) from None
