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

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .base import NAN, MetricResult, known_pairs


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
                  alpha: float = 0.05) -> tuple[float, float]:
    """Percentile CI of the ECE over verdicts resampled with replacement (numpy, per-bin sums)."""
    pa, ya = _arrays(p, y)
    n = len(pa)
    if not n:
        return NAN, NAN
    index = np.minimum((pa * bins).astype(int), bins - 1)
    rng = np.random.default_rng(seed)
    stats = np.empty(resamples)
    for r in range(resamples):
        pick = rng.integers(0, n, n)
        counts = np.bincount(index[pick], minlength=bins)
        gap = np.abs(np.bincount(index[pick], weights=pa[pick], minlength=bins)
                     - np.bincount(index[pick], weights=ya[pick], minlength=bins))
        stats[r] = gap.sum() / n if counts.sum() else NAN
    low, high = np.quantile(stats, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)
