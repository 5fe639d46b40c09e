"""What a config field says about itself, read from the code the loader validates with, so a
reference built from it cannot drift: its doc is the comment written beside the field in its
dataclass (the trailing comment with the comment lines continuing it, else the comment block just
above it), its type and default come from the dataclass, and its allowed values are the
validator's own words (the field is given a value out of any range and the one-line refusal it
gets is what the reference prints), or, for a `Literal` field, the values of its type."""
from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import io
import json
import textwrap
import tokenize
import types
import typing
from typing import Any

from ..core.schema import FieldError, choices

# A value no range admits, per scalar type: the validator's refusal of it states the range.
PROBES: dict[type, Any] = {int: -(10**9), float: float("nan"), str: "\x00"}


def field_docs(cls: type) -> dict[str, str]:
    """Each field of dataclass `cls` with the comment that documents it, as one line ("" when none);
    an inherited field's comment is its base class's."""
    docs: dict[str, str] = {}
    for base in reversed(cls.__mro__):
        if dataclasses.is_dataclass(base):
            docs |= {k: v for k, v in _own_docs(base).items() if v or k not in docs}
    return docs


@functools.cache
def _own_docs(cls: type) -> dict[str, str]:
    """The comments of the fields a class body declares itself."""
    source = textwrap.dedent(inspect.getsource(cls))
    comments: dict[int, tuple[int, str]] = {}          # line -> (column, text)
    code_lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = (tok.start[1], tok.string.lstrip("#").strip())
        elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            code_lines.update(range(tok.start[0], tok.end[0] + 1))
    (node,) = ast.parse(source).body
    assert isinstance(node, ast.ClassDef)
    docs = {}
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            docs[stmt.target.id] = _doc_of(stmt, comments, code_lines)
    return docs


def _doc_of(stmt: ast.AnnAssign, comments: dict[int, tuple[int, str]], code_lines: set[int]) -> str:
    """The trailing comment of a field's statement and the more indented comment-only lines below
    it; without one, the comment-only lines right above the field."""
    end = stmt.end_lineno or stmt.lineno
    parts = [comments[n][1] for n in range(stmt.lineno, end + 1) if n in comments]
    if parts:
        line = end + 1
        while line in comments and line not in code_lines and comments[line][0] > stmt.col_offset:
            parts.append(comments[line][1])
            line += 1
    else:
        line = stmt.lineno - 1
        while line in comments and line not in code_lines:
            parts.insert(0, comments[line][1])
            line -= 1
    return " ".join(p for p in parts if p)


def describe_type(annotation: Any) -> str:
    """A field's type as a TOML user reads it: `int`, `str or a list of str`, `table`."""
    if dataclasses.is_dataclass(annotation):
        return "table"
    if choices(annotation):
        return describe_type(type(choices(annotation)[0]))
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe_type(a) for a in typing.get_args(annotation) if a is not type(None))
    if origin in (list, tuple):
        (inner, *_) = typing.get_args(annotation) or (Any,)
        return f"list of {describe_type(inner)}"
    if origin is dict or annotation is dict:
        return "table"
    return {bool: "bool", int: "int", float: "float", str: "str"}.get(annotation, "any")


def default_of(f: dataclasses.Field) -> Any:
    """The field's default value (its factory's result), or MISSING when the key is required."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def show_default(value: Any) -> str:
    """A default as TOML writes it; a required key and an unset one say so."""
    if value is dataclasses.MISSING:
        return "required"
    if value is None:
        return "unset"
    if dataclasses.is_dataclass(value):
        return "(table)"
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, bool):
        return str(value).lower()
    return json.dumps(value, ensure_ascii=False)


def _scalar(annotation: Any) -> type | None:
    """The scalar type a field holds (`int | None` holds int), or None for lists, tables, unions of two."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        present = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _scalar(present[0]) if len(present) == 1 else None
    return annotation if annotation in PROBES else None


def _range_words(message: str, name: str) -> str:
    """The allowed values in a refusal: `must be in (0, 1], got nan` -> `in (0, 1]`."""
    text = message.split(": ", 1)[1] if message.startswith(f"{name}: ") else message
    for prefix in (f"options.{name} ", f"{name} "):
        text = text.removeprefix(prefix)
    text = text.rsplit(", got ", 1)[0]
    return text.removeprefix("must be ").removeprefix("must ")


def allowed_values(cls: type, name: str, required: dict[str, Any]) -> str:
    """What the validator admits for field `name` of `cls`, in its own words ("" when it admits any
    value of the field's type). `required`: values for the fields the class cannot be built without."""
    allowed = choices(typing.get_type_hints(cls)[name])
    if allowed:
        return f"one of {list(allowed)}"
    probe = PROBES.get(_scalar(typing.get_type_hints(cls)[name]) or object)
    if probe is None:
        return ""
    try:
        cls(**{**required, name: probe})
    except FieldError as exc:
        return _range_words(str(exc), name) if exc.field == name else ""
    except (TypeError, ValueError) as exc:       # protocol options: "options.NAME must be ..."
        text = str(exc)
        return _range_words(text, name) if text.startswith((f"options.{name} ", f"{name} ")) else ""
    return ""
