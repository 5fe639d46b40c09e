"""The runner: one judge's plan -> store lookup -> backend -> store.

It owns everything shared by backends: skipping finished keys, streaming commits, bounded re-asks
of answers the exact parser rejects, progress. The engine starts only when something is left to
generate, and is shut down (memory released) before the next judge loads."""
from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import Any

from litjudge.grammars import Unparsed
from litjudge.grammars.language import VerdictLanguage

from . import plan_process
from .backend import Backend, JudgeSpec, Planner
from .cache import leave_aside
from .distribution import argmax_label
from .errors import ContractError, LitjudgeError
from .hooks import hooks
from .planner import CHUNK, PlanChunk, PlanEntry, PlanStats, StreamPlanner, Truncation, make_plan, planned_ahead
from .progress import RunProgress
from .requests import Generation, JudgeRequest
from .session import Spend
from .store import ResultRow, Store

# A transaction every 8 results (slow engines) or 1 s (fast ones), at most 32,768 results or 2 s
# apart: a crash loses at most the last 8 results or second of them. Each transaction rewrites every
# page of the key index it touches, and random keys touch one page each: at a million results, 4,096
# per transaction (every 0.25 s) wrote the index over and over (parse_and_store 11.1 s of 400k rows
# from a replayed judge; 7.6 s this way).
COMMIT_EVERY, COMMIT_MIN_SECONDS, COMMIT_MAX_ROWS, COMMIT_SECONDS = 8, 1.0, 32_768, 2.0


@dataclass
class JudgeRun:
    judge: str
    plan: PlanStats
    generated: int
    reasked: int
    seconds: float
    backend: dict[str, Any]
    prompts: dict[str, str] | None = None       # key -> prompt for the log (None: too many to keep)
    # Requests sent without an answer to store (the server unreachable after retries, a budget
    # cap): not verdicts, so not stored; a re-run asks again.
    unanswered: int = 0
    from_cache: int = 0                         # verdicts copied from the shared verdict cache, not generated


@functools.lru_cache(maxsize=1024)
def spec_of(language: VerdictLanguage) -> dict[str, Any]:
    """A language's spec, built once per language (stored with every result; never mutated)."""
    return language.spec()


def parse_result(raw: str, distribution: dict[str, float] | None, language: VerdictLanguage, failure: str | None,
                 cut: bool) -> tuple[str, str | None, Any, str | None]:
    """THE parse of a generation into (status, label, value, reason), for the runner as results
    arrive and for `reparse` over stored rows alike. A backend failure is never parsed (its reason
    is the failure); a label distribution gives its most likely label; otherwise the exact parser,
    whose failures are values: status 'unparsed' with the reason (and whether the output was cut)."""
    if failure is not None:
        return "unparsed", None, None, failure
    if distribution is not None:
        label = argmax_label(distribution)
        return "ok", label, dict(language.pairs)[label], None  # type: ignore[attr-defined]
    parsed = language.parse(raw)
    if isinstance(parsed, Unparsed):
        return "unparsed", None, None, parsed.reason + (" (output cut at max_tokens)" if cut else "")
    return "ok", parsed.label, parsed.value, None


def to_row(g: Generation, language: VerdictLanguage, mode: str, judge: str, backend: str) -> ResultRow:
    """One generation as a store row, parsed by `parse_result`."""
    cut = g.finish_reason == "length"
    status, label, value, reason = parse_result(g.raw, g.distribution, language, g.error, cut)
    return ResultRow(key=g.key, judge=judge, backend=backend, mode=mode, language=spec_of(language), status=status,
                     label=label, value=value, reason=reason, raw=g.raw, analysis=g.analysis,
                     distribution=g.distribution, label_mass=g.label_mass, prompt_tokens=g.prompt_tokens,
                     cached_tokens=g.cached_tokens, output_tokens=g.output_tokens, created=time.time(),
                     failure=g.error, cut=cut, analysis_distribution=g.analysis_distribution)


def reparsed(row: ResultRow, language: VerdictLanguage) -> ResultRow:
    """A stored row (a shared-cache hit) through `parse_result` under the current run's verdict
    language: a verdict is what this run's parser makes of the raw output, never a copied label."""
    status, label, value, reason = parse_result(row.raw, row.distribution, language, row.failure, row.cut)
    return dataclasses.replace(row, status=status, label=label, value=value, reason=reason, language=spec_of(language))


