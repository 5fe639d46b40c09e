"""Expand -> deduplicate -> pre-flight -> order by shared prefix.

- Deduplicate: requests with the same content key are generated once; every plan entry
  (item, order, repeat...) points at its key.
- Pre-flight: every prompt is tokenized with the judge's tokenizer before any model time is spent;
  prompts whose length plus max_tokens exceed the context window are reported by item id with
  their token counts. Nothing is ever truncated silently: the policy is "error" (default) or
  "skip" (leave those requests out; they are listed in the results and the manifest).
- Order: sorting by token ids puts requests that share leading tokens next to each other, which
  is what vLLM's prefix cache needs (templates put the most-shared text first).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from grammars.analysis import Analyzed
from grammars.compile import max_verdict_tokens

from .backend import Planner
from .errors import PreflightError
from .requests import JudgeRequest, Prepared, content_key

Truncation = Literal["error", "skip"]   # skip: leave too-long prompts out, reported


@dataclass(frozen=True)
class PlanEntry:
    key: str
    request: JudgeRequest


@dataclass
class Plan:
    entries: list[PlanEntry]                      # one per (item, order, repeat, ...): what the protocol asked
    unique: list[Prepared]                        # one per key, in prefix order: what the backend runs
    too_long: list[tuple[str, int, int]] = field(default_factory=list)   # (item id, tokens, limit)
    runs: list[str] = field(default_factory=list)  # the run (sweep cell) of each entry, by position

    @property
    def prompt_tokens(self) -> int:
        return sum(p.prompt_tokens for p in self.unique)

    def distinct_prefill_tokens(self) -> int:
        """Tokens left to prefill if every shared leading token were served from the cache."""
        total = 0
        prev: tuple[int, ...] = ()
        for p in self.unique:
            total += p.prompt_tokens - common_prefix(prev, p.token_ids)
            prev = p.token_ids
        return total

    def summary(self) -> dict[str, int]:
        return {"requests": len(self.entries), "distinct_requests": len(self.unique),
                "prompt_tokens": self.prompt_tokens, "distinct_prefill_tokens": self.distinct_prefill_tokens(),
                "too_long_skipped": len(self.too_long)}


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Number of leading tokens two prompts share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def budget_tokens(request: JudgeRequest) -> int:
    """Output tokens a request may need: the verdict, plus the analysis in analyze mode."""
    if request.sampling.max_tokens:
        return request.sampling.max_tokens
    n = max_verdict_tokens(request.language)
    if isinstance(request.language, Analyzed):
        n += request.language.max_analysis_tokens + 8
    return n


def make_plan(requests: Sequence[JudgeRequest], backend: Planner, truncation: Truncation = "error") -> Plan:
    identity = backend.identity()
    window = backend.context_window()
    entries: list[PlanEntry] = []
    by_key: dict[str, JudgeRequest] = {}
    for r in requests:
        key = content_key(r, identity)
        entries.append(PlanEntry(key, r))
        by_key.setdefault(key, r)

    prepared: list[Prepared] = []
    plan = Plan(entries, prepared)
    budget_cache: dict[str, int] = {}
    for key, r in by_key.items():
        prompt = backend.render(r)
        ids = backend.encode(prompt)
        lang_fp = r.language.fingerprint() + r.mode + str(r.sampling.max_tokens)
        if lang_fp not in budget_cache:
            budget_cache[lang_fp] = budget_tokens(r)
        budget = budget_cache[lang_fp]
        if r.mode == "distribution":
            budget = 1
        if len(ids) + budget > window:
            plan.too_long.append((r.meta.item_id, len(ids), window - budget))
            continue
        prepared.append(Prepared(key, r, prompt, tuple(ids), budget))

    if plan.too_long and truncation == "error":
        worst = sorted(plan.too_long, key=lambda t: -t[1])[:5]
        shown = "; ".join(f"{item}: {n} tokens > {limit}" for item, n, limit in worst)
        raise PreflightError(f"{len(plan.too_long)} prompt(s) do not fit the context window ({window} tokens "
                             f"incl. the verdict budget): {shown}. Shorten the items, raise max_model_len, "
                             f"or set truncation = \"skip\" to leave them out (reported).")
    prepared.sort(key=lambda p: p.token_ids)
    skipped = {k for k in by_key if k not in {p.key for p in prepared}}
    plan.entries = [e for e in entries if e.key not in skipped]
    return plan
