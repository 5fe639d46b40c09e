"""Percentile bootstrap confidence intervals that resample whole clusters (a story's verdicts,
a pair's two orders) so that correlated items do not make an interval look narrower than it is.

>>> lo, hi = cluster_bootstrap([1, 2, 3, 4], [1, 1, 0, 0], [1, 0, 0, 0], cohen_kappa, resamples=200)
>>> lo <= hi
True

`mean_bootstrap` is the same resampling for a mean of per-row values (an accuracy, a rate, half
credit), computed from per-cluster sums in numpy: the same draws as `cluster_bootstrap` with
`accuracy`, fast enough for a million verdicts.

>>> mean_bootstrap([1, 1, 2, 2], [1.0, 1.0, 0.0, 0.0], resamples=200) == cluster_bootstrap(
...     [1, 1, 2, 2], [True] * 4, [True, True, False, False], accuracy, resamples=200)
True
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from .agreement import accuracy, cohen_kappa  # noqa: F401  (used by the doctests)
from .base import MetricResult, is_missing

NO_CLUSTERS = "fewer than 2 clusters: no interval"
NO_SPREAD = "every resample gives the same value: no interval"


def interval_note(clusters: int, low: float | None) -> str | None:
    """Why a bootstrap interval is missing (None when it is there): one cluster cannot show how the
    value varies, and neither can clusters that all give the same value (100% agreement, a constant
    score): a zero-width interval would claim a certainty the data cannot give."""
    if clusters < 2:
        return NO_CLUSTERS
    return NO_SPREAD if low is None or math.isnan(low) else None


def percentile_interval(stats: np.ndarray, clusters: int, alpha: float = 0.05) -> tuple[float, float]:
    """The percentile interval of the resampled statistics (NaN ones left out), or (nan, nan) when
    there are fewer than 2 clusters or the resamples do not vary (`interval_note` says which)."""
    stats = np.asarray(stats, dtype=float)
    stats = stats[~np.isnan(stats)]
    if clusters < 2 or not len(stats) or np.ptp(stats) <= 1e-12 * max(1.0, float(np.abs(stats).max())):
        return math.nan, math.nan
    low, high = np.quantile(stats, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def cluster_bootstrap(clusters: Sequence[Hashable], truth: Sequence, pred: Sequence,
                      metric: Callable[[list, list], MetricResult], resamples: int = 1000, seed: int = 0,
                      alpha: float = 0.05) -> tuple[float, float]:
    """(low, high) of `metric(truth, pred)` over `resamples` cluster resamples; resamples where the
    metric is undefined (NaN) are left out; (nan, nan) when none is defined, with one cluster, or
    when every resample gives the same value."""
    truth_a, pred_a = np.asarray(truth, dtype=object), np.asarray(pred, dtype=object)
    _, inverse = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    members = [np.flatnonzero(inverse == i) for i in range(inverse.max() + 1)] if len(inverse) else []
    if not members:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    stats = []
    for _ in range(resamples):
        idx = np.concatenate([members[i] for i in rng.integers(0, len(members), len(members))])
        stats.append(metric(truth_a[idx].tolist(), pred_a[idx].tolist()).value)
    return percentile_interval(np.asarray(stats, dtype=float), len(members), alpha)


def mean_bootstrap(clusters: Sequence[Hashable], values: Sequence[float], resamples: int = 1000, seed: int = 0,
                   alpha: float = 0.05, batch_cells: int = 4_000_000) -> tuple[float, float]:
    """(low, high) of mean(values) over `resamples` cluster resamples: each resample draws whole
    clusters with replacement and takes sum(values) / count over them. (nan, nan) with no values,
    one cluster, or no spread (`percentile_interval`)."""
    if not len(values):
        return math.nan, math.nan
    _, inverse = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    sums = np.bincount(inverse, weights=np.asarray(values, dtype=float))
    counts = np.bincount(inverse).astype(float)
    g = len(sums)
    rng = np.random.default_rng(seed)
    stats: list[np.ndarray] = []
    step = max(1, batch_cells // g)
    for start in range(0, resamples, step):
        idx = rng.integers(0, g, (min(step, resamples - start), g))
        stats.append(sums[idx].sum(axis=1) / counts[idx].sum(axis=1))
    return percentile_interval(np.concatenate(stats), g, alpha)


def balanced_accuracy_bootstrap(clusters: Sequence[Hashable], truth: Sequence, pred: Sequence, resamples: int = 1000,
                                seed: int = 0, alpha: float = 0.05, batch_cells: int = 4_000_000) -> tuple[float, float]:
    """(low, high) of balanced accuracy over cluster resamples: the same draws and the same value
    as `cluster_bootstrap(..., balanced_accuracy)`, from per-cluster hits and counts of each class
    in numpy (a Python metric call per resample is too slow for every judge of a sweep). Pairs
    with a missing side are left out, as the metric leaves them out."""
    if not len(truth):
        return math.nan, math.nan
    _, inverse = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    known = np.asarray([not (is_missing(t) or is_missing(p)) for t, p in zip(truth, pred, strict=True)], dtype=bool)
    classes = sorted({t for t, k in zip(truth, known, strict=True) if k}, key=str)
    g = int(inverse.max()) + 1
    hits = np.zeros((g, len(classes)))
    counts = np.zeros((g, len(classes)))
    for c, cls in enumerate(classes):
        is_cls = known & np.asarray([k and t == cls for t, k in zip(truth, known, strict=True)], dtype=bool)
        right = is_cls & np.asarray([p == cls for p in pred], dtype=bool)
        counts[:, c] = np.bincount(inverse, weights=is_cls.astype(float), minlength=g)
        hits[:, c] = np.bincount(inverse, weights=right.astype(float), minlength=g)
    rng = np.random.default_rng(seed)
    stats: list[np.ndarray] = []
    step = max(1, batch_cells // g)
    for start in range(0, resamples, step):
        idx = rng.integers(0, g, (min(step, resamples - start), g))
        h, n = hits[idx].sum(axis=1), counts[idx].sum(axis=1)
        with warnings.catch_warnings():       # a resample with no known pair: NaN, left out below
            warnings.simplefilter("ignore", RuntimeWarning)
            stats.append(np.nanmean(np.where(n > 0, h / np.maximum(n, 1), np.nan), axis=1))
    return percentile_interval(np.concatenate(stats), g, alpha)


def difference_of_means_ci(a: Sequence[float], b: Sequence[float], resamples: int = 2000, seed: int = 0,
                           alpha: float = 0.05) -> tuple[float, float, float]:
    """mean(a) - mean(b) and its percentile-bootstrap interval, the two samples resampled
    independently (scipy.stats.bootstrap): a judge's own items vs the others' (self-preference).
    (nan, nan, nan) when either side is empty; the interval is nan with fewer than 2 on a side or
    when neither side varies (no spread to resample)."""
    from scipy.stats import bootstrap

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if not len(x) or not len(y):
        return math.nan, math.nan, math.nan
    diff = float(x.mean() - y.mean())
    if len(x) < 2 or len(y) < 2:
        return diff, math.nan, math.nan
    if np.ptp(x) == 0 and np.ptp(y) == 0:
        return diff, math.nan, math.nan          # every resample gives the same difference
    res = bootstrap((x, y), lambda u, v, axis=-1: u.mean(axis=axis) - v.mean(axis=axis), n_resamples=resamples,
                    confidence_level=1 - alpha, method="percentile", rng=np.random.default_rng(seed), vectorized=True)
    return diff, float(res.confidence_interval.low), float(res.confidence_interval.high)



@dataclass(frozen=True)
class MeanCI:
    """A mean over units, how many units, and its 95% cluster-bootstrap interval (None when empty
    or undefined; `note` then says why)."""

    value: float | None
    n: int
    ci_low: float | None
    ci_high: float | None
    note: str | None = None

    def row(self, value: str, n: str = "n") -> dict[str, float | int | str | None]:
        """As table columns: the mean under its table's name, n, ci_low, ci_high, ci_note."""
        return {value: self.value, n: self.n, "ci_low": self.ci_low, "ci_high": self.ci_high, "ci_note": self.note}


