"""Calibration of a judge's label probabilities against human labels (distribution mode).

A judge that says P(Yes) = 0.8 should be right about 80% of the time on such items. Predictions
are put in `bins` equal-width bins of the predicted probability of the positive label; per bin the
mean prediction and the observed frequency of the positive label (the reliability diagram).

    ECE = sum over bins of (n_bin / N) * |mean prediction - observed frequency|
    Brier = mean of (p - y)^2

(ECE here bins the positive-class probability, the binary form of Naeini et al. 2015; a bin edge
belongs to the bin above it, and p = 1 falls in the last bin.)

>>> round(expected_calibration_error([0.9, 0.9, 0.1, 0.1], [1, 0, 0, 0], bins=10), 3)
0.25
>>> brier_score([1.0, 0.0], [1, 0]).value
0.0
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from .base import NAN, MetricResult, is_missing, known_pairs
from .bootstrap import percentile_interval


@dataclass(frozen=True)
class ReliabilityBin:
    low: float
    high: float
    n: int
    mean_prediction: float
    observed_frequency: float


def _arrays(p: Sequence[float], y: Sequence[float | bool]) -> tuple[np.ndarray, np.ndarray]:
    if len(p) != len(y):
        raise ValueError(f"need equal lengths, got {len(p)} and {len(y)}")
    pk, yk = known_pairs(p, y)
    pa, ya = np.asarray(pk, dtype=float), np.asarray(yk, dtype=float)
    if ((pa < 0) | (pa > 1)).any():
        raise ValueError("probabilities must lie in [0, 1]")
    return pa, ya


def reliability_bins(p: Sequence[float], y: Sequence[float | bool], bins: int = 10) -> list[ReliabilityBin]:
    """The non-empty bins of the reliability diagram."""
    pa, ya = _arrays(p, y)
    index = np.minimum((pa * bins).astype(int), bins - 1)
    out = []
    for b in range(bins):
        sel = index == b
        if sel.any():
            out.append(ReliabilityBin(b / bins, (b + 1) / bins, int(sel.sum()), float(pa[sel].mean()),
                                      float(ya[sel].mean())))
    return out


def expected_calibration_error(p: Sequence[float], y: Sequence[float | bool], bins: int = 10) -> float:
    pa, _ = _arrays(p, y)
    if not len(pa):
        return NAN
    return float(sum(b.n / len(pa) * abs(b.mean_prediction - b.observed_frequency)
                     for b in reliability_bins(p, y, bins)))


def brier_score(p: Sequence[float], y: Sequence[float | bool]) -> MetricResult:
    pa, ya = _arrays(p, y)
    if not len(pa):
        return MetricResult(NAN, 0)
    return MetricResult(float(((pa - ya) ** 2).mean()), len(pa))


def ece_bootstrap(p: Sequence[float], y: Sequence[float | bool], bins: int = 10, resamples: int = 500, seed: int = 0,
                  alpha: float = 0.05, clusters: Sequence[Hashable] | None = None) -> tuple[float, float]:
    """Percentile CI of the ECE over cluster resamples (a story's verdicts, a pair's orders move
    together; each verdict its own cluster when `clusters` is None), from per-cluster, per-bin sums
    in numpy. (nan, nan) with fewer than 2 clusters or no spread."""
    if clusters is not None and len(clusters) != len(p):
        raise ValueError(f"need one cluster per prediction, got {len(clusters)} and {len(p)}")
    kept = [i for i in range(len(p)) if not (is_missing(p[i]) or is_missing(y[i]))]
    pa, ya = _arrays([p[i] for i in kept], [y[i] for i in kept])
    if not len(pa):
        return NAN, NAN
    if clusters is None:
        inverse = np.arange(len(pa))
    else:
        _, inverse = np.unique(np.asarray([str(clusters[i]) for i in kept]), return_inverse=True)
    g = int(inverse.max()) + 1
    index = np.minimum((pa * bins).astype(int), bins - 1)
    counts, sum_p, sum_y = (np.zeros((g, bins)) for _ in range(3))
    np.add.at(counts, (inverse, index), 1.0)
    np.add.at(sum_p, (inverse, index), pa)
    np.add.at(sum_y, (inverse, index), ya)
    rng = np.random.default_rng(seed)
    stats = []
    step = max(1, 4_000_000 // (g * bins))
    for start in range(0, resamples, step):
        idx = rng.integers(0, g, (min(step, resamples - start), g))
        gap = np.abs(sum_p[idx].sum(axis=1) - sum_y[idx].sum(axis=1)).sum(axis=1)
        stats.append(gap / counts[idx].sum(axis=(1, 2)))
    return percentile_interval(np.concatenate(stats), g, alpha)
