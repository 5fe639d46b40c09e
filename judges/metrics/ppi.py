"""Prediction-powered estimates of a mean: the judge scores every item, humans label a few, and
the judge's scores sharpen what the labels say without ever replacing them (PPI++: Angelopoulos,
Duchi & Zrnic 2023, "PPI++: Efficient Prediction-Powered Inference"; PPI: Angelopoulos et al.,
Science 2023).

Definition. With n labelled items (human value Y, judge value f: a Yes as 1, or P(Yes)) and N
unlabelled ones (judge value only),
    theta = lambda * mean_N(f) + mean_n(Y - lambda * f),
the second term the rectifier (what the judge gets wrong, on the items where we can see it).
lambda = 0 is the human-only mean; lambda = 1 is PPI; PPI++ tunes lambda in [0, 1] from the data to
the value that minimizes the variance, cov(Y, f) / ((1 + n/N) var(f)) (ppi-python's rule), so a
judge with no signal gets lambda near 0 and the estimate falls back to the human-only one.

Clusters. Items come in clusters that move together (a story's 14 tests): every sum above is
taken per cluster and a cluster's items enter its linearized value together, so cluster-level
covariances and variances replace item-level ones. With one item per cluster every formula is
ppi-python's (`ppi_mean_pointestimate`, `ppi_mean_ci`: tests/test_ppi_crosscheck.py, 1e-6).

Interval (what is published; `clt_variance` is ppi-python's, kept for the cross-check). The
variance is the delete-one-cluster jackknife, stratified by labelled and unlabelled clusters, with
lambda tuned again in every replicate (so the tuning's own noise is in the variance: the plug-in
CLT variance with a tuned lambda covered 0.87-0.92 at 10 labelled stories with a good judge), on
the Satterthwaite degrees of freedom of the two strata, each stratum's from the spread of its
jackknife deviations, (sum d^2)^2 / sum d^4 * (g - 1) / g: n - 1 when the clusters weigh alike,
near 1 when one cluster carries the variance. The interval is Korn-Graubard's on that variance and
those degrees of freedom (proportion.korn_graubard: Clopper-Pearson on the effective sample size
p (1 - p) / v, the quantity rescaled to [0, 1] by its range), not a symmetric t interval: a rate
near 0 from clusters that mostly say No, with a few stories holding most Yes, is skewed, and the t
interval covered 0.85-0.86 at 10 labelled stories there (a rate of 0.062: 10% of stories passing
35% of tests, the rest 3%); Clopper-Pearson's asymmetry reaches the rate the sample under-shows.
The point is clipped into the quantity's range (a rectifier can carry PPI++ below 0: -0.156 was
seen), and the interval is built around the clipped point, so the published point always lies in
its interval and in the range. No interval from fewer than MIN_CLUSTERS labelled clusters, nor
where the humans' rarer answer (a value above the range's low end, or one below its high end) is in
fewer than EACH_SIDE labelled clusters: with one story holding every Yes, no spread estimated from
the sample can show how far off it is. Coverage of this rule, scenario by scenario:
tests/test_ppi_conformance.py.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .bootstrap import MIN_CLUSTERS
from .proportion import korn_graubard

EACH_SIDE = 2          # labelled clusters the humans' rarer answer must be in for an interval

TOO_FEW = "too few labelled clusters ({}; an interval needs {})"
ONE_SIDED = "the humans' rarer answer is in {} labelled cluster(s) (an interval needs {})"
NO_SPREAD = "every cluster gives the same value: no interval"
ALL_LABELLED = "every item is labelled: the judge has nothing to add"
FEW_UNLABELLED = "one cluster holds every unlabelled item: no interval"


@dataclass(frozen=True)
class ClusterSums:
    """One quantity's items summed per cluster, as arrays over clusters (leading axes: several
    estimates at once): labelled items' human values `y`, judge values `f` and count `m`;
    unlabelled items' judge values `fu` and count `mu`; and whether a cluster's labelled items
    hold a value above the range's low end (`above`) or below its high end (`below`). A cluster
    with neither labelled nor unlabelled items is padding and counts nowhere."""

    y: np.ndarray
    f: np.ndarray
    m: np.ndarray
    fu: np.ndarray
    mu: np.ndarray
    above: np.ndarray
    below: np.ndarray

    @classmethod
    def of(cls, clusters: np.ndarray, y: np.ndarray, f: np.ndarray, labelled: np.ndarray,
           bounds: tuple[float, float] = (0.0, 1.0), size: int | None = None) -> ClusterSums:
        """From items: each item's cluster index (0..size-1), human value (ignored where not
        labelled), judge value and whether its label may be used."""
        g = size if size is not None else int(clusters.max()) + 1 if len(clusters) else 0
        lab = labelled.astype(bool)
        y0 = np.where(lab, y, 0.0)

        def per(values: np.ndarray, where: np.ndarray) -> np.ndarray:
            return np.bincount(clusters, weights=np.where(where, values, 0.0), minlength=g)

        return cls(per(y0, lab), per(f, lab), per(np.ones(len(f)), lab), per(f, ~lab), per(np.ones(len(f)), ~lab),
                   per(np.ones(len(f)), lab & (y0 > bounds[0])) > 0, per(np.ones(len(f)), lab & (y0 < bounds[1])) > 0)


TERMS = {"n": lambda y, f, m: (m > 0).astype(float), "Sm": lambda y, f, m: m, "Sy": lambda y, f, m: y,
         "Sf": lambda y, f, m: f, "Syy": lambda y, f, m: y * y, "Sff": lambda y, f, m: f * f,
         "Syf": lambda y, f, m: y * f, "Sym": lambda y, f, m: y * m, "Sfm": lambda y, f, m: f * m,
         "Smm": lambda y, f, m: m * m}
UNLABELLED = {"N": "n", "Tm": "Sm", "Tf": "Sf", "Tff": "Sff", "Tfm": "Sfm", "Tmm": "Smm"}
FIXED = ("n", "Sm", "Sy", "Sf", "N", "Tm", "Tf")                 # what theta needs with lambda given
TUNED = (*FIXED, "Sff", "Syf", "Sym", "Sfm", "Smm", "Tff", "Tfm", "Tmm")


def _moments(s: ClusterSums, keys: tuple[str, ...] = (*TERMS, *UNLABELLED), own: bool = False) -> dict[str, np.ndarray]:
    """The sums every estimate is a function of: over clusters (own=False), or each cluster's own
    term (own=True, for the jackknife: a replicate's sums are the totals minus one cluster's)."""
    out = {}
    for key in keys:
        term = TERMS[key](s.y, s.f, s.m) if key in TERMS else TERMS[UNLABELLED[key]](s.fu, s.fu, s.mu)
        out[key] = term if own else term.sum(axis=-1)
    return out


@dataclass(frozen=True)
class Fit:
    """PPI++ from cluster sums, elementwise over any leading axes."""

    theta: np.ndarray
    lam: np.ndarray
    rectifier: np.ndarray        # mean over labelled items of Y - lambda f
    clt_variance: np.ndarray     # ppi-python's: var0(lambda f_u) / N + var0(Y - lambda f) / n, per cluster


def _theta(mo: dict[str, np.ndarray], lam: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """theta, lambda (tuned when None, else fixed) and the rectifier from the sums."""
    with np.errstate(invalid="ignore", divide="ignore"):
        n, big_n = mo["n"], mo["N"]
        ybar, fl = mo["Sy"] / mo["Sm"], mo["Sf"] / mo["Sm"]
        fu = np.where(mo["Tm"] > 0, mo["Tf"] / mo["Tm"], 0.0)
        if lam is None:
            mbar = mo["Sm"] / n
            cov = (mo["Syf"] - fl * mo["Sym"] - ybar * mo["Sfm"] + ybar * fl * mo["Smm"]) / (mbar ** 2 * n)
            fa = (mo["Sf"] + mo["Tf"]) / (mo["Sm"] + mo["Tm"])
            mbar_all = (mo["Sm"] + mo["Tm"]) / (n + big_n)
            spread = ((mo["Sff"] + mo["Tff"]) - 2 * fa * (mo["Sfm"] + mo["Tfm"]) + fa ** 2 * (mo["Smm"] + mo["Tmm"]))
            var_f = np.maximum(spread, 0.0) / (mbar_all ** 2 * (n + big_n - 1))
            tuned = cov / ((1 + n / np.maximum(big_n, 1)) * var_f)
            lam_a = np.where((var_f > 1e-15) & (big_n > 0) & np.isfinite(tuned), np.clip(tuned, 0.0, 1.0), 0.0)
        else:
            lam_a = np.where(big_n > 0, float(lam), 0.0) + 0.0 * ybar
        rect = ybar - lam_a * fl
    return lam_a * fu + rect, lam_a, rect


def fit(mo: dict[str, np.ndarray], lam: float | None = None) -> Fit:
    """theta, lambda, the rectifier and the plug-in CLT variance from the sums (all of `_moments`)."""
    theta, lam_a, rect = _theta(mo, lam)
    with np.errstate(invalid="ignore", divide="ignore"):
        n, big_n = mo["n"], mo["N"]
        mbar, mbar_u = mo["Sm"] / n, mo["Tm"] / np.maximum(big_n, 1)
        fu = np.where(mo["Tm"] > 0, mo["Tf"] / mo["Tm"], 0.0)
        ss_z = (mo["Syy"] - 2 * lam_a * mo["Syf"] + lam_a ** 2 * mo["Sff"]
                - 2 * rect * (mo["Sym"] - lam_a * mo["Sfm"]) + rect ** 2 * mo["Smm"])
        ss_u = mo["Tff"] - 2 * fu * mo["Tfm"] + fu ** 2 * mo["Tmm"]
        clt = (np.maximum(ss_z, 0.0) / (mbar ** 2 * n ** 2)
               + np.where(big_n > 0, lam_a ** 2 * np.maximum(ss_u, 0.0) / (mbar_u ** 2 * np.maximum(big_n, 1) ** 2), 0.0))
    return Fit(theta, lam_a, rect, clt)


@dataclass(frozen=True)
class Estimate:
    """Published estimates, elementwise: the value (clipped into the range), its 95% interval (NaN
    where withheld, `rule` says why: 0 shown, 1 too few labelled clusters, 2 the rarer answer in too
    few, 3 no spread, 4 no unlabelled items, 5 one unlabelled cluster), the jackknife variance and
    its degrees of freedom, lambda and the rectifier, and the clusters and items on each side."""

    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    variance: np.ndarray
    df: np.ndarray
    lam: np.ndarray
    rectifier: np.ndarray
    rule: np.ndarray
    rarer: np.ndarray            # labelled clusters holding the humans' rarer answer
    labelled_clusters: np.ndarray
    unlabelled_clusters: np.ndarray
    labelled_items: np.ndarray
    unlabelled_items: np.ndarray

    def note(self, i: int | tuple = ()) -> str | None:
        """The reason the interval at index i is withheld (None where it is shown)."""
        rule = int(self.rule[i])
        if rule == 1:                    # (only the note that applies is formatted: a table has a row per cell)
            return TOO_FEW.format(int(self.labelled_clusters[i]), MIN_CLUSTERS)
        if rule == 2:
            return ONE_SIDED.format(int(self.rarer[i]), EACH_SIDE)
        return {0: None, 3: NO_SPREAD, 4: ALL_LABELLED, 5: FEW_UNLABELLED}[rule]


def estimate(s: ClusterSums, lam: float | None = None, bounds: tuple[float, float] = (0.0, 1.0),
             alpha: float = 0.05) -> Estimate:
    """The PPI++ estimate (lam None: tuned; 0.0: the human-only mean; any other: fixed) with its
    published interval (module docstring), elementwise over the leading axes of `s`."""
    keys = TUNED if lam is None else FIXED
    total, own = _moments(s, keys), _moments(s, keys, own=True)
    theta, lam_a, rectifier = _theta(total, lam)
    replicate = _theta({k: total[k][..., None] - own[k] for k in keys}, lam)[0]      # (..., G): cluster g left out
    labelled, unlabelled = s.m > 0, (s.m <= 0) & (s.mu > 0)
    var_l, df_l = _stratum(replicate, labelled)
    var_u, df_u = _stratum(replicate, unlabelled)
    with np.errstate(invalid="ignore", divide="ignore"):
        variance = var_l + var_u
        parts = np.where(var_l > 0, var_l ** 2 / df_l, 0.0) + np.where(var_u > 0, var_u ** 2 / df_u, 0.0)
        df = np.maximum(np.where(parts > 0, variance ** 2 / parts, 1.0), 1.0)
    side = np.minimum((s.above & labelled).sum(axis=-1), (s.below & labelled).sum(axis=-1))
    n_l, n_u = labelled.sum(axis=-1), unlabelled.sum(axis=-1)
    predicted = lam != 0.0                                   # PPI needs unlabelled items; human-only does not
    no_unlabelled = (total["Tm"] <= 0) & predicted
    one_unlabelled = (total["N"] == 1) & predicted
    rule = np.select([no_unlabelled, n_l < MIN_CLUSTERS, side < EACH_SIDE, one_unlabelled,
                      ~np.isfinite(variance) | (variance <= 1e-14)], [4, 1, 2, 5, 3], 0)
    shown = rule == 0
    value = np.where(no_unlabelled, np.nan, np.clip(theta, *bounds))
    items = total["Sm"] + (total["Tm"] if predicted else 0.0)       # the values the estimate is over
    low, high = np.full(value.shape, np.nan), np.full(value.shape, np.nan)      # an interval only where shown
    low[shown], high[shown] = _interval(value[shown], variance[shown], items[shown], df[shown], bounds, alpha)
    return Estimate(value, low, high, variance, df,
                    lam_a, rectifier, rule, side, n_l, n_u, total["Sm"], total["Tm"])


def _interval(value: np.ndarray, variance: np.ndarray, items: np.ndarray, df: np.ndarray,
              bounds: tuple[float, float], alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Korn-Graubard's interval (module docstring) of a value in `bounds`, rescaled to [0, 1] and back."""
    lo, span = bounds[0], bounds[1] - bounds[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.clip((value - lo) / span, 0.0, 1.0)
        low, high = korn_graubard(np.nan_to_num(p), variance / span ** 2, np.maximum(items, 1.0), df, alpha)
    return lo + span * low, lo + span * high


def _stratum(replicate: np.ndarray, members: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The stratified jackknife's variance of one stratum, (g - 1)/g * sum of squared deviations
    of its replicates from their mean, and its degrees of freedom (module docstring)."""
    g = members.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(members, replicate, 0.0).sum(axis=-1) / g
        d = np.where(members, replicate - mean[..., None], 0.0)
        d2, d4 = (d ** 2).sum(axis=-1), (d ** 4).sum(axis=-1)
        variance = np.where(g > 1, (g - 1) / g * d2, 0.0)
        df = np.where(d4 > 0, d2 ** 2 / d4 * (g - 1) / g, np.maximum(g - 1, 1))
    return variance, np.maximum(df, 1e-9)


def effective_labels(human: Estimate, powered: Estimate) -> np.ndarray:
    """n_eff: the labelled items a human-only estimate would need for PPI++'s precision, on one
    footing: n * (human-only jackknife variance / PPI++ jackknife variance), the two variances of
    one estimator (lambda 0 and tuned) over the same clusters, no t quantile in it. n itself where
    lambda is 0 (the estimate is the human-only mean; the jackknife, lambda tuned again in each
    replicate, may find a smaller variance by chance), and never more than the items there are
    (labelled and unlabelled: a judge cannot be worth labels for items that do not exist)."""
    n = powered.labelled_items.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):    # a variance of rounding noise (5.7e-31) is none
        ratio = np.where(powered.variance > ROUNDING_VARIANCE, n * human.variance / powered.variance, np.nan)
    ratio = np.minimum(ratio, n + powered.unlabelled_items)
    # lambda 0 is n whatever the variances (a zero one gave null, one of 5.7e-31 gave n)
    return np.where(powered.lam == 0, n, ratio)


ROUNDING_VARIANCE = 1e-18       # a rate's variance below this is floating-point noise around 0