def or_none(x: float) -> float | None:
    """A NaN (no interval) as None, the tables' missing value."""
    return None if math.isnan(x) else x


def mean_with_ci(clusters: Sequence[Hashable], values: Sequence[float | None], resamples: int = 1000,
                 seed: int = 0) -> MeanCI:
    """THE mean of per-unit values with its cluster-bootstrap 95% CI (`mean_bootstrap`), missing
    values (None, NaN) left out first: a rate over pairs, an agreement over items, a Spearman over
    lists, a metric over groups. No interval (None, and a note) with one cluster or no spread."""
    kept = [(c, float(v)) for c, v in zip(clusters, values, strict=True) if not is_missing(v)]
    if not kept:
        return MeanCI(None, 0, None, None)
    low, high = mean_bootstrap([c for c, _ in kept], [v for _, v in kept], resamples=resamples, seed=seed)
    note = interval_note(len({str(c) for c, _ in kept}), low)
    return MeanCI(sum(v for _, v in kept) / len(kept), len(kept), or_none(low), or_none(high), note)


def mean_of_means_with_ci(clusters: Sequence[Hashable], strata: Sequence[Hashable], values: Sequence[float | None],
                          resamples: int = 1000, seed: int = 0, alpha: float = 0.05) -> MeanCI:
    """The mean over strata (e.g. the two presentation orders) of each stratum's mean, with a CI of
    that same statistic: every resample draws whole clusters (pairs) and recomputes each stratum's
    mean and their average, so the point always lies in the interval's population. `n` counts the
    values; a stratum left empty by a resample drops out of that resample's average."""
    kept = [(str(c), str(s), float(v)) for c, s, v in zip(clusters, strata, values, strict=True) if not is_missing(v)]
    if not kept:
        return MeanCI(None, 0, None, None)
    _, ci = np.unique([c for c, _, _ in kept], return_inverse=True)
    _, si = np.unique([s for _, s, _ in kept], return_inverse=True)
    g, k = int(ci.max()) + 1, int(si.max()) + 1
    sums, counts = np.zeros((g, k)), np.zeros((g, k))
    np.add.at(sums, (ci, si), [v for _, _, v in kept])
    np.add.at(counts, (ci, si), 1.0)

    def statistic(s: np.ndarray, n: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(n > 0, s / np.maximum(n, 1), np.nan)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmean(means, axis=-1)

    point = float(statistic(sums.sum(axis=0), counts.sum(axis=0)))
    rng = np.random.default_rng(seed)
    stats = []
    step = max(1, 4_000_000 // (g * k))
    for start in range(0, resamples, step):
        idx = rng.integers(0, g, (min(step, resamples - start), g))
        stats.append(statistic(sums[idx].sum(axis=1), counts[idx].sum(axis=1)))
    low, high = percentile_interval(np.concatenate(stats), g, alpha)
    return MeanCI(point, len(kept), or_none(low), or_none(high), interval_note(g, low))
