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


def icc(ratings: Sequence[Sequence[float]]) -> dict[str, float]:
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
