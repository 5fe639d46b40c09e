"""Percentile bootstrap confidence intervals that resample whole clusters (a story's verdicts,
a pair's two orders) so that correlated items do not make an interval look narrower than it is.

Every interval follows one rule (`percentile_interval`): the expanded percentile interval, and
none at all from fewer than MIN_CLUSTERS clusters.

>>> ids = list(range(12))
>>> lo, hi = cluster_bootstrap(ids, [1, 1, 0, 0] * 3, [1, 0, 0, 0] * 3, cohen_kappa, resamples=200)
>>> lo <= hi
True
>>> cluster_bootstrap([1, 2, 3, 4], [1, 1, 0, 0], [1, 0, 0, 0], cohen_kappa, resamples=200)
(nan, nan)

`mean_bootstrap` is the same resampling for a mean of per-row values (an accuracy, a rate, half
credit), computed from per-cluster sums in numpy: the same draws as `cluster_bootstrap` with
`accuracy`, fast enough for a million verdicts.

>>> ids = [i // 2 for i in range(24)]
>>> mean_bootstrap(ids, [float(i % 3 == 0) for i in range(24)], resamples=200) == cluster_bootstrap(
...     ids, [True] * 24, [i % 3 == 0 for i in range(24)], accuracy, resamples=200)
True
"""
from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from .agreement import accuracy, cohen_kappa  # noqa: F401  (used by the doctests)
from .base import MetricResult, is_missing

# THE rule for every interval litjudge prints: none from fewer than MIN_CLUSTERS independent units
# (stories, pairs, lists, groups). Chosen from a coverage simulation (tests/test_conformance.py):
# the plain percentile interval of a story-resampled balanced accuracy covered 0.87 at 8 stories,
# 0.90 at 10 and 0.92 at 20; the expanded percentile interval below covers 0.935-0.95 from 8 on,
# and >= 0.93 at 10 for every estimate the conformance tests simulate.
MIN_CLUSTERS = 10
# THE number of cluster resamples of every bootstrap interval (a table and a sweep ranking the same
# estimate print the same interval: the calibration table drew 500 where the sweep drew 1,000).
RESAMPLES = 1000
# The most an option may ask for: an interval's draws are resamples x clusters integers at once (10^8
# resamples of a sweep's 48 clusters asked 38 GB, after all of its inference); 20,000 of 10,000 stories 1.6 GB.
MAX_RESAMPLES = 20_000

NO_SPREAD = "every resample gives the same value: no interval"


def resamples_problem(n: int) -> str | None:
    """What is wrong with `n` resamples asked for by an option (a table's, a sweep's), or None."""
    return None if 1 <= n <= MAX_RESAMPLES else f"must be 1 to {MAX_RESAMPLES:,}, got {n:,}"


def too_few(clusters: int) -> str:
    """The note where an interval is withheld for want of clusters."""
    return f"too few clusters ({clusters}; an interval needs {MIN_CLUSTERS}): no interval"


def joined_notes(*notes: str | None) -> str | None:
    """Several reasons in one `ci_note`: each once, in order, "; " between; None when there is none."""
    return "; ".join(dict.fromkeys(n for n in notes if n)) or None


def interval_note(clusters: int, low: float | None) -> str | None:
    """Why a bootstrap interval is missing (None when it is there): too few clusters cannot show
    how the value varies (a percentile interval from 2 stories covered 53% of the time), and
    neither can clusters that all give the same value (100% agreement, a constant score): a
    zero-width interval would claim a certainty the data cannot give."""
    if clusters < MIN_CLUSTERS:
        return too_few(clusters)
    return NO_SPREAD if low is None or math.isnan(low) else None


CONSTANT = "every cluster gives the same value: exact binomial bound on a cluster that differs"
FEW_JUDGE_ANSWERS = (f"one of the judge's answers is in fewer than {MIN_CLUSTERS} clusters: the agreement rests on "
                     "too few independent units: no interval")
FEW_PER_CLASS = (f"a human answer is in fewer than {MIN_CLUSTERS} clusters: its rate (sensitivity or specificity) "
                 "rests on too few independent units: no interval")


