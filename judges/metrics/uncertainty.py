"""A cluster's uncertainty, the size measure the annotation queue draws by: sqrt of the sum of its
items' variances under the judges' answers (the variance-optimal Hansen-Hurwitz size for a
calibrated judge with lam = 1; `active.design` mixes it with a floor). Beside it, `cochran_draws`:
how many draws the active interval needs at most, from how skewed the clusters' answers are under
the judges' probabilities (their moments: `draws_needed.Totals.moments`)."""
from __future__ import annotations

import numpy as np

from .active import MIN

SKEW_RULE = 25.0       # Cochran's n > 25 G1^2: the draws before an interval of skewed draws (`cochran_draws`)


def _summed(item_values: np.ndarray, cluster_index: np.ndarray, n_clusters: int) -> np.ndarray:
    """The per-cluster sum of item values (NaN as 0)."""
    ci = np.asarray(cluster_index, dtype=np.int64)
    return np.bincount(ci, weights=np.nan_to_num(np.asarray(item_values, dtype=float)), minlength=n_clusters)


def _per_cluster(item_values: np.ndarray, cluster_index: np.ndarray, n_clusters: int) -> np.ndarray:
    """sqrt of the per-cluster sum of item variances (the optimal HH size measure)."""
    return np.sqrt(np.clip(_summed(np.clip(np.nan_to_num(item_values), 0.0, None), cluster_index, n_clusters),
                           0.0, None))


def binary_uncertainty(p_yes: np.ndarray, cluster_index: np.ndarray, n_clusters: int) -> np.ndarray:
    """Per cluster sqrt(sum over its items of p(1-p)): the variance-optimal HH size for a
    calibrated P(Yes) with lam = 1."""
    p = np.clip(np.asarray(p_yes, dtype=float), 0.0, 1.0)
    return _per_cluster(p * (1.0 - p), cluster_index, n_clusters)


def vote_share(votes: np.ndarray) -> np.ndarray:
    """Several judges' 0/1 votes (items, judges; NaN = no answer; one column: the share itself) as
    the vote share per item, treated as a P(Yes); an item no judge answered counts as 1/2."""
    v = np.asarray(votes, dtype=float)
    if v.ndim == 1:
        v = v[:, None]
    answered = np.sum(np.isfinite(v), axis=1)
    return np.divide(np.nansum(v, axis=1), answered, out=np.full(len(v), 0.5), where=answered > 0)


def vote_uncertainty(votes: np.ndarray, cluster_index: np.ndarray, n_clusters: int) -> np.ndarray:
    """From several judges' 0/1 votes: uncertainty sqrt(sum s(1-s)) per cluster of their share s."""
    return binary_uncertainty(vote_share(votes), cluster_index, n_clusters)


def cochran_draws(probability: np.ndarray, uncertainty: np.ndarray, third: np.ndarray | None) -> int:
    """MIN, or Cochran's n > 25 G1^2 (Sampling Techniques, 1977, sec. 2.15: a 95% statement wrong at
    most 6% of the time) where G1 is the skewness of one draw's weighted residual (Y_c - f_c)/p_c,
    the cluster drawn with p_c and its answers from the judges' probabilities (variance u_c^2, third
    central moment `third`): sum third/p^2 / (sum u^2/p)^1.5. An audit's populations with a rare
    answer in a few clusters (a calibrated judge, rate 3-7%) covered 0.86-0.95 at 10 draws; at this
    many, 0.92-0.96. The queue waits for at most this many (`draws_needed.min_draws`)."""
    if third is None:
        return MIN
    p, u, k3 = (np.asarray(a, dtype=float) for a in (probability, uncertainty, third))
    drawn = p > 0
    second = float((u[drawn] ** 2 / p[drawn]).sum())
    if not second > 0:
        return MIN
    g1 = float((k3[drawn] / p[drawn] ** 2).sum()) / second ** 1.5
    return max(MIN, int(np.ceil(SKEW_RULE * g1 * g1 - 1e-9)))
