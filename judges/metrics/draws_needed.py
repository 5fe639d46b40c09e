"""How many labelled draws the annotation queue's active interval waits for (`min_draws`): the
fewest from which a simulation of the queue's own interval covers, the humans' answers drawn from
the judges' probabilities. Cochran's n > 25 G1^2 (`uncertainty.cochran_draws`) sets how far it
looks, never the answer. Fixed before any label, as the design: it reads the judges'
probabilities, the draw probabilities and the design's seed, never a label.

Why a simulation. Cochran's rule (Sampling Techniques, 1977, sec. 2.15) asks for a mean's normal
interval the draws that its skewness needs; the queue's interval is a t on Satterthwaite's df of a
ratio with a tuned lam, which widens where a few draws carry the variance, and gives none where the
draws have no spread. Where the rule asked 22-75 draws of three recorded judges' vote shares, the
intervals covered 0.98-1.00 from 10-20 (a helper's populations); on 60 pairs with P(text) stored,
drawn by their agreement, it asked 605 where the intervals from 10 covered 0.994. The simulation is
the queue's own coverage under the judges' probabilities: where the judges are calibrated it is the
coverage the page will have. A judge sure where it is wrong predicts no skew: the rule cannot see
that (docs/annotate.md, "Not covered").

Each replicate draws every cluster's total from `Totals` (the truth: their sum over M), the
queue's i.i.d. draws with its probabilities, and fits every prefix length in a grid from MIN to a
top as `active.estimate` does (lam tuned); coverage counts the intervals given. The rule is the
smallest grid length from which every longer one up to the top covers TARGET or more. The top is
Cochran's n, at least 4 MIN, doubled while the top itself covers less, up to LONGEST. Cochran's n
was the answer until a hostile pass: where it asked 10 or fewer (no simulation) or where its own
length covered less, 29 of 80 calibrated populations covered below 0.93 at the draws asked, the
worst 0.81 (8 stories, two of them a third likely to pass). Beyond EVERY clusters a replicate
draws only the drawn clusters' totals (`Totals.at`): 200,000 clusters take 0.3 s, not 125.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache, cached_property

import numpy as np
from scipy.special import stdtrit

from .active import MIN, fit_moments
from .uncertainty import cochran_draws

REPLICATES = 2000      # the simulation's repeats: a coverage of 0.95 within 0.005 (its standard error)
RECHECK = 3            # a length below TARGET is simulated again with this many times the replicates, pooled
TARGET = 0.94          # Cochran's standard: a 95% statement "wrong at most 6% of the time"
STEP = 1.2             # the grid's ratio between simulated prefix lengths (geometric, MIN to the top)
LONGEST = 2000         # the longest prefix simulated: a queue that needs more is told this many
CELLS = 2_000_000      # numbers held at once per array (replicates x clusters x values, replicates x draws): memory
EVERY = 5000           # up to this many clusters each replicate draws every cluster's total; beyond, the drawn
                       # ones' and the rest's sum as a normal (200,000 clusters took 125 s drawing every total)


@dataclass(frozen=True)
class Totals:
    """Each cluster's total on the quantity's scale under the judges' probabilities: its possible
    values and their probabilities, (N, K) each (a row's probabilities sum to 1)."""

    values: np.ndarray
    probs: np.ndarray

    def __post_init__(self) -> None:
        if self.values.shape != self.probs.shape or self.values.ndim != 2:
            raise ValueError(f"values {self.values.shape} and probs {self.probs.shape} must be one (N, K) shape")

    @classmethod
    def answers(cls, dist: np.ndarray, scores: np.ndarray) -> Totals:
        """One item per cluster: `dist` (N, K) the judges' distribution over the answers (normalised
        here; a row of zeros: uniform), `scores` (K,) or (N, K) each answer's score."""
        d = np.asarray(dist, dtype=float)
        d = d.reshape(len(d), np.shape(scores)[-1])
        total = d.sum(axis=1, keepdims=True)
        d = np.divide(d, total, out=np.full_like(d, 1.0 / max(d.shape[1], 1)), where=total > 0)
        return cls(np.broadcast_to(np.asarray(scores, dtype=float), d.shape).copy(), d)

    @classmethod
    def binary(cls, p_yes: np.ndarray, cluster_index: np.ndarray, n: int) -> Totals:
        """Items answered Yes (1) with their P(Yes), independently: each cluster's count of Yes,
        its Poisson-binomial distribution (K = the largest cluster's items + 1)."""
        p = np.clip(np.nan_to_num(np.asarray(p_yes, dtype=float), nan=0.5), 0.0, 1.0)
        ci = np.asarray(cluster_index, dtype=np.int64)
        counts = np.bincount(ci, minlength=n)
        order = np.argsort(ci, kind="stable")
        slot = np.arange(len(ci)) - np.repeat(np.cumsum(counts) - counts, counts)
        width = int(counts.max(initial=0))
        items = np.zeros((n, width))                        # a cluster's j-th item's P(Yes); 0 past its items
        items[ci[order], slot] = p[order]
        pmf = np.zeros((n, width + 1))
        pmf[:, 0] = 1.0
        for j in range(width):
            q = items[:, j:j + 1]
            nxt = pmf * (1.0 - q)
            nxt[:, 1:] += pmf[:, :-1] * q
            pmf = nxt
        return cls(np.broadcast_to(np.arange(width + 1, dtype=float), pmf.shape).copy(), pmf)

    @cached_property
    def mean(self) -> np.ndarray:
        """Per cluster the total's expectation (computed once: `at` reads it for every block)."""
        return (self.probs * self.values).sum(axis=1)

    @cached_property
    def moments(self) -> tuple[np.ndarray, np.ndarray]:
        """Per cluster the total's variance and third central moment."""
        centred = self.values - self.mean[:, None]
        return (self.probs * centred ** 2).sum(axis=1), (self.probs * centred ** 3).sum(axis=1)

    def draw(self, rng: np.random.Generator, replicates: int) -> np.ndarray:
        """(replicates, N) totals, each cluster's drawn from its distribution (inverse CDF)."""
        cum = np.cumsum(self.probs, axis=1)
        u = rng.uniform(size=(replicates, len(cum)))
        return self.values[np.arange(len(cum))[None, :], _below(u, cum)]

    def at(self, rng: np.random.Generator, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The totals of the clusters drawn, d (replicates, k), and of all N: (replicates, k) (a
        cluster drawn twice by one replicate has one total) and (replicates,) their sum, the clusters not
        drawn summed as a normal of their mean and variance (thousands of them where there are more
        than EVERY: on 2,000 stories, six uncertain among sure ones, the coverage agreed with
        drawing every total within 0.004, tests/test_active_inference.py)."""
        order = np.argsort(d, axis=1, kind="stable")
        sd = np.take_along_axis(d, order, axis=1)
        first = np.ones(sd.shape, dtype=bool)
        first[:, 1:] = sd[:, 1:] != sd[:, :-1]
        pick = _below(rng.uniform(size=sd.shape), np.cumsum(self.probs[sd], axis=-1))
        runs = np.maximum.accumulate(np.where(first, np.arange(sd.shape[1]), 0), axis=1)
        v = np.take_along_axis(self.values[sd, pick], runs, axis=1)      # a cluster's first draw's total
        mean, var = self.mean, self.moments[0]
        rest = (mean.sum() - (mean[sd] * first).sum(axis=1),
                np.sqrt(np.clip(var.sum() - (var[sd] * first).sum(axis=1), 0.0, None)))
        out = np.empty_like(v)
        np.put_along_axis(out, order, v, axis=1)
        return out, (v * first).sum(axis=1) + rest[0] + rest[1] * rng.standard_normal(len(d))


def _below(u: np.ndarray, cum: np.ndarray) -> np.ndarray:
    """Per u the index of its value: how many of the cumulative probabilities on cum's last axis
    (broadcast against u) but the last are below it (the last is 1, above every u). Counted column
    by column: summing a boolean array over a short last axis took three times as long."""
    pick = np.zeros(u.shape, dtype=np.int64)
    for j in range(cum.shape[-1] - 1):
        pick += u > cum[..., j]
    return pick


def coverage(probability: np.ndarray, judge_total: np.ndarray, size: np.ndarray, totals: Totals,
             ks: np.ndarray, *, replicates: int = REPLICATES, seed: int | tuple[int, ...] = 0, alpha: float = 0.05
             ) -> tuple[np.ndarray, np.ndarray]:
    """Per prefix length in `ks`: the share of the intervals given that cover the truth (NaN where
    none is), and the share of replicates that give one (`active.fit`, lam tuned, as the page's
    active estimate)."""
    if not 0.5 < 1 - alpha / 2 < 1:               # a quantile of inf or NaN (helper-114)
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    p, f, m = (np.asarray(a, dtype=float) for a in (probability, judge_total, size))
    n, kmax = len(p), int(max(ks))
    big_f, big_m = float(f.sum()), float(m.sum())
    rng = np.random.default_rng(seed)
    every = n <= EVERY
    block = int(max(1, min(replicates, CELLS // max(1, (n if every else kmax) * totals.values.shape[1], kmax))))
    covered, given = np.zeros(len(ks)), np.zeros(len(ks))
    cum = np.cumsum(p)
    cum[-1] = 1.0
    where = _Inverse(cum)
    for start in range(0, replicates, block):
        b = min(block, replicates - start)
        y = totals.draw(rng, b) if every else None
        d = np.minimum(where(rng.uniform(size=(b, kmax))), n - 1)
        yd, total = (y[np.arange(b)[:, None], d], y.sum(axis=1)) if y is not None else totals.at(rng, d)
        truth = total / big_m
        pd = p[d]
        yp, fp, mp = yd / pd, f[d] / pd, m[d] / pd
        for i, k in enumerate(ks):
            theta, var, dof, ok, _ = fit_moments(yp[:, :k], fp[:, :k], mp[:, :k], big_f, big_m, None, pd[:, :k])
            ok &= np.isfinite(var) & np.isfinite(dof)     # `fit`'s half width is finite (a df of inf / inf: NaN)
            given[i] += ok.sum()
            covered[i] += _covers(np.abs(theta - truth), var, dof, ok, 1 - alpha / 2).sum()
    with np.errstate(invalid="ignore"):           # no interval given at a length: no claim (NaN)
        return np.where(given > 0, covered / np.maximum(given, 1.0), np.nan), given / replicates


class _Inverse:
    """searchsorted(cum, u, side="right") for many u in [0, 1), the same numbers 13 times as fast
    (it took a fifth of the coverage count): [0, 1) cut into BUCKETS equal parts, each part's
    answer is known where no cum falls inside it (u * BUCKETS is exact: a power of two), and
    searched for only in the parts where one does."""

    BUCKETS = 4096

    def __init__(self, cum: np.ndarray):
        edges = np.arange(self.BUCKETS + 1) / self.BUCKETS
        self.cum = cum
        self.low = np.searchsorted(cum, edges[:-1], side="right")
        self.split = self.low != np.searchsorted(cum, edges[1:], side="left")

    def __call__(self, u: np.ndarray) -> np.ndarray:
        part = (u * self.BUCKETS).astype(np.int64)
        out = self.low[part]
        inside = self.split[part]
        out[inside] = np.searchsorted(self.cum, u[inside], side="right")
        return out


@cache
def _t_grid(q: float) -> tuple[np.ndarray, np.ndarray]:
    """Student t's q quantile at degrees of freedom from 1 to 10^5, a geometric grid 0.06% apart."""
    grid = np.geomspace(1.0, 1e5, 20_001)
    return grid, stdtrit(grid, q)


def _covers(dist: np.ndarray, var: np.ndarray, dof: np.ndarray, ok: np.ndarray, q: float) -> np.ndarray:
    """Whether dist <= t_q(dof) sqrt(var) where `ok`, as `fit`'s half width decides it, with the
    quantile computed only near that edge: it falls with the df, so its values at dof's grid
    neighbours bracket it, and beyond the bracket the answer is known (stdtrit took 0.4 ms per
    1,333 values, 40% of the coverage count; the answers are the same, the edge computed as `fit`)."""
    grid, t = _t_grid(q)
    s = np.sqrt(np.where(ok, var, 0.0))
    at = np.where(ok, dof, 1.0)
    # dof's place on the grid from its logarithm (a binary search took a third as long as the rest), a step
    # wider on each side for its rounding: grid[j] <= dof < grid[j + 3]
    j = np.clip(np.floor(np.log(at) / np.log(grid[1])).astype(np.int64) - 1, 0, len(grid) - 4)
    inside, outside = dist <= t[j + 3] * s * (1 - 1e-9), dist > t[j] * s * (1 + 1e-9)
    edge = ok & ((~inside & ~outside) | (at >= grid[-4]))
    covered = ok & inside & ~edge
    covered[edge] = dist[edge] <= stdtrit(at[edge], q) * s[edge]
    return covered


def lengths(top: int) -> np.ndarray:
    """The prefix lengths simulated: geometric from MIN to `top`, STEP apart (both ends in)."""
    count = int(np.ceil(np.log(max(top, MIN) / MIN) / np.log(STEP))) + 1
    return np.unique(np.round(np.geomspace(MIN, max(top, MIN), count)).astype(np.int64))


def short(probability: np.ndarray, judge_total: np.ndarray, size: np.ndarray, totals: Totals, ks: np.ndarray,
          seed: int, replicates: int) -> np.ndarray:
    """Per length in `ks`: whether its coverage is below TARGET. A length found below is simulated
    again (RECHECK times the replicates, another stream) and judged on the pooled replicates: at
    2,000 alone, one of 20-40 lengths covering 0.95 fell below 0.94 by chance often enough that a
    points queue covering 0.944-0.966 everywhere asked 80 draws."""
    cover, given = coverage(probability, judge_total, size, totals, ks, replicates=replicates, seed=seed)
    low = np.nonzero(cover < TARGET)[0]          # NaN (no interval given at a length): no claim there
    if len(low):
        again, more = coverage(probability, judge_total, size, totals, ks[low], replicates=RECHECK * replicates,
                               seed=(seed, 1))
        n0, n1 = given[low] * replicates, more * RECHECK * replicates
        cover[low] = (np.nan_to_num(cover[low]) * n0 + np.nan_to_num(again) * n1) / np.maximum(n0 + n1, 1.0)
    return np.asarray(cover < TARGET)


def min_draws(probability: np.ndarray, judge_total: np.ndarray, size: np.ndarray, totals: Totals | None, *,
              seed: int = 0, replicates: int = REPLICATES) -> int:
    """The labelled draws before the active interval: the smallest simulated prefix length from
    which the coverage is TARGET or more at every longer one up to the top (MIN where all do;
    LONGEST where even that covers less). None: nothing known of the totals (MIN)."""
    if totals is None:
        return MIN
    var, third = totals.moments
    top = min(max(cochran_draws(probability, np.sqrt(np.clip(var, 0.0, None)), third), 4 * MIN), LONGEST)
    while True:
        ks = lengths(top)
        below = np.nonzero(short(probability, judge_total, size, totals, ks, seed, replicates))[0]
        if len(below) == 0:
            return MIN
        if below[-1] + 1 < len(ks):
            return int(ks[below[-1] + 1])
        if top >= LONGEST:
            return LONGEST
        top = min(2 * top, LONGEST)
