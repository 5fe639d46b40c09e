"""Chance-corrected agreement for categorical verdicts.

A missing label (None or a float NaN) on either side is not a category: the pair is left out and
`n` counts the pairs kept (the protocols decide, by their missing-answer policy, what reaches here).

>>> cohen_kappa(["Yes", "No", "Yes", "No"], ["Yes", "No", "No", "No"]).value
0.5
>>> round(balanced_accuracy(["Yes", "No", "Yes", "No"], ["Yes", "No", "No", "No"]).value, 3)
0.75
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from typing import overload

import numpy as np

from .base import NAN, MetricResult, is_missing, known_pairs


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> MetricResult:
    """Cohen's kappa of two raters over the same items: (p_o - p_e) / (1 - p_e)."""
    if len(a) != len(b):
        raise ValueError(f"cohen_kappa needs equal lengths, got {len(a)} and {len(b)}")
    a, b = known_pairs(a, b)
    n = len(a)
    if n == 0:
        return MetricResult(NAN, 0)
    po = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    pe = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / (n * n)
    if pe == 1.0:
        return MetricResult(NAN, n)   # both raters constant: kappa undefined
    return MetricResult((po - pe) / (1 - pe), n)


def accuracy(y_true: Sequence[Hashable], y_pred: Sequence[Hashable]) -> MetricResult:
    """Share of items where the prediction equals the truth (also any rate: truth all True)."""
    if len(y_true) != len(y_pred):
        raise ValueError(f"accuracy needs equal lengths, got {len(y_true)} and {len(y_pred)}")
    y_true, y_pred = known_pairs(y_true, y_pred)
    if not y_true:
        return MetricResult(NAN, 0)
    return MetricResult(sum(a == b for a, b in zip(y_true, y_pred)) / len(y_true), len(y_true))


def balanced_accuracy(y_true: Sequence[Hashable], y_pred: Sequence[Hashable]) -> MetricResult:
    """Mean per-class recall over the classes present in `y_true`; undefined (NaN) with one class
    present, where it would be that class's recall alone (0 or 1 on a test with one or two items)."""
    if len(y_true) != len(y_pred):
        raise ValueError(f"balanced_accuracy needs equal lengths, got {len(y_true)} and {len(y_pred)}")
    y_true, y_pred = known_pairs(y_true, y_pred)
    if len(set(y_true)) < 2:
        return MetricResult(NAN, len(y_true))
    recalls = []
    for cls in sorted(set(y_true), key=str):
        idx = [i for i, t in enumerate(y_true) if t == cls]
        recalls.append(sum(y_pred[i] == cls for i in idx) / len(idx))
    return MetricResult(float(np.mean(recalls)), len(y_true))


def binary_agreement(tp: int, fn: int, fp: int, tn: int) -> tuple[MetricResult, MetricResult]:
    """Cohen's kappa and the balanced accuracy of binary predictions from their 2x2 counts against
    the truth (tp: both True; fn: truth True, prediction False; ...), to the last bit what
    `cohen_kappa(truth, pred)` and `balanced_accuracy(truth, pred)` give from the lists: a table of
    1,000 judges by 14 tests counts them in one group-by where the lists took 6-8 s."""
    n = tp + fn + fp + tn
    if n == 0:
        return MetricResult(NAN, 0), MetricResult(NAN, 0)
    po = (tp + tn) / n
    pe = ((tp + fn) * (tp + fp) + (fp + tn) * (fn + tn)) / (n * n)
    kappa = MetricResult(NAN, n) if pe == 1.0 else MetricResult((po - pe) / (1 - pe), n)
    if tp + fn == 0 or fp + tn == 0:                   # one truth class: balanced accuracy undefined
        return kappa, MetricResult(NAN, n)
    return kappa, MetricResult(float(np.mean([tn / (fp + tn), tp / (tp + fn)])), n)   # classes False, True


@overload
def tie_credit(pred: float) -> float: ...


@overload
def tie_credit(pred: None) -> None: ...


def tie_credit(pred: float | None) -> float | None:
    """A pooled probability as the share of a positive vote: 1 above 0.5, 0 below, and 0.5 for an
    exact tie (a fair coin: the tie rule of juries)."""
    if pred is None:
        return None
    return 1.0 if pred > 0.5 else 0.0 if pred < 0.5 else 0.5


