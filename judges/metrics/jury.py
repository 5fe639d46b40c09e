"""Juries of judges on binary verdicts: several judges' probabilities of the positive label pooled
into one. Three poolings: majority vote (of each judge's label), the plain average of the
probabilities, and logistic stacking (weights per judge fitted on human-labelled items over the
log-odds of each judge's probability). A judge without probabilities (a replayed one) takes part
one-hot: for stacking its 0/1 is read as [EPS, 1 - EPS] so its log-odds stay finite; a judge's
own probabilities keep their log-odds (only an exact 0 or 1 is moved in by TINY).

>>> round(average([[0.9, 0.2], [0.7, 0.4]])[0], 2)
0.55
>>> majority([[0.9, 0.8, 0.2]])
[1.0]
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from .logistic import fit_logistic, sigmoid

EPS = 0.02          # a one-hot judge's 0 / 1, for its log-odds
TINY = 1e-9         # a real probability of exactly 0 or 1


def logit(p: float, one_hot: bool = False) -> float:
    edge = EPS if one_hot else TINY
    p = min(max(p, edge), 1 - edge)
    return math.log(p / (1 - p))


def _log_odds(probs: Sequence[Sequence[float]], one_hot: Sequence[Sequence[bool]] | None) -> list[list[float]]:
    if one_hot is None:
        return [[logit(p) for p in row] for row in probs]
    return [[logit(p, h) for p, h in zip(row, hot, strict=True)] for row, hot in zip(probs, one_hot, strict=True)]


def average(probs: Sequence[Sequence[float]]) -> list[float]:
    """Per item: the mean of the judges' probabilities."""
    return [sum(row) / len(row) for row in probs]


def majority(probs: Sequence[Sequence[float]]) -> list[float]:
    """Per item: 1 when most judges say positive, 0.5 on a tie, else 0; a judge at exactly p = 0.5
    casts half a vote each way (the one tie rule: a fair coin, never "Yes")."""
    out = []
    for row in probs:
        yes = sum(1.0 if p > 0.5 else 0.5 if p == 0.5 else 0.0 for p in row)
        out.append(1.0 if 2 * yes > len(row) else 0.5 if 2 * yes == len(row) else 0.0)
    return out


def fit_stacking(probs: Sequence[Sequence[float]], truth: Sequence[bool], ridge: float = 1.0,
                 one_hot: Sequence[Sequence[bool]] | None = None) -> list[float]:
    """[intercept, weight per judge] of a logistic regression of the truth on the judges' log-odds
    (a ridge penalty keeps a judge that is always right or always the same from taking over).
    `one_hot` marks the cells that are a label, not a probability."""
    return [float(b) for b in fit_logistic(_log_odds(probs, one_hot), [float(t) for t in truth], ridge)]


def stacked(weights: Sequence[float], probs: Sequence[Sequence[float]],
            one_hot: Sequence[Sequence[bool]] | None = None) -> list[float]:
    return [sigmoid(weights[0] + sum(w * x for w, x in zip(weights[1:], row))) for row in _log_odds(probs, one_hot)]
