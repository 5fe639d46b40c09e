"""A run's files, written so that a reader never sees a mix of two runs: the tables folder holds
exactly what this run produced (written beside it, then swapped in), and every single file is
written to a temporary name and renamed over the old one. A failed write leaves the previous
outputs whole and says why in one line."""
from __future__ import annotations

import html
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Literal

import orjson
import polars as pl

from ..core.console import say
from ..core.errors import StoreError, fault, os_error_of
from ..core.store import Store
from ..core.store_rows import RESULT_COLUMNS
from .annotate.labels import stale_queue
from .manifest import RunManifest


def csv_safe(df: pl.DataFrame) -> pl.DataFrame:
    nested = [c for c, t in df.schema.items() if isinstance(t, (pl.List, pl.Struct, pl.Object))]
    return df.with_columns([pl.col(c).cast(pl.Utf8, strict=False) for c in nested]) if nested else df


def guarded(action: Callable[[], Any], path: Path | str, option: str | None = None) -> Any:
    """`action()`, an OS refusal (also one inside polars' own error) as `fault`'s one line."""
    try:
        return action()
    except (OSError, pl.exceptions.PolarsError) as exc:
        refusal = os_error_of(exc)
        if refusal is None:
            raise
        raise fault(refusal, path, option) from None


def file_mode(folder: bool = False) -> int:
    """The mode a new file (or folder) gets under the user's umask; temporary ones are made 0600
    (0700), so what is written through them is given this mode before it is renamed into place."""
    mask = os.umask(0)
    os.umask(mask)
    return (0o777 if folder else 0o666) & ~mask


def write_file(path: Path, write: Callable[[Path], object]) -> None:
    """`write(tmp)` then rename tmp over `path` (atomic on one filesystem), with the mode any new
    file of the user's gets (their umask), not the temporary file's 0600."""
    def go() -> None:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.fchmod(fd, file_mode())
        os.close(fd)
        try:
            write(Path(tmp))
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    guarded(go, path)


# Present while `write_outputs` replaces a run's files one after another (hidden: not the user's file).
WRITING = ".outputs-writing"
STALE_TEMP = re.compile(r"^\..+\.[A-Za-z0-9_]{8}$")      # a `write_file` temporary: .NAME.XXXXXXXX


def remove_stale_temporaries(run_dir: Path) -> None:
    """Temporaries a killed run left while writing its outputs (kill -9 between write and rename):
    removed by the next run of the folder, which holds its lock, so no writer is using them."""
    for folder in (run_dir, run_dir / "tables"):
        if folder.is_dir():
            for path in folder.iterdir():
                if STALE_TEMP.match(path.name) and path.is_file():
                    path.unlink(missing_ok=True)


