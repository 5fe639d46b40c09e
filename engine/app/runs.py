"""A finished run folder, read back: its manifest and stored tables (the report, `compare`,
ensembles and the text summary read runs through this, never through the plotting code)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from ..core.errors import ConfigError, StoreError
from ..core.paths import run_folder_hint
from .manifest import RunManifest
from .outputs import edited_column, read_manifest, read_table, rebuild_hint


@dataclass
class LoadedRun:
    name: str
    path: Path
    manifest: RunManifest
    tables: dict[str, pl.DataFrame]


def load_run(path: Path) -> LoadedRun:
    path = Path(path)
    if not path.is_dir():
        raise ConfigError(f"not a run directory ({run_folder_hint()})", where=str(path))
    manifest = read_manifest(path)
    if manifest.kind == "sweep":
        raise ConfigError("a sweep: its tables are sweep_metrics.parquet / sweep_ranking.csv", where=str(path))
    if manifest.kind == "generation":
        raise ConfigError("a generation-only run (--generate-only): its items are generated/items.jsonl and its "
                          "tables tables/generation*.csv; run the config without --generate-only to judge them",
                          where=str(path))
    tables = run_tables(path, manifest)
    budgets = path / "budgets" / "tables" / "budgets.parquet"          # `litjudge budgets RUN`
    if budgets.exists():
        tables["budgets"] = read_table(budgets)
    return LoadedRun(path.name, path, manifest, tables)


def run_tables(path: Path, manifest: RunManifest) -> dict[str, pl.DataFrame]:
    """A run's tables, or one line where one its manifest lists is gone (report and export alike:
    export published the others without a word)."""
    tables = {p.stem: read_table(p) for p in sorted((path / "tables").glob("*.parquet"))}
    if not tables:
        raise StoreError(f"{path}: the run has no tables (tables/*.parquet); {rebuild_hint(path)}")
    listed = manifest.raw.get("tables")
    if missing := [n for n in listed if n not in tables] if isinstance(listed, list) else []:
        more = f" (and {len(missing) - 1} more)" if missing[1:] else ""
        raise StoreError(f"{path}: tables/{missing[0]}.parquet is missing{more} though the run wrote it; "
                         f"{rebuild_hint(path)}")
    wrote = manifest.raw.get("table_columns")
    for name, columns in wrote.items() if isinstance(wrote, dict) else ():
        if name in tables and isinstance(columns, dict) and (edited := edited_column(name, tables[name], columns)):
            raise StoreError(f"{path}: {edited}; {rebuild_hint(path)}")
    if manifest.kind == "run" and not (path / "verdicts.parquet").exists():    # the item viewer's and export's rows
        raise StoreError(f"{path}: verdicts.parquet is missing though the run wrote it; {rebuild_hint(path)}")
    return tables


def unique_labels(runs: list[LoadedRun]) -> list[LoadedRun]:
    """Runs labelled by their folder: the name, or as many parent folders as it takes to tell two
    runs of the same name apart (`out/r1`, `out2/r1`); the same run twice is refused."""
    paths = [r.path.resolve() for r in runs]
    twice = sorted({str(p) for p in paths if paths.count(p) > 1})
    if twice:
        raise ConfigError(f"the same run is given twice: {twice[0]}")
    depth = 1
    while True:
        labels = ["/".join(p.parts[-depth:]) for p in paths]
        if len(set(labels)) == len(labels) or depth >= max(len(p.parts) for p in paths):
            return [LoadedRun(label, r.path, r.manifest, r.tables) for label, r in zip(labels, runs, strict=True)]
        depth += 1


def task_folders(run_dirs: list[Path]) -> list[Path]:
    """Each run folder, or for a run of several tasks, the folder of each task."""
    out = []
    for d in run_dirs:
        manifest = read_manifest(d) if (d / "manifest.json").exists() else RunManifest()
        out += [d / t.task for t in manifest.tasks] if manifest.kind == "tasks" else [d]
    return out
