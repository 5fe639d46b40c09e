"""Reading dataset files with errors that name the file and the row."""
from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from ..core.errors import DataError, Part


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
    at = first.start if first else 0
    line, column = data[:at].count(b"\n") + 1 if first else None, at - data.rfind(b"\n", 0, at) - 1
    raise DataError(f"not {' or '.join(e.replace('-sig', '') for e in encodings)} text (byte {column} "
                    f"of this line)", path=str(path), row=line)


SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
BEYOND_64_BITS = 2.0 ** 63     # orjson reads an integer beyond 64 bits as the nearest float, at least this large


def parse_json(text: str, path: Path, row: int | None = None) -> Any:
    """JSON text -> value, every way it can fail a DataError naming the file (and line): invalid
    JSON, nesting too deep for the parser, or a lone surrogate escape (\\ud800 alone is JSON but
    no character: it cannot be written, hashed or tokenized as UTF-8). Read by orjson, as the standard
    parser reads it (property-tested), but for an integer beyond 64 bits, which orjson reads as the
    nearest float (an id 18446744073709551616 would become 1.8446744073709552e+19, and two 30-digit
    ids one): a record holding such a float is read again by the standard parser, which keeps every
    integer exact. What orjson refuses (NaN, Infinity, lone surrogates, deep nesting), the standard
    parser reads or names."""
    try:
        value = orjson.loads(text)              # 3x json's rate; what it refuses (NaN, lone surrogates,
        if _maybe_rounded(value):               # deep nesting) json reads, or names the error
            value = json.loads(text)
    except orjson.JSONDecodeError:
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


def _maybe_rounded(value: Any) -> bool:
    """A float as large as an integer beyond 64 bits, in a record or a list of records (where ids
    are): orjson may have rounded an integer there."""
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for v in items:
        if isinstance(v, float) and abs(v) >= BEYOND_64_BITS:
            return True
        if isinstance(v, dict) and any(isinstance(x, float) and abs(x) >= BEYOND_64_BITS for x in v.values()):
            return True
    return False


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
    seen = False
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
            if not seen:
                _not_json_lines(line, path, n)
            seen = True
            rec = parse_json(line, path, n)
            if not isinstance(rec, dict):
                raise DataError("expected a JSON object", path=str(path), row=n)
            yield n, rec


def _not_json_lines(first: str, path: Path, row: int) -> None:
    """A .json file of one array, or of objects written over several lines, is JSON but not JSON
    Lines: said so at its first line (it was "invalid JSON (Expecting value)", or "expected a JSON
    object", of a file any JSON reader opens)."""
    text = first.strip()
    if text.startswith("["):
        raise DataError("holds a JSON array; litjudge reads JSON Lines, one object per line (`jq -c '.[]' FILE` "
                        "writes an array's objects so)", path=str(path), row=row)
    if text == "{":
        raise DataError("holds an object written over several lines; litjudge reads JSON Lines, one object per line "
                        "(`jq -c . FILE` writes them so)", path=str(path), row=row)