def write_text(path: Path, text: str) -> None:
    write_file(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_tables(run_dir: Path, tables: dict[str, pl.DataFrame]) -> None:
    """tables/ holds exactly these tables (Parquet + CSV): built in a new folder, then swapped in."""
    final = run_dir / "tables"

    def go() -> None:
        fresh = Path(tempfile.mkdtemp(prefix=".tables.", dir=run_dir))
        os.chmod(fresh, file_mode(folder=True))
        try:
            for name, df in tables.items():
                df.write_parquet(fresh / f"{name}.parquet")
                csv_safe(df).write_csv(fresh / f"{name}.csv")
            old = run_dir / ".tables.old"
            shutil.rmtree(old, ignore_errors=True)
            if final.exists():
                os.replace(final, old)
            os.replace(fresh, final)
            shutil.rmtree(old, ignore_errors=True)
        finally:
            shutil.rmtree(fresh, ignore_errors=True)
    guarded(go, final)


# What each kind of run writes at its folder's top level, beside what every kind writes (store.sqlite,
# manifest.json, results.json, history.jsonl). A folder holds one run (engine.app.run_folder), so a run of
# one kind written over another's (--overwrite) removes the other's files: a sweep over a plain run kept
# its tables/ and verdicts.parquet, and a run over a sweep its sweep_ranking.csv, each read as the new
# run's. `budgets/` is derived from a run's verdicts (`litjudge budgets`).
RUN_FILES = ("tables", "verdicts.parquet", "log.jsonl", "budgets")
SWEEP_FILES = ("sweep_metrics.parquet", "sweep_ranking.parquet", "sweep_ranking.csv")
KIND_FILES = {"run": RUN_FILES, "sweep": SWEEP_FILES, "tasks": ()}


def drop_other_kinds(run_dir: Path, kind: Literal["run", "sweep", "tasks"], tasks: tuple[str, ...] = ()) -> None:
    """Before a run of `kind` writes its manifest: remove what a run of another kind wrote into the
    folder (KIND_FILES), and the folders of an earlier run's tasks; never this run's own files nor
    its `tasks` (a task may be named as another kind's file)."""
    try:
        old = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        old = {}
    listed = old.get("tasks") if isinstance(old, dict) and old.get("kind") == "tasks" else None
    old_tasks: list[str] = [t["task"] for t in listed if isinstance(t, dict) and _plain_name(t.get("task"))] \
        if isinstance(listed, list) else []
    own = {*KIND_FILES[kind], *tasks}
    names = [*(f for k, files in KIND_FILES.items() if k != kind for f in files), *old_tasks]
    for path in (run_dir / n for n in dict.fromkeys(names) if n not in own):
        if path.is_dir() and not path.is_symlink():
            guarded(partial(shutil.rmtree, path), path)
        elif path.is_file() or path.is_symlink():
            guarded(partial(path.unlink, missing_ok=True), path)


def _plain_name(name: object) -> bool:
    """A task's name as a folder of the run's own: never a path out of it (a manifest is a file anyone edits)."""
    return isinstance(name, str) and bool(name) and Path(name).name == name and not name.startswith(".")


def write_sweep(run_dir: Path, metrics: pl.DataFrame, ranking: pl.DataFrame, manifest: dict) -> None:
    """A sweep's metrics and ranking, then its manifest (the folder's other kinds' files removed first)."""
    guarded(lambda: run_dir.mkdir(parents=True, exist_ok=True), run_dir)
    write_file(run_dir / "sweep_metrics.parquet", lambda tmp: metrics.write_parquet(tmp))
    write_file(run_dir / "sweep_ranking.parquet", lambda tmp: ranking.write_parquet(tmp))
    write_file(run_dir / "sweep_ranking.csv", lambda tmp: ranking.write_csv(tmp))
    drop_other_kinds(run_dir, "sweep")
    write_text(run_dir / "manifest.json", json.dumps(manifest, indent=2, default=str))
    mark_report_stale(run_dir)


def write_outputs(run_dir: Path, tables: dict[str, pl.DataFrame], verdicts: pl.DataFrame, manifest: dict,
                  store: Store, prompts: dict[str, str] | None = None) -> None:
    """Tables (Parquet + CSV), the verdicts, the request/response log (JSONL) and the manifest,
    each replaced whole, under WRITING: a reparse killed between two of them left new tables beside
    the old verdicts and manifest, which export and report read as one run (a card's kappa 0.052
    over data whose was 0.0); `read_manifest` refuses such a folder until it is written again."""
    guarded(lambda: run_dir.mkdir(parents=True, exist_ok=True), run_dir)
    remove_stale_temporaries(run_dir)
    write_text(run_dir / WRITING, "litjudge was writing this run's outputs; if this file stays, that was stopped\n")
    log_path = run_dir / "log.jsonl"
    if prompts is None and log_path.exists():      # reparse: keep the prompts logged by the run
        prompts = read_logged_prompts(log_path)
    write_tables(run_dir, tables)
    write_file(run_dir / "verdicts.parquet", lambda tmp: verdicts.write_parquet(tmp))
    if said := stale_queue(run_dir, verdicts):       # judged again under a started annotation queue
        say(said, logging.WARNING)

    def log(tmp: Path) -> None:
        with tmp.open("wb") as fh:
            for row in store.raw_results(set(verdicts["key"].to_list())):
                fh.write(log_line(row, prompts.get(row[0]) if prompts else None))
    write_file(log_path, log)
    drop_other_kinds(run_dir, "run")
    # the tables it wrote, and their columns: a reader tells one deleted or edited since
    write_text(run_dir / "manifest.json", json.dumps({**manifest, "tables": sorted(tables),
                                                      "table_columns": table_columns(tables)}, indent=2, default=str))
    guarded(lambda: (run_dir / WRITING).unlink(missing_ok=True), run_dir / WRITING)
    mark_report_stale(run_dir)


# Stored as JSON text: written through as is.
JSON_COLUMNS = {"language", "value", "distribution", "analysis_distribution"}


def log_line(row: tuple, prompt: str | None) -> bytes:
    """One stored result as a JSON line (the store's own JSON columns copied, not re-encoded)."""
    rec = dict(zip(RESULT_COLUMNS, row))
    for name in JSON_COLUMNS:
        rec[name] = orjson.Fragment(rec[name] or b"null")
    if prompt is not None:
        rec["prompt"] = prompt
    return orjson.dumps(rec) + b"\n"


def read_manifest(run_dir: Path, *, rewriting: bool = False) -> RunManifest:
    """A run's manifest, typed, or one line saying what is wrong with it and what to do: also where
    its outputs were being written when that stopped (WRITING), unless `rewriting` them (reparse)."""
    path = run_dir / "manifest.json"
    if not rewriting and (run_dir / WRITING).exists() and path.exists():
        raise StoreError(f"{run_dir}: its tables and manifest were being written when that stopped (a reparse or a "
                         f"run interrupted), so they may be of two versions: `litjudge reparse {run_dir}` writes them "
                         "again from the store")
    if not path.exists():
        hint = (" (an interrupted run: run its config again to finish it)" if (run_dir / "store.sqlite").exists()
                else "")
        raise StoreError(f"{run_dir}: not a finished run (no manifest.json){hint}")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise StoreError(f"{path}: corrupt ({exc}); run the config again (`litjudge run`) to rewrite it "
                         "from the store") from None
    except OSError as exc:
        raise fault(exc, path) from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("config"), dict):
        raise StoreError(f"{path}: not a litjudge manifest; run the config again to rewrite it")
    if manifest.get("kind") in (None, "ensemble"):          # a run's (or an ensemble's) own manifest
        missing = [k for k, ok in (("config.protocol", manifest["config"].get("protocol")),
                                   ("judges", isinstance(manifest.get("judges"), list))) if not ok]
        if missing:
            raise StoreError(f"{path}: damaged (no {missing[0]}); run the config again (`litjudge run`) to rewrite it "
                             "from the store")
    return RunManifest.of(manifest)


