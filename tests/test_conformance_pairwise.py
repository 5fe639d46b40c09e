"""Conformance of the pairwise tables through the published path: `Pairwise().tables` on a verdict
frame of DRAWS judges (one simulated data set each), every interval read from the table it writes.
The hard cases of tests/conformance_data.py (lopsided rates, within-pair correlation, unequal
cluster sizes from 3 repeats and 10% unparsed verdicts, 10 and 30 pairs); the truth of each column
from the simulation's parameters."""
from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from litjudge.judges.pairwise import Pairwise
from tests.conformance_data import (
    COVERAGE,
    DRAWS,
    HARD_PATH,
    MIN_CLUSTERS,
    beta_rates,
    context,
    coverage,
    pairwise_frame,
    right_in_both_orders,
)

UNPARSED = 0.1
TIE = 0.1


def rows(table: pl.DataFrame, column: str, value: str) -> pl.DataFrame:
    out = table.filter(pl.col(column) == value)
    assert out.height == DRAWS, (column, value, out.height)
    return out


@pytest.mark.parametrize("p, rho, pairs", HARD_PATH)
def test_accuracy_and_bias_rates_cover_the_truth(p, rho, pairs):
    """A judge right with a pair-level chance r ~ Beta(mean p, correlation rho) in both orders:
    every accuracy row's truth is p, the swap-flip rate's 2 p (1 - p) (1 - rho) (the two orders
    disagree), the longer-text win rate's p (the preferred text is the longer), the tie rate's 0
    and each label's share (1 - UNPARSED) / 2."""
    rng = np.random.default_rng(int(1000 * p) + int(10 * rho) + pairs)
    human = rng.random((DRAWS, pairs)) < 0.5
    right = beta_rates(rng, (DRAWS, pairs), p, rho)
    frame = pairwise_frame(rng, right_in_both_orders(right, human), human, unparsed=UNPARSED)
    tables = Pairwise().tables(frame, context(Pairwise(), "pairs-generic"))
    acc, bias, shares = tables["accuracy"], tables["bias"], tables["label_distribution"]
    truths = {("order", "ab"): p, ("order", "ba"): p, ("order", "mean of both"): p,
              ("order", "combined (inconsistent; tie = 0.5)"): p}
    got = {key: coverage(*rows(acc, *key).select("ci_low", "ci_high"), truth) for key, truth in truths.items()}
    for metric, truth in (("swap_flip_rate", 2 * p * (1 - p) * (1 - rho)), ("longer_text_win_rate", p),
                          ("first_position_win_rate", 0.5), ("tie_rate", 0.0), ("text_a_win_rate", 0.5)):
        got[("bias", metric)] = coverage(*rows(bias, "metric", metric).select("ci_low", "ci_high"), truth)
    for label, truth in (("A", (1 - UNPARSED) / 2), ("unparsed", UNPARSED)):
        got[("label", label)] = coverage(*rows(shares, "label", label).select("ci_low", "ci_high"), truth)
    print(p, rho, pairs, got)
    assert not {k: c for k, c in got.items() if c < COVERAGE}, got


@pytest.mark.parametrize("p, rho, pairs", [(p, 0.6, MIN_CLUSTERS) for p in (0.05, 0.15, 0.95)])
def test_position_bias_tie_and_label_shares_cover_the_truth(p, rho, pairs):
    """A judge that says "tie" with a pair-level chance t ~ Beta(TIE, rho), else "A" (the text
    shown first) with a pair-level chance a ~ Beta(p, rho): the first-position win rate's truth
    is p, the tie rate's TIE, the share of "A" (1 - UNPARSED)(1 - TIE) p."""
    rng = np.random.default_rng(int(1000 * p) + int(10 * rho) + pairs + 7)
    human = rng.random((DRAWS, pairs)) < 0.5
    first = beta_rates(rng, (DRAWS, pairs), p, rho)
    frame = pairwise_frame(rng, np.stack([first, first], axis=-1), human, unparsed=UNPARSED,
                           tie=beta_rates(rng, (DRAWS, pairs), TIE, rho))
    tables = Pairwise().tables(frame, context(Pairwise(), "pairs-generic", options={"tie": True}))
    bias, shares = tables["bias"], tables["label_distribution"]
    got = {"first_position_win_rate": coverage(*rows(bias, "metric", "first_position_win_rate")
                                               .select("ci_low", "ci_high"), p),
           "tie_rate": coverage(*rows(bias, "metric", "tie_rate").select("ci_low", "ci_high"), TIE),
           "share A": coverage(*rows(shares, "label", "A").select("ci_low", "ci_high"), (1 - UNPARSED) * (1 - TIE) * p),
           "share tie": coverage(*rows(shares, "label", "tie").select("ci_low", "ci_high"), (1 - UNPARSED) * TIE)}
    print(p, rho, pairs, got)
    assert not {k: c for k, c in got.items() if c < COVERAGE}, got


