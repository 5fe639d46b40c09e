"""What a run leaves, as Python objects: the verdicts and tables a run folder holds, its manifest,
and the report one call away. `Result.open` reads a finished folder (a run, a run of several tasks
a sweep or an ensemble); nothing here computes a number the run did not store."""
from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from litjudge.engine.app.export import hub_typed, verdict_rows, with_answer
from litjudge.engine.app.manifest import RunManifest
from litjudge.engine.app.outputs import read_manifest, read_table
from litjudge.engine.app.report import write_report
from litjudge.engine.app.runs import load_run
from litjudge.engine.core.errors import ConfigError, StoreError
from litjudge.judges import PROTOCOLS


class LitjudgeWarning(UserWarning):
    """A run finished but its result is partial or empty (what the console's exit status 3 or 4 says)."""


@dataclass(frozen=True)
class Result:
    """A finished run.

    Attributes:
        run_dir: the run folder, absolute.
        kind: "run", "tasks", "sweep" or "ensemble".
        manifest: the run's manifest, typed (`.protocol`, `.judges`, `.verdicts`, `.warnings`, ...;
            `.raw` the JSON as written).
        tables: the run's tables by name (the files in RUN/tables); a sweep's are `sweep_metrics` and
            `sweep_ranking`; a run of several tasks: the first task's.
        verdicts: one row per verdict (RUN/verdicts.parquet), with `answer`, the verdict in the
            text's frame (see `with_answer`).
        tasks: a run of several tasks: each task's Result.
    """

    run_dir: Path
    kind: str                                   # "run", "tasks", "sweep" or "ensemble"
    manifest: RunManifest                       # typed: .protocol, .judges, .verdicts, .warnings, ...
    tables: dict[str, pl.DataFrame]
    verdicts: pl.DataFrame
    tasks: tuple[Result, ...] = field(default=())

    @classmethod
    def open(cls, run_dir: str | Path) -> Result:
        """A finished run folder; `run_dir` is kept absolute, as `judge()` returns it."""
        _path_argument(run_dir, "run_dir", "a run folder's path (str or Path)")
        path = Path(run_dir).expanduser().resolve()
        if not path.is_dir():
            raise ConfigError("not a run folder (give the folder a run wrote, e.g. runs/out/demo)", where=str(path))
        manifest = read_manifest(path)
        kind = manifest.kind
        if kind == "sweep":
            tables = {name: read_table(path / f"{name}.parquet") for name in ("sweep_metrics", "sweep_ranking")}
            return cls(path, "sweep", manifest, tables, pl.DataFrame())
        if kind == "ensemble":
            tables = {p.stem: read_table(p) for p in sorted((path / "tables").glob("*.parquet"))}
            return cls(path, "ensemble", manifest, tables, pl.DataFrame())
        if kind == "tasks":
            tasks = tuple(cls.open(path / t.task) for t in manifest.tasks)
            return cls(path, "tasks", manifest, tasks[0].tables, tasks[0].verdicts, tasks)
        loaded = load_run(path)                 # refuses generation-only folders, names missing tables
        verdicts_file = path / "verdicts.parquet"
        if not verdicts_file.exists():
            raise StoreError(f"{path}: no verdicts.parquet; `litjudge reparse {path}` rebuilds it from the store")
        verdicts = with_answer(loaded.manifest.protocol, read_table(verdicts_file), loaded.tables)
        return cls(path, "run", loaded.manifest, loaded.tables, verdicts)

    @property
    def summary(self) -> dict[str, pl.DataFrame]:
        """The tables `litjudge run` prints, in its order (the protocol's headline tables)."""
        if self.kind == "sweep":
            return {"sweep_ranking": self.tables["sweep_ranking"]}
        if self.kind == "ensemble":
            return self.tables
        protocol = self.manifest.protocol
        names = PROTOCOLS.get(protocol).declared.summary if protocol in PROTOCOLS else ()
        return {n: self.tables[n] for n in names if n in self.tables} or dict(list(self.tables.items())[:1])

    def problems(self) -> list[str]:
        """What makes this result partial or empty: requests left unanswered (a re-run asks them),
        judges whose every answer failed to parse, and the run's own warnings."""
        m = self.manifest
        lines = list(m.warnings)
        if m.unanswered:
            lines.append(f"{m.unanswered} requests were left unanswered; the same call again asks them")
        for name, c in m.verdicts_by_judge.items():
            answered = c.rows - c.missing
            if answered and c.unparsed == answered:
                lines.append(f"no verdict of {name} could be read (all {answered} unparsed): its tables hold no result")
        return lines

    def to_dataset(self, prompts: bool = False):
        """The verdicts as a Hugging Face `datasets.Dataset`: one row per verdict, the item's fields
        (item_id and what the protocol recorded of it) beside the verdict; `prompts=True` adds each
        prompt as sent. `litjudge export RUN --to DIR` writes the whole run, tables too, for the Hub."""
        import datasets

        if self.kind != "run":
            raise ConfigError(f"a {self.kind} holds no verdicts of its own: "
                              + ("take one task's, result.tasks[0].to_dataset()" if self.kind == "tasks"
                                 else "open one of its runs"), where=str(self.run_dir))
        return datasets.Dataset.from_polars(hub_typed(verdict_rows(self.run_dir, prompts, self.manifest.protocol,
                                                                   self.tables)))

    def report(self, out: str | Path | None = None) -> Path:
        """Write the HTML report (tables, plots and the per-item viewer) and return its path."""
        if out is not None:
            _path_argument(out, "out", "a folder's path (str or Path) for the report")
        if self.kind == "sweep":                 # an ensemble's is its cascade and jury panels, as the console's
            raise ConfigError("a sweep has no report of its own: report one of its cells' runs, or read "
                              "`tables['sweep_ranking']`", where=str(self.run_dir))
        return write_report([self.run_dir], Path(out) if out else None)

    def _repr_html_(self) -> str:
        """A notebook cell's view: what ran, how many verdicts, and the headline tables."""
        m = self.manifest
        counts = m.verdicts if "verdicts" in m.raw else None
        size = (f"{len(m.raw.get('cells') or [])} cells, {m.sharing.get('requests', 0)} requests" if self.kind == "sweep"
                else f"{counts.rows if counts else self.verdicts.height} verdicts"   # a sweep's are in its cells' runs
                + (f" ({counts.unparsed} unparsed)" if counts else ""))
        head = f"<b>litjudge</b> {html.escape(self.kind)} <code>{html.escape(str(self.run_dir))}</code> &middot; {size}"
        parts = [f"<p>{head}</p>"] + [f"<p style='color:#b00020'>{html.escape(p)}</p>" for p in self.problems()]
        with pl.Config(fmt_str_lengths=2000):         # a note in full (polars cuts a string at 30 characters)
            for name, table in self.summary.items():
                parts.append(f"<p><i>{html.escape(name)}</i></p>" + table.head(12)._repr_html_())
        return "\n".join(parts)

    def __repr__(self) -> str:
        return (f"Result(kind={self.kind!r}, run_dir={str(self.run_dir)!r}, verdicts={self.verdicts.height}, "
                f"tables={sorted(self.tables)})")


def is_path(value: Any) -> bool:
    """A path as Python callers give one: a non-blank str, or a Path (os.PathLike)."""
    return isinstance(value, (str, os.PathLike)) and bool(str(os.fspath(value)).strip())


def _path_argument(value: Any, parameter: str, need: str) -> None:
    """A path given from Python, or one ConfigError naming the parameter (not pathlib's TypeError)."""
    if not is_path(value):
        raise ConfigError(f"expected {need}, got {type(value).__name__} {value!r}", parameter=parameter, value=value)
