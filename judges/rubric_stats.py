"""Agreement of a rubric question's verdicts with the humans', from contingency tables.

Cohen's kappa and balanced accuracy (K = 2), Spearman's rho with average ranks for ties (the
Pearson correlation of the two sides' mid-ranks, as scipy's spearmanr) and quadratic-weighted
kappa (N points) are functions of the K x K table of (human category, judge category) counts
(exact and within-one agreement and the mean difference are means of per-verdict values, with the
project's mean interval: rubric_tables.py). So one table per cluster (a text: its repeats move together)
holds everything: a bootstrap resample of clusters is a sum of their tables, and each statistic is
computed for all resamples at once in numpy. Intervals follow the project's one rule
(`metrics.bootstrap.percentile_interval`: the expanded percentile interval, none under
MIN_CLUSTERS clusters, `interval_note` saying why one is missing).

>>> t = tables_by_cluster(["s1", "s1", "s2", "s3"], [0, 1, 1, 0], [0, 1, 0, 0], 2)
>>> round(float(kappa(t.sum(axis=0))), 3)
0.5
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Hashable, Sequence
from typing import TypedDict

import numpy as np

from .metrics.bootstrap import (
    BATCH_CELLS,
    MIN_CLUSTERS,
    RESAMPLES,
    draw_counts,
    interval_note,
    joined_notes,
    or_none,
    percentile_interval,
    resampled_sums,
)
from .metrics.estimates import Units
from .metrics.proportion import LUMPY_RECALL, lumpy_recall_bounds

Statistic = Callable[[np.ndarray], np.ndarray]


class Estimate(TypedDict):
    """One statistic of the pooled table with its interval; all None where there is no table (or no
    value), `note` why an interval is wide or missing."""

    value: float | None
    low: float | None
    high: float | None
    note: str | None


def tables_by_cluster(clusters: Sequence[Hashable], truth: Sequence[int] | np.ndarray,
                      pred: Sequence[int] | np.ndarray, k: int) -> np.ndarray:
    """(G, k, k) counts: per cluster (sorted by name), rows the human category 0..k-1, columns the judge's."""
    if not len(truth):
        return np.zeros((0, k, k))
    _, inverse = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    out = np.zeros((int(inverse.max()) + 1, k, k))
    np.add.at(out, (inverse, np.asarray(truth, dtype=int), np.asarray(pred, dtype=int)), 1.0)
    return out


def _quiet(fn: Statistic) -> Statistic:
    def wrapped(t: np.ndarray) -> np.ndarray:
        with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            return fn(t)
    return wrapped


def _n(t: np.ndarray) -> np.ndarray:
    return t.sum(axis=(-2, -1))