@pytest.mark.parametrize("right", [1.0, "always A"])
def test_a_constant_judge_gets_the_exact_bound_and_covers(right):
    """No resample varies: a perfect judge (truth 1) and one that always says "A" (right in exactly
    one order of every pair: truth 0.5 for the mean of both orders) get the exact binomial bound,
    inside [0, 1], and it holds the truth."""
    rng = np.random.default_rng(3)
    human = np.ones((DRAWS // 10, 10), dtype=bool)
    said = right_in_both_orders(np.ones(human.shape), human) if right == 1.0 else np.ones((*human.shape, 2))
    tables = Pairwise().tables(pairwise_frame(rng, said, human, unparsed=0.0),
                               context(Pairwise(), "pairs-generic"))
    both = tables["accuracy"].filter(pl.col("order") == "mean of both")
    truth = 1.0 if right == 1.0 else 0.5
    s = 1 - 0.025 ** (1 / 10)
    assert both["ci_low"].to_list() == pytest.approx([truth - s * truth] * both.height)
    assert both["ci_high"].to_list() == pytest.approx([min(1.0, truth + s * (1 - truth))] * both.height)
    assert coverage(both["ci_low"], both["ci_high"], truth) == 1.0


@pytest.mark.parametrize("p, pairs", [(0.15, MIN_CLUSTERS), (0.95, MIN_CLUSTERS), (0.7, 30)])
def test_text_a_win_rate_covers_and_is_unbiased_without_human_labels(p, pairs):
    """Two systems' texts, no human label: a judge preferring text a with a pair-level chance
    r ~ Beta(mean p, 0.3) in both orders, a tie on a tenth of the verdicts. The published text a
    win rate (a tie half) has the truth 0.9 p + 0.05, its interval covers it at the smallest sample
    it prints one for, and its mean over the draws is within 0.01 of it."""
    rng = np.random.default_rng(int(1000 * p) + pairs)
    a_first = np.ones((DRAWS, pairs), dtype=bool)            # 'right' is picking text a
    right = beta_rates(rng, (DRAWS, pairs), p, 0.3)
    frame = pairwise_frame(rng, right_in_both_orders(right, a_first), a_first, unparsed=0.0,
                           tie=np.full((DRAWS, pairs), TIE)).with_columns(pl.lit(None, pl.Utf8).alias("human"))
    tables = Pairwise().tables(frame, context(Pairwise(), "pairs-generic"))
    assert "accuracy" not in tables
    won = rows(tables["bias"], "metric", "text_a_win_rate")
    truth = (1 - TIE) * p + TIE / 2
    assert coverage(*won.select("ci_low", "ci_high"), truth) >= COVERAGE
    assert abs(won["value"].mean() - truth) < 0.01, won["value"].mean()


@pytest.mark.parametrize("pairs", [MIN_CLUSTERS, 30])
def test_text_a_win_rate_is_the_mean_of_the_orders_when_one_is_answered_less(pairs):
    """A judge preferring text a with a pair-level chance r ~ Beta(mean 0.5, 0.3), but saying "A"
    (the text shown first) on a share BIAS of its verdicts whatever the texts, and unreadable on half
    of order ba's verdicts (a tenth of ab's). Text a's win rate in each order is BIAS + (1 - BIAS) r
    (ab) and (1 - BIAS) r (ba): their mean is the truth, a tie half. Pooled, order ab weighed 1.8
    times order ba and the position bias came in: 0.59 for a truth of 0.5 (coverage 0.84 at 30
    pairs, the statistics audit). The published rate (the mean of the two orders' rates) covers and
    is unbiased within 0.01."""
    bias, p = 0.3, 0.5
    rng = np.random.default_rng(pairs + 11)
    a_first = np.ones((DRAWS, pairs), dtype=bool)
    r = beta_rates(rng, (DRAWS, pairs), p, 0.3)
    said_a = np.stack([bias + (1 - bias) * r, bias + (1 - bias) * (1 - r)], axis=-1)
    frame = pairwise_frame(rng, said_a, a_first, unparsed=(0.1, 0.5),
                           tie=np.full((DRAWS, pairs), TIE)).with_columns(pl.lit(None, pl.Utf8).alias("human"))
    won = rows(Pairwise().tables(frame, context(Pairwise(), "pairs-generic"))["bias"], "metric", "text_a_win_rate")
    truth = (1 - TIE) * (bias / 2 + (1 - bias) * p) + TIE / 2
    got = coverage(*won.select("ci_low", "ci_high"), truth)
    assert got >= COVERAGE, got
    assert abs(won["value"].mean() - truth) < 0.01, (won["value"].mean(), truth)


def test_an_analyze_runs_calibration_reads_its_p_text_after_the_analysis():
    """Analyze mode keeps the P(A) it read after its analysis: the same verdicts with their
    probabilities stored there publish distribution mode's calibration tables and sweep ranking
    (P(text a) by order, pairs resampled), with `read` saying where from; the picks stay the labels."""
    from litjudge.judges.base import RankBy

    rng = np.random.default_rng(8)
    human = rng.random((4, 3 * MIN_CLUSTERS)) < 0.5
    frame = pairwise_frame(rng, right_in_both_orders(np.full(human.shape, 0.7), human), human, unparsed=UNPARSED)
    p_a = rng.random(frame.height)
    stated = pl.DataFrame({"A": p_a, "B": 1 - p_a}).to_struct("distribution")
    given = frame.with_columns(pl.when(pl.col("status") == "ok").then(stated).alias("distribution"))
    analyzed = given.with_columns(pl.col("distribution").alias("analysis_distribution"),
                                  pl.lit(None, dtype=given.schema["distribution"]).alias("distribution"))
    theirs, ours = (Pairwise().tables(f, context(Pairwise(), "pairs-generic", mode=m))
                    for f, m in ((given, "distribution"), (analyzed, "analyze")))
    for name in ("calibration_summary", "calibration"):
        assert ours[name].drop("read", strict=False).equals(theirs[name].drop("read", strict=False)), name
    assert set(ours["calibration_summary"]["read"]) == {"after the analysis"} != set(theirs["calibration_summary"]["read"])
    assert ours["per_verdict"]["p_a_after_analysis"].equals(theirs["per_verdict"]["p_a"], check_names=False)
    assert ours["accuracy"].equals(theirs["accuracy"])
    judge = ours["calibration_summary"]["judge"][0]
    for metric in ("squared_calibration_error", "brier"):
        a, b = (Pairwise().rank_units(t, judge, RankBy(f"calibration_summary.{metric}"), Pairwise().options(
            context(Pairwise(), "pairs-generic").config)) for t in (ours, theirs))
        assert a.value() == pytest.approx(b.value()) and a.clusters == b.clusters


def test_a_request_never_answered_is_not_counted_unparsed():
    """A judge the budget cap never let ask anything: its bias table said "unparsed 40 of 40" though
    nothing came back to be read. Never answered (status missing) is not unparsed."""
    rng = np.random.default_rng(8)
    human = rng.random((1, 20)) < 0.5
    frame = pairwise_frame(rng, right_in_both_orders(np.full((1, 20), 0.8), human), human, repeats=1, unparsed=0.0)
    never = pl.col("pair_id") >= "p010"
    frame = frame.with_columns(pl.when(never).then(pl.lit("missing")).otherwise(pl.col("status")).alias("status"),
                               pl.when(never).then(None).otherwise(pl.col("label")).alias("label"))
    bias = Pairwise().tables(frame, context(Pairwise(), "pairs-generic"))["bias"]
    row = bias.filter(pl.col("metric") == "unparsed_rate").row(0, named=True)
    assert (row["value"], row["n"]) == (0.0, 20)
    # a share of the verdicts asked, with its interval over pairs, as the rates beside it
    half = frame.with_columns(pl.when(pl.col("pair_id") < "p005").then(None).otherwise(pl.col("label")).alias("label"),
                              pl.when(pl.col("pair_id") < "p005").then(pl.lit("unparsed")).otherwise(pl.col("status"))
                              .alias("status"))
    row = Pairwise().tables(half, context(Pairwise(), "pairs-generic"))["bias"].filter(
        pl.col("metric") == "unparsed_rate").row(0, named=True)
    assert (row["value"], row["n"]) == (0.5, 20) and row["ci_low"] < 0.5 < row["ci_high"], row


def test_a_reward_models_side_never_scored_is_not_counted_unparsed():
    """A reward model scores each text alone; a pair with a side never scored (the run stopped, the
    cap held it back) was counted unparsed: 0 unreadable of 19 scores asked read as an unparsed rate
    of 0.55 over 20 pairs (a hostile pass). Such a pair was never asked; an unreadable score still is."""
    rows = [{"judge": "rm", "pair_id": f"p{g:03d}", "side": side, "order": "reward", "human": "a", "group": "sim",
             "words_a": 300, "words_b": 100, "item_id": f"p{g:03d}/{side}",
             "status": "missing" if g >= 10 or (g, side) == (9, "b") else "ok",
             "value": None if g >= 10 or (g, side) == (9, "b") else float(g % 3 - (side == "b"))}
            for g in range(20) for side in ("a", "b")]
    ctx = context(Pairwise(), "pairs-generic", mode="reward", missing="drop")

    def unparsed(frame_rows):
        frame = pl.DataFrame(frame_rows, schema_overrides={"value": pl.Float64})
        return Pairwise().tables(frame, ctx)["bias"].filter(pl.col("metric") == "unparsed_rate").row(0, named=True)

    row = unparsed(rows)
    assert (row["value"], row["n"]) == (0.0, 9), row
    row = unparsed([{**r, "status": "unparsed", "value": None} if r["item_id"] == "p000/a" else r for r in rows])
    assert (row["value"], row["n"]) == (pytest.approx(1 / 9), 9), row
