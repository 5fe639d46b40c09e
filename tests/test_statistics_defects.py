"""The fourth statistics audit's defects (D1-D10), each reproduced as it was found and fixed; the
coverage of what is published is in tests/test_conformance_published.py."""
from __future__ import annotations

import math

import numpy as np
import pytest

from litjudge.judges.metrics.bootstrap import CONSTANT, NO_SPREAD
from litjudge.judges.metrics.estimates import Units, kappa_of, mean_of, spearman_of

STORIES = [f"s{i}" for i in range(10) for _ in range(14)]


# -- D1: the exact bound of a constant estimate used the cluster offsets as its range ---------
def test_a_constant_rate_gets_the_exact_bound_inside_its_range():
    u = Units.of(STORIES, {"v": np.ones(140)}, mean_of("v"), bounds=(0.0, 1.0))
    low, high, note = u.interval_with_note(200)
    assert (low, high, note) == (pytest.approx(0.025 ** (1 / 10)), 1.0, CONSTANT)      # was [0.692, 5.010]


@pytest.mark.parametrize("statistic, columns", [
    (kappa_of, {"truth": np.tile([True] * 5 + [False] * 9, 10), "pred": np.tile([True] * 5 + [False] * 9, 10)}),
    (spearman_of, {"x": np.tile(np.arange(14.0), 10), "y": np.tile(np.arange(14.0), 10)})])
def test_a_constant_estimate_without_natural_bounds_has_no_interval(statistic, columns):
    """A perfect judge's kappa (or Spearman): every resample gives 1; no bound is known, so no
    interval (as the overall table prints), never [0.692, 5.010]."""
    low, high, note = Units.of(STORIES, columns, statistic).interval_with_note(200)
    assert math.isnan(low) and math.isnan(high) and note == NO_SPREAD


# -- D2: same_as_best tested on the shared clusters only, the table shows each cell's own ------
def test_the_first_row_of_a_ranking_is_never_marked_worse_than_a_row_it_outranks():
    """Cell A: 50 pairs (its 30 own pairs all right, 3 of the 20 it shares with B), 0.66; cell B:
    the 20 shared pairs, 13 right, 0.65. Tested on the shared 20 only, A (0.15 there) was marked
    worse than the best while ranking first."""
    from litjudge.engine.app.sweep_rank import Ranked, ranking

    shared = [f"p{i}" for i in range(20)]
    a = Units.rate(shared + [f"q{i}" for i in range(30)], [1.0] * 3 + [0.0] * 17 + [1.0] * 30)
    b = Units.rate(shared, [1.0] * 13 + [0.0] * 7)
    table = ranking([Ranked({"judge": "a"}, a.value(), 50, a), Ranked({"judge": "b"}, b.value(), 20, b)], True, 300)
    assert table["judge"].to_list() == ["a", "b"] and table["clusters"].to_list() == [50, 20]
    assert table["same_as_best"].to_list() == [True, True]
