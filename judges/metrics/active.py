"""Which clusters should humans label? Draws by the judge's uncertainty, and an interval that
stays valid for them (the annotation queue's statistics, issue 55).

Design (Hansen & Hurwitz 1943, "On the theory of sampling from finite populations"): a budget of
n i.i.d. draws WITH replacement of clusters (the unit a human pays for: a TTCW story with all of
its tests, a pair, a rubric text), cluster c drawn with probability
    p_c = (1 - floor) * u_c / sum(u) + floor * w_c,
u_c the judge's uncertainty about c, fixed BEFORE any label is seen, and w the floor's own
distribution: proportional to size (w_c = m_c / M, probability proportional to size, the design
that suits a ratio when clusters differ in size), 1/N when they are equal. A cluster of size 0
(outside the estimate: a rubric's other kind) counts at the mean size, so that it is drawn. The
floor (0.2 unless told) is raised, still before any label, until cost(p) = sum w^2/p <= MAX_COST:
what the design adds to the human-only variance if the uncertainty turns out to mean nothing
(1 at p = w). With a uniform floor, one TTCW story holding 18% of the items (40 tests beside 59
stories of 3) was drawn 1/60 of the time and the interval covered 0.56 at 30 draws (0.93 by size;
docs/annotate.md). A cluster drawn
twice is read once and its label counted twice. Draws never adapt to labels, so every prefix of
the draw sequence is itself an i.i.d. sample: the estimate after the first k labelled draws is
valid at any k fixed in advance. An annotator's skip does not drop a draw (dropping would let the
labels choose the sample): estimates use the longest prefix of draws whose clusters are all
labelled (`labelled_prefix`).

Estimator (the difference / control-variate estimator of active inference: Zrnic & Candes 2024,
"Active Statistical Inference", ICML; PPI++'s power tuning, here the GREG coefficient), in
Hajek's ratio form: with Y_c the humans' total over the items of c, f_c the judge's total on
them, m_c their number, F = sum f, M = sum m (known for every cluster),
    theta_hat = lam F/M + sum_k (Y - lam f)/p / sum_k m/p        (`fit`).
Each (Y - lam f)/p has mean sum_c (Y_c - lam f_c) under the design for ANY fixed lam and any
judge (the judge changes the variance, never the target), and sum_k m/p estimates M; dividing by
it rather than by M removes the level theta m/p that unequal p adds to every draw (without it a
useless judge made the interval 1.13-1.30x as wide as human-only in the simulation). lam = 0 is
human-only; uniform p, equal sizes and a tuned lam give the regression estimator (uniform PPI++).
For a calibrated P(Yes) and lam = 1, E[(Y_c - f_c)^2] = sum over c's items of p(1-p), and the
variance sum_c E[(Y_c - f_c)^2] / p_c is smallest at p_c proportional to its square root:
`uncertainty.binary_uncertainty`.

Finite samples. The tuned lam and the ratio are smooth functions of i.i.d. means (bias O(1/k));
the interval is Student t on linearized residuals, with Satterthwaite's df when a few heavily
weighted draws carry the variance; no interval from fewer than MIN draws. Coverage at 10, 20 and
50 draws: tests/test_active_inference.py and scripts/active_simulation.py (docs/annotate.md).

Not covered: stopping when the interval looks good (a data-dependent k: the intervals are valid
at a k fixed in advance, not uniformly over k), and skips that depend on the cluster's answer
beyond the prefix rule (a skipped draw blocks every later one until it is labelled).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import stdtrit  # Student's t quantile as a ufunc (scipy.stats costs 0.5 s to import)

MAX_COST = 1.10       # the most a useless judge's draw probabilities may cost (variance; width sqrt: 1.07)
MIN = 10               # draws before any interval (the t interval's coverage is checked from here)

TOO_FEW = "too few labelled draws ({}; an interval needs {})"
SKEWED = (": the judges' probabilities make a draw's weighted answers skewed (an answer rare but for a few "
          "clusters), and a t interval from fewer draws covers less than it says (a simulation of this queue under "
          "them)")
NO_SPREAD = "every labelled draw gives the same weighted value: no interval"
# A question's items in only some clusters (a rubric's pairwise question beside its texts' ones): its
# estimate waits for a drawn cluster that holds one (the prefix of two pairs divided by zero).
NONE_COUNTED = "none of the {} labelled draws holds an item of this estimate: no value yet"


@dataclass(frozen=True)
class Design:
    """A fixed draw sequence: every cluster's probability and the i.i.d. draws made with them."""

    clusters: tuple[str, ...]          # every cluster id, in a fixed order
    probability: np.ndarray            # (N,) draw probabilities, sum 1, each >= floor * w_c
    draws: np.ndarray                  # (budget,) int indices into clusters: the i.i.d. draw sequence
    floor: float
    seed: int