def _weighted_kappa(t: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """1 - sum(w O) / sum(w E): observed vs chance disagreement; NaN where chance disagreement is 0."""
    n = _n(t)[..., None, None]
    rows, cols = t.sum(axis=-1), t.sum(axis=-2)
    expected = rows[..., :, None] * cols[..., None, :] / np.where(n > 0, n, np.nan)
    chance = (weights * expected).sum(axis=(-2, -1))
    observed = (weights * t).sum(axis=(-2, -1))
    return np.where(chance > 1e-12, 1.0 - observed / np.where(chance > 1e-12, chance, 1.0), np.nan)


@_quiet
def kappa(t: np.ndarray) -> np.ndarray:
    """Cohen's kappa (unweighted)."""
    k = t.shape[-1]
    return _weighted_kappa(t, 1.0 - np.eye(k))


@_quiet
def quadratic_kappa(t: np.ndarray) -> np.ndarray:
    """Cohen's kappa with quadratic weights (i - j)^2 / (k - 1)^2."""
    k = t.shape[-1]
    i = np.arange(k)
    return _weighted_kappa(t, (i[:, None] - i[None, :]) ** 2 / (k - 1) ** 2)


@_quiet
def balanced_accuracy(t: np.ndarray) -> np.ndarray:
    """Mean recall over the human classes present; NaN with fewer than two present."""
    rows = t.sum(axis=-1)
    recall = np.diagonal(t, axis1=-2, axis2=-1) / np.where(rows > 0, rows, np.nan)
    present = (rows > 0).sum(axis=-1)
    return np.where(present >= 2, np.nanmean(recall, axis=-1), np.nan)


@_quiet
def exact(t: np.ndarray) -> np.ndarray:
    return np.trace(t, axis1=-2, axis2=-1) / _n(t)


@_quiet
def within_one(t: np.ndarray) -> np.ndarray:
    k = t.shape[-1]
    i = np.arange(k)
    near = np.abs(i[:, None] - i[None, :]) <= 1
    return (t * near).sum(axis=(-2, -1)) / _n(t)


@_quiet
def mean_difference(t: np.ndarray) -> np.ndarray:
    """Mean of judge - human, in scale points."""
    k = t.shape[-1]
    i = np.arange(k)
    return (t * (i[None, :] - i[:, None])).sum(axis=(-2, -1)) / _n(t)


def _mid_ranks(counts: np.ndarray) -> np.ndarray:
    """The average rank of each category given its counts (ties share the mean of their ranks)."""
    before = np.cumsum(counts, axis=-1) - counts
    return before + (counts + 1.0) / 2.0


@_quiet
def spearman(t: np.ndarray) -> np.ndarray:
    """Spearman's rho with average ranks: the Pearson correlation of the mid-ranks; NaN when a side is constant."""
    n = _n(t)
    rows, cols = t.sum(axis=-1), t.sum(axis=-2)
    rh, rj = _mid_ranks(rows), _mid_ranks(cols)
    mh = (rows * rh).sum(axis=-1) / n
    mj = (cols * rj).sum(axis=-1) / n
    dh, dj = rh - mh[..., None], rj - mj[..., None]
    cov = (t * dh[..., :, None] * dj[..., None, :]).sum(axis=(-2, -1))
    vh, vj = (rows * dh ** 2).sum(axis=-1), (cols * dj ** 2).sum(axis=-1)
    ok = (vh > 1e-12) & (vj > 1e-12)
    return np.where(ok, cov / np.sqrt(np.where(ok, vh * vj, 1.0)), np.nan)


def estimate(tables: np.ndarray, statistic: Statistic, resamples: int = RESAMPLES, seed: int = 0,
             batch_cells: int = BATCH_CELLS, expand_for: int | None = None) -> Estimate:
    """A statistic of the pooled table and its 95% cluster-bootstrap interval: each resample draws
    clusters with replacement and sums their tables; `expand_for`: the count the small-sample
    expansion reads where it is not every cluster (`rarer_answer`)."""
    g = len(tables)
    if not g:
        return {"value": None, "low": None, "high": None, "note": None}
    value = float(statistic(tables.sum(axis=0)))
    low = high = math.nan
    if not math.isnan(value):
        low, high = percentile_interval(statistic(resampled_sums(tables, seed, resamples, batch_cells)),
                                        expand_for or g)
    return {"value": None if math.isnan(value) else value, "low": or_none(low), "high": or_none(high),
            "note": interval_note(g, low) if not math.isnan(value) else None}


def stratified_estimate(tables: np.ndarray, statistic: Statistic, resamples: int = RESAMPLES,
                        seed: int = 0) -> Estimate:
    """A statistic of the pooled table with an interval that resamples clusters within each human
    category (a text's human answer is one category): balanced accuracy is the mean of per-answer
    recalls, each over that answer's texts, so their counts stay as observed; the interval is
    expanded for the smallest category's count. (Resampling all texts at once covered 0.92 at 10
    and 30 texts of the two answers; within each, 0.95: a simulation in tests/test_rubric_conformance.py.)"""
    g = len(tables)
    if not g:
        return {"value": None, "low": None, "high": None, "note": None}
    value = float(statistic(tables.sum(axis=0)))
    strata = tables.sum(axis=2).argmax(axis=1)
    rng = np.random.default_rng(seed)
    total = np.zeros((resamples, *tables.shape[1:]))
    for c in np.unique(strata):
        members = tables[strata == c]
        drawn = draw_counts(rng.integers(0, len(members), (resamples, len(members))))
        total += (drawn @ members.reshape(len(members), -1)).reshape(total.shape)
    smallest = int(np.bincount(strata).min()) if len(np.unique(strata)) == tables.shape[1] else 0
    if math.isnan(value):
        return {"value": None, "low": None, "high": None, "note": None}
    low, high = percentile_interval(statistic(total), smallest)
    guard = lumpy_recall_bounds(np.diagonal(tables, axis1=1, axis2=2), tables.sum(axis=2)) \
        if not math.isnan(low) else None
    if guard is None:
        return {"value": value, "low": or_none(low), "high": or_none(high), "note": interval_note(smallest, low)}
    return {"value": value, "low": min(low, guard[0]), "high": max(high, guard[1]), "note": LUMPY_RECALL}


def per_class(tables: np.ndarray) -> np.ndarray:
    """How many clusters hold each human category."""
    return (tables.sum(axis=2) > 0).sum(axis=0)


def rarer_answer(tables: np.ndarray) -> int:
    """The texts holding the humans' rarer answer (of those they gave): a kappa's interval is
    expanded for these, as balanced accuracy's stratified one is. Expanded for all 20 texts of 10
    of each answer, a binary kappa's covered 0.93 (6,000 simulated data sets; the judge's rarer
    answer is in fewer than 10 of them most of the time); for the 10, 0.96-0.97
    (tests/test_rubric_conformance.py)."""
    counts = per_class(tables)
    given = counts[counts > 0]
    return int(given.min()) if len(given) else len(tables)


def few_per_class(tables: np.ndarray, names: Sequence[str]) -> str | None:
    """Why a binary agreement's interval is withheld: each human answer's recall is a rate over the
    texts that have it, so each needs MIN_CLUSTERS texts (a simulation: kappa over 10 texts, one
    verdict each, covered 0.87; with 10 of each answer, 0.94)."""
    counts = per_class(tables)
    if counts.min() >= MIN_CLUSTERS:
        return None
    shown = ", ".join(f"{n}: {c}" for n, c in zip(names, counts.tolist()))
    return f"too few texts of each human answer ({shown}; an interval needs {MIN_CLUSTERS} of each): no interval"


STRATIFIED = ("balanced_accuracy",)


def agreement_row(tables: np.ndarray, statistics: dict[str, Statistic], resamples: int = RESAMPLES, seed: int = 0,
                  withheld: str | None = None, expand_for: int | None = None) -> dict[str, float | int | str | None]:
    """Each statistic with its interval (`NAME`, `NAME_low`, `NAME_high`, and `NAME_note`, the note
    on it alone, which a headline of that statistic shows), the clusters, and one note on the
    intervals (they share the clusters: too few for all, or why one is missing); `withheld`: no
    interval at all, for that reason; `expand_for`: `estimate`'s, for the statistics not stratified."""
    row: dict[str, float | int | str | None] = {"clusters": len(tables)}
    notes = [withheld] if withheld else []
    for name, statistic in statistics.items():
        e = stratified_estimate(tables, statistic, resamples, seed) if name in STRATIFIED else \
            estimate(tables, statistic, resamples, seed, expand_for=expand_for)
        if withheld:
            e |= {"low": None, "high": None, "note": None}
        row |= {name: e["value"], f"{name}_low": e["low"], f"{name}_high": e["high"],
                f"{name}_note": joined_notes(withheld, e["note"])}
        if e["note"]:
            notes.append(e["note"] if len(tables) < MIN_CLUSTERS else f"{name}: {e['note']}")
    row["ci_note"] = joined_notes(*notes)
    return row


# -- a sweep's ranked estimate: the interval the agreement table prints -----------------------------
Withhold = Callable[[np.ndarray], "str | None"]


def table_units(clusters: Sequence[Hashable], h: np.ndarray, j: np.ndarray, k: int, metric: str,
                statistic: Statistic, resamples: int, withhold: Withhold | None = None,
                expand: Callable[[np.ndarray], int] | None = None) -> Units:
    """One statistic of the (human category, judge category) table, categories 0..k-1, as a sweep
    ranks it: the rows' clusters, and the interval `agreement_row` prints for them (the table's
    resamples and seed; `withhold`: why the table prints none; `expand`: its `expand_for`)."""
    return Units.of(clusters, {"h": h, "j": j}, lambda c: float(statistic(_table(c["h"], c["j"], k))),
                    rule=_table_rule(metric, statistic, k, resamples, withhold, expand))


def _table_rule(metric: str, statistic: Statistic, k: int, resamples: int, withhold: Withhold | None,
                expand: Callable[[np.ndarray], int] | None = None):
    def rule(u: Units, _resamples: int, seed: int) -> tuple[float, float, str | None]:
        names = np.asarray(u.ids)[u.cluster_of_rows()].tolist()           # the table sorts clusters by name
        tables = tables_by_cluster(names, u.columns["h"], u.columns["j"], k)
        withheld = withhold(tables) if withhold is not None else None
        row = agreement_row(tables, {metric: statistic}, resamples, seed, withheld,
                            expand(tables) if expand is not None else None)
        low, high = row[f"{metric}_low"], row[f"{metric}_high"]
        return (math.nan if low is None else float(low), math.nan if high is None else float(high),
                None if row["ci_note"] is None else str(row["ci_note"]))
    return rule


def _table(h: np.ndarray, j: np.ndarray, k: int) -> np.ndarray:
    t = np.zeros((k, k))
    np.add.at(t, (h.astype(int), j.astype(int)), 1.0)
    return t