def clusters_per_class(clusters: Sequence[Hashable] | np.ndarray, truth: Sequence | np.ndarray) -> int:
    """The fewest clusters holding any one truth class (0 with fewer than 2 classes): an agreement
    metric's sensitivity and specificity each rest on the clusters holding their class. Where
    the experts pass 5% of tests with stories alike inside, the positives sit in one or two
    stories, and a story-resampled balanced accuracy covered 0.4-0.6 at 10 stories
    (tests/test_conformance.py); below MIN_CLUSTERS such clusters no interval is printed. Boolean
    numpy truth (no missing value) is counted in numpy: the loop below was 1 ms of every interval of
    a TTCW table's agreement (`estimates.Units.agreement`)."""
    if isinstance(truth, np.ndarray) and truth.dtype == bool:
        at = np.asarray(clusters)
        return min(np.unique(at[truth]).size, np.unique(at[~truth]).size)
    by_class: dict[str, set[str]] = {}
    for c, t in zip(clusters, truth, strict=True):
        if not is_missing(t):
            by_class.setdefault(str(t), set()).add(str(c))
    return min((len(v) for v in by_class.values()), default=0) if len(by_class) >= 2 else 0


def constant_interval(value: float, clusters: int, bounds: tuple[float, float], alpha: float = 0.05) -> tuple[float, float]:
    """The interval where every one of n clusters gave the same value v (no resample varies):
    the share of clusters that could differ is at most 1 - (alpha/2)^(1/n) (the exact binomial,
    Clopper-Pearson, bound for n of n alike), and such a cluster moves the mean at most to the
    end of the value's range. For a rate of 1 over n clusters this is Clopper-Pearson's
    [(alpha/2)^(1/n), 1]; for a judge right in exactly one of a pair's two orders every time,
    0.5 +- (1 - (alpha/2)^(1/n)) / 2. (nan, nan) below MIN_CLUSTERS."""
    if clusters < MIN_CLUSTERS or math.isnan(value):
        return math.nan, math.nan
    share = 1.0 - (alpha / 2) ** (1.0 / clusters)
    return value - share * (value - bounds[0]), value + share * (bounds[1] - value)


@functools.lru_cache(maxsize=4096)
def expanded_alpha(clusters: int, alpha: float = 0.05) -> float:
    """The tail level of Hesterberg's expanded percentile interval (2015, "What teachers should
    know about the bootstrap"): the percentile interval is too narrow in small samples by about
    the factor sqrt((n-1)/n) z / t(n-1); reading it at 2 Phi(-sqrt(n/(n-1)) t(n-1, 1-alpha/2))
    instead of alpha widens it by that factor."""
    from scipy.stats import norm, t

    n = max(clusters, 2)
    return float(2 * norm.cdf(-math.sqrt(n / (n - 1)) * t.ppf(1 - alpha / 2, n - 1)))


# A cluster bootstrap's draws are kept for reuse where they are this small (2 MB of indices): a
# sweep's cells, a rubric's questions and a simulation's judges draw the same ones.
REUSED_CELLS = 250_000
BATCH_CELLS = 4_000_000      # indices drawn at once otherwise (memory)


