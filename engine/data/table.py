"""Your own data in any common layout: the `table` loader reads a file (JSONL, CSV, Parquet), a
saved Hugging Face dataset folder, or a hub dataset, and renames its columns to litjudge's fields
by the card's mapping, so nothing has to be converted by hand first.

    [dataset]                       # inline in a run config, or a card file anywhere
    loader = "table"
    path = "prefs.csv"              # relative to the config (or card) file
    protocols = ["pairwise"]
    [dataset.columns]               # litjudge field = your column ("=value" for a constant)
    prompt = "instruction"
    text_a = "response_a"
    text_b = "response_b"
    label = "winner"
    [dataset.values.label]          # your values -> litjudge's
    model_a = "a"
    model_b = "b"

Parquet, saved folders and hub datasets go through Hugging Face `datasets` (Arrow-backed,
streamed, so a file larger than memory is read as consumed); JSONL and CSV are read row by row by
litjudge's own readers (CSV strictly: every cell text, a stray quote an error, never merged rows),
so an error names the file's true line (blank lines included). A bad row fails naming the file and
its row: the line for JSONL and CSV (the header is line 1), the row number for Parquet and datasets.
"""
from __future__ import annotations

import csv
import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..core.errors import DataError, Part, Setting, did_you_mean
from .cards import DatasetCard
from .items import ITEM_FIELDS
from .pairs import PAIR_FIELDS, as_label
from .readers import LISTED, read_csv, read_jsonl

IDS = ("pair_id", "item_id")           # fields a loader numbers by row where the data has none
FORMATS = {".jsonl": "jsonl", ".json": "jsonl", ".csv": "csv", ".parquet": "parquet"}
# litjudge's fields per kind of data (a card's mapping renames columns to these)
FIELDS = {"pairs": PAIR_FIELDS, "items": ITEM_FIELDS,
          "groups": ("group", "item_id", "text", "human_score", "reference", "source")}


def data_format(card: DatasetCard, location: Path) -> str:
    if card.format:
        return card.format
    if card.hub:
        return "hub"
    if location.is_dir():
        return "arrow"
    fmt = FORMATS.get(location.suffix.lower())
    if fmt is None:
        raise DataError(f"cannot tell the format of {location.name}: set format = \"jsonl\", \"csv\", \"parquet\" or "
                        "\"arrow\" in the dataset table", path=str(location))
    return fmt


def rows(card: DatasetCard, location: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row number, record) of the data as stored, streamed."""
    fmt = data_format(card, location)
    if fmt == "jsonl":
        yield from read_jsonl(location)
        return
    if fmt == "csv":
        if not location.exists():
            raise DataError("file not found", path=str(location))
        yield from read_csv(location, csv_header(location))
        return
    import datasets  # heavy: imported only when a table is read

    try:
        if fmt == "hub":
            ds = datasets.load_dataset(card.hub["id"], revision=card.hub.get("revision"), split=card.split or "train",
                                       streaming=True)
        elif fmt == "arrow":
            ds = datasets.load_from_disk(str(location))
            if isinstance(ds, datasets.DatasetDict):
                ds = ds[card.split or "train"]
        else:
            if not location.exists():
                raise DataError("file not found", path=str(location))
            ds = datasets.load_dataset(fmt, data_files=str(location), split="train", streaming=True)
        for i, rec in enumerate(ds):
            yield i + 1, dict(rec)
    except DataError:
        raise
    except (ValueError, KeyError, OSError, FileNotFoundError) as exc:
        raise DataError(f"cannot be read as {fmt}: {str(exc).splitlines()[0][:200]}", path=str(location)) from None


def csv_header(location: Path) -> list[str]:
    """The CSV's column names (its first line); a header that reads as one column holding ';' or a
    tab is another delimiter's file, said so in one line."""
    with location.open(encoding="utf-8-sig", errors="replace", newline="") as fh:
        header = next(csv.reader([fh.readline()]), [])
    if not header:
        raise DataError("is empty: no header line naming the columns", path=str(location), row=1)
    check_header(header, location)
    return header


