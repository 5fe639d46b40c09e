"""Run a sweep: plan it, run each judge once over all its cells, evaluate every cell and post setting.

1. Build every cell's requests. Per judge, all cells go into ONE plan: a request two cells share
   has one content key and is generated once (and a key already stored is not generated again, so
   an interrupted sweep resumes where it stopped).
2. Judges run one after another, one engine each; it is shut down, its memory released, before the
   next loads (resident memory after each shutdown is recorded in the manifest).
3. Every cell x post setting is aggregated from the store (no model call) into one tidy table, one
   row per (cell, setting, judge, metric, group), and the cells are ranked by the protocol's pooled
   estimate of the chosen metric, each with its cluster-bootstrap CI and a paired test against the
   best (`sweep_rank`)."""
from __future__ import annotations

import dataclasses
import math
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from litjudge.judges import PROTOCOLS
from litjudge.judges.base import Context, group_columns
from litjudge.judges.metrics.bootstrap import MIN_CLUSTERS
from litjudge.judges.ppi_tables import ppi_choice

from .. import backends as registry
from ..core.backend import JudgeSpec
from ..core.cache import claim_role, leave_aside, open_verdict_cache
from ..core.console import log_to
from ..core.errors import LitjudgeError
from ..core.manifest import config_dict, git_commit, litjudge_version, machine
from ..core.planner import StreamPlanner, common_prefix, fewer_collections
from ..core.requests import JudgeRequest
from ..core.run_lock import RunLock
from ..core.runner import JudgeRun, run_judge
from ..core.session import Session
from ..core.store import Store
from ..core.verdicts import answered_and_unread, verdict_frame
from .calibrate import SAMPLE
from .constant_judge import constant_judge_warnings
from .manifest import KEY_ENV_NOTE, RunManifest
from .outputs import rebuild_store, remove_stale_temporaries, write_sweep
from .results_file import sweep_results, tidy, write_results
from .run import PreparedRun, prepare
from .run_folder import DataRead, cells_data, claim, refuse_foreign, sweep_claim, sweep_config
from .summary import append_history, append_stopped
from .sweep import Cell, Sweep
from .sweep_rank import MULTIPLE_COMPARISONS, Ranked, ranking


@dataclass
class JudgeWork:
    """One judge's share of a sweep: its cells, whose requests are built as the plan streams."""

    spec: JudgeSpec
    cells: list[tuple[Cell, str, PreparedRun]]
    skipped: list = field(default_factory=list)     # the items the protocols could not judge, and why
    units: int = 0                                  # the most units a cell judged (what a limit counts)

    @property
    def judge(self) -> str:
        return self.spec.name

    def requests(self) -> Iterator[tuple[str, JudgeRequest]]:
        """(run id, request) of every cell, cell after cell: a request two cells share is one key."""
        for _, run, prep in self.cells:
            built = prep.protocol.build(prep.context(self.spec))
            yield from ((run, r) for r in built.requests)
            self.skipped += built.skipped
            self.units = max(self.units, built.units)


@dataclass
class SweepOutcome:
    run_dir: Path
    metrics: pl.DataFrame
    ranking: pl.DataFrame
    manifest: RunManifest


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


def plan_summary(sweep: Sweep, session: Session | None = None) -> list[dict[str, Any]]:
    """Per judge, without loading any engine: requests, distinct requests, prompt tokens, distinct
    prefill tokens after prefix sharing, what was left out as too long, how many distinct requests
    are already stored (in the run's folder or the shared verdict cache) and what is left to
    generate and prefill, and a sample of distinct requests left to generate (for a calibration).
    Streams: the plan is never held whole. `session`: where the run folder and the verdict cache are."""
    rows, session = [], session or Session.current()
    cache = open_verdict_cache(session.verdict_cache, readonly=True)
    stores = [s for s in (_existing(session.run_dir(sweep.name) / "store.sqlite"), cache) if s is not None]
    try:
        for w in work(sweep, prepared_cells(sweep)):
            config = w.cells[0][0].config
            planner = registry.planner(w.spec)
            stream = StreamPlanner(planner, config.truncation)
            sample: list = []
            stored = left_prefill = 0
            prev: Sequence[int] = ()
            recorded = w.spec.capabilities.recorded
            for part in stream.chunks(w.requests()):
                keys = [p.key for p in part.unique]
                done: set[str] = set()
                for s in [x for x in (stores if not recorded else stores[:1]) if not x.left_aside]:
                    try:
                        done |= s.finished_keys(k for k in keys if k not in done)
                    except LitjudgeError as exc:          # the cache damaged past its first pages: set aside
                        if s is not cache:
                            raise                  # the run's own store: its remedy is the error's
                        leave_aside(s, exc)
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
                         "stats": st, "sample": sample, "planner": planner, "config": config, "spec": w.spec,
                         "skipped": w.skipped})
    finally:
        for s in stores:
            s.close()
    return rows


