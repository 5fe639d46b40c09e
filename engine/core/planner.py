"""Expand -> key -> deduplicate -> pre-flight -> order by shared prefix, in bounded memory.

- Streaming: requests arrive as an iterator and are planned in chunks (`CHUNK` requests); only a
  chunk's prompts and token ids are ever held, so a million-request run plans in bounded memory.
  Protocols emit related requests together (a story's tests, a pair's two orders), so prefix
  groups stay inside a chunk. A plan that fits one chunk is planned exactly as a whole.
- Deduplicate: requests with the same content key are generated once; every plan entry (item,
  order, repeat...) points at its key. Keys seen in earlier chunks are remembered (32-byte digests).
- Pre-flight: every prompt is tokenized with the judge's tokenizer before its chunk spends model
  time; prompts whose length plus the verdict budget exceed the context window are reported by
  item id. Nothing is truncated silently: the policy is "error" (default) or "skip" (left out and
  listed). A plan of one chunk fails before any model time; a larger one fails at the chunk that
  holds the first prompt too long (what came before stays stored).
- Order: sorting by token ids puts requests that share leading tokens next to each other, which
  is what vLLM's prefix cache needs (templates put the most-shared text first).
"""
from __future__ import annotations

import gc
import queue
import threading
import time
from collections import Counter
from collections.abc import Generator, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from litjudge.grammars.analysis import Analyzed
from litjudge.grammars.compile import max_verdict_tokens

from .backend import Planner
from .config import Truncation
from .errors import ConfigError, PreflightError
from .requests import JudgeRequest, Prepared, RequestMeta, content_key, packed

CHUNK = 20_000                          # requests planned (rendered, tokenized, sorted) at a time


@dataclass(frozen=True)
class PlanEntry:
    key: str
    request: JudgeRequest
    run: str = ""                        # the run (sweep cell, task) the entry belongs to


@dataclass
class PlanStats:
    """What a plan amounts to, counted as it streams."""

    requests: int = 0
    distinct_requests: int = 0
    prompt_tokens: int = 0
    distinct_prefill_tokens: int = 0
    too_long: list[tuple[str, int, int, str]] = field(default_factory=list)   # (item id, tokens, limit, run)
    # build_and_key, render, tokenize, prepare (fit checked, Prepared made), order (sorted, prefixes
    # counted); a planner process adds send (its chunk packed)
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(("build_and_key", "render", "tokenize",
                                                                               "prepare", "order"), 0.0))
    tokenization: dict[str, Any] = field(default_factory=dict)   # how prompts were tokenized (pieces or whole)

    def nothing_to_judge(self, skipped: Sequence[Any], where: str | None) -> ConfigError:
        """Why the plan holds no request, in one line: every prompt too long for the context window,
        every item skipped by the protocol (`skipped`: its Skips; the commonest reason, counted), or
        nothing asked at all. (A sweep of such data failed on an internal error in aggregation.)"""
        if self.too_long:
            why = f": all {len(self.too_long)} prompts are longer than the context window"
        elif skipped:
            reason, n = Counter(s.reason for s in skipped).most_common(1)[0]
            why = f": every item was skipped ({n} of {len(skipped)}: {reason})"
        else:
            why = " (check options, limit and dataset)"
        return ConfigError("the protocol produced no requests to judge" + why, where=where)

    def summary(self) -> dict[str, Any]:
        return {"requests": self.requests, "distinct_requests": self.distinct_requests,
                "prompt_tokens": self.prompt_tokens, "distinct_prefill_tokens": self.distinct_prefill_tokens,
                "too_long_skipped": len(self.too_long), "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
                **({"tokenization": self.tokenization} if self.tokenization else {})}


@dataclass
class PlanChunk:
    entries: list[PlanEntry]             # every (item, order, repeat...) of the chunk, too-long ones left out
    unique: list[Prepared]               # the keys first seen in this chunk, prefix-sorted


@dataclass
class Plan:
    """A whole plan in memory (small runs, tests, the benchmark): one chunk."""

    entries: list[PlanEntry]
    unique: list[Prepared]
    stats: PlanStats

    @property
    def too_long(self) -> list[tuple[str, int, int, str]]:
        return self.stats.too_long

    @property
    def prompt_tokens(self) -> int:
        return self.stats.prompt_tokens

    def distinct_prefill_tokens(self) -> int:
        return self.stats.distinct_prefill_tokens

    def summary(self) -> dict[str, int]:
        return self.stats.summary()


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Number of leading tokens two prompts share: the first 32 one by one (most neighbours part
    early), then by halving with slice comparisons, which run in C (a story shared by 14 prompts
    is 1,000 tokens or more: 3x faster than a Python loop). Either may be packed (array('I'), whose
    slices compare as memory); a tuple and an array never compare equal, so a mix is made tuples."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    if type(a) is not type(b):
        a, b = tuple(a), tuple(b)
    for i in range(min(n, 32)):
        if a[i] != b[i]:
            return i
    lo, hi = min(n, 32), n
    if a[lo:hi] == b[lo:hi]:
        return n
    while hi - lo > 8:                       # a[:lo] == b[:lo] and a[:hi] != b[:hi]
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    while a[lo] == b[lo]:
        lo += 1
    return lo


