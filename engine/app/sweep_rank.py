"""A sweep's ranking: every cell x post setting x judge by the protocol's pooled estimate, each value
with its cluster-bootstrap interval, and the cells a paired comparison cannot tell from the best.

What is ranked is the estimate the protocol declares (`Declaration.tables`, with its direction):
pairwise accuracy over both orders, TTCW agreement over all tests, reference-Likert agreement at the run's cutoff.
Never "the table's first row": that ranked pairwise judges by the order-ab row alone, where a judge
that always answers "A" beats a good one on data whose better text is shown first.

Ties with the best: every cell is compared with the best by one simultaneous cluster bootstrap
drawing from the union of the cells' clusters (stories, pairs, lists), paired where cells share them
(`metrics.estimates.same_as_best`): the chance that any cell truly as good as the best is marked
worse is about 5% at most, the best having been picked on the same data (tested in
tests/test_conformance.py). `same_as_best` is True where the comparison cannot separate the cell
from the best, False where it can, None where the cell has fewer than MIN_CLUSTERS clusters. The top
row's own value is optimistic when many cells are close (the winner's curse: with 20 equally good
cells its interval covered the truth in 53% of sweeps): read the set marked same_as_best, not the
winner alone.

Range: a published value stays in its metric's range. The debiased squared calibration error is
unbiased, so a well-calibrated judge's estimate is below 0 about half the time (its table prints it
so, docs/statistics.md); the ranking prints it and its interval clipped at 0, and orders the cells
by the unclipped estimates.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import polars as pl

from litjudge.judges.metrics.bootstrap import RESAMPLES
from litjudge.judges.metrics.estimates import Units, intervals_with_notes, same_as_best

MULTIPLE_COMPARISONS = ("same_as_best: one simultaneous cluster bootstrap of every cell against the best, drawing from "
                        "all cells' clusters (paired where cells share them; max pairwise error, 95%): a cell marked "
                        "false is worse than the best with 95% family-wise confidence; true cannot be told apart from it; "
                        "read that set, not the winner")


@dataclass(frozen=True)
class Ranked:
    """One candidate row of the ranking: where it stands (head), the published value and its units."""

    head: dict[str, Any]
    value: float
    n: int | None
    units: Units | None
    missing: bool = False          # the cell's tables have no row of the ranked group at all
    note: str | None = None        # why it is undefined, as its table says (its ci_note)


def ranking(rows: list[Ranked], up: bool, resamples: int = RESAMPLES) -> pl.DataFrame:
    """The rows best first (`up`: higher is better, as the protocol declares the metric), those
    without an interval after the rest, each with its interval (ci_low, ci_high, ci_note: the one
    interval rule) and `same_as_best`, which compares the rows that have one; then, unranked (no
    rank, no value), the cells where it is undefined, each saying why in ci_note: a cell left out
    silently read as a sweep of fewer cells. Undefined in every cell, every cell is listed unranked
    (an empty ranking said nothing of why); its columns are the same whatever it holds.

    A row without an interval (fewer than MIN_CLUSTERS clusters, or an answer in too few of them:
    the interval rule withholds it because it would not cover) is not compared with the best and is
    ranked after those that are, whatever its value: 2 pairs read of 200 (the rest unread) at
    accuracy 1.0 topped a sweep's ranking with no interval; a TTCW judge whose experts said Yes in
    3 stories was marked worse than the best "with 95% confidence"."""
    defined = [r for r in rows if not math.isnan(r.value)]
    undefined = [r for r in rows if math.isnan(r.value)]
    units = {i: r.units for i, r in enumerate(defined) if r.units is not None}
    found = dict(zip(units, intervals_with_notes(list(units.values()), resamples), strict=True))
    intervals = [found.get(i, (math.nan, math.nan, "no resampling units for this estimate: no interval"))
                 for i in range(len(defined))]
    order = sorted(range(len(defined)), key=lambda i: (math.isnan(intervals[i][0]),
                                                       -defined[i].value if up else defined[i].value))
    compared = [i for i in order if i in units and not math.isnan(intervals[i][0])]
    same_of = dict(zip(compared, same_as_best([units[i] for i in compared], up, resamples), strict=True))
    out = []
    for rank, i in enumerate(order, start=1):
        r, (lo, hi, note) = defined[i], intervals[i]
        if compared and i not in same_of:
            note = f"{note or 'no interval'}; {RANKED_AFTER}"
        value, lo, hi = _in_range(r, r.value, lo, hi)
        out.append({"rank": rank, **r.head, "value": value, "n": r.n, "clusters": r.units.clusters if r.units else 0,
                    "ci_low": None if math.isnan(lo) else lo, "ci_high": None if math.isnan(hi) else hi,
                    "ci_note": note, "same_as_best": same_of.get(i)})
    out += [{"rank": None, **r.head, "value": None, "n": r.n, "clusters": r.units.clusters if r.units else 0,
             "ci_low": None, "ci_high": None,
             "ci_note": f"{r.note}: unranked" if r.note else UNDEFINED_IN_CELL[r.missing], "same_as_best": None}
            for r in undefined]
    head = dict(pl.DataFrame([r.head for r in rows], infer_schema_length=None).schema) if rows else {}
    schema: dict[str, Any] = {"rank": pl.Int64, **head, "value": pl.Float64, "n": pl.Int64, "clusters": pl.Int64,
              "ci_low": pl.Float64, "ci_high": pl.Float64, "ci_note": pl.Utf8, "same_as_best": pl.Boolean}
    return pl.DataFrame(out, schema=schema) if out else pl.DataFrame(schema=schema)


RANKED_AFTER = "not compared with the best: ranked after the rows that have an interval"


# Why an unranked cell has no value: its tables say it undefined (their ci_note says why), or hold no row of it.
UNDEFINED_IN_CELL = {False: "undefined in this cell (no answer read, a constant judge or one human answer): unranked",
                     True: "this cell's tables have no row of it (no answer read with a human label): unranked"}


def _in_range(row: Ranked, *values: float) -> tuple[float, ...]:
    """The published value and interval clipped into the metric's range, where its estimate can
    leave it (`Units.published_range`: the unbiased CE^2 below 0). The order is the unclipped
    estimates', so cells clipped alike keep what the data says of them."""
    bounds = row.units.published_range if row.units is not None else None
    if bounds is None:
        return values
    return tuple(v if math.isnan(v) else min(max(v, bounds[0]), bounds[1]) for v in values)