def check_header(header: list[str], location: Path) -> None:
    """THE rules of a CSV header litjudge reads (a data file's, an annotation import's): each named
    column named once (a spreadsheet's unnamed empty columns, `a,b,,`, are none: no field reads
    them), and commas between them (a header that reads as one column holding ';' or a tab is
    another delimiter's file), each said in one line."""
    named = [c for c in header if c.strip()]
    twice = sorted({c for c in named if named.count(c) > 1})
    if twice:
        raise DataError(f"the header names column {twice[0]!r} twice: rename one", path=str(location), row=1)
    if len(header) == 1 and any(d in header[0] for d in (";", "\t", "|")):
        sep = next(d for d in (";", "\t", "|") if d in header[0])
        raise DataError(f"the header is one column, {header[0][:80]!r}: the file looks {sep!r}-separated; litjudge reads "
                        "comma-separated CSV (save it with commas, or as JSONL)", path=str(location), row=1)


# a number as people write one in a data file: ASCII digits, an optional sign and decimals; Python's
# float() also reads "1_0" (ten), "1e0", "nan" and digits of any script, which no rater meant
PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")


def plain_number(text: str) -> float | None:
    """A cell's text as a number if it is written as plain decimal digits (padding allowed); else None."""
    text = text.strip()
    return float(text) if PLAIN_NUMBER.fullmatch(text) else None


TRUE = ("true", "1", "yes", "y", "t")
FALSE = ("false", "0", "no", "n", "f", "")


def typed(name: str, value: Any) -> Any:
    """A CSV cell (text) as the field's type: human_score a number, reference true/false; a cell
    that is neither stays as it is, for the protocol's own check to name."""
    if not isinstance(value, str):
        return value
    if name == "human_score":
        number = plain_number(value)
        return number if number is not None else value if value.strip() else None
    if name == "reference":
        low = value.strip().lower()
        return True if low in TRUE else False if low in FALSE else value
    return value


def check_mapping(card: DatasetCard, kind: str, location: Path, first: dict[str, Any] | None = None) -> None:
    """The card's `columns` and `values` maps name fields of `kind` (an unknown one is one line with
    "did you mean", and a map written the other way round, your column -> field as in a rename,
    says so), and, given the first record, every mapped column is one it has."""
    fields = FIELDS[kind]
    for section, names in (("columns", card.columns), ("values", card.values)):
        unknown = [f for f in names if f not in fields]
        if not unknown:
            continue
        name = unknown[0]
        target = card.columns.get(name) if section == "columns" else None
        hint: tuple[Part, ...] = (did_you_mean(name, fields),)
        if isinstance(target, str) and target in fields:
            hint = (": the map goes from litjudge's field to your column, the other way round from a rename: write ",
                    Setting("dataset.columns", {target: name}))
        verb = "maps" if section == "columns" else "renames values of"
        raise DataError((Setting(f"dataset.{section}", table=True), f" {verb} {name!r}, which {kind} data does not have",
                         *hint, f" (fields: {', '.join(fields)})"), path=str(location))
    wrong = [(k, v) for k, v in card.values.get("label", {}).items() if as_label(str(v)) is None]
    if kind == "pairs" and wrong:        # each row it renames would be refused, the map unnamed as the cause
        raise DataError((Setting("dataset.values.label", table=True), f" renames {wrong[0][0]!r:.40} to "
                         f"{wrong[0][1]!r:.40}, which is not a, b or tie (the text the humans preferred, or neither)"),
                        path=str(location))
    if first is not None:
        absent = [(f, c) for f, c in card.columns.items() if not str(c).startswith("=") and c not in first]
        if absent:
            field, column = absent[0]
            raise DataError((Setting("dataset.columns", table=True), f" maps {field} to column {column!r}, which the data "
                             f"does not have{did_you_mean(column, first)} (columns: {', '.join(map(str, first))[:300]})"),
                            path=str(location))


def check_first(card: DatasetCard, kind: str, location: Path, first: dict[str, Any] | None = None) -> None:
    """A `table` dataset's maps checked against its first row (read now, or `first` as given)
    before a run writes anything: the file's format, the columns it maps, the fields it names."""
    if card.loader != "table" or card.hub or kind not in FIELDS:
        return
    check_mapping(card, kind, location)
    if first is None:
        first = next((rec for _, rec in rows(card, location)), None)
    check_mapping(card, kind, location, first)


