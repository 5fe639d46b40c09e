"""Reliability across repeated judgements, and differences between categories.

ICC follows Shrout & Fleiss (1979) from the two-way ANOVA mean squares of an n targets x k raters
matrix (here: items x repeats of the same prompt), as the poetry paper reports them:
ICC1 (one-way random), ICC2 (two-way random, absolute agreement), ICC3 (two-way mixed,
consistency), and their k-rater averages ICC1k, ICC2k, ICC3k.

>>> icc([[1, 2], [3, 4], [5, 6], [2, 3]])["ICC3"]
1.0
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .base import NAN, MetricResult, scipy_stats

ICC_KINDS = ("ICC1", "ICC2", "ICC3", "ICC1k", "ICC2k", "ICC3k")


def icc(ratings: Sequence[Sequence[float]] | np.ndarray) -> dict[str, float]:
    """`ratings[i][j]`: target i rated by rater (repeat) j; complete rows only. NaN when undefined
    (fewer than 2 targets or raters, or a denominator that is 0 up to rounding).

    Every sum of squares is computed from deviations (row and column effects, residuals), not as a
    difference of large totals, so a rater offset far larger than the differences between targets
    does not swamp them. A denominator counts as 0 when it is within its rounding noise: 64 machine
    epsilons of the magnitude of its terms, plus what the deviations' own rounding (64 eps x the
    largest |rating| each) can add to every mean square it sums."""
    x = np.asarray(ratings, dtype=float)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 2 or np.isnan(x).any():
        return {k: NAN for k in ICC_KINDS}
    n, k = x.shape
    grand = x.mean()
    row_eff = x.mean(axis=1) - grand
    col_eff = x.mean(axis=0) - grand
    resid = x - grand - row_eff[:, None] - col_eff[None, :]
    ss_rows, ss_cols = k * (row_eff ** 2).sum(), n * (col_eff ** 2).sum()
    ss_err = (resid ** 2).sum()
    msr, msc = ss_rows / (n - 1), ss_cols / (k - 1)
    mse = ss_err / ((n - 1) * (k - 1))
    msw = (ss_cols + ss_err) / (n * (k - 1))
    eps = 64 * np.finfo(float).eps
    dev = eps * max(np.abs(x).max(), 1e-300)          # rounding of one deviation from a mean

    def ratio(num: float, den: float, *terms: float) -> float:
        size = sum(abs(t) for t in terms)
        noise = eps * size + len(terms) * (2 * np.sqrt(size) * dev + dev * dev)
        return float(num / den) if abs(den) > noise else NAN      # 0/0 up to rounding: undefined

    return {"ICC1": ratio(msr - msw, msr + (k - 1) * msw, msr, (k - 1) * msw),
            "ICC2": ratio(msr - mse, msr + (k - 1) * mse + k * (msc - mse) / n, msr, (k - 1) * mse, k * msc / n,
                          k * mse / n),
            "ICC3": ratio(msr - mse, msr + (k - 1) * mse, msr, (k - 1) * mse),
            "ICC1k": ratio(msr - msw, msr, msr),
            "ICC2k": ratio(msr - mse, msr + (msc - mse) / n, msr, msc / n, mse / n),
            "ICC3k": ratio(msr - mse, msr, msr)}


def one_way_anova(groups: Sequence[Sequence[float]]) -> MetricResult:
    """F statistic (value) and p-value of scipy's one-way ANOVA across groups (empty groups dropped)."""
    groups = [list(g) for g in groups if len(g)]
    n = sum(len(g) for g in groups)
    if len(groups) < 2 or n <= len(groups):
        return MetricResult(NAN, n)
    res = scipy_stats().f_oneway(*groups)
    return MetricResult(float(res.statistic), n, float(res.pvalue))


def within_strata_permutation_p(values: Sequence[float], categories: Sequence[object], strata: Sequence[object],
                                permutations: int = 999, seed: int = 0) -> float:
    """p-value of the one-way ANOVA F across categories by a permutation test that shuffles the
    category labels within each stratum (a listwise group: its items' scores are relative to one
    another, and a group's level is shared by all its items, so a test counting items as
    independent rejected 23% of true nulls at 0.05 where lists were each dominated by one
    category). Exact at any number of strata under its null, "within every stratum the scores do
    not depend on the category" (Monte Carlo: (1 + #{F* >= F}) / (1 + permutations)). Within-
    stratum shuffles keep every category's count, so F is a monotone function of sum_c S_c^2 /
    n_c (S_c the category's sum), the statistic compared. NaN with fewer than 2 categories."""
    x = np.asarray(values, dtype=float)
    _, cat = np.unique(np.asarray([str(c) for c in categories]), return_inverse=True)
    _, st = np.unique(np.asarray([str(s) for s in strata]), return_inverse=True)
    k = int(cat.max()) + 1 if len(cat) else 0
    if k < 2:
        return NAN
    counts = np.bincount(cat, minlength=k).astype(float)

    def statistic(labels: np.ndarray) -> np.ndarray:
        sums = np.stack([(x * (labels == c)).sum(axis=-1) for c in range(k)], axis=-1)
        return (sums ** 2 / counts).sum(axis=-1)

    rng = np.random.default_rng(seed)
    labels = np.tile(cat, (permutations, 1))
    for s in range(int(st.max()) + 1):
        rows = np.flatnonzero(st == s)
        order = np.argsort(rng.random((permutations, len(rows))), axis=1)
        labels[:, rows] = cat[rows][order]
    observed = float(statistic(cat))
    shuffled = statistic(labels)
    return float((1 + (shuffled >= observed - 1e-9 * abs(observed)).sum()) / (1 + permutations))
