"""Krippendorff's alpha (nominal) between annotators with its 95% interval, for the annotation
page: the items two or more people answered, grouped by the unit paid for (a story with its
tests, a pair, a text). The interval is litjudge's one rule (`bootstrap.percentile_interval`): a
bootstrap over those units, Hesterberg's expanded percentile interval, and none from fewer than
MIN_CLUSTERS units. Alpha is a ratio of sums of each unit's coincidences, so a resample's alpha is
the ratio of the drawn units' sums (`bootstrap.resampled_sums`).

A second condition, as the agreement tables' (`bootstrap.clusters_per_class`): no interval until
the answers other than the commonest are in MIN_CLUSTERS units. Disagreement is measured on
them: with two annotators over 10 pairs of one item each, 10% of them Yes, the interval from 10
units covered 0.61; with the condition, 0.933-0.960 where it is given (tests/test_annotate.py).
"""
from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .base import is_missing
from .bootstrap import MIN_CLUSTERS, percentile_interval, resampled_sums

FEW_OTHER = (f"the answers other than the commonest are in fewer than {MIN_CLUSTERS} units: the disagreement rests on "
             "too few independent units: no interval")
FEW_UNITS = f"fewer than {MIN_CLUSTERS} units answered by two or more: no interval"


@dataclass(frozen=True)
class Alpha:
    value: float          # NaN: undefined (every label the same, or no item answered twice)
    low: float            # NaN with a `note`
    high: float
    items: int            # items answered by two or more
    units: int            # the units holding them
    note: str | None


def coincidences(units: Sequence[Sequence[int]], categories: int) -> np.ndarray:
    """The coincidence matrix of items' labels (category indices), each item with two or more."""
    out = np.zeros((categories, categories))
    for labels in units:
        counts = np.bincount(np.asarray(labels, dtype=np.int64), minlength=categories).astype(float)
        out += (np.outer(counts, counts) - np.diag(counts)) / (counts.sum() - 1)
    return out


def alpha_of(coincidence: np.ndarray) -> np.ndarray:
    """Nominal alpha from coincidence matrices (..., K, K): 1 - (n - 1) D_o / D_e; NaN where D_e is 0."""
    n_c = coincidence.sum(axis=-1)
    n = n_c.sum(axis=-1)
    observed = coincidence.sum(axis=(-1, -2)) - np.trace(coincidence, axis1=-2, axis2=-1)
    expected = n * n - (n_c ** 2).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(expected > 0, 1.0 - (n - 1) * observed / np.where(expected > 0, expected, 1.0), np.nan)


def _paired(by_unit: Mapping[str, Sequence[Sequence[Hashable]]]) -> dict[str, list[list[Hashable]]]:
    """Each unit's items with two or more labels (missing ones dropped); units without one left out."""
    out: dict[str, list[list[Hashable]]] = {}
    for unit, items in by_unit.items():
        for labels in items:
            known = [x for x in labels if not is_missing(x)]
            if len(known) >= 2:
                out.setdefault(unit, []).append(known)
    return out


def annotator_alpha(by_unit: Mapping[str, Sequence[Sequence[Hashable]]], seed: int = 0) -> Alpha:
    """Alpha over every item answered two or more times, `by_unit` mapping a unit to its items'
    labels, with the interval of the units' bootstrap (see the module)."""
    kept = _paired(by_unit)
    nan = float("nan")
    if not kept:
        return Alpha(nan, nan, nan, 0, 0, FEW_UNITS)
    items = sum(len(v) for v in kept.values())
    index = {c: i for i, c in enumerate(sorted({x for v in kept.values() for labels in v for x in labels}, key=str))}
    coded = [[[index[x] for x in labels] for labels in v] for v in kept.values()]
    per_unit = np.stack([coincidences(v, len(index)) for v in coded])
    value = float(alpha_of(per_unit.sum(axis=0)))
    commonest = int(np.argmax(per_unit.sum(axis=(0, 2))))
    other = sum(1 for v in coded if any(x != commonest for labels in v for x in labels))
    note = FEW_UNITS if len(kept) < MIN_CLUSTERS else FEW_OTHER if other < MIN_CLUSTERS else None
    if note is not None or value != value:
        return Alpha(value, nan, nan, items, len(kept), note or "every label the same: no alpha")
    low, high = percentile_interval(alpha_of(resampled_sums(per_unit, seed)), other)
    return Alpha(value, low, high, items, len(kept), None if low == low else "every resample gives the same value: "
                                                                             "no interval")
