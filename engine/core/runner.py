"""The runner: one judge's plan -> store lookup -> backend -> store.

It owns everything shared by backends: skipping finished keys, streaming commits, bounded re-asks
of answers the exact parser rejects, progress. The engine starts only when something is left to
generate, and is shut down (memory released) before the next judge loads.
"""
from __future__ import annotations

import dataclasses
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from grammars import Unparsed
from grammars.language import VerdictLanguage

from .backend import Backend, JudgeSpec, Planner
from .distribution import argmax_label
from .planner import Plan, Truncation, make_plan
from .progress import RunProgress
from .requests import Generation, JudgeRequest
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


def to_row(g: Generation, language: VerdictLanguage, mode: str, judge: str, backend: str) -> ResultRow:
    """Parse one generation into a store row. Failures are values: status 'unparsed' + reason."""
    common: dict[str, Any] = dict(key=g.key, judge=judge, backend=backend, mode=mode, language=language.spec(), raw=g.raw,
                  analysis=g.analysis, distribution=g.distribution, label_mass=g.label_mass,
                  prompt_tokens=g.prompt_tokens, cached_tokens=g.cached_tokens, output_tokens=g.output_tokens,
                  created=time.time())
    if g.error:
        return ResultRow(status="unparsed", label=None, value=None, reason=g.error, **common)
    if g.distribution is not None:
        label = argmax_label(g.distribution)
        return ResultRow(status="ok", label=label, value=dict(language.pairs)[label], reason=None, **common)  # type: ignore[attr-defined]
    parsed = language.parse(g.raw)
    if isinstance(parsed, Unparsed):
        reason = parsed.reason + (" (output cut at max_tokens)" if g.finish_reason == "length" else "")
        return ResultRow(status="unparsed", label=None, value=None, reason=reason, **common)
    return ResultRow(status="ok", label=parsed.label, value=parsed.value, reason=None, **common)


class Writer:
    """Buffers finished rows and commits every few rows or seconds (WAL, one transaction each).

    Fault injection for the crash tests: with LITJUDGE_FAULT_KILL_AFTER=N in the environment the
    process SIGKILLs itself right after the commit that brings the rows it stored (all judges, all
    cells) to N or more, so a test can kill a real run mid-flight at a known point instead of racing it."""

    committed = 0          # per process

    def __init__(self, store: Store):
        self.store, self.last = store, time.monotonic()
        self.buf: list[ResultRow] = []
        self.kill_after = int(os.environ.get("LITJUDGE_FAULT_KILL_AFTER", "0") or 0)

    def add(self, row: ResultRow) -> None:
        self.buf.append(row)
        if len(self.buf) >= COMMIT_EVERY or time.monotonic() - self.last > COMMIT_SECONDS:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            self.store.put_results(self.buf)
            Writer.committed += len(self.buf)
            self.buf = []
            if self.kill_after and Writer.committed >= self.kill_after:
                os.kill(os.getpid(), signal.SIGKILL)
        self.last = time.monotonic()


class LazyBackend:
    """The judge's backend, created on first use: a run whose keys are all stored starts no engine."""

    def __init__(self, start: Callable[[], Backend], live: Backend | None = None):
        self.start, self.live = start, live
        self.owned: Backend | None = None

    def get(self, planned_as) -> Backend:
        if self.live is None:
            self.live = self.owned = self.start()
        if self.live.identity() != planned_as:
            raise RuntimeError(f"planner and engine disagree on the judge identity: {planned_as} vs {self.live.identity()}")
        return self.live

    def close(self) -> None:
        if self.owned is not None:
            self.owned.close()
            self.owned = None


def run_judge(spec: JudgeSpec, planner: Planner, start: Callable[[], Backend], runs: dict[str, list[JudgeRequest]],
              store: Store, *, truncation: Truncation = "error", reasks: int = 0, progress: bool = True,
              on_result: Callable[[ResultRow], None] | None = None, live: Backend | None = None) -> JudgeRun:
    """Plan one judge's requests (`runs`: run id -> requests; a sweep passes one run per cell, and
    a request shared by cells is one key, generated once), generate the keys not yet stored, store
    them as they finish. `live` is an already started backend to reuse (not closed here);
    otherwise `start()` is called only if something is left to generate."""
    t0 = time.time()
    plan_with = live or planner
    run_of = {id(r): run_id for run_id, reqs in runs.items() for r in reqs}
    plan = make_plan([r for reqs in runs.values() for r in reqs], plan_with, truncation)
    plan.runs = [run_of[id(e.request)] for e in plan.entries]
    put_plans(store, plan)
    identity = plan_with.identity()
    done = store.finished_keys(p.key for p in plan.unique)
    todo = [p for p in plan.unique if p.key not in done]
    by_key = {p.key: p for p in plan.unique}
    lazy = LazyBackend(start, live)
    writer = Writer(store)
    bar = RunProgress(len(todo), spec.name, enabled=progress)
    generated = reasked = 0
    try:
        if todo:
            backend = lazy.get(identity)
            for g in backend.generate(todo):
                p = by_key[g.key]
                row = to_row(g, p.request.language, p.request.mode, spec.name, backend.name)
                writer.add(row)
                bar.update(g, getattr(backend, "progress_note", str)())
                generated += 1
                if on_result:
                    on_result(row)
            writer.flush()
        reasked = reask(spec, plan_with, lambda: lazy.get(identity), plan, store, writer, reasks)
        described = (lazy.live or plan_with).describe()
    finally:
        writer.flush()
        bar.close()
        lazy.close()
    return JudgeRun(spec.name, plan, generated, reasked, time.time() - t0,
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


def put_plans(store: Store, plan: Plan) -> None:
    for run_id in dict.fromkeys(plan.runs):
        store.put_plan(run_id, [(e.key, e.request.meta.item_id, e.request.meta.as_dict())
                                for e, r in zip(plan.entries, plan.runs) if r == run_id])


def reask(spec: JudgeSpec, plan_with: Planner, engine: Callable[[], Backend], plan: Plan, store: Store,
          writer: Writer, limit: int) -> int:
    """Listwise answers the parser rejects (a backend without slot-by-slot decoding can repeat or
    drop ids) are re-asked with a new attempt index (a new seed), at most `limit` times; plan
    entries move to the new key. Slot-by-slot decoding never needs this."""
    total = 0
    for attempt in range(1, limit + 1):
        failed = {r.key for r in store.results([e.key for e in plan.entries]) if r.status == "unparsed"}
        retry = [e for e in plan.entries if e.key in failed and e.request.language.kind == "listwise"]
        if not retry:
            break
        new = [dataclasses.replace(e.request, attempt=attempt) for e in retry]
        sub = make_plan(new, plan_with, "skip")
        done = store.finished_keys(p.key for p in sub.unique)
        todo = {p.key: p for p in sub.unique if p.key not in done}
        if todo:
            backend = engine()
            for g in backend.generate(list(todo.values())):
                p = todo[g.key]
                writer.add(to_row(g, p.request.language, p.request.mode, spec.name, backend.name))
        writer.flush()
        total += len(todo)
        moved = {id(e): n for e, n in zip(retry, sub.entries)}
        plan.entries = [moved.get(id(e), e) for e in plan.entries]       # same positions, so plan.runs holds
        put_plans(store, plan)
    return total