def binary_agreement_with_ties(truth: Sequence[bool], said: Sequence[float]) -> dict[str, MetricResult]:
    """Accuracy, balanced accuracy and Cohen's kappa of binary verdicts where `said` is the share
    of a positive vote per item (1, 0, or 0.5 for a tie): the expected values over a fair coin
    breaking every tie, i.e. each tie counted half as each label (sklearn's metrics with sample
    weights 0.5 give the same numbers). Every item counts; hard verdicts give the usual metrics.
    Balanced accuracy is NaN with one truth class present, as `balanced_accuracy` (that class's
    recall alone is no balanced accuracy)."""
    if len(truth) != len(said):
        raise ValueError(f"need equal lengths, got {len(truth)} and {len(said)}")
    t = np.asarray(truth, dtype=bool)
    q = np.asarray(said, dtype=float)
    n = len(t)
    if not n:
        return {m: MetricResult(NAN, 0) for m in ("accuracy", "balanced_accuracy", "kappa")}
    credit = np.where(t, q, 1.0 - q)
    po = float(credit.mean())
    recalls = [float(credit[t == c].mean()) for c in (False, True) if (t == c).any()]
    pos_truth, pos_said = float(t.mean()), float(q.mean())
    pe = pos_truth * pos_said + (1 - pos_truth) * (1 - pos_said)
    kappa = NAN if pe >= 1.0 - 1e-15 else (po - pe) / (1 - pe)
    balanced = float(np.mean(recalls)) if len(recalls) == 2 else NAN     # one class present: undefined
    return {"accuracy": MetricResult(po, n), "balanced_accuracy": MetricResult(balanced, n),
            "kappa": MetricResult(kappa, n)}


def fleiss_kappa(ratings: Sequence[Sequence[Hashable]]) -> MetricResult:
    """Fleiss' kappa; `ratings[i]` are the labels the raters gave item i (same count per item).
    Items with a missing rating are left out (n counts the items kept)."""
    ratings = [r for r in ratings if not any(is_missing(x) for x in r)]
    if not ratings:
        return MetricResult(NAN, 0)
    m = len(ratings[0])
    if m < 2 or any(len(r) != m for r in ratings):
        raise ValueError("fleiss_kappa needs the same number (>= 2) of ratings per item")
    cats = sorted({x for r in ratings for x in r}, key=str)
    table = np.array([[sum(x == c for x in r) for c in cats] for r in ratings], dtype=float)
    n = len(ratings)
    p_j = table.sum(axis=0) / (n * m)
    p_i = ((table ** 2).sum(axis=1) - m) / (m * (m - 1))
    pbar, pe = p_i.mean(), (p_j ** 2).sum()
    if pe == 1.0:
        return MetricResult(NAN, n)
    return MetricResult(float((pbar - pe) / (1 - pe)), n)


def krippendorff_alpha(ratings: Sequence[Sequence[Hashable]]) -> MetricResult:
    """Krippendorff's alpha for nominal labels; `ratings[i]` are the labels item i got from however
    many raters (any count: the annotation queue's `--per-item K` with skips and late raters).
    Missing labels are dropped; items with fewer than two labels are not pairable and left out
    (n counts the items kept). Undefined (NaN) when every kept label is the same category.

    >>> krippendorff_alpha([["Yes", "Yes"], ["No", "No"], ["Yes", "No", "No"]]).value
    0.5
    """
    units = pairable(ratings)
    if not units:
        return MetricResult(NAN, 0)
    index = categories(units)
    return MetricResult(float(alpha_of(coincidences([[index[x] for x in u] for u in units], len(index)))), len(units))


def pairable(ratings: Sequence[Sequence[Hashable]]) -> list[list[Hashable]]:
    """Each item's known labels (missing ones dropped), the items with two or more: those alpha pairs."""
    units = [[x for x in r if not is_missing(x)] for r in ratings]
    return [u for u in units if len(u) >= 2]


def categories(units: Sequence[Sequence[Hashable]]) -> dict[Hashable, int]:
    """The labels given, each with its index (in the order of their text)."""
    return {c: i for i, c in enumerate(sorted({x for u in units for x in u}, key=str))}


def coincidences(units: Sequence[Sequence[int]], count: int) -> np.ndarray:
    """Alpha's coincidence matrix of items' labels (category indices), each item with two or more."""
    out = np.zeros((count, count))
    for labels in units:
        counts = np.bincount(np.asarray(labels, dtype=np.int64), minlength=count).astype(float)
        out += (np.outer(counts, counts) - np.diag(counts)) / (counts.sum() - 1)
    return out


def alpha_of(coincidence: np.ndarray) -> np.ndarray:
    """Nominal alpha from coincidence matrices (..., K, K): 1 - (n - 1) D_o / D_e; NaN where D_e is 0
    (every label one category)."""
    n_c = coincidence.sum(axis=-1)
    n = n_c.sum(axis=-1)
    observed = coincidence.sum(axis=(-1, -2)) - np.trace(coincidence, axis1=-2, axis2=-1)
    expected = n * n - (n_c ** 2).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(expected > 0, 1.0 - (n - 1) * observed / np.where(expected > 0, expected, 1.0), np.nan)