def _existing(path: Path | None) -> Store | None:
    """A store to read, only where one already is (planning never creates a run folder)."""
    if path is None or not path.exists():
        return None
    return claim_role(Store.open(path, create=False, readonly=True), "run", mark=False)


def run_sweep(sweep: Sweep, session: Session | None = None, *, overwrite: bool = False,
              switch: str = "--overwrite", rebuild: bool = False) -> SweepOutcome:
    """The sweep in `session` (its folder under the session's runs folder; refused, unless
    `overwrite`, where that folder holds another run: engine.app.run_folder). `rebuild`
    (--rebuild-store): the sweep folder's store moved aside first, under its lock."""
    t0 = time.time()
    session = session or Session.current()
    protocol = PROTOCOLS.get(sweep.base.protocol)()
    cells = prepared_cells(sweep)
    run_dir = session.run_dir(sweep.name)
    refuse_foreign(run_dir, switch)                # a folder of the user's: before the lock writes into it
    created = not run_dir.exists()
    lock = RunLock(run_dir)                        # one run per folder at a time
    try:
        reads = cells_data(sweep.base, [prep for _, prep in cells])
        claim(run_dir, sweep_claim(run_dir, config_dict(sweep.base), reads, axes=sweep.axes, cells=cell_table(sweep)),
              overwrite=overwrite, switch=switch)
        remove_stale_temporaries(run_dir)
        if rebuild:
            rebuild_store(run_dir)
        with fewer_collections():
            return _run_sweep(sweep, protocol, cells, run_dir, t0, session, reads)
    except LitjudgeError:
        if created and not _stored_any(run_dir):   # refused while planning: no folder left that looks interrupted
            lock.release()
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
    finally:
        lock.release()


def _stored_any(run_dir: Path) -> bool:
    path = run_dir / "store.sqlite"
    if not path.exists():
        return False
    store = Store.open(path, create=False, readonly=True)
    try:
        return store.has_results()
    finally:
        store.close()


