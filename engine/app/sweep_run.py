"""Run a sweep: plan it, run each judge once over all its cells, evaluate every cell and post setting.

1. Build every cell's requests. Per judge, all cells go into ONE plan: a request two cells share
   has one content key and is generated once (and a key already stored is not generated again, so
   an interrupted sweep resumes where it stopped).
2. Judges run one after another, one engine each; it is shut down, its memory released, before the
   next loads (resident memory after each shutdown is recorded in the manifest).
3. Every cell x post setting is aggregated from the store (no model call) into one tidy table, one
   row per (cell, setting, judge, metric, group), and the cells are ranked by the chosen metric with
   cluster-bootstrap CIs.
"""
from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from judges import PROTOCOLS
from judges.base import Context
from judges.metrics import cluster_bootstrap
from judges.metrics.direction import higher_is_better

from .. import backends as registry
from ..core.backend import JudgeSpec
from ..core.cache import open_verdict_cache, verdict_cache_path
from ..core.console import log_to, terminal
from ..core.manifest import config_dict, git_commit, machine
from ..core.paths import runs_output_dir
from ..core.planner import StreamPlanner, common_prefix
from ..core.requests import JudgeRequest
from ..core.runner import JudgeRun, run_judge
from ..core.store import Store
from ..core.verdicts import verdict_frame
from .calibrate import SAMPLE
from .outputs import write_file, write_text
from .run import PreparedRun, prepare
from .sweep import Cell, Sweep

CI_ROWS = 20        # bootstrap CIs for the top rows and each cell's best row (~0.1 s each at 1,000 resamples)


@dataclass
class JudgeWork:
    """One judge's share of a sweep: its cells, whose requests are built as the plan streams."""

    spec: JudgeSpec
    cells: list[tuple[Cell, str, PreparedRun]]

    @property
    def judge(self) -> str:
        return self.spec.name

    def requests(self) -> Iterator[tuple[str, JudgeRequest]]:
        """(run id, request) of every cell, cell after cell: a request two cells share is one key."""
        for _, run, prep in self.cells:
            for r in prep.protocol.build(prep.context(self.spec)).requests:
                yield run, r


@dataclass
class SweepOutcome:
    run_dir: Path
    metrics: pl.DataFrame
    ranking: pl.DataFrame
    manifest: dict[str, Any]


def cell_run_id(sweep: Sweep, cell: Cell, judge: str) -> str:
    return f"{sweep.name}/{cell.id}/{judge}"


def _options(protocol, cell: Cell, setting: dict[str, Any]):
    opts = {**cell.config.options, **{k.removeprefix("options."): v for k, v in setting.items()}}
    return protocol.options(dataclasses.replace(cell.config, options=opts))


def prepared_cells(sweep: Sweep) -> list[tuple[Cell, PreparedRun]]:
    """Every cell validated and its judges resolved (each judge once: `backends.resolve` caches)."""
    return [(cell, prepare(cell.config)) for cell in sweep.cells]


def work(sweep: Sweep, cells: list[tuple[Cell, PreparedRun]]) -> list[JudgeWork]:
    """Every cell, grouped by judge (judges in first-seen order)."""
    by_judge: dict[str, JudgeWork] = {}
    for cell, prep in cells:
        for spec in prep.specs:
            run = cell_run_id(sweep, cell, spec.name)
            by_judge.setdefault(spec.name, JudgeWork(spec, [])).cells.append((cell, run, prep))
    return list(by_judge.values())


def plan_summary(sweep: Sweep) -> list[dict[str, Any]]:
    """Per judge, without loading any engine: requests, distinct requests, prompt tokens, distinct
    prefill tokens after prefix sharing, what was left out as too long, how many distinct requests
    are already stored (in the run's folder or the shared verdict cache) and what is left to
    generate and prefill, and a sample of distinct requests left to generate (for a calibration).
    Streams: the plan is never held whole."""
    rows = []
    stores = [s for s in (_existing(runs_output_dir() / sweep.name / "store.sqlite"), _existing(verdict_cache_path()))
              if s is not None]
    try:
        for w in work(sweep, prepared_cells(sweep)):
            config = w.cells[0][0].config
            planner = registry.planner(w.spec)
            stream = StreamPlanner(planner, config.truncation)
            sample: list = []
            stored = left_prefill = 0
            prev: tuple[int, ...] = ()
            recorded = w.spec.capabilities.recorded
            for part in stream.chunks(w.requests()):
                keys = [p.key for p in part.unique]
                done: set[str] = set()
                for s in (stores if not recorded else stores[:1]):
                    done |= s.finished_keys(k for k in keys if k not in done)
                stored += len(done)
                todo = [p for p in part.unique if p.key not in done]
                for p in todo:
                    left_prefill += p.prompt_tokens - common_prefix(prev, p.token_ids)
                    prev = p.token_ids
                sample = sample or todo[:SAMPLE]
            st = stream.stats
            rows.append({"judge": w.judge, "cells": len(w.cells), "requests": st.requests + len(st.too_long),
                         "too_long": len(st.too_long), "distinct_requests": st.distinct_requests,
                         "saved_by_sharing": st.requests - st.distinct_requests, "prompt_tokens": st.prompt_tokens,
                         "distinct_prefill_tokens": st.distinct_prefill_tokens, "stored": stored,
                         "to_generate": st.distinct_requests - stored, "to_prefill_tokens": left_prefill,
                         "stats": st, "sample": sample, "planner": planner, "config": config, "spec": w.spec})
    finally:
        for s in stores:
            s.close()
    return rows


