"""Logistic regression by Newton's method (IRLS), for length- and style-controlled agreement.

The AlpacaEval-LC / Chatbot Arena style-control idea applied to a judge: regress whether the judge
agreed with the humans on how much longer (and how much more formatted) the human-preferred text
is, then read the fitted agreement where those differences are zero. A tiny ridge penalty (not on
the intercept) keeps the fit finite when a feature separates the outcomes perfectly.

>>> b = fit_logistic([[0.0], [0.0], [1.0], [1.0]], [1, 0, 1, 1])
>>> round(sigmoid(b[0]), 3)   # agreement at feature 0: 1 of 2
0.5
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


def fit_logistic(features: Sequence[Sequence[float]], outcome: Sequence[float | bool], ridge: float = 1e-4,
                 iterations: int = 100, tol: float = 1e-10) -> np.ndarray:
    """Coefficients [intercept, b_1 .. b_k] maximising the log-likelihood of P(y=1) =
    sigmoid(b0 + x.b) minus ridge/2 |b_1..k|^2. NaN coefficients when there are no rows."""
    y = np.asarray(outcome, dtype=float)
    if not len(y):
        width = np.shape(features)[1] if np.ndim(features) == 2 else 0
        return np.full(width + 1, np.nan)
    x = np.asarray(features, dtype=float).reshape(len(outcome), -1)
    design = np.hstack([np.ones((len(y), 1)), x])
    penalty = np.eye(design.shape[1]) * ridge
    penalty[0, 0] = 0.0
    beta = np.zeros(design.shape[1])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(design @ beta, -35, 35)))
        grad = design.T @ (y - p) - penalty @ beta
        hess = design.T @ (design * (p * (1 - p))[:, None]) + penalty + 1e-12 * np.eye(len(beta))
        step = np.linalg.solve(hess, grad)
        beta = beta + step
        if np.abs(step).max() < tol:
            break
    return beta


def separated(features: Sequence[Sequence[float]], outcome: Sequence[float | bool]) -> bool:
    """Whether the outcomes are (completely or quasi-completely) separated by a hyperplane in the
    features plus an intercept, so that the logistic MLE does not exist and a ridge-penalised fit
    is set by its penalty (Konis 2007: a linear program finds b != 0 with s_i x_i.b >= 0 for all
    rows, s_i = +1/-1 for outcome 1/0). All outcomes equal counts as separated (the intercept
    alone runs off to infinity)."""
    y = np.asarray(outcome, dtype=float)
    if not len(y):
        return False
    one = np.asarray(features, dtype=float).reshape(len(y), -1)
    if one.shape[1] == 1:        # one feature: separated iff a threshold on it splits the outcomes
        pos, neg = one[y > 0.5, 0], one[y <= 0.5, 0]
        return bool(not len(pos) or not len(neg)
                    or (np.ptp(one) > 0 and (pos.max() <= neg.min() or neg.max() <= pos.min())))
    from scipy.optimize import linprog

    x = np.hstack([np.ones((len(y), 1)), np.asarray(features, dtype=float).reshape(len(y), -1)])
    signed = x * np.where(y > 0.5, 1.0, -1.0)[:, None]
    res = linprog(-signed.sum(axis=0), A_ub=-signed, b_ub=np.zeros(len(y)), bounds=[(-1, 1)] * x.shape[1],
                  method="highs")
    return bool(res.status == 0 and -res.fun > 1e-7 * max(1.0, float(np.abs(signed).sum())))


def cluster_robust_cov(features: Sequence[Sequence[float]], outcome: Sequence[float | bool], beta: np.ndarray,
                       clusters: Sequence[object]) -> np.ndarray:
    """Covariance of the fitted coefficients, robust to correlation within clusters (a pair's two
    orders): the sandwich H^-1 (sum over clusters of s_g s_g^T) H^-1, with the small-sample factor
    G/(G-1) * (N-1)/(N-K) that statsmodels applies."""
    x = np.asarray(features, dtype=float).reshape(len(outcome), -1)
    y = np.asarray(outcome, dtype=float)
    design = np.hstack([np.ones((len(y), 1)), x])
    p = 1.0 / (1.0 + np.exp(-np.clip(design @ beta, -35, 35)))
    hess = design.T @ (design * (p * (1 - p))[:, None])
    _, inverse = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    scores = np.zeros((inverse.max() + 1, design.shape[1]))
    np.add.at(scores, inverse, design * (y - p)[:, None])
    bread = np.linalg.pinv(hess)
    g, n, k = len(scores), len(y), design.shape[1]
    factor = g / (g - 1) * (n - 1) / (n - k) if g > 1 and n > k else 1.0
    return factor * bread @ (scores.T @ scores) @ bread
