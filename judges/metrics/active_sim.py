"""Simulating the annotation queue before paying anyone: coverage and interval width of the three
designs of `active` (human-only, uniform PPI++, active) over many repeats, vectorized over the
repeats, and the labels active needs to reach uniform PPI++'s width.

A population is per-cluster arrays: humans' totals Y, the judge's totals f, the judge's
uncertainty u and the sizes m, either (N,) (one fixed population, e.g. TTCW's 48 stories: only
the draws vary between repeats) or (R, N) (a fresh population per repeat). The truth of a repeat
is sum(Y) / sum(m), the quantity `active.estimate` aims at. Draws are i.i.d. with replacement
with `active.probabilities`, by inverse CDF (the same law as `active.design`'s rng.choice).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .active import MIN, fit, probabilities
from .draws_needed import REPLICATES, Totals, min_draws
from .uncertainty import binary_uncertainty

DESIGNS = ("human-only", "uniform PPI++", "active")
TESTS = 14           # a simulated story's yes/no tests (as TTCW)
STORIES = 100        # simulated stories per population


@dataclass(frozen=True)
class Population:
    human: np.ndarray        # Y_c: humans' totals, (N,) or (R, N)
    judge: np.ndarray        # f_c: the judge's totals on the same items
    uncertainty: np.ndarray  # u_c
    size: np.ndarray         # m_c
    # Y_c's distribution under the judge (`draws_needed.min_draws`): one for a fixed population, or one per repeat
    totals: Totals | Sequence[Totals] | None = None


@dataclass(frozen=True)
class Curves:
    """Per design, arrays (len(ks), R): the half width (NaN: no interval), whether the interval
    covers the truth, and the estimate's error (unclipped value - truth)."""

    ks: np.ndarray
    half: dict[str, np.ndarray]
    covered: dict[str, np.ndarray]
    error: dict[str, np.ndarray]


