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
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .bootstrap import (
    BATCH_CELLS,
    CONSTANT,
    FEW_JUDGE_ANSWERS,
    FEW_PER_CLASS,
    MIN_CLUSTERS,
    RESAMPLES,
    clusters_per_class,
    constant_interval,
    expanded_alpha,
    interval_note,
    percentile_interval,
    resample_indices,
)
from .proportion import LUMPY_RECALL, lumpy_recall_bounds, rate_interval, rate_note, rate_with_ci
from .row_statistics import (  # noqa: F401  (the statistics of estimates, imported from here)
    BinaryAgreement,
    MeanOf,
    balanced_accuracy_of,
    kappa_of,
    mean_of,
    mean_of_stratum_means,
    pearson_of,
    spearman_of,
)

Columns = Mapping[str, np.ndarray]
ColumnValues = Sequence[Any] | np.ndarray          # what `Units.of` takes for a column (it converts to numpy)
Statistic = Callable[[Columns], float]


IntervalRule = Callable[["Units", int, int], tuple[float, float, "str | None"]]


@dataclass(frozen=True)
class Units:
    """Rows of one estimate: `ids` the sorted cluster names, `members[i]` the row indices of
    cluster i, `columns` the rows' values, `statistic` rows -> the estimate. `rule`, where the
    estimate has its own interval (a rate: `proportion.rate_interval`; the calibration error: its
    centred bootstrap), is the one its table prints; else the expanded percentile bootstrap."""

    ids: tuple[str, ...]
    members: tuple[np.ndarray, ...]
    columns: Columns
    statistic: Statistic
    bounds: tuple[float, float] | None = None      # the range of a per-cluster value (a rate: 0, 1)
    rule: IntervalRule | None = None
    # the metric's range where an unbiased estimate of it can leave it (CE^2 below 0): a sweep's
    # ranking publishes the value and its interval clipped into it (sweep_rank.ranking)
    published_range: tuple[float, float] | None = None

    @classmethod
    def of(cls, clusters: Sequence[Hashable], columns: Mapping[str, ColumnValues], statistic: Statistic,
           bounds: tuple[float, float] | None = None, rule: IntervalRule | None = None,
           published_range: tuple[float, float] | None = None) -> Units:
        names = np.asarray([str(c) for c in clusters])
        ids, inverse = np.unique(names, return_inverse=True) if len(names) else (np.asarray([]), np.asarray([], int))
        order = np.argsort(inverse, kind="stable")
        offsets = np.searchsorted(inverse[order], np.arange(len(ids) + 1))
        members = tuple(order[offsets[i]:offsets[i + 1]] for i in range(len(ids)))
        return cls(tuple(str(i) for i in ids), members, {k: np.asarray(v) for k, v in columns.items()}, statistic,
                   bounds, rule, published_range)

    @classmethod
    def rate(cls, clusters: Sequence[Hashable], values: Sequence[float], strata: Sequence[Hashable] | None = None,
             need: int | None = None) -> Units:
        """A rate of values in [0, 1] (over strata: the mean of each stratum's rate, none where
        fewer than `need` strata hold a value), with the interval its tables print
        (`proportion.rate_with_ci`)."""
        columns = {"v": np.asarray(values, dtype=float)}
        if strata is None:
            return cls.of(clusters, columns, mean_of("v"), (0.0, 1.0), _rate_rule)
        return cls.of(clusters, {**columns, "stratum": np.asarray([str(s) for s in strata])},
                      mean_of_stratum_means("v", "stratum", need), (0.0, 1.0), _rate_rule)

    @classmethod
    def agreement(cls, clusters: Sequence[Hashable], truth: Sequence, pred: Sequence, statistic: Statistic) -> Units:
        """Agreement of binary predictions with the truth (kappa, balanced accuracy): the bootstrap
        interval, none where a truth class is in fewer than MIN_CLUSTERS clusters
        (`bootstrap.clusters_per_class`), as the tables print it."""
        return cls.of(clusters, {"truth": np.asarray(truth, dtype=bool), "pred": np.asarray(pred, dtype=bool)},
                      statistic, rule=_agreement_rule)

    @property
    def clusters(self) -> int:
        return len(self.ids)

    def cluster_of_rows(self) -> np.ndarray:
        """Each row's cluster position (the inverse of `members`)."""
        sizes = [len(m) for m in self.members]
        out = np.zeros(sum(sizes), dtype=int)
        if sizes:
            out[np.concatenate(self.members)] = np.repeat(np.arange(len(sizes)), sizes)
        return out

    def value(self) -> float:
        return float(self.statistic(self.columns)) if self.clusters else math.nan

    def _rows(self, positions: np.ndarray) -> dict[str, np.ndarray]:
        rows = np.concatenate([self.members[i] for i in positions]) if len(positions) else np.asarray([], int)
        return {k: v[rows] for k, v in self.columns.items()}

    def resampled(self, draws: np.ndarray, positions: np.ndarray | None = None) -> np.ndarray:
        """The statistic over each row of `draws` (indices into `positions`, this estimate's
        cluster positions, -1 for a cluster it lacks, left out; all clusters when None)."""
        positions = np.arange(self.clusters) if positions is None else np.asarray(positions)
        clusters = positions[draws]
        if hasattr(self.statistic, "resampled_means"):
            return self.statistic.resampled_means(self, clusters)
        return np.asarray([self.statistic(self._rows(row[row >= 0])) for row in clusters], dtype=float)

    def percentile(self, resamples: int, seed: int, expanded_for: int) -> tuple[float, float]:
        """The expanded percentile interval over cluster resamples (`bootstrap.percentile_interval`),
        expanded as for `expanded_for` clusters."""
        return percentile_interval(self.resampled(resample_indices(seed, self.clusters, resamples)), expanded_for)

    def interval(self, resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float]:
        """95% interval (none below MIN_CLUSTERS clusters): the estimate's own `rule`, else over
        cluster resamples, and where no resample varies and the value's bounds are known,
        `bootstrap.constant_interval`."""
        return self.interval_with_note(resamples, seed)[:2]

    def interval_with_note(self, resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float, str | None]:
        """`interval` and why it is missing or what it is (`bootstrap.interval_note`, CONSTANT)."""
        if self.clusters < MIN_CLUSTERS:
            return math.nan, math.nan, interval_note(self.clusters, None)
        if self.rule is not None:
            return self.rule(self, resamples, seed)
        low, high = self.percentile(resamples, seed, self.clusters)
        if math.isnan(low) and self.bounds is not None:
            return (*constant_interval(self.value(), self.clusters, self.bounds), CONSTANT)
        return low, high, interval_note(self.clusters, low)


