"""Calibration of a judge's label probabilities against human labels (distribution mode).

A judge that says P(Yes) = 0.8 should be right about 80% of the time on such items. Predictions
are put in `bins` equal-width bins of the predicted probability of the positive label; per bin the
mean prediction and the observed frequency of the positive label (the reliability diagram).

    ECE = sum over bins of (n_bin / N) * |mean prediction - observed frequency|
    Brier = mean of (p - y)^2

(ECE here bins the positive-class probability, the binary form of Naeini et al. 2015; a bin edge
belongs to the bin above it, and p = 1 falls in the last bin.)

The plug-in ECE is biased upward: a perfectly calibrated judge's bins still differ from their
predictions by sampling noise, so its ECE and every interval around it stay above 0 (0 of 100
simulated calibrated judges reached 0), and a sweep ranking by it favours the cells with more
verdicts. It is published as the papers print it, with no interval. The estimate litjudge puts an
interval on and ranks by is the debiased calibration error of Kumar, Liang & Ma (2019, "Verified
uncertainty calibration"): per bin, the squared gap minus its sampling variance,

    CE^2 = sum over bins of (n_bin / N) * [(observed - mean prediction)^2 - observed (1 - observed) / (n_bin - 1)]

unbiased for the binned squared calibration error (can be negative by chance: a calibrated judge's
estimate scatters around 0). It is published as it is, `squared_calibration_error`, with its
interval: its square root would not be unbiased (sqrt(max(CE^2, 0)) read +0.03 for a calibrated
judge at 10 stories), and an interval of the root is the roots of this one. The interval resamples
clusters and is centred on the estimate (`centred_interval`); the tables and a sweep ranking by it
print the same one (`calibration_units`).

>>> round(expected_calibration_error([0.9, 0.9, 0.1, 0.1], [1, 0, 0, 0], bins=10), 3)
0.25
>>> brier_score([1.0, 0.0], [1, 0]).value
0.0
"""
from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from .base import NAN, MetricResult, is_missing, known_pairs
from .bootstrap import MIN_CLUSTERS, RESAMPLES, interval_note, percentile_interval, resampled_sums
from .estimates import Units, mean_of


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