def table_columns(tables: dict[str, pl.DataFrame]) -> dict[str, dict[str, str]]:
    """Each table's columns and what they hold (`column_kind`), as the manifest records them."""
    return {name: {c: column_kind(t[c].dtype) for c in t.columns} for name, t in sorted(tables.items())}


def column_kind(dtype: pl.DataType) -> str:
    """What a column holds, coarsely enough to survive Parquet ("any": all null, nothing to tell)."""
    return ("any" if dtype == pl.Null else "number" if dtype.is_numeric() else "text" if dtype == pl.Utf8 else
            "bool" if dtype == pl.Boolean else "other")


def edited_column(name: str, table: pl.DataFrame, wrote: dict[str, str]) -> str | None:
    """What in a stored table is not what the run wrote (a column gone, or holding text where it held
    numbers: a hand edit the report would crash on), or None."""
    gone = [c for c in wrote if c not in table.columns]
    if gone:
        return f"tables/{name}.parquet lacks column {gone[0]!r}, which the run wrote"
    for column, kind in wrote.items():
        now = column_kind(table[column].dtype)
        if kind != now and "any" not in (kind, now):
            return f"tables/{name}.parquet column {column!r} holds {now} values where the run wrote {kind}"
    return None


def read_table(path: Path) -> pl.DataFrame:
    """One of a run's stored tables, or one line saying it is unreadable and how to rebuild it."""
    try:
        return pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError) as exc:
        run_dir = path.parent.parent if path.parent.name == "tables" else path.parent    # RUN/tables/X, RUN/verdicts
        raise StoreError(f"{path}: unreadable ({type(exc).__name__}); {rebuild_hint(run_dir)}") from None


