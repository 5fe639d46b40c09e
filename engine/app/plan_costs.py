"""What a plan's API judges would send and cost, and whether that passes the invocation's budget
caps: `litjudge plan` says so before a run holds requests back at the cap."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..backends import BACKENDS
from ..core.settings import ApiConfig


@dataclass(frozen=True)
class ApiEstimate:
    """An API judge's share of the plan: the tokens it would send and receive at most, and their cost
    (None: no prices known), held against the invocation's caps by `over_the_caps`."""

    tokens: float
    cost_usd: float | None
    caps: ApiConfig


def api_estimate(r: dict[str, Any]) -> tuple[ApiEstimate, str]:
    """What an API judge's row of the plan would send and cost, and how that was estimated."""
    spec, api = r["spec"], r["config"].api
    tokens_in = 1.3 * r["prompt_tokens"] * r["to_generate"] / max(r["distinct_requests"], 1)
    tokens_out = r["to_generate"] * max((p.max_tokens for p in r["sample"]), default=0)
    dollars = BACKENDS.get(spec.backend).cost(spec, tokens_in, tokens_out)
    how = (f"API: ~{tokens_in:,.0f} prompt tokens to send (1.3 x words), about {tokens_out:,} output tokens "
           f"at most; cost from api.price_in_per_mtok / price_out_per_mtok"
           + (" at the provider's batch rate; results within 24 h" if api.batch else "; time depends on the server"))
    return ApiEstimate(tokens_in + tokens_out, dollars, api), how


def over_the_caps(estimates: list[ApiEstimate]) -> list[str]:
    """Where the plan's API judges together would pass a budget cap: the caps hold for the whole
    invocation (every API judge's spend is one total), so the sum is what meets the lowest cap."""
    dollar_caps = [e.caps.max_cost_usd for e in estimates if e.caps.max_cost_usd]
    token_caps = [e.caps.max_tokens_total for e in estimates if e.caps.max_tokens_total]
    dollars = sum(e.cost_usd or 0.0 for e in estimates)
    tokens = sum(e.tokens for e in estimates)
    over = []
    if dollar_caps and dollars > min(dollar_caps):
        over.append(f"about ${dollars:,.4g}, over api.max_cost_usd = {min(dollar_caps):g}")
    if token_caps and tokens > min(token_caps):
        over.append(f"about {tokens:,.0f} tokens, over api.max_tokens_total = {min(token_caps):,}")
    return [f"the plan's {len(estimates)} API judge(s) would spend {what}: requests past the cap are held back (not "
            "sent, not stored), the run exits 3 and a re-run resumes them; raise the cap to judge every item in "
            "one run" for what in over]