def _bin_sums(pa: np.ndarray, ya: np.ndarray, inverse: np.ndarray, g: int, bins: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    index = np.minimum((pa * bins).astype(int), bins - 1)
    counts, sum_p, sum_y = (np.zeros((g, bins)) for _ in range(3))
    np.add.at(counts, (inverse, index), 1.0)
    np.add.at(sum_p, (inverse, index), pa)
    np.add.at(sum_y, (inverse, index), ya)
    return counts, sum_p, sum_y


def squared_calibration_error(counts: np.ndarray, sum_p: np.ndarray, sum_y: np.ndarray) -> np.ndarray:
    """Debiased CE^2 (module doc) from per-bin counts and sums over the last axis; bins with one
    verdict carry no variance estimate and are left out of the sum (their weight too)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        obs, pred = sum_y / counts, sum_p / counts
        term = (obs - pred) ** 2 - obs * (1 - obs) / (counts - 1)
    kept = counts >= 2
    n = np.where(kept, counts, 0).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(kept, counts * np.nan_to_num(term), 0.0).sum(axis=-1) / np.where(n > 0, n, np.nan)


# Besides MIN_CLUSTERS clusters, the interval needs this many verdicts: 10 clusters of one verdict each
# covered 0.86-0.90 (a hostile pass, 1,000 draws each), 15 of one 0.93, 20 of one 0.955-0.96, 10 of two 0.96.
MIN_VERDICTS = 20


def calibration_note(clusters: int, verdicts: int, low: float | None) -> str | None:
    """Why the calibration error's interval is missing: `interval_note`'s reasons, or too few verdicts."""
    if clusters >= MIN_CLUSTERS and verdicts < MIN_VERDICTS:
        return f"too few verdicts ({verdicts}; the calibration error's interval needs {MIN_VERDICTS}): no interval"
    return interval_note(clusters, low)


def centred_interval(counts: np.ndarray, sum_p: np.ndarray, sum_y: np.ndarray, resamples: int = RESAMPLES,
                     seed: int = 0) -> tuple[float, float, float]:
    """(debiased CE^2, CI low, CI high) from per-cluster, per-bin counts and sums (G, bins): the
    expanded percentile interval of the cluster-resampled CE^2, centred on the estimate (no
    interval below MIN_CLUSTERS clusters or without spread)."""
    point = float(squared_calibration_error(counts.sum(axis=0), sum_p.sum(axis=0), sum_y.sum(axis=0)))
    g = counts.shape[0]
    if counts.sum() < MIN_VERDICTS:
        return point, NAN, NAN
    drawn = resampled_sums(np.stack([counts, sum_p, sum_y], axis=1), seed, resamples)
    stats = squared_calibration_error(drawn[:, 0], drawn[:, 1], drawn[:, 2])
    # A resample repeats whole clusters, so its bins vary more than the n_bin - 1 term removes:
    # the resampled CE^2 sit above the estimate. Centring them on it (median bias correction)
    # brings the coverage at 10 clusters from 0.92 to the level the conformance test asks.
    if len(stats) and not math.isnan(point) and not np.isnan(stats).all():
        stats = stats - (np.nanmedian(stats) - point)
    low, high = percentile_interval(stats, g)
    return point, low, high


def squared_calibration_error_ci(p: Sequence[float], y: Sequence[float | bool], bins: int = 10, resamples: int = RESAMPLES,
                                 seed: int = 0, clusters: Sequence[Hashable] | None = None
                                 ) -> tuple[float, float, float]:
    """(debiased CE^2, CI low, CI high) of predictions p against outcomes y, clusters resampled
    (each prediction its own cluster when None; no interval below MIN_CLUSTERS clusters). A
    calibrated judge's interval holds 0; a plug-in ECE's never does.

    >>> round(squared_calibration_error_ci([0.5] * 4, [1, 0, 1, 0])[0], 3)
    -0.083
    """
    pa, ya, inverse, g = _kept(p, y, clusters)
    if not len(pa):
        return NAN, NAN, NAN
    return centred_interval(*_bin_sums(pa, ya, inverse, g, bins), resamples=resamples, seed=seed)


def _kept(p: Sequence[float], y: Sequence[float | bool], clusters: Sequence[Hashable] | None
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Known (p, y) as arrays, each row's cluster index and the number of clusters."""
    if clusters is not None and len(clusters) != len(p):
        raise ValueError(f"need one cluster per prediction, got {len(clusters)} and {len(p)}")
    kept = [i for i in range(len(p)) if not (is_missing(p[i]) or is_missing(y[i]))]
    pa, ya = _arrays([p[i] for i in kept], [y[i] for i in kept])
    if clusters is None:
        inverse = np.arange(len(pa))
    else:
        _, inverse = np.unique(np.asarray([str(clusters[i]) for i in kept]), return_inverse=True)
    return pa, ya, inverse, (int(inverse.max()) + 1 if len(inverse) else 0)


def ece_bootstrap(p: Sequence[float], y: Sequence[float | bool], bins: int = 10, resamples: int = RESAMPLES, seed: int = 0,
                  alpha: float = 0.05, clusters: Sequence[Hashable] | None = None) -> tuple[float, float]:
    """Percentile CI of the ECE over cluster resamples (a story's verdicts, a pair's orders move
    together; each verdict its own cluster when `clusters` is None), from per-cluster, per-bin sums
    in numpy. (nan, nan) with too few clusters or no spread. Biased upward like the ECE itself (module
    doc): the tables print `squared_calibration_error` with its interval instead; this stays for audits."""
    pa, ya, inverse, g = _kept(p, y, clusters)
    if not len(pa):
        return NAN, NAN
    counts, sum_p, sum_y = _bin_sums(pa, ya, inverse, g, bins)
    drawn = resampled_sums(np.stack([counts, sum_p, sum_y], axis=1), seed, resamples)
    gap = np.abs(drawn[:, 1] - drawn[:, 2]).sum(axis=1)
    return percentile_interval(gap / drawn[:, 0].sum(axis=1), g, alpha)


def squared_calibration_error_of(c) -> float:
    """The debiased CE^2 of rows with columns p and y (10 bins)."""
    pa, ya = c["p"].astype(float), c["y"].astype(float)
    if not len(pa):
        return NAN
    counts, sum_p, sum_y = _bin_sums(pa, ya, np.zeros(len(pa), dtype=int), 1, 10)
    return float(squared_calibration_error(counts[0], sum_p[0], sum_y[0]))


def calibration_units(clusters: Sequence[Hashable], p: Sequence[float], y: Sequence[float | bool]):
    """The debiased CE^2 as a rankable estimate (10 bins), with the calibration table's interval;
    a sweep publishes it clipped at 0 (the unbiased estimate can be negative, its metric cannot)."""
    def rule(u: Units, resamples: int, seed: int) -> tuple[float, float, str | None]:
        pa, ya = u.columns["p"].astype(float), u.columns["y"].astype(float)
        point, low, high = centred_interval(*_bin_sums(pa, ya, u.cluster_of_rows(), u.clusters, 10),
                                            resamples=resamples, seed=seed)
        return low, high, calibration_note(u.clusters, len(pa), low)
    return Units.of(clusters, {"p": np.asarray(p, dtype=float), "y": np.asarray(y, dtype=float)},
                    squared_calibration_error_of, rule=rule, published_range=(0.0, 1.0))


def brier_units(clusters: Sequence[Hashable], p: Sequence[float], y: Sequence[float | bool]):
    """The Brier score as a rankable estimate: the mean of (p - y)^2, its interval the bootstrap
    of that mean over clusters."""
    errors = (np.asarray(p, dtype=float) - np.asarray(y, dtype=float)) ** 2
    return Units.of(clusters, {"v": errors}, mean_of("v"), bounds=(0.0, 1.0))
