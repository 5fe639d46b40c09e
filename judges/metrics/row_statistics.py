"""Statistics over the rows of an estimate (`estimates.Units`), each also computed for many
cluster resamples at once (`resampled_means(units, clusters)`): a sweep puts an interval on every
ranked value and compares every cell with the best, and a Python call per resample was the cost of
both. `clusters` holds cluster positions per resample (-1: a cluster the estimate lacks); a
resample is the multiset of its clusters' rows, so each row counts as often as its cluster was
drawn, and every statistic here equals the plain one on the duplicated rows (tested).
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .ranking import pearson, spearman

if TYPE_CHECKING:
    from .estimates import Units

Columns = Mapping[str, np.ndarray]


def multiplicity(u: Units, clusters: np.ndarray) -> np.ndarray:
    """(R, rows): how often each row is in each resample."""
    drawn = np.zeros((clusters.shape[0], u.clusters + 1))
    np.add.at(drawn, (np.arange(clusters.shape[0])[:, None], np.where(clusters >= 0, clusters, u.clusters)), 1.0)
    return drawn[:, u.cluster_of_rows()]


@dataclass(frozen=True)
class MeanOf:
    """The mean of a column (an accuracy, a rate, a mean Spearman over lists), or with `stratum`
    the mean over strata of each stratum's mean (pairwise accuracy, the mean of both orders).
    Resampled from per-cluster sums at once (`resampled_means`), not row by row."""

    column: str
    stratum: str | None = None
    need: int | None = None           # strata that must hold a value (a pair's two orders), else NaN

    def __call__(self, c: Columns) -> float:
        if not len(c[self.column]):
            return math.nan
        if self.stratum is None:
            return float(c[self.column].mean())
        strata = np.unique(c[self.stratum])
        if self.need is not None and len(strata) < self.need:
            return math.nan
        return float(np.mean([c[self.column][c[self.stratum] == s].mean() for s in strata]))

    def sums(self, u: Units) -> tuple[np.ndarray, np.ndarray]:
        """Per cluster of `u` and stratum: the sum of the column and the count, (G, S)."""
        _, si = (np.unique(u.columns[self.stratum], return_inverse=True) if self.stratum is not None
                 else (None, np.zeros(len(u.columns[self.column]), dtype=int)))
        shape = (u.clusters, int(si.max()) + 1 if len(si) else 1)
        sums, counts = np.zeros(shape), np.zeros(shape)
        rows = u.cluster_of_rows()
        np.add.at(sums, (rows, si), u.columns[self.column].astype(float))
        np.add.at(counts, (rows, si), 1.0)
        return sums, counts

    def resampled_means(self, u: Units, clusters: np.ndarray) -> np.ndarray:
        """The statistic over each row of `clusters` (cluster positions; -1: none)."""
        sums, counts = self.sums(u)
        kept = (clusters >= 0)[..., None]
        total = np.where(kept, sums[np.maximum(clusters, 0)], 0.0).sum(axis=1)
        size = np.where(kept, counts[np.maximum(clusters, 0)], 0.0).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            means = np.nanmean(np.where(size > 0, total / np.where(size > 0, size, 1), np.nan), axis=1)
        if self.need is not None:
            means = np.where((size > 0).sum(axis=-1) < self.need, np.nan, means)
        return means


def mean_of(column: str) -> MeanOf:
    """The mean of a column (`MeanOf`)."""
    return MeanOf(column)


def mean_of_stratum_means(column: str, stratum: str, need: int | None = None) -> MeanOf:
    """The mean over strata of each stratum's mean (`MeanOf`), NaN with fewer than `need` strata."""
    return MeanOf(column, stratum, need)


def binary_counts(c: Columns) -> tuple[float, float, float, float]:
    t, p = c["truth"].astype(bool), c["pred"].astype(bool)
    return float((t & p).sum()), float((t & ~p).sum()), float((~t & p).sum()), float((~t & ~p).sum())


def kappa_from(tp, fn, fp, tn):
    """Cohen's kappa of two binary raters from the 2 x 2 counts (arrays or floats); NaN when both
    raters are constant."""
    tp, fn, fp, tn = (np.asarray(x, dtype=float) for x in (tp, fn, fp, tn))
    n = tp + fn + fp + tn
    with np.errstate(invalid="ignore", divide="ignore"):
        po = (tp + tn) / n
        pe = ((tp + fn) * (tp + fp) + (fp + tn) * (fn + tn)) / n / n
        return np.where((n > 0) & (pe < 1 - 1e-15), (po - pe) / (1 - pe), np.nan)


