"""Correlation and ordering metrics for scores and rankings.

>>> pairwise_accuracy([1, 2, 3], [10, 30, 20]).value   # 2 of 3 pairs ordered alike
0.6666666666666666
"""
from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from .base import NAN, MetricResult, known_pairs, scipy_stats


def _paired(x: Sequence[float], y: Sequence[float]) -> tuple[list[float], list[float]]:
    if len(x) != len(y):
        raise ValueError(f"need equal lengths, got {len(x)} and {len(y)}")
    return known_pairs(x, y)


def _corr(name: str, x, y) -> MetricResult:
    """scipy.stats' `name` correlation of the known pairs; scipy.stats is imported only when there
    is one to compute (a judge answering one label throughout, as the demo's does, needs none: the
    import was 3-8 s of such a run here)."""
    a, b = _paired(x, y)
    if len(a) < 3 or len(set(a)) < 2 or len(set(b)) < 2:
        return MetricResult(NAN, len(a))
    res = getattr(scipy_stats(), name)(a, b)
    return MetricResult(float(res.statistic), len(a), float(res.pvalue))


def pearson(x: Sequence[float], y: Sequence[float]) -> MetricResult:
    return _corr("pearsonr", x, y)


def spearman(x: Sequence[float], y: Sequence[float]) -> MetricResult:
    return _corr("spearmanr", x, y)


def kendall(x: Sequence[float], y: Sequence[float]) -> MetricResult:
    """Kendall's tau-b (ties handled)."""
    return _corr("kendalltau", x, y)


def pairwise_accuracy(truth: Sequence[float], predicted: Sequence[float]) -> MetricResult:
    """Share of item pairs with different true scores that the prediction orders the same way
    (a predicted tie counts as half), as in the reference-based paper."""
    a, b = _paired(truth, predicted)
    total = correct = 0.0
    for i, j in combinations(range(len(a)), 2):
        if a[i] == a[j]:
            continue
        total += 1
        d = (a[i] - a[j]) * (b[i] - b[j])
        correct += 1.0 if d > 0 else 0.5 if d == 0 else 0.0
    return MetricResult(correct / total if total else NAN, int(total))
