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