def _run_sweep(sweep: Sweep, protocol, cells: list[tuple[Cell, PreparedRun]], run_dir: Path, t0: float,
               session: Session, reads: list[DataRead]) -> SweepOutcome:
    progress = session.progress
    store = claim_role(Store.open(run_dir / "store.sqlite"), "run")      # never a verdict cache
    store.meta(KEY_ENV_NOTE, sweep.base.api.key_env)                     # for `status --cancel-batches` after a kill
    log_to(run_dir / "engine.log")
    cache: Store | None = None
    judge_runs: list[JudgeRun] = []
    works = work(sweep, cells)
    try:
        cache = open_verdict_cache(session.verdict_cache)
        for w in works:
            config = w.cells[0][0].config
            start = lambda s=w.spec, c=config.cluster: registry.create(s, c)  # noqa: E731
            recorded = w.spec.capabilities.recorded
            judge_runs.append(run_judge(w.spec, registry.planner(w.spec), start,
                                        w.requests(), store, spend=session.spend,
                                        truncation=config.truncation,
                                        reasks=config.reasks, progress=progress, cache=None if recorded else cache,
                                        apart=True, on_stop=judge_runs.append))
            if not judge_runs[-1].plan.requests:          # no cell asked it anything: said as a run says it
                raise judge_runs[-1].plan.nothing_to_judge(w.skipped, sweep.source)
        metrics, ranked, warnings, labelled = evaluate(sweep, protocol, cells, store)
    except (LitjudgeError, KeyboardInterrupt) as e:
        # stopped once a judge had begun: the invocation's line in history.jsonl keeps what it did and spent
        # (a sweep kept no history: a resumed sweep's manifest held its last invocation's API spend alone)
        if any(j.plan.requests for j in judge_runs):
            append_stopped(run_dir, time.time() - t0, judge_runs, e)
        raise
    finally:
        store.close()
        if cache is not None:
            cache.close()
    ranking, unranked = rank(sweep, ranked)
    warnings += unranked
    model_calls_saved = sum(j.plan.summary()["requests"] - j.plan.summary()["distinct_requests"] for j in judge_runs)
    settings = len(sweep.post_settings())
    manifest = {
        "kind": "sweep", "litjudge": litjudge_version(), "git_commit": git_commit(), "machine": machine(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "seconds": round(time.time() - t0, 2),
        "source": sweep.source, "config": sweep_config(config_dict(sweep.base), sweep.axes), "axes": sweep.axes,
        "data": [r.identity for r in reads], "post": sweep.post, "rank_by": sweep.rank_by,
        "multiple_comparisons": MULTIPLE_COMPARISONS, "cells": cell_table(sweep),
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
        "units": max((w.units for w in works), default=None), "warnings": warnings,
        **({"ppi": labelled} if labelled else {}),       # each cell's labelled subset ([ppi]): its tables are not kept
    }
    for read in reads:
        read.check_unchanged()                       # a data file replaced while the cells read it: one error
    write_sweep(run_dir, metrics, ranking, manifest)
    append_history(run_dir, RunManifest.of(manifest))
    table, _, metric = sweep.rank_by.partition("@")[0].partition(".")
    write_results(run_dir, sweep_results(ranking, manifest, protocol.declared.direction(table, metric)))
    return SweepOutcome(run_dir, metrics, ranking, RunManifest.of(manifest))


def cell_table(sweep: Sweep) -> list[dict[str, Any]]:
    """The cells as the manifest records them (and a folder's claim compares): id and axis values."""
    return [{"id": c.id, **c.values} for c in sweep.cells]


def _context(prep: PreparedRun, cell: Cell, setting: dict[str, Any], spec: JudgeSpec) -> Context:
    return Context(cell.config, _options(prep.protocol, cell, setting), prep.card, replay=prep.context(spec).replay,
                   annotations=prep.annotations)


def evaluate(sweep: Sweep, protocol, cells: list[tuple[Cell, PreparedRun]],
             store: Store) -> tuple[pl.DataFrame, list[Ranked], list[str], list[dict[str, Any]]]:
    """Every cell x post setting x judge, aggregated from stored verdicts: one row per metric and
    group, per (cell, setting, judge) the ranked estimate with its resampling units, what the
    protocol warned of, once per cell (pairs without labels, say: a run says it, a sweep kept it),
    and each cell's labelled subset where it has [ppi] (drawn per cell: which stories, by its seed)."""
    rows: list[dict[str, Any]] = []
    ranked: list[Ranked] = []
    warned: dict[str, None] = {}
    labelled: dict[str, dict[str, Any]] = {}
    rank = protocol.parse_rank_by(sweep.rank_by)
    for cell, prep in cells:
        for spec in prep.specs:
            verdicts = verdict_frame(store, cell_run_id(sweep, cell, spec.name), spec.name)
            if not verdicts.height:           # the cell asked nothing (its items skipped): listed, not aggregated
                warned[f"cell {cell.id}: {spec.name} has no verdict: every item of the cell was skipped"] = None
                ranked += [Ranked({**_head(cell, setting, spec.name), "group": None, "unread": None}, math.nan, None,
                                  None, missing=True, note="no verdict in this cell (every item skipped)")
                           for setting in sweep.post_settings()]
                continue
            for setting in sweep.post_settings():
                ctx = _context(prep, cell, setting, spec)
                tables = protocol.tables(verdicts, ctx)
                if "ppi_labelled" in tables and cell.id not in labelled:
                    labelled[cell.id] = {"cell": cell.id, **ppi_choice(cell.config.ppi, tables["ppi_labelled"])}
                # a constant judge's agreement is defined (kappa 0) and ranked: said as a run says it
                warned.update(dict.fromkeys(f"cell {cell.id}: {w}" for w in
                                            [*ctx.warnings, *constant_judge_warnings(verdicts, tables)]))
                head = _head(cell, setting, spec.name)
                tidied = tidy(tables, protocol.declared, head)
                rows += tidied
                group = protocol.rank_group(rank, ctx.options)
                row = next((r for r in tidied if r["table"] == rank.table and r["metric"] == rank.metric
                            and r["group"] == group), None)
                where = {"group": group, "unread": _unread(protocol, verdicts, group, rank.table)}
                if row is None:              # listed unranked, not left out (a sweep of fewer cells, silently)
                    ranked.append(Ranked({**head, **where}, math.nan, None, None, missing=True))
                else:
                    ranked.append(Ranked({**head, **where}, row["value"], row["n"],
                                         protocol.rank_units(tables, spec.name, rank, ctx.options),
                                         note=_table_note(tables.get(rank.table), f"judge={spec.name},{group}")
                                         if math.isnan(row["value"]) else None))
    return pl.DataFrame(rows, infer_schema_length=None), ranked, list(warned), list(labelled.values())


def _head(cell: Cell, setting: dict[str, Any], judge: str) -> dict[str, Any]:
    """Where a ranking row stands: its cell, the cell's axis values, the post setting and the judge."""
    return {"cell": cell.id, **{k: str(v) for k, v in cell.values.items()}, **setting, "judge": judge}


def _table_note(table: pl.DataFrame | None, group: str) -> str | None:
    """Why a table's row of the group (`col=value,...`) has no value: its `note` where the table
    keeps one (TTCW's says why kappa is undefined; its ci_note is about the interval), else its
    ci_note."""
    if table is None or "ci_note" not in table.columns:
        return None
    for column, value in group_columns(group).items():
        if column in table.columns:
            table = table.filter(pl.col(column).cast(pl.Utf8) == value)
    for name in ("note", "ci_note"):
        notes = table[name].drop_nulls() if name in table.columns else pl.Series([], dtype=pl.Utf8)
        if len(notes) == 1:
            return notes[0]
    return None


def _unread(protocol, verdicts: pl.DataFrame, group: str, table: str) -> float | None:
    """The share of the answers behind a cell's ranked value that could not be read as a verdict:
    its value is over the rest (a judge answering "Tie" where ties are off ranked level with one
    that answered all). The protocol picks the ranked group's answers (`Protocol.group_rows`)."""
    if "status" not in verdicts.columns:
        return None
    answered, unread = answered_and_unread(protocol.group_rows(verdicts, group, table))
    return unread.height / answered.height if answered.height else None


def rank(sweep: Sweep, ranked: list[Ranked]) -> tuple[pl.DataFrame, list[str]]:
    """Cells x settings x judges by the protocol's pooled estimate of `rank_by`, best first, each
    with its interval and whether a paired test can tell it from the best (`sweep_rank`), and what
    the ranking warns of (cells it could not rank: kept in the manifest and results.json). A post
    axis the estimate ignores only repeats rows: its first value is kept, and a warning says so (the
    ranking's column for it was gone without a word). (A cell's best post setting is chosen on the
    same data: an optimistic pick, which same_as_best tempers.)"""
    said = []
    for axis in list(sweep.post):
        values: dict[tuple, set] = {}
        for r in ranked:
            key = tuple((k, str(v)) for k, v in r.head.items() if k != axis)
            values.setdefault(key, set()).add(r.value if not math.isnan(r.value) else "nan")
        if all(len(v) <= 1 for v in values.values()):
            ranked = [dataclasses.replace(r, head={k: v for k, v in r.head.items() if k != axis})   # its note too
                      for r in ranked if r.head.get(axis) == sweep.post[axis][0]]
            if len(sweep.post[axis]) > 1:
                said.append(f"{axis} gives {sweep.rank_by} the same value in every cell for its "
                            f"{len(sweep.post[axis])} values: the ranking lists each cell once for it, at "
                            f"{sweep.post[axis][0]!r} (every setting's tables: sweep_metrics.parquet)")
    table_name, _, metric = sweep.rank_by.partition("@")[0].partition(".")
    up = PROTOCOLS.get(sweep.base.protocol).declared.direction(table_name, metric) is not False
    table = ranking(ranked, up, resamples=sweep.bootstrap)
    unranked = table["rank"].null_count()
    ranked_rows = table.filter(pl.col("rank").is_not_null())
    few = ranked_rows["ci_low"].null_count() if ranked_rows["ci_low"].null_count() < ranked_rows.height else 0
    if few:                                      # `ranking` puts them after the rows with an interval
        said.append(f"{few} of {table.height - unranked} ranked rows have no interval (fewer than {MIN_CLUSTERS} "
                    "clusters, or an answer in too few of them): not compared with the best, and ranked after the rows "
                    "that have one, whatever their value")
    if all(r.missing for r in ranked):
        # The metric is a valid one (checked when the sweep loaded), but these data give it no
        # value (no human labels, say): the cells' tables are kept, and each is listed unranked.
        return table, [f"no cell has a value of {sweep.rank_by} (data without human labels?): the sweep's metrics are "
                       "written, and its ranking lists every cell unranked"]
    if unranked and unranked == table.height:
        return table, [f"{sweep.rank_by} is undefined in every cell: the sweep's metrics are written, and its ranking "
                       "lists every cell unranked, its ci_note saying why"]
    if unranked:
        return table, [*said, f"{sweep.rank_by} is undefined in {unranked} of {table.height} rows of the ranking: they "
                       "are listed last, unranked, their ci_note saying why"]
    return table, said