def budget_tokens(request: JudgeRequest) -> int:
    """Output tokens a request may need: the verdict, plus the analysis in analyze mode (in
    distribution mode, the labels read after the prompt: "10" and the end token)."""
    if request.mode == "distribution":
        return max_verdict_tokens(request.language)
    if request.sampling.max_tokens:
        return request.sampling.max_tokens
    if isinstance(request.language, Analyzed):
        return request.language.max_analysis_tokens + after_analysis(request.language)
    return max_verdict_tokens(request.language)


def after_analysis(language: Analyzed) -> int:
    """Output tokens after an analysis: its marker line (a token per byte at worst) and the verdict."""
    return len(language.tail_prefix.encode("utf-8")) + max_verdict_tokens(language)


def analysis_tokens(language: Analyzed, max_tokens: int) -> int:
    """An analysis's share of its request's `max_tokens`: what the marker line and the verdict leave,
    at most the language's max_analysis_tokens (a [sampling] max_tokens below the derived budget caps
    the analysis, as it caps an API judge's whole answer, and keeps the request in its context window)."""
    return max(1, min(language.max_analysis_tokens, max_tokens - after_analysis(language)))


class StreamPlanner:
    """Plans chunk after chunk, remembering which keys earlier chunks already planned."""

    def __init__(self, planner: Planner, truncation: Truncation = "error", chunk: int = CHUNK):
        self.planner, self.truncation, self.chunk = planner, truncation, chunk
        self.identity = planner.identity()
        self.window = planner.context_window()
        self.stats = PlanStats()
        self._seen: set[bytes] = set()
        self._skipped: set[bytes] = set()
        self.skipped_keys: list[str] = []              # keys left out as too long, in the order found
        self._prev: Sequence[int] = ()
        self._budgets: dict[tuple, int] = {}
        # a recorded judge answers by item id: per run, each id's one key (and what asked it)
        self._served: dict[tuple[str, str], tuple[str, RequestMeta]] | None = (
            {} if planner.capabilities.recorded else None)

    def chunks(self, requests: Iterable[tuple[str, JudgeRequest]]) -> Generator[PlanChunk, None, None]:
        it = iter(requests)
        while True:
            with cycles_collected_after():
                t = time.perf_counter()
                batch = list(islice(it, self.chunk))      # the protocol builds its requests here
                self.stats.seconds["build_and_key"] += time.perf_counter() - t
                part = self._plan(batch) if batch else None
            if part is None:
                return
            yield part

    def _budget(self, r: JudgeRequest) -> int:
        fp = (id(r.language), r.mode, r.sampling.max_tokens)
        if fp not in self._budgets:
            self._budgets[fp] = budget_tokens(r)
        return self._budgets[fp]

    def _one_answer_per_item(self, run: str, key: str, r: JudgeRequest) -> None:
        """A recorded judge holds one answer per item id: a run asking one id in two ways (two repeats,
        two shown orders, two prompts) would be served that answer for both, and agreement between
        them read perfect. Refused at planning, before anything is generated, naming what differs."""
        assert self._served is not None
        first = self._served.setdefault((run, r.meta.item_id), (key, r.meta))   # not the request: its text
        if first[0] == key:          # its key holds the item id: two items of one text are two requests
            return
        was, now = first[1].as_dict(), r.meta.as_dict()
        differ = [k for k in dict.fromkeys([*was, *now]) if was.get(k) != now.get(k)]
        how = f"with another {' and '.join(differ)}" if differ else "with another prompt"
        raise ConfigError(f"the recorded judge {self.identity.fingerprint!r} holds one answer per item id, and item "
                          f"{r.meta.item_id!r} is asked twice ({how}), which would share it: ask each item once "
                          "(one repeat, one order), or use a judge that reads the prompt")

    def _plan(self, batch: list[tuple[str, JudgeRequest]]) -> PlanChunk:
        seconds, t = self.stats.seconds, time.perf_counter()
        entries, new = [], {}
        for run, r in batch:
            key = content_key(r, self.identity)
            entries.append(PlanEntry(key, r, run))
            if self._served is not None:
                self._one_answer_per_item(run, key, r)
            if key not in new and bytes.fromhex(key) not in self._seen:
                new[key] = (run, r)
        prepared, too_long = [], []
        seconds["build_and_key"] += time.perf_counter() - t
        t = time.perf_counter()
        prompts = [self.planner.render(r) for _, r in new.values()]
        t2 = time.perf_counter()
        token_ids = self.planner.encode_batch(prompts)
        seconds["render"] += t2 - t
        t = time.perf_counter()
        seconds["tokenize"] += t - t2
        self.stats.tokenization = self.planner.tokenization()
        for (key, (run, r)), prompt, ids in zip(new.items(), prompts, token_ids, strict=True):
            self._seen.add(bytes.fromhex(key))
            budget = self._budget(r)
            if budget >= self.window:
                raise PreflightError(f"max_tokens = {budget:,} leaves no room for a prompt in the context window "
                                     f"({self.window:,} tokens): lower [sampling] max_tokens (or leave it out: "
                                     "derived from the verdict language), or raise max_model_len")
            if len(ids) + budget > self.window:
                too_long.append((r.meta.item_id, len(ids), self.window - budget, run))
                self._skipped.add(bytes.fromhex(key))
                self.skipped_keys.append(key)
                continue
            prepared.append(Prepared(key, r, prompt, packed(ids), budget))
        if too_long and self.truncation == "error":
            worst = sorted(too_long, key=lambda t: -t[1])[:5]
            shown = "; ".join(f"{item}: {n} tokens > {limit}" for item, n, limit, _ in worst)
            raise PreflightError(f"{len(too_long)} prompt(s) do not fit the context window ({self.window} tokens "
                                 f"incl. the verdict budget): {shown}. Shorten the items, raise max_model_len, "
                                 f"or set truncation = \"skip\" to leave them out (reported).")
        self.stats.too_long += too_long
        t2 = time.perf_counter()
        seconds["prepare"] += t2 - t
        t = t2
        prepared.sort(key=lambda p: p.token_ids)
        prev, tokens, distinct = self._prev, 0, 0
        for p in prepared:
            n = len(p.token_ids)
            tokens += n
            distinct += n - common_prefix(prev, p.token_ids)
            prev = p.token_ids
        self._prev = prev
        self.stats.prompt_tokens += tokens
        self.stats.distinct_prefill_tokens += distinct
        self.stats.distinct_requests += len(prepared)
        kept = [e for e in entries if not self._skipped or bytes.fromhex(e.key) not in self._skipped]
        self.stats.requests += len(kept)
        seconds["order"] += time.perf_counter() - t
        return PlanChunk(kept, prepared)