class Writer:
    """Buffers finished rows and commits every few rows or seconds (WAL, one transaction each).
    Tells the patch points (engine.core.hooks) how many rows of this process are committed, and
    asks them whether a row must be committed on its own (the crash tests kill a real run there)."""

    committed = 0          # per process

    def __init__(self, store: Store, cache: Store | None = None):
        self.store, self.last = store, time.monotonic()
        self.cache = None if cache is None or cache.left_aside else cache
        self.buf: list[ResultRow] = []

    def add(self, row: ResultRow) -> None:
        self.buf.append(row)
        waited = time.monotonic() - self.last
        if (len(self.buf) >= COMMIT_EVERY and waited >= COMMIT_MIN_SECONDS) or len(self.buf) >= COMMIT_MAX_ROWS \
                or waited > COMMIT_SECONDS or hooks().commit_now(Writer.committed + len(self.buf)):
            self.flush()

    def flush(self) -> None:
        if self.buf:
            self.store.put_results(self.buf)
            if self.cache is not None:
                self._share(self.buf)
            Writer.committed += len(self.buf)
            self.buf = []
            hooks().rows_committed(Writer.committed)
        self.last = time.monotonic()


    def _share(self, rows: list[ResultRow]) -> None:
        """Into the shared verdict cache too; a cache that cannot be written (locked past the wait,
        read-only, full) is left aside with one warning: the run's own store has every verdict."""
        try:
            self.cache.put_results(rows)  # type: ignore[union-attr]
        except LitjudgeError as exc:
            self.leave_cache_aside(exc)

    def leave_cache_aside(self, exc: LitjudgeError) -> None:
        """The shared cache failed (to write, or to read: damaged past its first pages): one warning,
        and this run and every later judge of the invocation go on without it."""
        if self.cache is not None:
            leave_aside(self.cache, exc)
        self.cache = None


class LazyBackend:
    """The judge's backend, created on first use: a run whose keys are all stored starts no engine."""

    def __init__(self, start: Callable[[], Backend], live: Backend | None = None):
        self.start, self.live = start, live
        self.owned: Backend | None = None
        self.starts = 0                          # engines started for this judge (the manifest says how many)

    def get(self, planned_as) -> Backend:
        if self.live is None:
            self.live = self.owned = self.start()
            self.starts += 1
        if self.live.identity() != planned_as:
            raise RuntimeError(f"planner and engine disagree on the judge identity: {planned_as} vs {self.live.identity()}")
        return self.live

    def close(self) -> None:
        if self.owned is not None:
            self.owned.close()
            self.owned = None


LOG_PROMPTS_MAX = 50_000  # distinct prompts kept in memory for log.jsonl; beyond that the log omits them


