"""A cluster's uncertainty, the size measure the annotation queue draws by: sqrt of the sum of its
items' variances under the judges' answers (the variance-optimal Hansen-Hurwitz size for a
calibrated judge with lam = 1; `active.design` mixes it with a floor)."""
from __future__ import annotations

import numpy as np


def _per_cluster(item_values: np.ndarray, cluster_index: np.ndarray, n_clusters: int) -> np.ndarray:
    """sqrt of the per-cluster sum of item variances (the optimal HH size measure)."""
    ci = np.asarray(cluster_index, dtype=np.int64)
    v = np.clip(np.nan_to_num(np.asarray(item_values, dtype=float)), 0.0, None)
    return np.sqrt(np.bincount(ci, weights=v, minlength=n_clusters))


def binary_uncertainty(p_yes: np.ndarray, cluster_index: np.ndarray, n_clusters: int) -> np.ndarray:
    """Per cluster sqrt(sum over its items of p(1-p)): the variance-optimal HH size for a
    calibrated P(Yes) with lam = 1."""
    p = np.clip(np.asarray(p_yes, dtype=float), 0.0, 1.0)
    return _per_cluster(p * (1.0 - p), cluster_index, n_clusters)


def vote_uncertainty(votes: np.ndarray, cluster_index: np.ndarray, n_clusters: int) -> np.ndarray:
    """From several judges' 0/1 votes (items, judges; NaN = no answer): the vote share s per item,
    treated as a P(Yes), uncertainty sqrt(sum s(1-s)) per cluster. An item no judge answered
    counts as s = 1/2 (nothing known)."""
    v = np.asarray(votes, dtype=float)
    if v.ndim == 1:
        v = v[:, None]
    answered = np.sum(np.isfinite(v), axis=1)
    share = np.divide(np.nansum(v, axis=1), answered, out=np.full(len(v), 0.5), where=answered > 0)
    return binary_uncertainty(share, cluster_index, n_clusters)


def points_uncertainty(dist: np.ndarray, points: np.ndarray, cluster_index: np.ndarray,
                       n_clusters: int) -> np.ndarray:
    """From a distribution over a rubric's points (items, K): the variance of the point value
    under it, sqrt(sum) per cluster."""
    d = np.asarray(dist, dtype=float)
    d = d / np.where(d.sum(axis=1, keepdims=True) > 0, d.sum(axis=1, keepdims=True), 1.0)
    x = np.asarray(points, dtype=float)
    mean = d @ x
    return _per_cluster(d @ (x * x) - mean * mean, cluster_index, n_clusters)