def _existing(path: Path | None) -> Store | None:
    """A store to read, only where one already is (planning never creates a run folder)."""
    return Store.open(path, create=False) if path is not None and path.exists() else None


def run_sweep(sweep: Sweep, *, progress: bool = True) -> SweepOutcome:
    t0 = time.time()
    protocol = PROTOCOLS.get(sweep.base.protocol)()
    cells = prepared_cells(sweep)
    run_dir = runs_output_dir() / sweep.name
    store = Store.open(run_dir / "store.sqlite")
    log_to(run_dir / "engine.log")
    cache = open_verdict_cache()
    judge_runs: list[JudgeRun] = []
    try:
        for w in work(sweep, cells):
            config = w.cells[0][0].config
            start = lambda s=w.spec, c=config.cluster: registry.create(s, c)  # noqa: E731
            recorded = w.spec.capabilities.recorded
            judge_runs.append(run_judge(w.spec, registry.planner(w.spec), start,
                                        w.requests(), store, truncation=config.truncation,  # type: ignore[arg-type]
                                        reasks=config.reasks, progress=progress, cache=None if recorded else cache))
        metrics = evaluate(sweep, protocol, cells, store)
    finally:
        store.close()
        if cache is not None:
            cache.close()
    ranking = rank(sweep, protocol, cells, metrics)
    model_calls_saved = sum(j.plan.summary()["requests"] - j.plan.summary()["distinct_requests"] for j in judge_runs)
    settings = len(sweep.post_settings())
    manifest = {
        "kind": "sweep", "git_commit": git_commit(), "machine": machine(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "seconds": round(time.time() - t0, 2),
        "source": sweep.source, "config": config_dict(sweep.base), "axes": sweep.axes, "post": sweep.post,
        "rank_by": sweep.rank_by, "cells": [{"id": c.id, **{k: v for k, v in c.values.items()}} for c in sweep.cells],
        "judges": [{"judge": j.judge, "plan": j.plan.summary(), "generated": j.generated, "seconds": round(j.seconds, 2),
                    "unanswered": j.unanswered, "from_cache": j.from_cache,
                    **{k: v for k, v in j.backend.items() if k != "throughput"}} for j in judge_runs],
        "unanswered": sum(j.unanswered for j in judge_runs),
        "sharing": {"requests": sum(j.plan.summary()["requests"] for j in judge_runs),
                    "distinct_requests": sum(j.plan.summary()["distinct_requests"] for j in judge_runs),
                    "model_calls_saved_across_cells": model_calls_saved,
                    "post_settings_per_cell": settings,
                    "model_calls_saved_by_post_settings": (settings - 1) * sum(j.plan.summary()["distinct_requests"]
                                                                               for j in judge_runs)},
        "generated_now": sum(j.generated for j in judge_runs),
    }
    write_sweep(run_dir, metrics, ranking, manifest)
    return SweepOutcome(run_dir, metrics, ranking, manifest)


def _context(prep: PreparedRun, cell: Cell, setting: dict[str, Any], spec: JudgeSpec) -> Context:
    return Context(cell.config, _options(prep.protocol, cell, setting), prep.card, replay=prep.context(spec).replay)


def evaluate(sweep: Sweep, protocol, cells: list[tuple[Cell, PreparedRun]], store: Store) -> pl.DataFrame:
    """Every cell x post setting x judge, aggregated from stored verdicts: one row per metric and group."""
    rows: list[dict[str, Any]] = []
    for cell, prep in cells:
        for spec in prep.specs:
            verdicts = verdict_frame(store, cell_run_id(sweep, cell, spec.name), spec.name)
            for setting in sweep.post_settings():
                tables = protocol.aggregate(verdicts, _context(prep, cell, setting, spec))
                head = {"cell": cell.id, **{k: str(v) for k, v in cell.values.items()},
                        **{k: v for k, v in setting.items()}, "judge": spec.name}
                rows += tidy(tables, protocol.metric_tables, head)
    return pl.DataFrame(rows, infer_schema_length=None)


def tidy(tables: dict[str, pl.DataFrame], metric_tables: dict[str, tuple[str, ...]],
         head: dict[str, Any]) -> list[dict[str, Any]]:
    """A protocol's metric tables -> rows of (head..., table, metric, group, value, n)."""
    rows = []
    for name, group_cols in metric_tables.items():
        df = tables.get(name)
        if df is None or not df.height:
            continue
        floats = [c for c, t in df.schema.items() if t.is_float() and c not in group_cols]
        n_col = next((c for c in ("n", "stories", "pairs_both_orders", "groups") if c in df.columns), None)
        for rec in df.iter_rows(named=True):
            group = ",".join(f"{c}={rec[c]}" for c in group_cols) or "all"
            for metric in floats:
                value = rec[metric]
                rows.append({**head, "table": name, "metric": metric, "group": group,
                             "value": float(value) if value is not None else math.nan,
                             "n": int(rec[n_col]) if n_col and rec[n_col] is not None else None,
                             "higher_is_better": higher_is_better(metric)})
    return rows


def rank(sweep: Sweep, protocol, cells: list[tuple[Cell, PreparedRun]], metrics: pl.DataFrame) -> pl.DataFrame:
    """Cells x settings ordered by the rank metric (first group, e.g. view=all), best first (by the
    metric's direction: ascending for an error such as ECE), with a
    cluster-bootstrap 95% CI for the top rows and for each cell's best row, so that close cells are
    not over-read. (A cell's best post setting is chosen on the same data: an optimistic pick.)"""
    if not metrics.height:
        return pl.DataFrame()
    table, _, metric = sweep.rank_by.partition(".")
    chosen = metrics.filter((pl.col("table") == table) & (pl.col("metric") == metric))
    if not chosen.height:
        # The metric is a valid one (checked when the sweep loaded), but these data give it no
        # value (no human labels, say): the cells' tables are kept, the ranking is empty.
        print(f"litjudge: warning: no cell has a value of {sweep.rank_by} (data without human labels?): the sweep's "
              "metrics are written, its ranking is empty", file=terminal())
        return pl.DataFrame()
    first_group = chosen["group"][0]
    chosen = chosen.filter(pl.col("group") == first_group)
    for axis in list(sweep.post):                   # a post axis the metric ignores only repeats rows
        others = ["cell", "judge"] + [a for a in sweep.post if a != axis and a in chosen.columns]
        if chosen.group_by(others).agg(pl.col("value").n_unique().alias("k"))["k"].max() <= 1:
            chosen = chosen.filter(pl.col(axis) == sweep.post[axis][0]).drop(axis)
    ranked = best_first(chosen, metric)
    lows, highs = [], []
    seen_cells: set[tuple[str, str]] = set()
    store = Store.open(runs_output_dir() / sweep.name / "store.sqlite")
    prepared = {cell.id: (cell, prep) for cell, prep in cells}
    try:
        for i, row in enumerate(ranked.iter_rows(named=True)):
            lo = hi = math.nan
            best_of_cell = (row["cell"], row["judge"]) not in seen_cells
            seen_cells.add((row["cell"], row["judge"]))
            if i < CI_ROWS or best_of_cell:
                cell, prep = prepared[row["cell"]]
                spec = next(s for s in prep.specs if s.name == row["judge"])
                setting = {k: row.get(k, sweep.post[k][0]) for k in sweep.post}
                tables = protocol.aggregate(verdict_frame(store, cell_run_id(sweep, cell, spec.name), spec.name),
                                            _context(prep, cell, setting, spec))
                units = protocol.rank_units(tables, sweep.rank_by)
                if units is not None:
                    fn, df = units
                    lo, hi = cluster_bootstrap(df["cluster"].to_list(), df["truth"].to_list(), df["pred"].to_list(),
                                               fn, resamples=sweep.bootstrap)
            lows.append(lo)
            highs.append(hi)
    finally:
        store.close()
    return ranked.with_columns(pl.Series("ci_low", lows, dtype=pl.Float64), pl.Series("ci_high", highs, dtype=pl.Float64))


def best_first(rows: pl.DataFrame, metric: str) -> pl.DataFrame:
    """Rows of one metric ranked best first by its direction (an error such as ECE ascending);
    undefined values (NaN) are left out."""
    return (rows.filter(pl.col("value").is_not_nan())
            .sort("value", descending=higher_is_better(metric) is not False).with_row_index("rank", offset=1))


def write_sweep(run_dir: Path, metrics: pl.DataFrame, ranking: pl.DataFrame, manifest: dict) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    write_file(run_dir / "sweep_metrics.parquet", lambda tmp: metrics.write_parquet(tmp))
    write_file(run_dir / "sweep_ranking.parquet", lambda tmp: ranking.write_parquet(tmp))
    write_file(run_dir / "sweep_ranking.csv", lambda tmp: ranking.write_csv(tmp))
    write_text(run_dir / "manifest.json", json.dumps(manifest, indent=2, default=str))