def run_judge(spec: JudgeSpec, planner: Planner, start: Callable[[], Backend],
              requests: Iterable[tuple[str, JudgeRequest]], store: Store, *, spend: Spend,
              truncation: Truncation = "error", reasks: int = 0, progress: bool = True,
              on_result: Callable[[ResultRow], None] | None = None,
              live: Backend | None = None, chunk: int = CHUNK, engine: LazyBackend | None = None,
              cache: Store | None = None, apart: bool = False,
              on_stop: Callable[[JudgeRun], None] | None = None) -> JudgeRun:
    """Plan one judge's requests (`requests`: (run id, request) pairs, e.g. one run per sweep cell;
    a request shared by runs is one key, generated once) chunk by chunk, generate the keys not yet
    stored, store them as they finish. `live` is an already started backend to reuse (not closed
    here); otherwise `start()` is called only when something is left to generate. `engine` is a
    lazily started engine the caller keeps across several calls (the turns of a conversation) and
    closes itself. `cache`: the shared verdict cache (engine.core.cache), read before generating and
    written with every stored verdict. `apart`: `requests` reads nothing but files (a protocol's build), so the plan may
    be made in a process of its own (engine.core.plan_process). `on_stop`: given the judge's figures so far when it is
    interrupted (Ctrl-C, SIGTERM) or fails, for the history. `spend`: the invocation's API spend (`Session.spend`),
    attached to the engine with the store before it generates anything, so the budget caps hold for every judge of it."""
    t0 = time.time()
    lazy = engine or LazyBackend(start, live)
    plan_with = lazy.live or planner
    stream = StreamPlanner(plan_with, truncation, chunk)
    writer = Writer(store, cache)
    bar = RunProgress(0, spec.name, enabled=progress)
    tally = _Tally()

    def attached() -> Backend:
        backend = lazy.get(stream.identity)
        backend.attach(store, spend)            # the run's store and the invocation's spend, before generating
        return backend
    # Planned ahead when the planner is not the live engine itself (an engine's own tokenizer must not be used
    # from two threads at once): in a process of its own where the stream allows it (no shared GIL), else a thread.
    chunks: Generator[PlanChunk, None, None]
    if lazy.live is not None:
        ahead, chunks = "no", stream.chunks(requests)
    elif apart and plan_process.available():
        ahead, chunks = "process", plan_process.planned_apart(stream, requests)
    else:
        ahead, chunks = "thread", planned_ahead(stream.chunks(requests))
    try:
        parts = iter(chunks)
        while True:
            t = time.perf_counter()
            part = next(parts, None)            # planned ahead: the wait; planned here: the planning
            tally.stage["wait_for_plan"] += time.perf_counter() - t
            if part is None:
                break
            t = time.perf_counter()
            tally.record_plan(part, store)
            done = store.finished_keys(p.key for p in part.unique)
            todo = tally.copy_from_cache([p for p in part.unique if p.key not in done], store, writer)
            tally.stage["store_plan"] += time.perf_counter() - t
            if todo:
                backend = attached()            # the engine starts before the bar: its start is no part of the first ETA
                bar.grow(len(todo))
                _generate(spec, backend, todo, store, writer, bar, on_result, tally)
        reasked = reask(spec, plan_with, attached, tally.listwise, store, writer, reasks)
        described = (lazy.live or plan_with).describe()
    except (KeyboardInterrupt, LitjudgeError) as e:
        if on_stop is not None:
            spent = (lazy.live.describe() if lazy.live else {}).get("api")       # an API judge's spend so far
            on_stop(JudgeRun(spec.name, stream.stats, tally.generated, 0, time.time() - t0, {
                "throughput": dataclasses.asdict(bar.stats), "seconds": bar.elapsed, "planned_ahead": ahead, "api": spent,
                "failed" if isinstance(e, LitjudgeError) else "interrupted": True}, None, tally.unanswered,
                tally.from_cache))
        raise
    finally:
        chunks.close()                          # stops the planner (thread, process) where the loop ended early
        writer.flush()
        bar.close()
        if engine is None:
            lazy.close()
    identity = stream.identity
    return JudgeRun(spec.name, stream.stats, tally.generated, reasked, time.time() - t0,
                    {"engine_starts": lazy.starts, **described, "fingerprint": identity.fingerprint,
                     "chat_template_hash": identity.template_hash,
                     "throughput": dataclasses.asdict(bar.stats), "seconds": bar.elapsed,
                     # wall time of this thread's stages (they add up to at most the run's time) and,
                     # apart, the planner's own stages, which overlap them when planned ahead
                     "stage_seconds": {k: round(v, 3) for k, v in tally.stage.items()},
                     "planner_seconds": {k: round(v, 3) for k, v in stream.stats.seconds.items()},
                     "planned_ahead": ahead,
                     "rss_mib_after_close": rss_mib()}, tally.prompts, tally.unanswered, tally.from_cache)


@dataclass
class _Tally:
    """What one judge's run has done so far: counts, stage times, the prompts for the log (None
    beyond LOG_PROMPTS_MAX), the listwise entries to re-ask, the runs whose old plan is cleared."""
    generated: int = 0
    unanswered: int = 0
    from_cache: int = 0
    stage: dict[str, float] = field(default_factory=lambda: dict.fromkeys(("wait_for_plan", "store_plan", "backend",
                                                                           "parse_and_store"), 0.0))
    prompts: dict[str, str] | None = field(default_factory=dict)
    listwise: list[PlanEntry] = field(default_factory=list)
    cleared: set[str] = field(default_factory=set)

    def record_plan(self, part: Any, store: Store) -> None:
        """A planned chunk into the store's plan (each run's previous plan cleared once)."""
        for run in {e.run for e in part.entries} - self.cleared:
            store.clear_plan(run)
            self.cleared.add(run)
        store.add_plan([(e.run, e.key, e.request.meta.item_id, e.request.meta.as_dict()) for e in part.entries])
        self.listwise += [e for e in part.entries if e.request.language.kind == "listwise"]
        if self.prompts is not None:
            self.prompts.update((p.key, p.prompt) for p in part.unique)
            if len(self.prompts) > LOG_PROMPTS_MAX:
                self.prompts = None

    def copy_from_cache(self, todo: list, store: Store, writer: Writer) -> list:
        """Keys another run generated: copied from the shared cache (re-parsed), not generated; the rest."""
        if not todo or writer.cache is None:
            return todo
        wanted = {p.key: p for p in todo}
        try:
            found = list(writer.cache.results(wanted))
        except LitjudgeError as exc:          # a cache damaged in its middle: it stopped every run (exit 2)
            writer.leave_cache_aside(exc)
            return todo
        hits = [reparsed(h, wanted[h.key].request.language) for h in found]
        if not hits:
            return todo
        store.put_results(hits)
        self.from_cache += len(hits)
        got = {r.key for r in hits}
        return [p for p in todo if p.key not in got]


