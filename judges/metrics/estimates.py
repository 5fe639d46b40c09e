"""Rankable estimates: the resampling units behind one published number, so that a sweep can put
an interval on every value it ranks and say which cells it cannot tell apart from the best.

A `Units` holds one row per observation (numpy columns), the cluster each row belongs to (a story,
a pair, a list, a group: the independent unit) and the statistic that turns rows into the
published value. Resampling whole clusters gives its interval (`interval`, the one rule of
`bootstrap.percentile_interval`); drawing the SAME clusters for two cells gives a paired
difference (`separable`): two cells judged on the same stories share the stories' difficulty, and
a paired comparison sees differences that two separate intervals hide.

>>> u = Units.of([f"s{i // 2}" for i in range(24)], {"v": [float(i % 3 == 0) for i in range(24)]}, mean_of("v"))
>>> round(u.value(), 4), u.clusters
(0.3333, 12)
"""
from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .bootstrap import CONSTANT, MIN_CLUSTERS, constant_interval, interval_note, percentile_interval
from .ranking import pearson, spearman

Columns = Mapping[str, np.ndarray]
Statistic = Callable[[Columns], float]


@dataclass(frozen=True)
class Units:
    """Rows of one estimate: `ids` the sorted cluster names, `members[i]` the row indices of
    cluster i, `columns` the rows' values, `statistic` rows -> the estimate."""

    ids: tuple[str, ...]
    members: tuple[np.ndarray, ...]
    columns: Columns
    statistic: Statistic
    bounds: tuple[float, float] | None = None      # the range of a per-cluster value (a rate: 0, 1)

    @classmethod
    def of(cls, clusters: Sequence[Hashable], columns: Mapping[str, Sequence], statistic: Statistic,
           bounds: tuple[float, float] | None = None) -> Units:
        names = np.asarray([str(c) for c in clusters])
        ids, inverse = np.unique(names, return_inverse=True) if len(names) else (np.asarray([]), np.asarray([], int))
        order = np.argsort(inverse, kind="stable")
        offsets = np.searchsorted(inverse[order], np.arange(len(ids) + 1))
        members = tuple(order[offsets[i]:offsets[i + 1]] for i in range(len(ids)))
        return cls(tuple(str(i) for i in ids), members, {k: np.asarray(v) for k, v in columns.items()}, statistic,
                   bounds)

    @property
    def clusters(self) -> int:
        return len(self.ids)

    def value(self) -> float:
        return float(self.statistic(self.columns)) if self.clusters else math.nan

    def _rows(self, positions: np.ndarray) -> dict[str, np.ndarray]:
        rows = np.concatenate([self.members[i] for i in positions]) if len(positions) else np.asarray([], int)
        return {k: v[rows] for k, v in self.columns.items()}

    def resampled(self, draws: np.ndarray, positions: np.ndarray | None = None) -> np.ndarray:
        """The statistic over each row of `draws` (indices into `positions`, this estimate's
        cluster positions; all clusters when None)."""
        positions = np.arange(self.clusters) if positions is None else positions
        return np.asarray([self.statistic(self._rows(positions[draw])) for draw in draws], dtype=float)

    def interval(self, resamples: int = 1000, seed: int = 0) -> tuple[float, float]:
        """95% interval over cluster resamples (none below MIN_CLUSTERS clusters); where no
        resample varies and the value's bounds are known, `bootstrap.constant_interval`."""
        return self.interval_with_note(resamples, seed)[:2]

    def interval_with_note(self, resamples: int = 1000, seed: int = 0) -> tuple[float, float, str | None]:
        """`interval` and why it is missing or what it is (`bootstrap.interval_note`, CONSTANT)."""
        if self.clusters < MIN_CLUSTERS:
            return math.nan, math.nan, interval_note(self.clusters, None)
        draws = np.random.default_rng(seed).integers(0, self.clusters, (resamples, self.clusters))
        low, high = percentile_interval(self.resampled(draws), self.clusters)
        if math.isnan(low) and self.bounds is not None:
            return (*constant_interval(self.value(), self.clusters, self.bounds), CONSTANT)
        return low, high, interval_note(self.clusters, low)