def resample_batches(seed: int, clusters: int, resamples: int = RESAMPLES, cells: int = BATCH_CELLS
                     ) -> Iterator[np.ndarray]:
    """THE draws of a cluster bootstrap: `resamples` rows of `clusters` indices drawn with
    replacement from default_rng(seed), yielded in batches of about `cells` indices (one stream:
    the rows are the same however they are batched). Every interval with the same seed and
    number of clusters resamples the same clusters, so small draws are made once a process
    (read-only: `_reused`)."""
    if resamples * clusters <= REUSED_CELLS:
        yield _reused(seed, clusters, resamples)
        return
    rng = np.random.default_rng(seed)
    step = max(1, cells // clusters)
    for start in range(0, resamples, step):
        yield rng.integers(0, clusters, (min(step, resamples - start), clusters))


def resample_indices(seed: int, clusters: int, resamples: int = RESAMPLES) -> np.ndarray:
    """All of `resample_batches` at once: (resamples, clusters); read-only where kept."""
    batches = list(resample_batches(seed, clusters, resamples))
    return batches[0] if len(batches) == 1 else np.concatenate(batches)


@functools.lru_cache(maxsize=64)
def _reused(seed: int, clusters: int, resamples: int) -> np.ndarray:
    idx = np.random.default_rng(seed).integers(0, clusters, (resamples, clusters))
    idx.flags.writeable = False
    return idx


def resample_counts(seed: int, clusters: int, resamples: int = RESAMPLES) -> np.ndarray:
    """How often each resample of `resample_indices` drew each cluster, (resamples, clusters), as
    floats: a sum over a resample is a product with it. Kept, read-only, where the draws are."""
    if resamples * clusters <= REUSED_CELLS:
        return _reused_counts(seed, clusters, resamples)
    return draw_counts(resample_indices(seed, clusters, resamples))


@functools.lru_cache(maxsize=64)
def _reused_counts(seed: int, clusters: int, resamples: int) -> np.ndarray:
    counts = draw_counts(_reused(seed, clusters, resamples))
    counts.flags.writeable = False
    return counts


def draw_counts(idx: np.ndarray) -> np.ndarray:
    """How often each row of draws (resamples, clusters) drew each cluster, as floats."""
    resamples, clusters = idx.shape
    return np.bincount((idx + clusters * np.arange(resamples)[:, None]).ravel(),
                       minlength=resamples * clusters).reshape(resamples, clusters).astype(float)


def resampled_sums(per_cluster: np.ndarray, seed: int, resamples: int = RESAMPLES, cells: int = BATCH_CELLS
                   ) -> np.ndarray:
    """THE sums of per-cluster values over each resample's drawn clusters: `per_cluster` is
    (clusters, ...), the result (resamples, ...), the draws `resample_batches`'. Each sum is a
    product with the resample's draw counts (`resample_counts`): on an EPYC Zen 4, 3-17 us where
    gathering the drawn rows and adding them took 139-767 us (10-30 clusters, 2 x 2 to 5 x 5
    tables, 500-1,000 resamples). Values that are not finite are gathered and added as drawn (a
    count of 0 times NaN would be NaN)."""
    g = len(per_cluster)
    flat = per_cluster.reshape(g, -1).astype(float, copy=False)
    shape = per_cluster.shape[1:]
    if not np.isfinite(flat).all():
        return np.concatenate([per_cluster[idx].sum(axis=1) for idx in resample_batches(seed, g, resamples, cells)])
    if resamples * g <= REUSED_CELLS:
        return (resample_counts(seed, g, resamples) @ flat).reshape(resamples, *shape)
    step = max(1, cells // (g + flat.shape[1]))        # counts and sums of one batch within `cells` floats
    return np.concatenate([draw_counts(idx) @ flat for idx in resample_batches(seed, g, resamples, step * g)]
                          ).reshape(resamples, *shape)


def percentile_interval(stats: np.ndarray, clusters: int, alpha: float = 0.05) -> tuple[float, float]:
    """The expanded percentile interval of the resampled statistics (NaN ones left out), or
    (nan, nan) with fewer than MIN_CLUSTERS clusters or when the resamples do not vary
    (`interval_note` says which)."""
    stats = np.asarray(stats, dtype=float)
    stats = stats[~np.isnan(stats)]
    if clusters < MIN_CLUSTERS or not len(stats) or np.ptp(stats) <= 1e-12 * max(1.0, float(np.abs(stats).max())):
        return math.nan, math.nan
    a = expanded_alpha(clusters, alpha)
    low, high = np.quantile(stats, [a / 2, 1 - a / 2])
    return float(low), float(high)


def cluster_bootstrap(clusters: Sequence[Hashable], truth: Sequence, pred: Sequence,
                      metric: Callable[[list, list], MetricResult], resamples: int = RESAMPLES, seed: int = 0,
                      alpha: float = 0.05, expand_for: int | None = None) -> tuple[float, float]:
    """(low, high) of `metric(truth, pred)` over `resamples` cluster resamples; resamples where the
    metric is undefined (NaN) are left out; (nan, nan) when none is defined, with one cluster, or
    when every resample gives the same value. `expand_for`: the count the expansion reads where it
    is not every cluster (an agreement's rarer answer's clusters, as `Units.agreement` prints it)."""
    truth_a, pred_a = np.asarray(truth, dtype=object), np.asarray(pred, dtype=object)
    _, inverse = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    members = [np.flatnonzero(inverse == i) for i in range(inverse.max() + 1)] if len(inverse) else []
    if not members:
        return math.nan, math.nan
    stats = []
    for drawn in resample_indices(seed, len(members), resamples):
        idx = np.concatenate([members[i] for i in drawn])
        stats.append(metric(truth_a[idx].tolist(), pred_a[idx].tolist()).value)
    return percentile_interval(np.asarray(stats, dtype=float), expand_for or len(members), alpha)


def mean_bootstrap(clusters: Sequence[Hashable], values: Sequence[float], resamples: int = RESAMPLES, seed: int = 0,
                   alpha: float = 0.05, batch_cells: int = BATCH_CELLS) -> tuple[float, float]:
    """(low, high) of mean(values) over `resamples` cluster resamples: each resample draws whole
    clusters with replacement and takes sum(values) / count over them. (nan, nan) with no values,
    one cluster, or no spread (`percentile_interval`)."""
    if not len(values):
        return math.nan, math.nan
    _, inverse = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    sums = np.bincount(inverse, weights=np.asarray(values, dtype=float))
    counts = np.bincount(inverse).astype(float)
    g = len(sums)
    drawn = resampled_sums(np.stack([sums, counts], axis=1), seed, resamples, batch_cells)
    return percentile_interval(drawn[:, 0] / drawn[:, 1], g, alpha)


def difference_of_means_ci(clusters: Sequence[Hashable], values: Sequence[float], own: Sequence[bool],
                           resamples: int = 2000, seed: int = 0, alpha: float = 0.05) -> tuple[float, float, float]:
    """mean(values where own) - mean(values where not own), and its bootstrap interval (the one
    rule, `percentile_interval`) resampling whole clusters, each bringing its own and other rows: a
    judge's own items vs the others' (self-preference), the item groups the clusters (an item's
    listwise score is relative to the items listed with it: one list is one independent unit,
    and resampling its items showed 0.25 [-0.75, 1.25] for a single list). (nan, nan, nan) when
    either side is empty; the interval is nan with fewer than MIN_CLUSTERS clusters or no spread."""
    x, mine = np.asarray(values, dtype=float), np.asarray(own, dtype=bool)
    if not mine.any() or mine.all():
        return math.nan, math.nan, math.nan
    diff = float(x[mine].mean() - x[~mine].mean())
    _, inverse = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    g = int(inverse.max()) + 1
    per = np.stack([np.bincount(inverse, weights=w, minlength=g)
                    for w in (x * mine, mine.astype(float), x * ~mine, (~mine).astype(float))])
    drawn = resampled_sums(per.T, seed, resamples).T          # (4, resamples)
    with np.errstate(invalid="ignore", divide="ignore"):
        stats = drawn[0] / drawn[1] - drawn[2] / drawn[3]
    low, high = percentile_interval(stats, g, alpha)
    return diff, low, high


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


def mean_with_ci(clusters: Sequence[Hashable], values: Sequence[float | None], resamples: int = RESAMPLES,
                 seed: int = 0, bounds: tuple[float, float] | None = None) -> MeanCI:
    """THE mean of per-unit values with its cluster-bootstrap 95% CI (`mean_bootstrap`), missing
    values (None, NaN) left out first: a rate over pairs, an agreement over items, a Spearman over
    lists, a metric over groups. No interval (None, and a note) with too few clusters or no spread;
    with no spread and known `bounds` of the values (a rate: 0, 1), `constant_interval`."""
    kept = [(c, float(v)) for c, v in zip(clusters, values, strict=True) if v is not None and not is_missing(v)]
    if not kept:
        return MeanCI(None, 0, None, None)
    low, high = mean_bootstrap([c for c, _ in kept], [v for _, v in kept], resamples=resamples, seed=seed)
    return with_note(sum(v for _, v in kept) / len(kept), len(kept), len({str(c) for c, _ in kept}), low, high,
                      bounds)


def with_note(value: float, n: int, clusters: int, low: float, high: float,
               bounds: tuple[float, float] | None) -> MeanCI:
    """A MeanCI from a bootstrap interval: where no resample varied and the values' bounds are
    known, the constant interval instead (noted CONSTANT)."""
    note = interval_note(clusters, low)
    if note == NO_SPREAD and bounds is not None:
        low, high = constant_interval(value, clusters, bounds)
        note = CONSTANT
    return MeanCI(value, n, or_none(low), or_none(high), note)


def mean_of_means_with_ci(clusters: Sequence[Hashable], strata: Sequence[Hashable], values: Sequence[float | None],
                          resamples: int = RESAMPLES, seed: int = 0, alpha: float = 0.05,
                          bounds: tuple[float, float] | None = None) -> MeanCI:
    """The mean over strata (e.g. the two presentation orders) of each stratum's mean, with a CI of
    that same statistic: every resample draws whole clusters (pairs) and recomputes each stratum's
    mean and their average, so the point always lies in the interval's population. `n` counts the
    values; a stratum left empty by a resample drops out of that resample's average."""
    kept = [(str(c), str(s), float(v)) for c, s, v in zip(clusters, strata, values, strict=True)
            if v is not None and not is_missing(v)]
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
    drawn = resampled_sums(np.stack([sums, counts], axis=1), seed, resamples)
    low, high = percentile_interval(statistic(drawn[:, 0], drawn[:, 1]), g, alpha)
    return with_note(point, len(kept), g, low, high, bounds)