def fold(text: str) -> str:
    """THE rule by which answers are matched, whatever their case and Unicode form: Unicode's
    canonical caseless match, NFD(casefold(NFD(text))) (casefolding NFC text left some decomposed,
    so `ΠΡΩΪ́` and `πρωΐ` no longer met). A human column, an annotation, the check that a
    question's answers differ and a `[dataset.values]` map all read it."""
    return unicodedata.normalize("NFD", unicodedata.normalize("NFD", text).casefold())


def renamed(table: dict[str, str], value: Any, name: str, location: Path, row: int) -> Any:
    """A value through the card's `values` map of field `name`: its own key, else the key it matches
    in any case, Unicode form and outer spaces, as the labels themselves are read (a map `A = "b"`
    left `a` and `A ` to be read as the label a: the opposite preference, silently). A value two
    keys match so, each renaming it otherwise, is one line."""
    text = str(value)
    if text in table:
        return table[text]
    targets = {v for k, v in table.items() if fold(k.strip()) == fold(text.strip())}
    if len(targets) > 1:
        raise DataError(f"value {text!r:.40} of field {name!r} matches several keys of [dataset.values.{name}] in "
                        f"another case or spacing ({', '.join(sorted(map(repr, targets)))}): add it as a key of its "
                        "own", path=str(location), row=row)
    return targets.pop() if targets else value


def mapped(card: DatasetCard, location: Path, kind: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """Rows renamed to litjudge's fields by the card's `columns` (and `values`) mapping. A mapped
    column the data lacks fails on the first row, naming the columns it has."""
    check_mapping(card, kind, location)
    consumed = {c for c in card.columns.values() if not str(c).startswith("=")}
    for i, (n, rec) in enumerate(rows(card, location)):
        if i == 0:
            check_mapping(card, kind, location, rec)
        out: dict[str, Any] = {}
        for name in FIELDS[kind]:
            source = card.columns.get(name, name)
            if isinstance(source, str) and source.startswith("="):
                out[name] = source[1:]
            elif source in rec:
                out[name] = rec[source]
            elif name in IDS and name in card.columns:   # the loader would make one up ("line7"): never for yours
                raise DataError(f"no column {source!r} (your {name}) in this row; the first row has it",
                                path=str(location), row=n)
            else:
                continue
            table = card.values.get(name)
            if table and out[name] is not None:
                out[name] = renamed(table, out[name], name, location, n)
            out[name] = typed(name, out[name])
        if kind != "groups":
            out.update((c, v) for c, v in rec.items() if c not in FIELDS[kind] and c not in consumed)
        yield n, out


def in_columns(card: DatasetCard, exc: DataError) -> DataError:
    """The error of a mapped row, naming the user's column beside litjudge's field."""
    parts = exc.parts
    for name in dict.fromkeys([*card.columns, *card.values]):      # a field renamed, or only its values
        column = card.columns.get(name, name)
        if not str(column).startswith("=") and f"field {name!r}" in exc.message:
            said = f"field {name!r}"
            if column != name:
                parts = tuple(p.replace(said, f"{said} (column {column!r})", 1) if isinstance(p, str) else p
                              for p in parts)
            if card.values.get(name):
                parts += (" (", Setting(f"dataset.values.{name}", table=True),
                          f" renames {', '.join(map(repr, card.values[name]))})")
            break
    return DataError(tuple(_your_columns(card, p) for p in parts), path=exc.path, row=exc.row)


def _your_columns(card: DatasetCard, part: Any) -> Any:
    """The columns a missing field's message lists, as the user named them (the row was renamed to
    litjudge's fields: 'item_id, text' where the file says 'id, story')."""
    if not isinstance(part, str) or not part.startswith(LISTED):
        return part
    listed, close, hint = part[len(LISTED):].partition(")")
    yours = {f: c for f, c in card.columns.items() if not str(c).startswith("=")}
    return LISTED + ", ".join(yours.get(n, n) for n in listed.split(", ")) + close + hint


def checked(card: DatasetCard, records: Iterator[Any]) -> Iterator[Any]:
    """`records`, with a bad row's error naming the user's column."""
    try:
        yield from records
    except DataError as exc:
        raise in_columns(card, exc) from None
