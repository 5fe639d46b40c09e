"""Distribution mode: the probability of every label at the decision point, read unconstrained.

vLLM renormalises logprobs over the tokens a constraint allows, so constrained logprobs are not
scores. Instead the assistant turn is prefilled up to the decision point and the next token is
read without a constraint (how a local engine finds each label's tokens: `engine/backends/local/
label_tokens.py`). The kernel keeps what every backend's distribution shares: renormalising label
logprobs (the total raw probability on the labels is kept as an on-format check) and the argmax
with its tie rule.
"""
from __future__ import annotations

import math


def normalise(logprobs: dict[str, float]) -> tuple[dict[str, float], float]:
    """Raw label logprobs -> (probabilities renormalised over the labels, total raw label mass)."""
    mass = sum(math.exp(lp) for lp in logprobs.values())
    if mass <= 0.0:
        return {k: float("nan") for k in logprobs}, 0.0
    return {k: math.exp(lp) / mass for k, lp in logprobs.items()}, mass


def argmax_label(dist: dict[str, float]) -> str:
    return max(dist, key=lambda k: (dist[k], -list(dist).index(k)))
