"""Reading dataset files with errors that name the file and the row."""
from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ..core.errors import DataError


def read_text(path: Path, encodings: tuple[str, ...] = ("utf-8-sig",)) -> str:
    """Decode with the first encoding that works (UTF-8 with or without Excel's byte-order mark by
    default; a card may name fallbacks). What none decodes fails naming the first bad line."""
    if not path.exists():
        raise DataError("file not found", path=str(path))
    if path.is_dir():
        raise DataError("is a folder, not a data file", path=str(path))
    data = path.read_bytes()
    first: UnicodeDecodeError | None = None
    for enc in encodings:
        try:
            return data.decode(enc)
        except UnicodeDecodeError as exc:
            first = first or exc
    line = data[: first.start].count(b"\n") + 1 if first else None
    raise DataError(f"not {' or '.join(e.replace('-sig', '') for e in encodings)} text (byte {first.start if first else 0} "
                    f"of this line)", path=str(path), row=line)


SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def parse_json(text: str, path: Path, row: int | None = None) -> Any:
    """JSON text -> value, every way it can fail a DataError naming the file (and line): invalid
    JSON, nesting too deep for the parser, or a lone surrogate escape (\\ud800 alone is JSON but
    no character: it cannot be written, hashed or tokenized as UTF-8). Read by orjson, as the standard
    parser reads it (property-tested) but for integers beyond 64 bits, read as the nearest float (as
    most JSON readers do); what orjson refuses (NaN, Infinity, lone surrogates, deep nesting), the
    standard parser reads or names."""
    try:
        value = orjson.loads(text)              # 3x json's rate; what it refuses (NaN, lone surrogates,
    except orjson.JSONDecodeError:             # deep nesting) json reads, or names the error
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"invalid JSON ({exc.msg})", path=str(path), row=row or exc.lineno) from None
        except RecursionError:
            raise DataError("JSON nested too deeply to read", path=str(path), row=row) from None
    if "\\u" in text and SURROGATE_ESCAPE.search(text):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise DataError("a lone surrogate escape (\\ud800-\\udfff without its pair): not a character",
                            path=str(path), row=row) from None
    return value


def read_json_list(path: Path) -> list[dict[str, Any]]:
    rows = parse_json(read_text(path), path)
    if not isinstance(rows, list):
        raise DataError("expected a JSON list of records", path=str(path))
    return rows


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) for every non-blank line, read as consumed (a file larger than memory
    streams); a line that is not UTF-8 or not a JSON object fails naming its number."""
    if not path.exists():
        raise DataError("file not found", path=str(path))
    if path.is_dir():
        raise DataError("is a folder, not a JSONL file", path=str(path))
    with path.open("rb") as fh:
        for n, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(f"not UTF-8 text (byte {exc.start} of this line)", path=str(path), row=n) from None
            if n == 1:
                line = line.removeprefix("\ufeff")
            if not line.strip():
                continue
            rec = parse_json(line, path, n)
            if not isinstance(rec, dict):
                raise DataError("expected a JSON object", path=str(path), row=n)
            yield n, rec


TYPE_NAMES = {int: "a whole number", float: "a number", str: "text", bool: "true or false", list: "a list",
              dict: "a table"}


def type_name(typ: type | tuple[type, ...]) -> str:
    """`(int, float)` -> "a number": how a user reads a type."""
    if isinstance(typ, tuple):
        if set(typ) == {int, float}:
            return "a number"
        return " or ".join(type_name(t) for t in typ)
    return TYPE_NAMES.get(typ, typ.__name__)


def require(rec: dict[str, Any], fields: dict[str, type | tuple[type, ...]], path: Path, row: int) -> None:
    """Every field present with the right type; strings non-empty; numbers finite."""
    for name, typ in fields.items():
        if name not in rec or rec[name] is None:
            raise DataError(f"missing field {name!r}", path=str(path), row=row)
        if not isinstance(rec[name], typ) or isinstance(rec[name], bool) and typ is not bool:
            raise DataError(f"field {name!r} should be {type_name(typ)}, got {rec[name]!r:.60}",
                            path=str(path), row=row)
        if isinstance(rec[name], str) and not rec[name].strip():
            raise DataError(f"field {name!r} is empty", path=str(path), row=row)
        if isinstance(rec[name], float) and not math.isfinite(rec[name]):
            raise DataError(f"field {name!r} must be a finite number, got {rec[name]!r}", path=str(path), row=row)