@contextmanager
def cycles_collected_after() -> Iterator[None]:
    """Python's cyclic garbage collector paused while a chunk is planned, and resumed after it.
    A chunk makes hundreds of thousands of objects (requests, keys, token tuples) with no reference
    cycle, freed by reference counting anyway; the collector only walks them again and again as they
    survive (measured: over half of a plan's time). Cycles made meanwhile (none in the plan) are
    collected at the first collection after the chunk. The switch is the process's: a planner
    thread pauses it for the main thread as well, for that chunk only. Within a run
    (`fewer_collections`) what is alive after the chunk is also frozen: the chunk's requests live
    until it is judged, and each collection walked them again (3 s of a 39-s run of 400k requests).
    Anything frozen returns to the collector when the run ends."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if _in_run[0]:
            gc.freeze()
        if paused:
            gc.enable()


_in_run = [0]        # how many `fewer_collections` are open (a run, a sweep)


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Python's cyclic collector run less often while a run judges and aggregates, its thresholds
    restored after. A run keeps a chunk's requests, entries and rows alive while it stores and
    parses them, so at the default thresholds (a young collection every 700 allocations) the
    collector walks them again and again: 2.6 s of a 12.6-s run of 100k requests (measured with the
    collector off). Cycles are still collected, every 100,000 allocations instead of 700, and what
    the run's planning froze (`cycles_collected_after`) returns to the collector at the end."""
    before = gc.get_threshold()
    gc.set_threshold(100_000, 50, 100)
    _in_run[0] += 1
    try:
        yield
    finally:
        _in_run[0] -= 1
        if not _in_run[0]:
            gc.unfreeze()
        gc.set_threshold(*before)


def planned_ahead(chunks: Iterator[PlanChunk], depth: int = 2) -> Generator[PlanChunk, None, None]:
    """The chunks of a plan, planned in a background thread up to `depth` chunks ahead of the one
    being judged, so a large run takes about max(planning, inference), not their sum: the engine
    starts on the first chunk while the planner goes on (tokenizers and hashing release the GIL for
    most of their work). Order is kept; an error while planning is raised here, at the chunk it
    would have been; closing this generator stops the planner."""
    out: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def produce() -> None:
        try:
            for part in chunks:
                while not stop.is_set():
                    try:
                        out.put(part, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            item: object = done
        except BaseException as exc:  # noqa: BLE001  (handed to the consumer, raised there)
            item = exc
        while not stop.is_set():
            try:
                out.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    worker = threading.Thread(target=produce, name="litjudge-planner", daemon=True)
    worker.start()
    try:
        while True:
            item = out.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        worker.join(timeout=5)


def make_plan(requests: Sequence[JudgeRequest], planner: Planner, truncation: Truncation = "error") -> Plan:
    """A whole plan at once (one chunk): small runs, the benchmark, the tests."""
    stream = StreamPlanner(planner, truncation, chunk=max(1, len(requests)))
    chunks = list(stream.chunks(("", r) for r in requests))
    return Plan([e for c in chunks for e in c.entries], [p for c in chunks for p in c.unique], stream.stats)
