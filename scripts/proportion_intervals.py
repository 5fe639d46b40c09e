"""Coverage of intervals for a clustered proportion: the figures behind `judges/metrics/proportion.py`.

    .venv/bin/python scripts/proportion_intervals.py [--draws 2000]

Each scenario draws G clusters (stories) with `sizes` values each (unequal: 3, 6, 10, 14, 20, 31
repeated), a cluster rate from a Beta distribution with mean p and within-cluster correlation rho
(the beta-binomial's intra-cluster correlation 1 / (a + b + 1)), and the cluster's values from it.
With `other` = 0.05 a twentieth of the answers is replaced by another (an unparsed verdict), spread
over every cluster. The truth is p (1 - other). Printed per scenario: the coverage of the 95% interval and its mean width for
- the expanded percentile cluster bootstrap (the rule before: `bootstrap.percentile_interval`,
  with the exact bound where no resample varies),
- Korn-Graubard alone (Clopper-Pearson on the effective sample size from the cluster-robust
  variance, df G - 1; the exact bound where every cluster is alike),
- the published rule (`proportion.rate_interval`: Korn-Graubard, the few-clusters guard, the exact
  bound for a constant estimate).
"""
from __future__ import annotations

import argparse

import numpy as np

from litjudge.judges.metrics.bootstrap import CONSTANT, constant_interval, percentile_interval
from litjudge.judges.metrics.proportion import _constant, rate_interval
from litjudge.judges.metrics.proportion import korn_graubard as kg_interval

SIZES = {"14 each": (14,), "unequal": (3, 6, 10, 14, 20, 31)}


def draw(rng: np.random.Generator, draws: int, g: int, sizes: tuple[int, ...], p: float, rho: float,
         other: float = 0.0):
    """Per draw and cluster: the count of the answer and the cluster's size; `other`: a share of
    answers replaced by another one (an unparsed verdict) independently of the cluster."""
    m = np.resize(np.asarray(sizes), g).astype(float)
    s = 1 / rho - 1
    rates = rng.beta(p * s, (1 - p) * s, (draws, g))
    y = rng.binomial(np.broadcast_to(m.astype(int), (draws, g)), rates)
    y = rng.binomial(y, 1 - other).astype(float)
    return y[..., None], np.broadcast_to(m, (draws, g))[..., None].copy()


def bootstrap(rng: np.random.Generator, y: np.ndarray, m: np.ndarray, resamples: int = 500):
    lows, highs = [], []
    for yd, md in zip(y[..., 0], m[..., 0]):
        idx = rng.integers(0, len(yd), (resamples, len(yd)))
        low, high = percentile_interval(yd[idx].sum(1) / md[idx].sum(1), len(yd))
        if np.isnan(low):
            low, high = constant_interval(yd.sum() / md.sum(), len(yd), (0.0, 1.0))
        lows.append(low)
        highs.append(high)
    return np.asarray(lows), np.asarray(highs)


def korn_graubard(y: np.ndarray, m: np.ndarray):
    p = y.sum(axis=(1, 2)) / m.sum(axis=(1, 2))
    g = y.shape[1]
    v = g / (g - 1) * ((y[..., 0] - p[:, None] * m[..., 0]) ** 2).sum(1) / m.sum(axis=(1, 2)) ** 2
    low, high = kg_interval(p, v, m.sum(axis=(1, 2)), np.full_like(p, g - 1), 0.05)
    c_low, c_high = _constant(p, np.full_like(p, g), 0.05)
    return np.where(v <= 0, c_low, low), np.where(v <= 0, c_high, high)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--draws", type=int, default=2000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"{CONSTANT!r} where every cluster alike; {args.draws} draws per row; coverage (mean width)")
    print(f"{'G':>3} {'sizes':>8} {'p':>5} {'rho':>4} {'other':>5} | {'bootstrap':>16} | {'Korn-Graubard':>16} | "
          f"{'published':>16}")
    for g in (10, 15, 30):
        for name, sizes in SIZES.items():
            for p in (0.05, 0.15, 0.5, 0.95):
                for rho in (0.3, 0.6):
                    for other in (0.0, 0.05):
                        y, m = draw(rng, args.draws, g, sizes, p, rho, other)
                        truth = p * (1 - other)
                        cells = []
                        for low, high in (bootstrap(rng, y, m), korn_graubard(y, m), rate_interval(y, m)[1:3]):
                            ok = ~np.isnan(low)
                            cover = float(np.mean(np.where(ok, (low <= truth) & (truth <= high), False)))
                            cells.append(f"{cover:.3f} ({float(np.nanmean(high - low)):.3f})")
                        print(f"{g:>3} {name:>8} {p:>5} {rho:>4} {other:>5} | " + " | ".join(f"{c:>16}" for c in cells),
                              flush=True)


if __name__ == "__main__":
    main()