def read_csv(path: Path, header: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number where the row starts, record) for every non-blank row (a row of empty cells,
    as spreadsheets save, is blank) of a comma-separated file whose first line is `header`, read
    as consumed. Cells are text, an empty one missing. Quotes
    are read strictly: a stray one (`"The door opened,No` closed by a quote rows later) fails naming
    its line, as does a row whose cells do not match the header, instead of rows merging unseen."""
    import csv

    csv.field_size_limit(max(csv.field_size_limit(), 1 << 30))   # a novel in a cell (the default stops at 128 KiB)
    with path.open(encoding="utf-8-sig", newline="") as fh:
        reader = csv.reader(fh, strict=True)
        start = 1
        try:
            next(reader, None)                                  # the header (csv_header read it)
            start = reader.line_num + 1
            for row in reader:
                if any(cell.strip() for cell in row):       # a spreadsheet's empty row (`,,,,`) is a blank line
                    if len(row) != len(header):
                        raise DataError(f"{len(row)} cells where the header has {len(header)} (a stray quote or "
                                        "comma?)", path=str(path), row=start)
                    yield start, {name: (cell if cell != "" else None) for name, cell in zip(header, row)}
                start = reader.line_num + 1
        except csv.Error as exc:
            hint = " (a quote opened in the row starting here is not closed where its cell ends)" \
                if "expected after" in str(exc) or "end of data" in str(exc) else ""
            raise DataError(f"cannot be read as CSV: {exc}{hint}", path=str(path), row=start) from None
        except UnicodeDecodeError:
            # decoded ahead of the rows, a chunk at a time: the row being read is not where the byte is
            raise _not_utf8(path) from None


def _not_utf8(path: Path) -> DataError:
    """The line of the first byte that is not UTF-8 (a hostile pass: a bad byte on line 501 was
    named as line 1, where the decoded chunk began)."""
    with path.open("rb") as fh:
        for n, line in enumerate(fh, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as exc:
                return DataError(f"not UTF-8 text (byte {exc.start} of this line)", path=str(path), row=n)
    return DataError("not UTF-8 text", path=str(path))


TYPE_NAMES = {int: "a whole number", float: "a number", str: "text", bool: "true or false", list: "a list",
              dict: "a table"}


def type_name(typ: type | tuple[type, ...]) -> str:
    """`(int, float)` -> "a number": how a user reads a type."""
    if isinstance(typ, tuple):
        if set(typ) == {int, float}:
            return "a number"
        return " or ".join(type_name(t) for t in typ)
    return TYPE_NAMES.get(typ, typ.__name__)


def id_text(rec: dict[str, Any], name: str, path: Path, row: int, default: str | None = None,
            absent: Sequence[Part] = ()) -> str:
    """An identifier exactly as written: text as is, an integer as its digits (never through a
    float), a float holding a whole number as that number's digits (pandas turns a column of whole
    numbers with a gap into floats: [1, 2, None] is 1.0, 2.0, NaN). Absent: `default` (None: an
    error, `absent` saying what to do). Null, empty, a fraction, a float too large to be exact, true/false or anything else
    is one DataError naming the field and row (an id "None" or "1.0" would be a silent wrong result)."""
    if name not in rec and default is not None:
        return default
    value = rec.get(name)
    if value is None:
        if name in rec:
            raise DataError(f"missing field {name!r} (null: every row needs its own)", path=str(path), row=row)
        raise missing_field(rec, name, path, row, (" (", *absent, ")") if absent else ())
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and abs(value) <= 2**53:
        return str(int(value))
    why = "is empty" if isinstance(value, str) else f"should be text or a whole number, got {value!r:.60}"
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        why += " (too large to be exact as a float: give ids as text)"
    raise DataError(f"field {name!r} {why}", path=str(path), row=row)


def missing_field(rec: dict[str, Any], name: str, path: Path, row: int, why: Sequence[Part] = ()) -> DataError:
    """A field the row does not have, with the columns it has (a header written `id, prompt` gives
    the column ' prompt': one with surrounding spaces is named as such)."""
    spaced = [c for c in rec if isinstance(c, str) and c != c.strip()]
    listed = ", ".join(repr(c) if c in spaced else str(c) for c in rec)[:300] or "none"
    near = next((c for c in spaced if c.strip() == name), None)
    hint = (f"; its column {near!r} has surrounding spaces: remove them (in the header)" if near else
            f"; {', '.join(map(repr, spaced[:3]))} {'has' if len(spaced) == 1 else 'have'} surrounding spaces"
            if spaced else "")
    return DataError((f"missing field {name!r}", *why, f"{LISTED}{listed}){hint}"), path=str(path), row=row)


LISTED = " (the row's columns: "          # how a missing field's message lists the row's (table.in_columns reads it)


def missing_value(value: Any) -> bool:
    """No answer in a cell: null, NaN (pandas' missing value) or blank text (an empty CSV cell)."""
    return value is None or isinstance(value, float) and math.isnan(value) or isinstance(value, str) and not value.strip()


def optional_text(rec: dict[str, Any], name: str) -> str:
    """An optional text field (a source, a group): "" when absent or null, never "None"."""
    value = rec.get(name)
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def first_use(seen: dict[str, int], value: str, name: str, path: Path, row: int) -> None:
    """`value` of the id field `name` taken at `row`, once per file: a second use names the line of
    the first (`seen`: each id's first row, kept by the caller)."""
    if value in seen:
        raise DataError(f"duplicate {name} {value!r} (first on line {seen[value]})", path=str(path), row=row)
    seen[value] = row


def _fits_float(value: int) -> bool:
    try:
        float(value)
    except OverflowError:
        return False
    return True


def require(rec: dict[str, Any], fields: dict[str, type | tuple[type, ...]], path: Path, row: int) -> None:
    """Every field present with the right type; strings non-empty; numbers finite. A record that is
    no object at all (a number or a string in a JSON list of records) is one line too."""
    if not isinstance(rec, dict):
        raise DataError(f"not a JSON object of fields ({', '.join(fields)}), got {type(rec).__name__} {rec!r:.40}",
                        path=str(path), row=row)
    for name, typ in fields.items():
        if name not in rec or rec[name] is None:
            raise missing_field(rec, name, path, row) if name not in rec else \
                DataError(f"missing field {name!r}", path=str(path), row=row)
        if not isinstance(rec[name], typ) or isinstance(rec[name], bool) and typ is not bool:
            raise DataError(f"field {name!r} should be {type_name(typ)}, got {rec[name]!r:.60}",
                            path=str(path), row=row)
        if isinstance(rec[name], str) and not rec[name].strip():
            raise DataError(f"field {name!r} is empty", path=str(path), row=row)
        if isinstance(rec[name], float) and not math.isfinite(rec[name]):
            raise DataError(f"field {name!r} must be a finite number, got {rec[name]!r}", path=str(path), row=row)
        if isinstance(rec[name], int) and float in (typ if isinstance(typ, tuple) else (typ,)) \
                and not _fits_float(rec[name]):          # float() raised OverflowError, an internal error
            raise DataError(f"field {name!r} must be a finite number, got one of {len(str(abs(rec[name])))} digits",
                            path=str(path), row=row)