def _generate(spec: JudgeSpec, backend: Backend, todo: list, store: Store, writer: Writer, bar: RunProgress,
              on_result: Callable[[ResultRow], None] | None, tally: _Tally) -> None:
    """One chunk's missing keys through the backend, each answer parsed and stored as it arrives; a
    retryable failure is no verdict and is left for a re-run."""
    by_key = {p.key: p for p in todo}
    outputs = iter(backend.generate(todo))
    answered = 0
    extra: list[str] = []                    # keys answered twice, or never asked: the backend breaks its contract
    try:
        while True:
            t = time.perf_counter()
            g = next(outputs, None)
            t2 = time.perf_counter()
            tally.stage["backend"] += t2 - t
            if g is None:
                break
            if not isinstance(g, Generation) or not isinstance(g.raw, str):
                raise ContractError(f"backend {backend.name!r} (judge {spec.name}) answered "
                                    f"{_what(g)}: a backend answers with a Generation whose raw is the answer's text "
                                    f"('' for none). {FIX_BACKEND}")
            if g.retryable:
                continue
            p = by_key.pop(g.key, None)
            if p is None:
                extra.append(g.key)
                continue
            answered += 1
            row = to_row(g, p.request.language, p.request.mode, spec.name, backend.name)
            writer.add(row)
            bar.update(g, backend.progress_note())
            tally.generated += 1
            if on_result:
                on_result(row)
            tally.stage["parse_and_store"] += time.perf_counter() - t2
    except BaseException:   # Ctrl-C or an error: sending stops now (not when the traceback lets the stream go:
        getattr(outputs, "close", lambda: None)()   # an API judge sent 9 more), replies received are stored
        for g in backend.salvaged():
            if not g.retryable and (p := by_key.pop(g.key, None)) is not None:
                writer.add(to_row(g, p.request.language, p.request.mode, spec.name, backend.name))
                tally.generated += 1
        raise
    tally.unanswered += len(todo) - answered
    t = time.perf_counter()
    writer.flush()
    tally.stage["parse_and_store"] += time.perf_counter() - t
    if extra:
        asked = {p.key for p in todo}
        twice = sum(key in asked for key in extra)
        what = " and ".join(part for part in (f"{twice} request(s) twice" if twice else "",
                                              f"{len(extra) - twice} request(s) it was not asked" if len(extra) > twice
                                              else "") if part)
        raise ContractError(f"backend {backend.name!r} (judge {spec.name}) answered {what} (e.g. key {extra[0][:16]}): "
                            "a backend answers each request of its batch once; the first answers are stored, the rest "
                            f"ignored. {FIX_BACKEND}")


FIX_BACKEND = "Fix the backend (`litjudge judges` names the distribution it comes from)"


def _what(g: Any) -> str:
    """A backend's wrong answer, as its refusal names it (a raw of None counted as generated and stored nothing)."""
    if isinstance(g, Generation):
        return f"key {g.key[:16]} with a raw of {type(g.raw).__name__} {g.raw!r:.40}"
    return f"{type(g).__name__} {g!r:.60}"


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


def reask(spec: JudgeSpec, plan_with: Planner, engine: Callable[[], Backend], entries: list[PlanEntry],
          store: Store, writer: Writer, limit: int) -> int:
    """Listwise answers the parser rejects (a backend without slot-by-slot decoding can repeat or
    drop ids) are re-asked with a new attempt index (a new seed), at most `limit` times; their plan
    rows move to the new key. Slot-by-slot decoding never needs this."""
    total = 0
    for attempt in range(1, limit + 1):
        failed = {r.key for r in store.results({e.key for e in entries}) if r.status == "unparsed"}
        retry = [e for e in entries if e.key in failed]
        if not retry:
            break
        new = {id(e): dataclasses.replace(e.request, attempt=attempt) for e in retry}
        sub = make_plan(list(new.values()), plan_with, "skip")
        done = store.finished_keys(p.key for p in sub.unique)
        todo = {p.key: p for p in sub.unique if p.key not in done}
        if todo:
            backend = engine()
            for g in backend.generate(list(todo.values())):
                if g.retryable:
                    continue
                p = todo[g.key]
                writer.add(to_row(g, p.request.language, p.request.mode, spec.name, backend.name))
        writer.flush()
        total += len(todo)
        key_of = {id(e.request): e.key for e in sub.entries}
        moved = {id(e): PlanEntry(key_of[id(new[id(e)])], new[id(e)], e.run) for e in retry if id(new[id(e)]) in key_of}
        store.move_plan([(e.run, e.request.meta.item_id, e.request.meta.as_dict(), moved[id(e)].key)
                         for e in retry if id(e) in moved])
        entries = [moved.get(id(e), e) for e in entries]
    return total
