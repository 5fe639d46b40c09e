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

from dataclasses import dataclass

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