def same_as_best(cells: Sequence[Units], higher_is_better: bool, resamples: int = 1000, seed: int = 0,
                 alpha: float = 0.05) -> list[bool | None]:
    """Per cell: whether it cannot be told apart from the best (True), is worse than the best
    (False), or no statement is made (None: fewer than MIN_CLUSTERS clusters shared by all cells).

    Simultaneous paired comparison over the clusters every cell shares (each cell's value
    recomputed on them): the same clusters are drawn for every cell in each resample, and q is
    the (1 - alpha) quantile of max_j c_j - min_k c_k with c_j = (resampled - observed value of
    cell j), the largest error of any pairwise difference. A cell is worse than the best when the
    best's value exceeds its own by more than q. With probability about 1 - alpha every pairwise
    difference is within q of its estimate, so the chance that ANY cell truly as good as the best
    is marked worse is at most about alpha, the best having been chosen on the same data (a
    comparison with Bonferroni over "best vs each" is not valid after that choice: 20 equal cells
    were separated in 27 of 40 sweeps)."""
    if not cells:
        return []
    shared = sorted(set.intersection(*(set(u.ids) for u in cells)))
    if len(shared) < MIN_CLUSTERS:
        return [None] * len(cells)
    sign = 1.0 if higher_is_better else -1.0
    draws = np.random.default_rng(seed).integers(0, len(shared), (resamples, len(shared)))
    observed, errors = [], []
    for u in cells:
        positions = np.asarray([u.ids.index(c) for c in shared])
        value = sign * float(u.statistic(u._rows(positions)))
        observed.append(value)
        errors.append(sign * u.resampled(draws, positions) - value)
    err = np.vstack(errors)
    spread = np.nanmax(err, axis=0) - np.nanmin(err, axis=0)
    spread = spread[~np.isnan(spread)]
    values = np.asarray(observed)
    if not len(spread) or np.isnan(values).all():
        return [None] * len(cells)
    q = float(np.quantile(spread, 1 - alpha))
    best = float(np.nanmax(values))
    return [None if math.isnan(v) else bool(best - v <= q) for v in values]


# -- statistics over rows (numpy, called once per resample) ----------------------------------
def mean_of(column: str) -> Statistic:
    """The mean of a column (an accuracy, a rate, a mean Spearman over lists)."""
    return lambda c: float(c[column].mean()) if len(c[column]) else math.nan


def mean_of_stratum_means(column: str, stratum: str) -> Statistic:
    """The mean over strata of each stratum's mean (pairwise accuracy, the mean of both orders)."""
    def stat(c: Columns) -> float:
        means = [c[column][c[stratum] == s].mean() for s in np.unique(c[stratum])]
        return float(np.mean(means)) if means else math.nan
    return stat


def binary_counts(c: Columns) -> tuple[float, float, float, float]:
    t, p = c["truth"].astype(bool), c["pred"].astype(bool)
    return float((t & p).sum()), float((t & ~p).sum()), float((~t & p).sum()), float((~t & ~p).sum())


def kappa_of(c: Columns) -> float:
    """Cohen's kappa of two binary raters (truth, pred); NaN when both are constant."""
    tp, fn, fp, tn = binary_counts(c)
    n = tp + fn + fp + tn
    if not n:
        return math.nan
    po = (tp + tn) / n
    pe = ((tp + fn) * (tp + fp) + (fp + tn) * (fn + tn)) / n / n
    return math.nan if pe >= 1 - 1e-15 else (po - pe) / (1 - pe)


def balanced_accuracy_of(c: Columns) -> float:
    """The mean of sensitivity and specificity; NaN with one truth class."""
    tp, fn, fp, tn = binary_counts(c)
    if not (tp + fn) or not (fp + tn):
        return math.nan
    return 0.5 * (tp / (tp + fn) + tn / (fp + tn))


def pearson_of(c: Columns) -> float:
    """Pearson's r of columns x and y; NaN with fewer than 3 rows or a constant side."""
    return pearson(c["x"].tolist(), c["y"].tolist()).value


def spearman_of(c: Columns) -> float:
    """Spearman's rho of columns x and y; NaN with fewer than 3 rows or a constant side."""
    return spearman(c["x"].tolist(), c["y"].tolist()).value
