"""The interval of a clustered proportion: a rate, a label share, an agreement with half credit for
ties, the mean of a pair's two orders' accuracies. Values lie in [0, 1] (0/1 answers, 0.5 for a
tie); clusters (stories, pairs, items) move together.

Why not the bootstrap. Near 0 or 1, with correlated values inside a cluster (a story's 14 tests),
the expanded percentile interval of a story-resampled rate covered 0.85-0.90 at 10 stories and
0.80-0.89 at 30 (scripts/proportion_intervals.py): a resample cannot show the clusters the sample
lacks, and at p = 0.05 those are the few stories where the judge answers the rarer label often.

The rule (Korn & Graubard 1998, "Confidence intervals for proportions with small expected number
of positive counts estimated from survey data"): Clopper-Pearson on the effective sample size
n* = p (1 - p) / v, v the cluster-robust (linearized) variance of the estimate, n* at most the
number of values (a design effect of at least 1), scaled by (t(n-1) / t(G-1))^2 for the G - 1
degrees of freedom of v. It covers 0.93-0.99 where the rate is between 0.2 and 0.8, but near 0 or
1 it covered 0.85-0.92 at 30 stories (rho = 0.6): v is estimated from the clusters the sample
holds, and the few where the rarer answer concentrates are often not among them. Hence, with the
reason in the published interval's note:
- a rate below LOPSIDED or above 1 - LOPSIDED, or whose rarer answer (a value above 0, or one
  below 1) occurs in fewer than FEW_CLUSTERS clusters: the interval is widened to Clopper-Pearson
  with one trial per cluster (n* = G, the largest design effect there can be), which covered
  0.94-1.00 in every case simulated, 5% of other answers spread over all clusters included;
- where every cluster gives the same value (v = 0), the exact binomial bound on a cluster that
  differs (`bootstrap.constant_interval`; for a rate of 1 over G clusters this equals the guard's
  Clopper-Pearson, [0.025^(1/G), 1]).
No interval from fewer than MIN_CLUSTERS clusters (the one rule of `bootstrap`).

>>> v = rate_with_ci([i // 14 for i in range(140)], [float(i % 5 == 0) for i in range(140)])
>>> round(v.value, 4), v.ci_low is not None
(0.2, True)
>>> rate_with_ci(list(range(10)), [1.0] * 10).ci_low == 0.025 ** (1 / 10)
True
"""
from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np

from .base import is_missing
from .bootstrap import (
    CONSTANT,
    MIN_CLUSTERS,
    RESAMPLES,
    MeanCI,
    constant_interval,
    or_none,
    resample_indices,
    too_few,
    with_note,
)

FEW_CLUSTERS = 5
LOPSIDED = 0.2
FEW = (f"a rate below {LOPSIDED} or above {1 - LOPSIDED:g}, or its rarer answer in fewer than {FEW_CLUSTERS} "
       "clusters: Clopper-Pearson with one trial per cluster (the largest design effect)")