def floor_weights(size: np.ndarray | None, n: int) -> np.ndarray:
    """The floor's distribution over n clusters (last axis): proportional to size, a size-0
    cluster at the mean size of the others; uniform without sizes, or with no positive one."""
    if size is None:
        return np.full(n, 1.0 / n)
    m = np.asarray(size, dtype=float)
    if m.shape[-1] != n or not np.all(np.isfinite(m)) or np.any(m < 0):
        raise ValueError(f"size must be {n} finite values >= 0, one per cluster")
    positive = m > 0
    count = positive.sum(axis=-1, keepdims=True)
    mean = np.divide(m.sum(axis=-1, keepdims=True), count, out=np.ones(count.shape), where=count > 0)
    w = np.where(positive, m, mean)
    return w / w.sum(axis=-1, keepdims=True)


def cost(probability: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """What the draw probabilities cost if the judge's uncertainty turns out to mean nothing:
    sum_c w_c^2 / p_c (w: `floor_weights`, uniform unless given; for uniform w, sum_c 1/(N^2 p_c)),
    the variance of human-only inverse-probability weighting relative to drawing by w when every
    cluster's centred total is proportional to its weight (1 at p = w; the width grows by its
    square root)."""
    p = np.asarray(probability, dtype=float)
    w = np.full(p.shape[-1], 1.0 / p.shape[-1]) if weights is None else np.asarray(weights, dtype=float)
    return (w * w / p).sum(axis=-1)


def _mix(share: np.ndarray, floor: np.ndarray | float, w: np.ndarray) -> np.ndarray:
    return (1.0 - floor) * share + floor * w


def probabilities(uncertainty: np.ndarray, floor: float = 0.2, max_cost: float | None = None,
                  size: np.ndarray | None = None) -> np.ndarray:
    """p_c = (1 - floor) u_c / sum(u) + floor w_c (last axis; w: `floor_weights` of `size`, and p = w
    where no cluster is uncertain), the floor raised where needed so that `cost(p, w)` <= max_cost
    (default MAX_COST)."""
    return _drawn(uncertainty, floor, max_cost, size)[0]


def _drawn(uncertainty: np.ndarray, floor: float, max_cost: float | None, size: np.ndarray | None
           ) -> tuple[np.ndarray, np.ndarray]:
    """`probabilities` and the floor they use (one bisection for both: `design` needs the two)."""
    u = np.asarray(uncertainty, dtype=float)
    n = u.shape[-1]
    if n == 0:
        raise ValueError("no clusters to draw from")
    if not 0.0 <= floor <= 1.0:
        raise ValueError(f"floor must be in [0, 1], got {floor}")
    if not np.all(np.isfinite(u)) or np.any(u < 0):
        raise ValueError("uncertainty must be finite and >= 0 for every cluster")
    share, fl, w = _share_floor(u, floor, MAX_COST if max_cost is None else max_cost, floor_weights(size, n))
    return _mix(share, fl, w), fl


def _share_floor(u: np.ndarray, floor: float, max_cost: float, w: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The uncertainty's shares and the smallest floor >= `floor` meeting the cost cap (bisection:
    the cost falls as the floor rises, to 1 at floor 1)."""
    total = u.sum(axis=-1, keepdims=True)
    share = np.divide(u, total, out=np.broadcast_to(w, u.shape).copy(), where=total > 0)
    lo = np.full(total.shape, float(floor))
    ok = cost(_mix(share, lo, w), w)[..., None] <= max_cost
    hi = np.ones_like(lo)
    for _ in range(50):
        mid = (lo + hi) / 2
        good = cost(_mix(share, mid, w), w)[..., None] <= max_cost
        hi, lo = np.where(good, mid, hi), np.where(good, lo, mid)
    return share, np.where(ok, float(floor), hi), w


def effective_floor(uncertainty: np.ndarray, floor: float = 0.2, max_cost: float | None = None,
                    size: np.ndarray | None = None) -> float:
    """The floor `probabilities` uses for one population (>= `floor`)."""
    return float(_drawn(uncertainty, floor, max_cost, size)[1].reshape(-1)[0])


def design(clusters: Sequence[str], uncertainty: np.ndarray, budget: int, *, floor: float = 0.2,
           seed: int = 0, size: np.ndarray | None = None) -> Design:
    """The draw sequence for a budget of `budget` draws, from the judge's uncertainty per cluster
    and the clusters' sizes (same order as `clusters`; None: equal), fixed before any label."""
    ids = tuple(str(c) for c in clusters)
    u = np.asarray(uncertainty, dtype=float)
    if u.shape != (len(ids),):
        raise ValueError(f"uncertainty has shape {u.shape}, expected ({len(ids)},): one value per cluster")
    if len(set(ids)) != len(ids):
        raise ValueError("cluster ids must be distinct")
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    p, used = _drawn(u, floor, None, size)
    draws = np.random.default_rng(seed).choice(len(ids), size=budget, replace=True, p=p)
    return Design(ids, p, draws.astype(np.int64), float(used.reshape(-1)[0]), int(seed))


def labelled_prefix(design: Design, labelled: Mapping[int, float] | set[int] | Sequence[int]) -> int:
    """The longest prefix of the draws whose clusters are all labelled (a skip blocks the rest)."""
    have = set(labelled)
    for k, c in enumerate(design.draws.tolist()):
        if c not in have:
            return k
    return len(design.draws)


@dataclass(frozen=True)
class ActiveEstimate:
    """One estimate from the first `draws` labelled draws; low/high NaN with a `note` when there
    is no interval."""

    value: float
    low: float
    high: float
    half_width: float
    lam: float
    draws: int
    clusters_read: int
    n_eff: float        # uniform human-only draws whose interval is this wide (no interval: same variance)
    note: str | None    # why no interval (fewer than MIN draws, ...)


def _human(design: Design, human_total: Mapping[int, float] | np.ndarray, k: int) -> np.ndarray:
    idx = design.draws[:k]
    if isinstance(human_total, Mapping):
        try:
            return np.array([float(human_total[int(c)]) for c in idx], dtype=float)
        except KeyError as e:
            raise ValueError(f"cluster {e.args[0]} is drawn in the first {k} draws but has no human total") from None
    h = np.asarray(human_total, dtype=float)
    if h.shape == (len(design.clusters),):
        return h[idx]
    raise ValueError(f"human_total must map drawn cluster index -> total or be ({len(design.clusters)},)")


def fit(y_p: np.ndarray, f_p: np.ndarray, m_p: np.ndarray, judge_sum: np.ndarray | float,
        total_size: np.ndarray | float, lam: float | None = None, alpha: float = 0.05,
        p: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The estimator on the last axis (leading axes: many samples at once, as the simulation
    uses it): y_p = Y/p, f_p = f/p and m_p = m/p of the k draws, p their draw probabilities
    (None: equal), F and M. Returns (theta unclipped, half width, lam, variance); the half width
    is NaN where k < 3 or the draws have no spread.

    theta = lam F/M + sum_k (Y - lam f)/p / sum_k m/p: the difference estimator with the
    rectifier's total divided by the HH estimate of M (Hajek's ratio form: unequal p makes every
    Y/p carry the level theta m/p, which the ratio cancels). lam (when None) is the coefficient of
    f in the design-weighted least squares of Y on (f, m), weights 1/p, no intercept (`_slope`);
    with uniform p and equal sizes this is the regression estimator (uniform PPI++).
    Variance: Woodruff's linearization of the ratio, as survey software computes it (R's svyratio,
    svy's `estimation.ratio`: tests/test_active_inference.py): the residuals r = (Y - lam f -
    (theta - lam F/M) m)/p over the draws that carry the quantity (m > 0: a rubric's cluster of the
    other kind is drawn but has no item in it), k' of them, sum r^2 k' / (k' - d) / (sum m/p)^2,
    d = 2 with lam tuned, 1 fixed. Two choices there are conditional on the draws: M estimated by
    the same draws (sum m/p / k, not the known M: when the draws missed the large or the
    informative clusters, the interval widens with them; with M a story holding a fifth of the
    items left the interval at 0.87 at 10 draws, with it 0.915), and the draws of size 0 left out of
    the degrees of freedom (a rubric with pairs among its texts: 0.88-0.92 at 30 and 60 draws
    before, 0.92-0.95 with both). Student t on the smaller of k' - d and Satterthwaite's (sum
    r^2)^2 / sum r^4 * (k' - 1) / k' (as ppi.py): near 1 when one heavily weighted draw carries the
    variance, where a t on k - 2 covered 0.91 at 10 draws in the simulation."""
    theta, var, dof, ok, lam_v = fit_moments(y_p, f_p, m_p, judge_sum, total_size, lam, p)   # k < 3: none
    return theta, np.where(ok, stdtrit(dof, 1 - alpha / 2) * np.sqrt(np.where(ok, var, 0.0)), np.nan), lam_v, var


def fit_moments(y_p: np.ndarray, f_p: np.ndarray, m_p: np.ndarray, judge_sum: np.ndarray | float,
                total_size: np.ndarray | float, lam: float | None = None, p: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`fit` before its t quantile (`draws_needed.coverage` compares without it where it can): theta,
    the variance, the t's degrees of freedom (>= 1), whether there is an interval, and lam."""
    y_p, f_p, m_p = (np.asarray(a, dtype=float) for a in (y_p, f_p, m_p))
    big_f, big_m = np.asarray(judge_sum, dtype=float), np.asarray(total_size, dtype=float)
    k = y_p.shape[-1]
    phi = big_f / big_m
    msum = m_p.sum(axis=-1)
    if lam is None:
        lam_v, spread = _slope(y_p, f_p, m_p, np.ones_like(y_p) if p is None else np.asarray(p, dtype=float))
        lam_v = np.where(k >= 3, lam_v, 0.0)
    else:
        spread = np.zeros(y_p.shape[:-1], dtype=bool)
        lam_v = np.full(y_p.shape[:-1], float(lam))
    l_ = lam_v[..., None]
    with np.errstate(invalid="ignore", divide="ignore"):     # no draw holding an item (msum 0): NaN, NONE_COUNTED
        theta = lam_v * phi + ((y_p - l_ * f_p).sum(axis=-1)) / msum
    if k < 3:
        return theta, np.full_like(theta, np.nan), np.full_like(theta, np.nan), np.zeros(theta.shape, bool), lam_v
    r = y_p - l_ * f_p - (theta - lam_v * phi)[..., None] * m_p
    carried = (m_p > 0).sum(axis=-1).astype(float)           # k': the draws of clusters in the quantity
    df = carried - np.where(spread, 2, 1)
    r2 = r * r
    var = r2.sum(axis=-1) * carried / np.maximum(df, 1.0) / np.maximum(msum * msum, 1e-300)
    sat = r2.sum(axis=-1) ** 2 / np.maximum((r2 * r2).sum(axis=-1), 1e-300) * (carried - 1) / np.maximum(carried, 1.0)
    ok = (df >= 1) & (var > 1e-24 * np.maximum(1.0, theta * theta))
    return theta, var, np.clip(np.minimum(df, sat), 1.0, None), ok, lam_v


def _slope(y_p: np.ndarray, f_p: np.ndarray, m_p: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """lam: the f coefficient of sum_k (Y - lam f - beta m)^2 / p at its minimum (the GREG
    coefficient, Sarndal, Swensson & Wretman 1992: a design-consistent estimate of the
    population least squares of Y on (f, m)), and where f is not proportional to m among the
    draws (else lam = 0). In Y/p terms a weight 1/p is a row scale sqrt(p). With uniform p and
    equal sizes it is the OLS slope of Y on f. The earlier slope of (Y - theta_H m)/p on
    (f - (F/M) m)/p with an intercept (theta_H the human-only estimate) took in the nuisance
    (theta_H - F/M) m/p that unequal p puts into the sure clusters' rows: with it the active
    estimate's root mean square error at 10 draws was 1.11x uniform PPI++'s, with this 0.94x
    (a calibrated judge, tests/test_active_inference.py)."""
    s = np.sqrt(p)
    x1, x2, yv = f_p * s, m_p * s, y_p * s
    s11, s12, s22 = (x1 * x1).sum(axis=-1), (x1 * x2).sum(axis=-1), (x2 * x2).sum(axis=-1)
    det = s11 * s22 - s12 * s12
    spread = det > 1e-12 * np.maximum(s11 * s22, 1e-300)
    num = s22 * (x1 * yv).sum(axis=-1) - s12 * (x2 * yv).sum(axis=-1)
    return np.where(spread, num / np.where(spread, det, 1.0), 0.0), spread


def estimate(design: Design, judge_total: np.ndarray, size: np.ndarray,
             human_total: Mapping[int, float] | np.ndarray, labelled_draws: int, *, lam: float | None = None,
             bounds: tuple[float, float] = (0.0, 1.0), alpha: float = 0.05, needs: int = MIN) -> ActiveEstimate:
    """The mean per item (T / M) from the first `labelled_draws` draws: lam=None tunes lam, a
    number fixes it (0: human-only); an interval from `needs` draws on (`draws_needed.min_draws`)."""
    f_all, m_all = np.asarray(judge_total, dtype=float), np.asarray(size, dtype=float)
    n_cl = len(design.clusters)
    if f_all.shape != (n_cl,) or m_all.shape != (n_cl,):
        raise ValueError(f"judge_total and size must have one value per cluster ({n_cl})")
    k = int(labelled_draws)
    if not 0 <= k <= len(design.draws):
        raise ValueError(f"labelled_draws must be in [0, {len(design.draws)}], got {k}")
    big_m = float(m_all.sum())
    idx = design.draws[:k]
    reads = len(set(idx.tolist()))
    # why fewer than `needs` give none, said alike before the first label (it said 10 where 54 were asked)
    short = f"; the queue's budget is {len(design.draws)} draws" if needs > len(design.draws) else ""
    too_few = TOO_FEW.format(k, max(needs, MIN)) + short + (SKEWED if needs > MIN else "")
    why = (too_few if k == 0 or big_m <= 0 else NONE_COUNTED.format(k) if not m_all[idx].sum() > 0 else None)
    nan = float("nan")
    if why is not None:
        return ActiveEstimate(nan, nan, nan, nan, 0.0 if lam is None else float(lam), k, reads, 0.0, why)
    p = design.probability[idx]
    y_h = _human(design, human_total, k)
    theta, half_a, lam_a, var_a = fit(y_h / p, f_all[idx] / p, m_all[idx] / p, float(f_all.sum()), big_m, lam, alpha, p)
    value, half, lam_v = float(theta), float(half_a), float(lam_a)
    lo, hi = bounds
    point = float(np.clip(value, lo, hi))
    a, _ = _centred(y_h, f_all[idx], m_all[idx], p, float(f_all.sum()) / big_m)
    # Uniform human-only's variance over this one, both with M estimated by these draws (as `fit`):
    # with the known M on one side only, n_eff moved with (M_hat / M)^2, not with the design.
    m_hat = float((m_all[idx] / p).mean())
    s2 = float(n_cl * float((a * a / p).mean()) * k / (k - 1) / m_hat ** 2) if k >= 2 else 0.0
    n_eff = float(k) if k < 2 or not var_a > 0 else s2 / float(var_a)
    if k < max(needs, MIN):
        return ActiveEstimate(point, nan, nan, nan, lam_v, k, reads, n_eff, too_few)
    if not np.isfinite(half):
        return ActiveEstimate(point, nan, nan, nan, lam_v, k, reads, n_eff, NO_SPREAD)
    if s2 > 0:
        n_eff = same_width(half, s2, _dof_share(a, p, n_cl), alpha)
    # The interval clipped into the range as a whole: clipping each end alone reversed it when the
    # unclipped value lay more than a half width outside (0.000 to -0.001 was printed, 5 stories).
    low, high = (float(np.clip(end, lo, hi)) for end in (value - half, value + half))
    return ActiveEstimate(point, low, high, half, lam_v, k, reads, n_eff, None)


def _dof_share(a: np.ndarray, p: np.ndarray, n_cl: int) -> float:
    """rho of uniform human-only's degrees of freedom, rho (n - 1) at n draws: Satterthwaite's
    (sum r^2)^2 / sum r^4 (n - 1) / n as `fit` computes it, its moments over uniformly drawn
    clusters estimated from these draws with HH weights 1/p (1: every cluster alike)."""
    second, fourth = float((a * a / p).mean()), float((a ** 4 / p).mean())
    return float(np.clip(second * second / (n_cl * fourth), 1e-9, 1.0)) if fourth > 0 else 1.0


def same_width(half: float, s2: float, rho: float, alpha: float = 0.05) -> float:
    """The uniform human-only draws n whose interval is `half` wide: t(rho (n - 1)) sqrt(s2 / n),
    the t on at least 1 df as `fit`'s; n_eff, which the page's labels gained reads (a variance ratio
    ignored the degrees of freedom: 12 draws whose interval was wider than human-only's read as 42
    labels gained). Bisection: the width falls with n."""
    def width(n: float) -> float:
        return float(stdtrit(max(rho * (n - 1), 1.0), 1 - alpha / 2)) * (s2 / n) ** 0.5

    lo, hi = 1.0, 2.0
    if width(lo) <= half:
        return lo
    while width(hi) > half and hi < 1e12:
        lo, hi = hi, hi * 2
    for _ in range(100):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if width(mid) > half else (lo, mid)
    return float(hi)


def _centred(y: np.ndarray, f: np.ndarray, m: np.ndarray, p: np.ndarray, phi: float) -> tuple[np.ndarray, np.ndarray]:
    """Humans' and judge's totals centred on their rates: Y - theta_H m (theta_H the human-only
    ratio estimate) and f - (F/M) m."""
    theta_h = float((y / p).sum() / (m / p).sum())
    return y - theta_h * m, f - phi * m


def uniform_width(design: Design, judge_total: np.ndarray, size: np.ndarray,
                  human_total: Mapping[int, float] | np.ndarray, labelled_draws: int,
                  bounds: tuple[float, float] = (0.0, 1.0), alpha: float = 0.05) -> float:
    """The half width uniform PPI++ would have with the same number of labels, estimated from
    these draws: N sum_c (a_c - lam b_c)^2 / M^2 at its best lam (a, b: `_centred`), the sums
    estimated with HH weights 1/p; t on the df `fit` would give it, k - 2 or Satterthwaite's
    rho (k - 1) (`_dof_share` of the residuals) where fewer: on k - 2 alone the projection was
    narrower than the interval the same uniform design gave (0.056 against 0.069, an audit). NaN
    below MIN draws, or from draws of one cluster (no spread to project: it printed 0), or of
    clusters without an item of the estimate."""
    k = int(labelled_draws)
    n_cl = len(design.clusters)
    f_all, m_all = np.asarray(judge_total, dtype=float), np.asarray(size, dtype=float)
    idx = design.draws[:k]
    if k < MIN or len(set(idx.tolist())) < 2 or not m_all[idx].sum() > 0:
        return float("nan")
    p = design.probability[idx]
    big_m = float(m_all.sum())
    a, b = _centred(_human(design, human_total, k), f_all[idx], m_all[idx], p, float(f_all.sum()) / big_m)
    saa, sab, sbb = float((a * a / p).mean()), float((a * b / p).mean()), float((b * b / p).mean())
    lam = sab / sbb if sbb > 0 else 0.0
    resid = max(0.0, saa - lam * sab) * k / (k - 2)
    df = max(min(k - 2.0, _dof_share(a - lam * b, p, n_cl) * (k - 1)), 1.0)
    half = float(stdtrit(df, 1 - alpha / 2)) * np.sqrt(n_cl * resid / k) / big_m
    return float(min(half, bounds[1] - bounds[0]))


def label_ratio(probability: np.ndarray, uncertainty: np.ndarray) -> float:
    """Labels active needs per uniform PPI++ label for the same variance, predicted before any
    label if the judge's P(Yes) is calibrated and u = sqrt(sum p(1-p)) (lam = 1 in both):
    sum_c u_c^2 / (N p_c) / sum_c u_c^2. 1 means no saving; a useless judge's cost is not in it."""
    p, v = np.asarray(probability, dtype=float), np.asarray(uncertainty, dtype=float) ** 2
    total = float(v.sum())
    return float((v / (len(p) * p)).sum() / total) if total > 0 else 1.0
