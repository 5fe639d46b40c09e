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

from .agreement import alpha_of, categories, coincidences, pairable
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


def annotator_alpha(by_unit: Mapping[str, Sequence[Sequence[Hashable]]], seed: int = 0) -> Alpha:
    """Alpha over every item answered two or more times, `by_unit` mapping a unit to its items'
    labels, with the interval of the units' bootstrap (see the module)."""
    kept = {unit: units for unit, items in by_unit.items() if (units := pairable(items))}
    nan = float("nan")
    if not kept:
        return Alpha(nan, nan, nan, 0, 0, FEW_UNITS)
    items = sum(len(v) for v in kept.values())
    index = categories([labels for v in kept.values() for labels in v])
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