def clopper_pearson(x: np.ndarray, n: np.ndarray, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """The exact binomial interval of x successes in n trials (both may be fractional: Beta
    quantiles), elementwise."""
    from scipy.special import betaincinv  # the Beta quantile as a ufunc (scipy.stats' ppf is slow)

    x, n = np.asarray(x, dtype=float), np.asarray(n, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        low = np.where(x > 0, betaincinv(np.maximum(x, 1e-300), n - x + 1, alpha / 2), 0.0)
        high = np.where(x < n, betaincinv(x + 1, np.maximum(n - x, 1e-300), 1 - alpha / 2), 1.0)
    return low, high


def rate_interval(sums: np.ndarray, counts: np.ndarray, alpha: float = 0.05, values: np.ndarray | None = None,
                  need: int | np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(value, low, high, rule) of D estimates at once from per-cluster, per-stratum sums of values
    and counts of shape (D, G, S): value = the mean over strata of each stratum's sum / count (one
    stratum: the plain rate; the two orders of a pair: their mean). `rule` says which interval
    each got: 0 Korn-Graubard, 1 the few-clusters guard, 2 constant, 3 none (too few clusters), 4
    none and no value (fewer than `need` strata hold a value: the mean of a pair's two orders with
    one order unanswered would be the other's alone, its position bias included). Clusters with
    count 0 in every stratum are left out of G. `values` (D,): how many values the estimate is
    over, the bound on n* (default: the counts' total; a mean of per-cluster means passes each
    cluster's mean with count 1 and its values here)."""
    sums, counts = np.asarray(sums, dtype=float), np.asarray(counts, dtype=float)
    present = counts.sum(axis=2) > 0                                     # (D, G)
    g = present.sum(axis=1).astype(float)                                # clusters per estimate
    totals, sizes = sums.sum(axis=1), counts.sum(axis=1)                 # (D, S)
    strata = (sizes > 0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(sizes > 0, totals / np.where(sizes > 0, sizes, 1), 0.0)
        value = ratio.sum(axis=1) / strata
        # each cluster's share of the linearized estimate: sum over strata of (y - r m) / (S M)
        weight = np.where(sizes > 0, 1.0 / (strata[:, None] * np.where(sizes > 0, sizes, 1)), 0.0)
        z = ((sums - ratio[:, None, :] * counts) * weight[:, None, :]).sum(axis=2)
        variance = g / (g - 1) * (z ** 2).sum(axis=1)
    n = counts.sum(axis=(1, 2)) if values is None else np.asarray(values, dtype=float)
    cluster_sum, cluster_n = sums.sum(axis=2), counts.sum(axis=2)
    rarer = np.minimum((present & (cluster_sum > 1e-12)).sum(axis=1),
                       (present & (cluster_sum < cluster_n - 1e-12)).sum(axis=1))
    constant = variance <= 1e-14 * np.maximum(value * (1 - value), 1e-300)
    few = (rarer < FEW_CLUSTERS) | (np.minimum(value, 1 - value) < LOPSIDED)
    rule = np.where(g < MIN_CLUSTERS, 3, np.where(constant, 2, np.where(few, 1, 0)))
    if need is not None:
        short = strata < need
        value, rule = np.where(short, np.nan, value), np.where(short, 4, rule)
    # each interval computed only where its rule applies (the Beta quantiles are most of the cost)
    low, high = np.full(value.shape, np.nan), np.full(value.shape, np.nan)
    # (and not at all where none does: most calls are one estimate, and an empty ufunc call costs)
    kg, guarded, flat = rule <= 1, rule == 1, rule == 2
    if kg.any():
        low[kg], high[kg] = korn_graubard(value[kg], variance[kg], n[kg], np.maximum(g[kg] - 1, 1), alpha)
    if guarded.any():
        few_low, few_high = clopper_pearson(value[guarded] * g[guarded], g[guarded], alpha)
        low[guarded], high[guarded] = np.minimum(low[guarded], few_low), np.maximum(high[guarded], few_high)
    if flat.any():
        low[flat], high[flat] = _constant(value[flat], g[flat], alpha)
    return value, low, high, rule


def korn_graubard(value: np.ndarray, variance: np.ndarray, n: np.ndarray, df: np.ndarray,
                  alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """THE Korn-Graubard interval of an estimated proportion: Clopper-Pearson on the effective
    sample size n* = p (1 - p) / v (at most n, the values the estimate is over), scaled by
    (t(n - 1) / t(df))^2 for the `df` degrees of freedom of v; n itself where v says nothing (0 or
    undefined). Elementwise; `value` must lie in [0, 1]."""
    from scipy.special import stdtrit  # Student's t quantile as a ufunc

    with np.errstate(invalid="ignore", divide="ignore"):
        effective = np.minimum(value * (1 - value) / variance, n)
        effective = effective * (stdtrit(np.maximum(n - 1, 1), 1 - alpha / 2) / stdtrit(df, 1 - alpha / 2)) ** 2
        effective = np.where(np.isfinite(effective) & (effective > 0), effective, n)
    return clopper_pearson(value * effective, effective, alpha)


def _constant(value: np.ndarray, g: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    pairs = [constant_interval(float(v), int(k), (0.0, 1.0), alpha) if k >= MIN_CLUSTERS and not math.isnan(v)
             else (math.nan, math.nan) for v, k in zip(value, g)]
    return np.asarray([p[0] for p in pairs]), np.asarray([p[1] for p in pairs])


ONE_ORDER = ("one order has no answer: the mean of both orders would be the other order's alone, its position "
             "bias included: no value")
NOTES = {1: FEW, 2: CONSTANT, 4: ONE_ORDER}


def cluster_sums(clusters: Sequence[Hashable], values: Sequence[float], strata: Sequence[Hashable] | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Per cluster and stratum: the sum of the values and their count, as (1, G, S) arrays, the
    clusters and strata in the sorted order of their names (as text)."""
    ci = _codes(clusters)
    si = _codes(strata) if strata is not None else [0] * len(ci)
    groups, kinds = max(ci) + 1, max(si) + 1
    cells = np.asarray(ci) * kinds + np.asarray(si)
    # bincount adds each cell's values in the order given, as np.add.at did (the same sums to the last bit)
    sums = np.bincount(cells, weights=np.asarray(values, dtype=float), minlength=groups * kinds)
    counts = np.bincount(cells, minlength=groups * kinds).astype(float)
    return sums.reshape(1, groups, kinds), counts.reshape(1, groups, kinds)


def _codes(keys: Sequence[Hashable]) -> list[int]:
    """Each key's place among the distinct keys sorted as text (a few dozen keys a call: a dict
    is faster here than numpy's unique over a string array)."""
    names = [str(k) for k in keys]
    place = {name: i for i, name in enumerate(sorted(set(names)))}
    return [place[name] for name in names]


def rate_with_ci(clusters: Sequence[Hashable], values: Sequence[float | None],
                 strata: Sequence[Hashable] | None = None, need: int | None = None) -> MeanCI:
    """THE rate of values in [0, 1] (missing ones left out) with its 95% interval (module doc):
    over strata (a pair's two orders), the mean of each stratum's rate, none where fewer than
    `need` strata hold a value (rate_interval's rule 4). `n` counts the values."""
    known = [(i, float(v)) for i, v in enumerate(values) if v is not None and not is_missing(v)]
    if not known:
        return MeanCI(None, 0, None, None)
    keep, vals = [i for i, _ in known], [v for _, v in known]
    if min(vals) < 0 or max(vals) > 1:
        raise ValueError(f"a rate's values lie in [0, 1], got {min(vals)} .. {max(vals)}")
    sums, counts = cluster_sums([clusters[i] for i in keep], vals,
                                None if strata is None else [strata[i] for i in keep])
    return _one(*rate_interval(sums, counts, need=need), n=len(keep), clusters=int(sums.shape[1]))


def rate_note(rule: int, clusters: int) -> str | None:
    """The note of a `rate_interval` estimate with this `rule` over `clusters` clusters."""
    return too_few(clusters) if rule == 3 else NOTES.get(rule)


def _one(value: np.ndarray, low: np.ndarray, high: np.ndarray, rule: np.ndarray, n: int, clusters: int) -> MeanCI:
    """The first (only) estimate of `rate_interval` as a MeanCI with its note."""
    return MeanCI(or_none(float(value[0])), n, or_none(float(low[0])), or_none(float(high[0])),
                  rate_note(int(rule[0]), clusters))


def cluster_mean_with_ci(clusters: Sequence[Hashable], values: Sequence[float | None]) -> MeanCI:
    """The mean over clusters of each cluster's rate (every story weighs the same: a cascade's
    certified agreement), values in [0, 1], with the interval of `rate_interval`: each cluster's
    rate one unit, n* bounded by the number of values. `n` counts the clusters."""
    keep = [(str(c), float(v)) for c, v in zip(clusters, values, strict=True) if v is not None and not is_missing(v)]
    if not keep:
        return MeanCI(None, 0, None, None)
    sums, counts = cluster_sums([c for c, _ in keep], [v for _, v in keep])
    rates = sums / counts
    g = int(rates.shape[1])
    return _one(*rate_interval(rates, np.ones_like(rates), values=np.asarray([len(keep)])), n=g, clusters=g)


LUMPY = (f"fewer than {FEW_CLUSTERS} units off the bound the values pile at: the bootstrap-t interval widened to "
         "Clopper-Pearson with one trial per unit (the largest design effect)")


def bounded_mean_with_ci(values: Sequence[float | None], bounds: tuple[float, float], resamples: int = RESAMPLES,
                         seed: int = 0, alpha: float = 0.05) -> MeanCI:
    """THE mean of one value per unit, the values within `bounds` (a reference-Likert group's
    Spearman or pairwise accuracy), with a bootstrap-t 95% interval: each resample's t statistic
    (its mean's distance from the mean in its own standard errors) gives the quantiles, so the
    interval leans the way the values are skewed, where the percentile interval covered 0.92 at
    10 groups. A resample of one value drawn n times has an infinite t (it is the most extreme
    mean there is), kept, and the quantiles are read without interpolating into it: dropped, the
    lower bound of [1]*9 + [-1] was its mean (0.8), and a judge whose groups pile at one bound
    was covered 0.73-0.90 at 10 groups. Where fewer than FEW_CLUSTERS units lie off that bound
    (a lumpy mean: two candidates a group, their accuracy 0, 0.5 or 1), the interval is widened
    to Clopper-Pearson on the mean rescaled to [0, 1] with one trial per unit, as a rate's
    (`rate_interval`): 0.95-0.99 in every case simulated (tests/test_conformance_lists.py).
    Missing values are left out; below MIN_CLUSTERS units, or with no spread, as `mean_with_ci`
    (`constant_interval` within `bounds`)."""
    v = np.asarray([float(x) for x in values if x is not None and not is_missing(x)], dtype=float)
    if not len(v):
        return MeanCI(None, 0, None, None)
    n, mean = len(v), float(v.mean())
    sd = float(v.std(ddof=1)) if n > 1 else 0.0
    if n < MIN_CLUSTERS or sd <= 1e-12 * max(1.0, abs(mean)):
        return with_note(mean, n, n, math.nan, math.nan, bounds)
    drawn = v[resample_indices(seed, n, resamples)]
    means, sds = drawn.mean(axis=1), drawn.std(axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        flat = np.where(means > mean, np.inf, np.where(means < mean, -np.inf, 0.0))
        t = np.where(sds > 1e-12, (means - mean) / (sds / math.sqrt(n)), flat)
    upper = float(np.quantile(t, 1 - alpha / 2, method="higher"))
    lower = float(np.quantile(t, alpha / 2, method="lower"))
    lo, hi = bounds
    low, high = max(mean - upper * sd / math.sqrt(n), lo), min(mean - lower * sd / math.sqrt(n), hi)
    off = min(int((v > lo + 1e-12).sum()), int((v < hi - 1e-12).sum()))
    if off >= FEW_CLUSTERS:
        return MeanCI(mean, n, low, high, None)
    share = (mean - lo) / (hi - lo)
    few_low, few_high = clopper_pearson(np.asarray([share * n]), np.asarray([float(n)]), alpha)
    return MeanCI(mean, n, min(low, lo + float(few_low[0]) * (hi - lo)), max(high, lo + float(few_high[0]) * (hi - lo)),
                  LUMPY)


LUMPY_RECALL = (f"an answer's recall with fewer than {FEW_CLUSTERS} clusters answered right or fewer than {FEW_CLUSTERS} "
                "wrong: widened to its Clopper-Pearson bounds with one trial per cluster")


def lumpy_recall_bounds(right: np.ndarray, asked: np.ndarray, alpha: float = 0.05) -> tuple[float, float] | None:
    """Balanced accuracy's bounds where an answer's recall is lumpy. `right`, `asked` (G, K): per
    cluster and human answer, the verdicts right and all. A recall with fewer than FEW_CLUSTERS of
    its clusters answered right, or wrong, hardly varies over cluster resamples (all 10 texts of the
    humans' rarer answer right: never), and the bootstrap interval covered 0.68-0.84 (a rubric's
    10 texts of 100, TTCW's stories where the experts' rarer answer is 5-10%); such a recall takes
    its Clopper-Pearson bounds with one trial per cluster (the rate guard, `rate_interval`), the
    others their value; the mean over answers. None: no recall lumpy."""
    lows, highs, lumpy = [], [], False
    for k in range(right.shape[1]):
        held = asked[:, k] > 0
        if not held.any():
            continue
        hit, of = right[held, k], asked[held, k]
        recall, g = float(hit.sum() / of.sum()), float(held.sum())
        if min(int((hit > 0).sum()), int((hit < of).sum())) < FEW_CLUSTERS:
            low, high = clopper_pearson(np.asarray([recall * g]), np.asarray([g]), alpha)
            lows.append(float(low[0]))
            highs.append(float(high[0]))
            lumpy = True
        else:
            lows.append(recall)
            highs.append(recall)
    return (float(np.mean(lows)), float(np.mean(highs))) if lumpy else None