def rebuild_hint(run_dir: Path) -> str:
    """How a folder's tables are written again: `reparse` from a run's store; an ensemble has no
    store (reparse refuses it), so it is computed again from its member runs."""
    try:
        kind = json.loads((run_dir / "manifest.json").read_text()).get("kind")
    except (OSError, ValueError, AttributeError):
        kind = None
    if kind == "ensemble":
        return (f"an ensemble's tables are computed again by `litjudge ensemble` over its member runs with --name "
                f"{run_dir.name} (its manifest.json lists the runs and settings)")
    return f"`litjudge reparse {run_dir}` rebuilds the tables and verdicts.parquet from the store"


def read_logged_prompts(log_path: Path) -> dict[str, str]:
    """The prompts a run logged (log.jsonl), kept when its tables are rebuilt; a damaged line is
    skipped with a warning (the log is derived from the store; only that prompt is lost)."""
    prompts: dict[str, str] = {}
    with log_path.open(encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, start=1):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                say(f"litjudge: warning: {log_path}:{n} is not valid JSON: its logged prompt is not kept", logging.WARNING)
                continue
            if isinstance(rec, dict) and "prompt" in rec and "key" in rec:
                prompts[rec["key"]] = rec["prompt"]
    return prompts


STALE = "STALE.txt"


def mark_report_stale(run_dir: Path) -> None:
    """A run whose outputs were just rewritten makes its old report (RUN/report/) out of date:
    say so on the page itself and in a file beside it, until `litjudge report RUN` rewrites it."""
    report = run_dir / "report"
    if not (report / "report.html").exists():
        return
    note = (f"This report is out of date: the run was written again at {time.strftime('%Y-%m-%d %H:%M:%S')}. "
            f"Run `litjudge report {run_dir}` to rebuild it.")
    write_text(report / STALE, note + "\n")
    page = (report / "report.html").read_text(encoding="utf-8")
    if "id='stale'" not in page:
        banner = f"<p id='stale' style='background:#fdd;padding:.5em;font-weight:bold'>{html.escape(note)}</p>"
        write_text(report / "report.html", page.replace("<body>", "<body>" + banner, 1))
    md = report / "report.md"
    if md.exists() and not md.read_text(encoding="utf-8").startswith("> **Out of date"):
        write_text(md, f"> **Out of date.** {note}\n\n" + md.read_text(encoding="utf-8"))


def rebuild_store(run_dir: Path) -> Path | None:
    """`--rebuild-store` (a run's or a sweep's): move the folder's store (and its WAL files) aside,
    kept under a dated name, so the run starts a fresh one, and say so; returns where it went (None
    when there was none)."""
    store = run_dir / "store.sqlite"
    if not store.exists():
        return None
    stamp = run_dir / f"store.sqlite.corrupt-{time.strftime('%Y%m%d-%H%M%S')}"
    aside, n = stamp, 1
    while any(Path(str(aside) + suffix).exists() for suffix in ("", "-wal", "-shm")):
        aside, n = Path(f"{stamp}-{n}"), n + 1        # a second rebuild within the second keeps the first's
    for suffix in ("", "-wal", "-shm"):
        part = Path(str(store) + suffix)
        if part.exists():
            guarded(partial(os.replace, part, Path(str(aside) + suffix)), part)
    say(f"litjudge: the old store is kept as {aside}; every verdict is taken again: from the shared verdict cache "
        "where it holds it, else generated (--no-cache, or cache=False in Python, generates them all)", logging.WARNING)
    return aside