def _draw(prob: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """(R, k) i.i.d. draws, row r with probabilities prob[r] (inverse CDF: the count of cum < u, by a
    binary search; comparing every u with every cum held R x k x N booleans, 6 GB at 100,000 pairs).
    Rows broadcast from one (stride 0, a queue's design) share one cumulative sum."""
    one = prob.strides[0] == 0
    cum = np.cumsum(prob[:1] if one else prob, axis=-1)
    cum[:, -1] = 1.0
    u = rng.uniform(size=(prob.shape[0], k))
    picks = np.stack([np.searchsorted(cum[0 if one else r], u[r], side="left") for r in range(len(u))])
    return np.minimum(picks, prob.shape[1] - 1)


def simulate(pop: Population, ks: Sequence[int] | np.ndarray, repeats: int, *, floor: float = 0.2, seed: int = 0,
             alpha: float = 0.05, probability: np.ndarray | None = None, lam: float | None = None,
             needs: int | None = None, replicates: int = REPLICATES) -> Curves:
    """Every design at every prefix length in `ks` over `repeats` repeats (one draw sequence per
    repeat and design kind, its prefixes giving the smaller budgets, as on the page). `probability`
    (N,) or (R, N): active's draw probabilities as given (an annotation queue's design), instead of
    `probabilities(uncertainty, floor, size=size)`. `lam`: uniform PPI++'s and active's lam fixed (1: what an
    oracle would pick for a calibrated judge) instead of tuned. `needs`: the draws before active gives
    an interval where more than MIN (a queue's `min_draws`); None: `draws_needed.min_draws` of each
    repeat's population (its `replicates`), as the queue's page would, where `totals` is known."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    rng = np.random.default_rng(seed)
    y, f, u, m = (np.broadcast_to(np.asarray(a, dtype=float), np.broadcast_shapes(
        np.shape(pop.human), np.shape(pop.judge), np.shape(pop.uncertainty), np.shape(pop.size)))
        for a in (pop.human, pop.judge, pop.uncertainty, pop.size))
    if y.ndim == 1:
        y, f, u, m = (np.broadcast_to(a, (repeats, a.shape[0])) for a in (y, f, u, m))
    n_cl = y.shape[1]
    rows = np.arange(repeats)[:, None]
    big_f, big_m = f.sum(axis=1), m.sum(axis=1)
    truth = y.sum(axis=1) / big_m
    kmax = int(max(ks))
    p_uni = np.broadcast_to(np.full(n_cl, 1.0 / n_cl), (repeats, n_cl))
    p_act = probabilities(u, floor, size=m) if probability is None else \
        np.broadcast_to(np.asarray(probability, dtype=float), (repeats, n_cl))
    d_uni, d_act = _draw(p_uni, kmax, rng), _draw(p_act, kmax, rng)
    # below MIN every design's widths are kept (the docs read a saving off the curve below 10 draws);
    # only a skewed population's further draws are withheld, as the page withholds them
    need: int | np.ndarray = 0 if needs is None or needs <= MIN else needs
    if needs is None and pop.totals is not None:
        each = [pop.totals] * repeats if isinstance(pop.totals, Totals) else list(pop.totals)
        fixed = isinstance(pop.totals, Totals) and np.ndim(pop.uncertainty) == np.ndim(pop.size) == 1 and \
            np.ndim(pop.judge) == 1 and (probability is None or np.ndim(probability) == 1)    # one population: once
        need = np.array([min_draws(p_act[r], f[r], m[r], each[r], seed=r, replicates=replicates)
                         for r in range(1 if fixed else repeats)])
        need = np.where(need > MIN, need, 0)
    kinds = {"human-only": (d_uni, p_uni, 0.0), "uniform PPI++": (d_uni, p_uni, lam), "active": (d_act, p_act, lam)}
    half = {n: np.empty((len(ks), repeats)) for n in DESIGNS}
    covered = {n: np.empty((len(ks), repeats), dtype=bool) for n in DESIGNS}
    error = {n: np.empty((len(ks), repeats)) for n in DESIGNS}
    for name, (d, p, lam_d) in kinds.items():
        pd = p[rows, d]
        yp, fp, mp = y[rows, d] / pd, f[rows, d] / pd, m[rows, d] / pd
        for i, k in enumerate(ks):
            theta, h, _, _ = fit(yp[:, :k], fp[:, :k], mp[:, :k], big_f, big_m, lam_d, alpha, pd[:, :k])
            if name == "active":
                h = np.where(k >= np.asarray(need), h, np.nan)
            half[name][i], error[name][i] = h, theta - truth
            covered[name][i] = np.abs(theta - truth) <= np.nan_to_num(h, nan=-1.0)
    return Curves(np.asarray(ks), half, covered, error)


def mean_width(half: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Mean half width per row over the repeats that give an interval (weights: a bootstrap's);
    NaN where none does (0 read as intervals of no width)."""
    w = np.full(half.shape[-1], 1.0) if weights is None else weights
    ok = np.isfinite(half)
    held = ok @ w
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(held > 0, (np.where(ok, half, 0.0) @ w) / np.where(held > 0, held, 1.0), np.nan)


def labels_needed(ks: np.ndarray, width: np.ndarray, target: float) -> float:
    """The (linearly interpolated) number of labels at which a mean-width curve first reaches
    `target`; NaN if it never does within ks; the first length with a width (NaN before it: no
    interval, a withheld active one) if it already does there."""
    below = np.nonzero(width <= target)[0]
    if len(below) == 0:
        return float("nan")
    i = int(below[0])
    if i == 0 or not np.isfinite(width[i - 1]):     # "more than N" where the curve began below (a hostile pass)
        return float(ks[i])
    k0, k1, w0, w1 = ks[i - 1], ks[i], width[i - 1], width[i]
    return float(k0 + (k1 - k0) * (w0 - target) / (w0 - w1)) if w0 != w1 else float(k1)


def saving(curves: Curves, budget: int, boot: int = 0, seed: int = 0, design: str = "active",
           reference: str = "uniform PPI++") -> tuple[float, float, float]:
    """Labels `design` needs to reach `reference`'s mean half width at `budget` labels, and a 95%
    percentile interval from a bootstrap over the repeats (NaN, NaN without `boot`). The default
    asks how few labels active needs for what uniform PPI++ gets from the budget; design="uniform
    PPI++", reference="active" asks how many uniform PPI++ needs for what active gets from it."""
    ks = curves.ks
    j = int(np.nonzero(ks == budget)[0][0])
    hr, hd = curves.half[reference], curves.half[design]

    def need(weights: np.ndarray) -> float:
        wr, wd = mean_width(hr, weights), mean_width(hd, weights)
        return labels_needed(ks, wd, float(wr[j]))

    r = hr.shape[1]
    point = need(np.full(r, 1.0 / r))
    if not boot:
        return point, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    reps = [need(np.bincount(rng.integers(0, r, r), minlength=r) / r) for _ in range(boot)]
    if not np.isfinite(reps).any():
        return point, float("nan"), float("nan")
    lo, hi = np.nanpercentile(reps, [2.5, 97.5])
    return point, float(lo), float(hi)


# Simulated judges (docs/annotate.md, "Simulation"): P is the judge's P(Yes) per item; where it is
# calibrated the humans answer Y ~ Bernoulli(P).

def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def judge_p(rng: np.random.Generator, r: int, n: int, sharp: Callable[[np.random.Generator, tuple], np.ndarray]
            ) -> np.ndarray:
    """(r, n, TESTS) P(Yes): story and test levels, item noise, the judge's sharpness per story."""
    a = rng.normal(-0.3, 1.2, (r, n, 1))
    b = rng.normal(0.0, 0.8, (r, 1, TESTS))
    e = rng.normal(0.0, 0.5, (r, n, TESTS))
    return _sigmoid(sharp(rng, (r, n, 1)) * (a + b + e))


def sure_of_most(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    return np.where(rng.uniform(size=shape) < 0.75, 12.0, 0.5)


def graded(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    return np.exp(rng.normal(np.log(1.5), 0.75, shape))


def population(p_judge: np.ndarray, y_items: np.ndarray) -> Population:
    """Per-cluster totals from items (r, n, TESTS)."""
    r, n, t = p_judge.shape
    idx = np.repeat(np.arange(r * n), t)
    u = binary_uncertainty(p_judge.reshape(-1), idx, r * n).reshape(r, n)
    within = np.repeat(np.arange(n), t)
    totals = [Totals.binary(p_judge[k].reshape(-1), within, n) for k in range(r)]
    return Population(y_items.sum(axis=2), p_judge.sum(axis=2), u, np.full((r, n), float(t)), totals)


def scenarios(repeats: int, seed: int) -> dict[str, Population]:
    rng = np.random.default_rng(seed)
    out = {}
    for name, sharp in (("calibrated, sure of most", sure_of_most), ("calibrated, graded", graded)):
        p = judge_p(rng, repeats, STORIES, sharp)
        out[name] = population(p, (rng.uniform(size=p.shape) < p).astype(float))
    p = judge_p(rng, repeats, STORIES, sure_of_most)
    y = (rng.uniform(size=p.shape) < p).astype(float)
    out["useless (same confidence)"] = population(judge_p(rng, repeats, STORIES, sure_of_most), y)
    out["useless (flat)"] = population(rng.uniform(size=p.shape), y)
    rate = np.where(rng.uniform(size=(repeats, STORIES, 1)) < 0.1, 0.35, 0.03)
    p = np.broadcast_to(rate, (repeats, STORIES, TESTS))
    out["lopsided 35%/3%"] = population(p, (rng.uniform(size=p.shape) < p).astype(float))
    return out