def balanced_accuracy_from(tp, fn, fp, tn):
    """The mean of sensitivity and specificity from the 2 x 2 counts; NaN with one truth class."""
    tp, fn, fp, tn = (np.asarray(x, dtype=float) for x in (tp, fn, fp, tn))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((tp + fn > 0) & (fp + tn > 0), 0.5 * (tp / (tp + fn) + tn / (fp + tn)), np.nan)


@dataclass(frozen=True)
class BinaryAgreement:
    """Kappa or balanced accuracy of columns truth and pred, resampled from per-cluster 2 x 2
    counts at once."""

    of: Callable[..., np.ndarray]

    def __call__(self, c: Columns) -> float:
        return float(self.of(*binary_counts(c)))

    def resampled_means(self, u: Units, clusters: np.ndarray) -> np.ndarray:
        t, p = u.columns["truth"].astype(bool), u.columns["pred"].astype(bool)
        rows = u.cluster_of_rows()
        cells = np.stack([np.bincount(rows, weights=(a & b).astype(float), minlength=u.clusters)
                          for a, b in ((t, p), (t, ~p), (~t, p), (~t, ~p))])          # (4, G)
        # each resample's 2 x 2 counts: its draw counts times the clusters' (gathering the drawn
        # clusters' counts and adding them was 2-5 ms of every TTCW table's interval)
        resamples, valid = len(clusters), clusters >= 0
        flat = (clusters + u.clusters * np.arange(resamples)[:, None])[valid]
        counts = np.bincount(flat, minlength=resamples * u.clusters).reshape(resamples, u.clusters)
        return self.of(*(cells @ counts.T.astype(float)))


kappa_of = BinaryAgreement(kappa_from)
balanced_accuracy_of = BinaryAgreement(balanced_accuracy_from)


@dataclass(frozen=True)
class Correlation:
    """Pearson's r (or, `ranks`, Spearman's rho) of columns x and y; NaN with fewer than 3 rows or
    a constant side."""

    ranks: bool

    def __call__(self, c: Columns) -> float:
        return (spearman if self.ranks else pearson)(c["x"].tolist(), c["y"].tolist()).value

    def resampled_means(self, u: Units, clusters: np.ndarray) -> np.ndarray:
        w = multiplicity(u, clusters)
        x, y = u.columns["x"].astype(float), u.columns["y"].astype(float)
        if self.ranks:
            x, y = average_ranks(x, w), average_ranks(y, w)
        return weighted_correlation(np.broadcast_to(x, w.shape), np.broadcast_to(y, w.shape), w)


def average_ranks(v: np.ndarray, w: np.ndarray) -> np.ndarray:
    """(R, rows): each row's average rank (1-based, ties averaged) in the multiset where row i
    counts w[r, i] times: rows with equal values share the mean of the ranks they span."""
    distinct, group = np.unique(v, return_inverse=True)
    counts = np.stack([w[:, group == k].sum(axis=1) for k in range(len(distinct))], axis=1)
    below = np.cumsum(counts, axis=1) - counts
    return (below + (counts + 1) / 2)[:, group]


def weighted_correlation(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Per row of the (R, rows) arrays: Pearson's r of x and y with weights w (NaN with fewer
    than 3 weighted rows or a constant side)."""
    n = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx, my = (w * x).sum(axis=1) / n, (w * y).sum(axis=1) / n
        dx, dy = x - mx[:, None], y - my[:, None]
        sxx, syy, sxy = (w * dx * dx).sum(axis=1), (w * dy * dy).sum(axis=1), (w * dx * dy).sum(axis=1)
        scale = np.maximum(np.abs(x).max(axis=1, initial=0), np.abs(y).max(axis=1, initial=0)) ** 2 * n * 1e-12
        r = sxy / np.sqrt(sxx * syy)
    return np.where((n >= 3) & (sxx > scale) & (syy > scale), np.clip(r, -1.0, 1.0), np.nan)


pearson_of = Correlation(ranks=False)
spearman_of = Correlation(ranks=True)
