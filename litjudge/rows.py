"""Your rows in memory as the file `litjudge.judge` judges (RUN/input/data.jsonl), taken as you see
them: a Hugging Face dataset's selected rows (after `filter`, `select`, `shuffle`), a pandas index
that holds a column you name, identifiers exactly as written (pandas' NaN as missing, never
"nan"; integers as their digits, never through a float), text as text (UTF-8 bytes decoded).
What cannot be judged as given is one DataError naming the row (1-based) and the column.

One rule with the console for everything else: the file written here is read by the same `table`
loader as a file given to `litjudge run`, so a value the protocol reads is checked there, and a
column it does not read is never refused (NaN in an unused column is no error from either side)."""
from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from litjudge.engine.app.outputs import write_file
from litjudge.engine.app.run_folder import DataRead
from litjudge.engine.core.errors import ConfigError, DataError
from litjudge.engine.core.run_lock import RunLock
from litjudge.engine.data.table import FIELDS

WHERE = "data"


def records(data: Any, mapped: Mapping[str, str]) -> list[dict[str, Any]]:
    """Rows as dicts, from polars, pandas, a Hugging Face Dataset or a list of dicts (missing
    values, pandas' NaN included, become null). `mapped`: the columns map, whose columns a
    pandas index may hold."""
    module = type(data).__module__
    if isinstance(data, pl.DataFrame):
        rows = _frame_rows(data)
    elif module.startswith("pandas"):
        rows = _pandas_rows(data, mapped)
    elif module.startswith("datasets"):
        rows = _dataset_rows(data)
    elif isinstance(data, list):
        bad = next((i for i, r in enumerate(data) if not isinstance(r, Mapping)), None)
        if bad is not None:
            raise DataError(f"row {bad + 1} is a {type(data[bad]).__name__}, not a dict of column -> value", path=WHERE)
        rows = [dict(r) for r in data]
    else:
        raise DataError(f"a {type(data).__name__} is not data litjudge reads: give a polars or pandas DataFrame, "
                        "a Hugging Face Dataset, a list of dicts or a file path", path=WHERE)
    if not rows:
        raise DataError("no rows to judge (the data is empty)", path=WHERE)
    return rows


def _frame_rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
    floats = [c for c, t in frame.schema.items() if t.is_float()]
    return frame.with_columns(pl.col(c).fill_nan(None) for c in floats).to_dicts()


