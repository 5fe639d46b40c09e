"""What API verdicts cost: the one place prices are turned into dollars. The per-token prices of a
model are the config's (`[api] price_in_per_mtok`, `price_out_per_mtok`: providers change them, so
they are the user's to state); a provider batch costs that times its provider's batch rate
(`Provider.batch_rate`: OpenAI and Anthropic bill batches at half price, as their documentation
states, November 2026). The budget caps (`max_cost_usd`) and `litjudge plan`'s estimate read prices
here, so batch runs are counted at batch prices.

>>> round(cost(ApiPrices(2.0, 8.0), 1_000_000, 100_000, batch=True), 2)
1.4
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from .providers import Provider


@dataclass(frozen=True)
class ApiPrices:
    in_per_mtok: float
    out_per_mtok: float
    batch_rate: float = 0.5


def prices(provider: type[Provider], price_in: float, price_out: float) -> ApiPrices:
    """The config's per-token prices, at `provider`'s batch rate in a provider batch."""
    return ApiPrices(price_in, price_out, provider.batch_rate)


def cost(p: ApiPrices, prompt_tokens: float, completion_tokens: float, batch: bool = False) -> float:
    """Dollars for these tokens, online or in a provider batch."""
    rate = p.batch_rate if batch else 1.0
    return rate * (prompt_tokens * p.in_per_mtok + completion_tokens * p.out_per_mtok) / 1e6


@dataclass
class Spend:
    """What one invocation (a run, a sweep, an ensemble's member runs) has spent on API judges: the
    budget caps hold for this total, not per judge (two judges under one $1 cap spend $1 between
    them, not $2). Shared by the judges' worker threads."""

    tokens: int = 0
    dollars: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, tokens: int, dollars: float) -> None:
        with self.lock:
            self.tokens += tokens
            self.dollars += dollars


_spend: ContextVar[Spend | None] = ContextVar("litjudge_spend", default=None)


@contextmanager
def one_budget() -> Iterator[Spend]:
    """Every API judge created inside the block counts against one shared `Spend` (an invocation
    already inside one keeps it)."""
    current = _spend.get()
    if current is not None:
        yield current
        return
    current = Spend()
    token = _spend.set(current)
    try:
        yield current
    finally:
        _spend.reset(token)


def invocation_spend() -> Spend:
    """The current invocation's spend (a judge created outside any counts alone). Read where the
    judge is created: the API's worker threads do not inherit the context."""
    return _spend.get() or Spend()