def _agreement_rule(u: Units, resamples: int, seed: int) -> tuple[float, float, str | None]:
    """The bootstrap interval of an agreement metric, withheld where a truth class is in fewer
    than MIN_CLUSTERS clusters, or one of the judge's answers is: a judge saying No in 5 of 36
    stories (14 tests each) had its kappa's interval cover 0.91 and balanced accuracy's 0.91 (0.87
    at 2 stories), and 0.95-0.97 from 10 such stories up (tests/test_conformance.py). Expanded for
    the rarer answer's clusters, not all of them, as a rubric's stratified interval is: balanced
    accuracy is a mean of per-answer recalls, the rarer one's over those clusters alone (expanded
    for all 26 stories, one verdict each, a TTCW test's interval covered 0.93, and 0.94 at 80)."""
    rows = u.cluster_of_rows()
    truths = clusters_per_class(rows, u.columns["truth"].astype(bool))
    if truths < MIN_CLUSTERS:
        return math.nan, math.nan, FEW_PER_CLASS
    answers = clusters_per_class(rows, u.columns["pred"].astype(bool))
    if answers < MIN_CLUSTERS:
        return math.nan, math.nan, FEW_JUDGE_ANSWERS
    low, high = u.percentile(resamples, seed, min(truths, answers))
    if u.statistic is balanced_accuracy_of and not math.isnan(low):
        truth, pred = u.columns["truth"].astype(bool), u.columns["pred"].astype(bool)
        asked = np.stack([np.bincount(rows, ~truth, u.clusters), np.bincount(rows, truth, u.clusters)], axis=1)
        right = np.stack([np.bincount(rows, ~truth & ~pred, u.clusters), np.bincount(rows, truth & pred, u.clusters)],
                         axis=1)
        guard = lumpy_recall_bounds(right, asked)
        if guard is not None:
            return min(low, guard[0]), max(high, guard[1]), LUMPY_RECALL
    return low, high, interval_note(u.clusters, low)


def _rate_rule(u: Units, resamples: int, seed: int) -> tuple[float, float, str | None]:
    """A rate's interval from its rows, as `proportion.rate_with_ci` computes it for the tables."""
    clusters = u.cluster_of_rows()
    ci = rate_with_ci(clusters.tolist(), u.columns["v"].tolist(),
                      u.columns["stratum"].tolist() if "stratum" in u.columns else None, _need(u))
    return (math.nan if ci.ci_low is None else ci.ci_low, math.nan if ci.ci_high is None else ci.ci_high, ci.note)


def _need(u: Units) -> int | None:
    """The strata a rate's rows must all hold (a pair's two orders: `Units.rate`'s `need`)."""
    return u.statistic.need if isinstance(u.statistic, MeanOf) else None