def _pandas_rows(frame: Any, mapped: Mapping[str, str]) -> list[dict[str, Any]]:
    """A pandas frame's rows; an index level named as a column you map (or as a field) joins the
    columns (`pair_id` kept in the index is used, not dropped); MultiIndex columns are refused."""
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise DataError(f"a pandas {type(frame).__name__} is not a table of rows: give a DataFrame", path=WHERE)
    if isinstance(frame.columns, pd.MultiIndex):
        seen = ", ".join(map(str, list(frame.columns)[:8])) + (", ..." if len(frame.columns) > 8 else "")
        raise DataError(f"the columns are a MultiIndex ({seen}): give one name per column, e.g. "
                        "df.columns = ['_'.join(map(str, c)) for c in df.columns]", path=WHERE)
    names = [str(c) for c in frame.columns]
    twice = sorted({c for c in names if names.count(c) > 1})
    if twice:                                 # pandas' records keep only the last of them, silently
        raise DataError(f"the DataFrame has two columns named {twice[0]!r}: rename one", path=WHERE)
    wanted = set(mapped.values()) | {f for fields in FIELDS.values() for f in fields}
    levels = [n for n in frame.index.names if n is not None and n in wanted and n not in frame.columns]
    if levels:
        frame = frame.reset_index(level=levels)
    try:
        return _frame_rows(pl.from_pandas(frame, nan_to_null=True))
    except (OverflowError, TypeError, ValueError, pl.exceptions.PolarsError):
        # pandas holds what polars cannot (integers beyond 64 bits in an object column): its own records
        return [{str(k): _missing_as_none(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]


def _missing_as_none(value: Any) -> Any:
    import pandas as pd

    if isinstance(value, float) and math.isnan(value):
        return None
    return None if value is pd.NA or value is pd.NaT else value


def _dataset_rows(data: Any) -> list[dict[str, Any]]:
    """A Hugging Face dataset's rows as it shows them: a `filter` / `select` result is its selected
    rows (its indices mapping), not the whole table underneath."""
    import datasets

    if isinstance(data, datasets.DatasetDict):
        raise DataError(f"a DatasetDict holds several splits ({', '.join(data)}): give one, e.g. ds['train']",
                        path=WHERE)
    if isinstance(data, datasets.Dataset):
        return _frame_rows(pl.from_arrow(data.with_format("arrow")[:]))    # type: ignore[arg-type]
    return [dict(r) for r in data]                       # an IterableDataset: read as it streams


def jsonl(rows: list[dict[str, Any]]) -> bytes:
    """The rows as JSON lines, exactly as given (NaN written as NaN: the loader reads it as the
    console does); bytes decoded as UTF-8; text that is no character (a lone surrogate) refused."""
    lines = []
    for n, row in enumerate(rows, start=1):
        row = {str(k): _text(v, n, k) for k, v in row.items()}
        try:
            line = json.dumps(row, ensure_ascii=False, default=_plain, allow_nan=True)
            lines.append(line.encode("utf-8"))
        except UnicodeEncodeError:
            column = next((k for k, v in row.items() if isinstance(v, str) and _lone_surrogate(v)), "?")
            raise DataError(f"row {n}: column {column!r} holds a lone surrogate (\\ud800-\\udfff without its pair), "
                            "which is no character: fix the text", path=WHERE) from None
        except _NotText as exc:
            raise DataError(f"row {n}: {exc}", path=WHERE) from None
    return b"".join(line + b"\n" for line in lines)


class _NotText(ValueError):
    pass


def _text(value: Any, row: int, column: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise DataError(f"row {row}: column {column!r} holds bytes that are not UTF-8 text: decode them "
                            "first (e.g. with their encoding)", path=WHERE) from None
    return value


def _plain(value: Any) -> Any:
    """What JSON has no type for: nested bytes decoded, anything else (a date, a decimal) as text."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise _NotText("a value holds bytes that are not UTF-8 text: decode them first") from None
    if hasattr(value, "tolist"):                         # numpy scalars and arrays
        return value.tolist()
    return str(value)


def _lone_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def identity(lines: bytes) -> DataRead:
    """The identity of rows not yet written: what RUN/input/data.jsonl will hold."""
    return DataRead({"sha256": hashlib.sha256(lines).hexdigest(), "bytes": len(lines)}, None)


def judged(run_dir: Path, rows: DataRead) -> bool:
    """Whether the folder's manifest names these rows (`identity`'s: the run wrote its outputs
    before it failed)."""
    try:
        return bool(rows.sha256) and json.loads((run_dir / "manifest.json").read_text())["dataset"]["data"][
            "sha256"] == rows.sha256
    except (OSError, ValueError, KeyError, TypeError):
        return False


def write(data: bytes, target: Path) -> None:
    """Rows in memory as RUN/input/data.jsonl, the file the `table` loader reads (rewritten only when
    they change), so the run folder holds what was judged and `litjudge reparse` can read it again."""
    if target.exists() and target.read_bytes() == data:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    write_file(target, lambda tmp: tmp.write_bytes(data))


PREVIOUS = ".data.jsonl.previous"      # beside RUN/input/data.jsonl while an overwrite runs


def replace(data: bytes, target: Path) -> bytes | None:
    """`write`, the rows it replaces kept beside them first (PREVIOUS), as a journal: an overwrite
    killed before its outputs (SIGTERM, kill -9: no handler runs) left the new rows, never judged,
    beside the old run's tables, and `load()` read them together; `recover` puts the judged rows
    back. Returns the rows replaced (None: there were none)."""
    previous = target.read_bytes() if target.is_file() else None
    if previous is not None and previous != data:
        write_file(target.with_name(PREVIOUS), lambda tmp: tmp.write_bytes(previous))
    write(data, target)
    return previous


def settle(run_dir: Path, target: Path, previous: bytes | None, rows: DataRead) -> None:
    """After an overwrite ended (finished, refused or stopped): the rows the folder's outputs were
    made from stay in `target` (the replaced ones unless the run wrote its outputs), the journal goes."""
    if previous is not None and not judged(run_dir, rows):
        write(previous, target)
    target.with_name(PREVIOUS).unlink(missing_ok=True)


def recover(run_dir: Path, target: Path) -> None:
    """An overwrite's journal left by a killed process: the folder's outputs name the rows kept in
    it (not the ones in `target`): they are put back. Call with the folder's lock held."""
    journal = target.with_name(PREVIOUS)
    if not journal.is_file():
        return
    kept = journal.read_bytes()
    current = target.read_bytes() if target.is_file() else b""
    if judged(run_dir, identity(kept)) and not judged(run_dir, identity(current)):
        write(kept, target)
    journal.unlink(missing_ok=True)


def recover_when_free(run_dir: Path, target: Path) -> None:
    """`recover`, for a reader (`load()`): only where a journal is left and no run holds the folder
    (a run writing it settles its rows at its own end)."""
    if not target.with_name(PREVIOUS).is_file():
        return
    try:
        lock = RunLock(run_dir)
    except ConfigError:
        return
    try:
        recover(run_dir, target)
    finally:
        lock.release()
