"""The fourth statistics audit's defects (D1-D10), each reproduced as it was found and fixed; the
coverage of every published interval is in the conformance test tests/estimate_registry.py names for it."""
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


# -- the sweep's resampled statistics equal the plain ones on the duplicated rows -------------
@pytest.mark.parametrize("seed", range(6))
def test_every_resampled_statistic_is_the_statistic_of_the_drawn_rows(seed):
    """`row_statistics`: a resample's value from per-cluster sums, 2 x 2 counts or weighted ranks
    equals the statistic of its clusters' rows concatenated (scipy's Spearman with its tie
    ranks, Pearson, kappa, balanced accuracy, a mean over strata), a cluster drawn twice counted
    twice, a cluster the estimate lacks (-1) left out."""
    from litjudge.judges.metrics.estimates import balanced_accuracy_of, mean_of_stratum_means, pearson_of

    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 12, 90)
    cols = {"x": rng.integers(1, 4, 90).astype(float), "y": rng.normal(0, 1, 90).round(1),
            "truth": rng.random(90) < 0.4, "pred": rng.random(90) < 0.5, "v": rng.random(90) < 0.7,
            "stratum": rng.integers(0, 2, 90)}
    draws = rng.integers(0, 14, (25, 14))
    positions = np.r_[np.arange(12), -1, -1]
    for statistic in (spearman_of, pearson_of, kappa_of, balanced_accuracy_of, mean_of_stratum_means("v", "stratum")):
        u = Units.of(ids.tolist(), cols, statistic)
        fast = u.resampled(draws, positions)
        slow = [statistic(u._rows(positions[d][positions[d] >= 0])) for d in draws]
        assert fast == pytest.approx(slow, nan_ok=True, abs=1e-9), statistic


# -- D8: balanced accuracy with one truth class is undefined in juries too --------------------
def test_jury_balanced_accuracy_with_one_truth_class_is_nan():
    from litjudge.judges.metrics.agreement import binary_agreement_with_ties

    scores = binary_agreement_with_ties([True] * 4, [1.0, 1.0, 1.0, 0.0])
    assert math.isnan(scores["balanced_accuracy"].value) and scores["accuracy"].value == 0.75   # was 0.75


# -- D9: what the panels and the console say about intervals ---------------------------------
def test_the_panels_say_how_each_interval_is_made():
    import polars as pl

    from litjudge.engine.app.report.panels import _calibration_panels, _label_distribution

    bins = pl.DataFrame({"judge": ["j"], "bin_low": [0.0], "bin_high": [0.1], "n": [3], "mean_prediction": [0.05],
                         "observed_frequency": [0.0]})
    calibration = _calibration_panels({"calibration": bins, "calibration_summary": pl.DataFrame({"judge": ["j"]})})[0]
    assert "95% bootstrap CI; Brier" not in calibration.note and "so no interval" in calibration.note
    shares = pl.DataFrame({"judge": ["j"], "label": ["Yes"], "n": [3], "share": [1.0], "ci_low": [None],
                           "ci_high": [None], "ci_note": [None]})
    note = _label_distribution({"label_distribution": shares})[0].note
    assert "over verdicts" not in note and "as the clusters" in note


def test_the_console_lists_an_exact_bound_as_an_interval():
    """A row with the exact binomial bound has an interval: it was listed under "no interval where"."""
    import polars as pl

    from litjudge.engine.app.console.run_commands import interval_notes
    from litjudge.judges.metrics.bootstrap import too_few

    ranking = pl.DataFrame({"rank": [1, 2], "ci_low": [0.69, None], "ci_note": [CONSTANT, too_few(4)]})
    assert interval_notes(ranking) == [f"no interval where: {too_few(4)}", f"interval where: {CONSTANT}"]
    # an unranked row's note says why it has no value, not why it has no interval
    unranked = pl.concat([ranking, pl.DataFrame({"rank": [None], "ci_low": [None], "ci_note": ["no answer read: unranked"]},
                                                schema=ranking.schema)])
    assert interval_notes(unranked) == [f"no interval where: {too_few(4)}", f"interval where: {CONSTANT}",
                                        "unranked where: no answer read: unranked"]


def test_a_perfect_jury_member_gets_the_exact_bound_as_the_pairwise_table_does():
    import polars as pl

    from litjudge.judges.ensembles import JuryOptions, jury_tables

    rows = [{"judge": j, "item": f"i{k}", "cluster": f"s{k}", "truth": k % 2 == 0, "pred": k % 2 == 0,
             "p": None, "tokens": None, "cost": None} for j in ("a", "b") for k in range(40)]
    jury = jury_tables(pl.DataFrame(rows), JuryOptions()).get("jury")
    member = jury.filter(pl.col("member") == "judge: a").row(0, named=True)
    assert member["agreement"] == 1.0 and member["ci_note"] == CONSTANT and member["ci_low"] == pytest.approx(
        0.025 ** (1 / 20))                                                     # was: no interval


def test_the_reference_likert_mean_table_says_why_an_interval_is_missing():
    import polars as pl

    from litjudge.judges.reference_likert import _group_intervals

    out = _group_intervals(pl.DataFrame({"judge": ["j"] * 3, "spearman": [0.1, 0.5, 0.9]}), ["judge"], ("spearman",))
    assert out.row(0, named=True)["spearman_ci_note"].startswith("too few clusters (3")