def intervals_with_notes(cells: Sequence[Units], resamples: int = RESAMPLES, seed: int = 0,
                         batch_cells: int = BATCH_CELLS) -> list[tuple[float, float, str | None]]:
    """Each cell's `interval_with_note`; the rates' (`_rate_rule`) in one `rate_interval` over all
    of them, as the tables compute theirs (a sweep ranks hundreds of cells, and the rate rule one
    cell at a time was a fifth of its ranking), in padded arrays of at most `batch_cells` values."""
    rates = [i for i, u in enumerate(cells) if u.rule is _rate_rule and u.clusters >= MIN_CLUSTERS
             and _rate_values(u.columns["v"])]
    batched = set(rates)
    out: list[tuple[float, float, str | None]] = [
        (math.nan, math.nan, None) if i in batched else u.interval_with_note(resamples, seed)
        for i, u in enumerate(cells)]
    if not rates:
        return out
    strata = {i: np.unique(cells[i].columns["stratum"].astype(str), return_inverse=True)[1]
              if "stratum" in cells[i].columns else np.zeros(len(cells[i].columns["v"]), dtype=int) for i in rates}
    width, depth = max(cells[i].clusters for i in rates), max(int(s.max(initial=0)) + 1 for s in strata.values())
    step = max(1, batch_cells // (width * depth))          # padded arrays of a bounded size (large data, many cells)
    for start in range(0, len(rates), step):
        chunk = rates[start:start + step]
        sums, counts = np.zeros((len(chunk), width, depth)), np.zeros((len(chunk), width, depth))
        for d, i in enumerate(chunk):
            v = cells[i].columns["v"].astype(float)
            known = ~np.isnan(v)                              # a missing value is left out, as rate_with_ci does
            where = (cells[i].cluster_of_rows()[known], strata[i][known])
            np.add.at(sums[d], where, v[known])
            np.add.at(counts[d], where, 1.0)
        _, low, high, rule = rate_interval(sums, counts, need=np.asarray([_need(cells[i]) or 0 for i in chunk]))
        present = (counts.sum(axis=2) > 0).sum(axis=1)
        for d, i in enumerate(chunk):
            out[i] = (float(low[d]), float(high[d]), rate_note(int(rule[d]), int(present[d])))
    return out


def _rate_values(v: np.ndarray) -> bool:
    """Some values, all a rate can be of (else `_rate_rule`, one cell at a time, says what is wrong
    or that there is nothing to estimate)."""
    known = v[~np.isnan(v.astype(float))]
    return bool(len(known)) and known.min() >= 0 and known.max() <= 1


def same_as_best(cells: Sequence[Units], higher_is_better: bool, resamples: int = RESAMPLES, seed: int = 0,
                 alpha: float = 0.05) -> list[bool | None]:
    """Per cell: whether it cannot be told apart from the best (True), is worse than the best
    (False), or no statement is made (None: fewer than MIN_CLUSTERS clusters of its own, the
    cell then left out of the family).

    Simultaneous paired comparison of the values the ranking shows, each over its cell's own
    clusters: every resample draws from the union of the cells' clusters, and each cell's value
    is recomputed on the drawn clusters it has, so cells judged on the same stories see the same
    draws (a paired comparison) and cells on different stories vary independently. q is the
    (1 - alpha) quantile of max_j c_j - min_k c_k with c_j = (resampled - observed value of cell
    j), the largest error of any pairwise difference, read at Hesterberg's expanded level
    (`bootstrap.expanded_alpha`: at 10 clusters the plain 95% quantile let 8.1% of sweeps of 5
    equal cells mark one worse); a cell is worse than the best when the
    best's value exceeds its own by more than q. With probability about 1 - alpha every pairwise
    difference is within q of its estimate, so the chance that ANY cell truly as good as the best
    is marked worse is at most about alpha, the best having been chosen on the same data (a
    comparison with Bonferroni over "best vs each" is not valid after that choice: 20 equal cells
    were separated in 27 of 40 sweeps). (Testing on the clusters all cells share instead could
    mark the table's first row worse than a row it outranks.)"""
    verdicts: list[bool | None] = [None] * len(cells)
    family = [i for i, u in enumerate(cells) if u.clusters >= MIN_CLUSTERS]
    if not family:
        return verdicts
    union = sorted(set().union(*(cells[i].ids for i in family)))
    sign = 1.0 if higher_is_better else -1.0
    draws = resample_indices(seed, len(union), resamples)
    observed, errors = [], []
    for i in family:
        u = cells[i]
        where = {c: k for k, c in enumerate(u.ids)}
        own = np.asarray([where.get(c, -1) for c in union])                  # -1: a cluster the cell lacks
        value = sign * u.value()
        observed.append(value)
        errors.append(sign * u.resampled(draws, own) - value)
    err = np.vstack(errors)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)        # a resample where every cell is undefined
        spread = np.nanmax(err, axis=0) - np.nanmin(err, axis=0)
    spread = spread[~np.isnan(spread)]
    values = np.asarray(observed)
    if not len(spread) or np.isnan(values).all():
        return verdicts
    q = float(np.quantile(spread, 1 - expanded_alpha(len(union), alpha)))
    best = float(np.nanmax(values))
    for i, v in zip(family, values):
        verdicts[i] = None if math.isnan(v) else bool(best - v <= q)
    return verdicts


