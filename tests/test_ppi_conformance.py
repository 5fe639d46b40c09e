"""Conformance of the prediction-powered estimates through the code that publishes them: the `ppi`
table as TTCW's aggregate writes it (TTCW.prediction_powered on frames shaped like its decisions:
story, test, repeat, status, P(Yes), pass decision, expert label), with a known truth.

Each simulated data set is one judge of a single frame (DRAWS of them, four judges each: the
tables are computed for every judge at once, as a run computes them): stories of 14 tests whose
expert labels are correlated inside a story (a story-level pass rate drawn from a Beta with
intra-story correlation RHO around the rate P), 20% of the stories labelled (the table's own
seeded draw), the rest hidden. Judges: `useless` (its answers independent of the experts', with
a story-level tendency of their own), `biased` (says Yes to 80% of passes and 40% of fails, more
in some stories than others), `good` (90% / 5%), `probability` (distribution mode: a P(Yes) that
tracks the label through noise, story-level noise included).

Coverage is counted over the rows that print an interval (a row without one states why; the
share printed is reported): at least COVERAGE = 0.93 over DRAWS = 1,000 data sets (a coverage of
0.95 has a standard error of 0.007 there, so 0.93 is three of them below) for the pooled rate
(clusters: stories) and, on the same draws, for each test's rate (one item a story).
"""
from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from litjudge.engine.core.settings import PPIConfig
from litjudge.judges.metrics.bootstrap import MIN_CLUSTERS
from litjudge.judges.ttcw import TTCW

DRAWS = 1000
TESTS = 14
COVERAGE = 0.93
SHARE = 0.2
JUDGES = ("useless", "biased", "good", "probability")


def beta(rng, mean: float, rho: float, size) -> np.ndarray:
    """Story-level rates with mean `mean` and intra-story correlation `rho` of the 0/1 labels."""
    spread = 1 / rho - 1
    return rng.beta(mean * spread, (1 - mean) * spread, size)


def frame(rng, labelled_stories: int, rate: float, rho: float) -> pl.DataFrame:
    """DRAWS data sets x four judges as one decisions frame (one row per judge, story and test)."""
    stories = int(round(labelled_stories / SHARE))
    shape = (DRAWS, stories, TESTS)
    y = rng.random(shape) < beta(rng, rate, rho, (DRAWS, stories, 1))
    columns = []
    for kind in JUDGES:
        r, p_yes = rng.random(shape), None
        if kind == "useless":
            said = r < beta(rng, 0.4, 0.3, (DRAWS, stories, 1))
        elif kind == "biased":
            lean = rng.normal(0, 0.1, (DRAWS, stories, 1))
            said = r < np.clip(np.where(y, 0.8, 0.4) + lean, 0, 1)
        elif kind == "good":
            said = np.where(y, r < 0.9, r < 0.05)
        else:
            score = 2.0 * (2 * y - 1) + rng.normal(0, 1.5, shape) + rng.normal(0, 0.7, (DRAWS, stories, 1))
            p_yes = 1 / (1 + np.exp(-score))
            said = p_yes >= 0.5
        columns.append((kind, said, p_yes))
    draw, story, test = (a.ravel() for a in np.indices(shape))
    parts = [pl.DataFrame({"kind": np.full(draw.size, i, dtype=np.int8), "draw": draw, "story": story, "test": test + 1,
                           "p_yes": p_yes.ravel() if p_yes is not None else np.full(draw.size, np.nan),
                           "judge_pass": said.ravel(), "expert_pass": y.ravel()})
             for i, (kind, said, p_yes) in enumerate(columns)]
    return pl.concat(parts).select(
        pl.format("{}-{}", pl.col("kind").replace_strict(dict(enumerate(JUDGES)), return_dtype=pl.Utf8),
                  "draw").alias("judge"),
        pl.format("s{}", "story").alias("story_id"), "test", pl.format("s{}t{}", "story", "test").alias("item_id"),
        pl.lit(0, pl.Int64).alias("repeat"), pl.lit("ok").alias("status"), pl.col("p_yes").fill_nan(None),
        "judge_pass", "expert_pass")


def coverage(table: pl.DataFrame, rate: float, pooled: bool) -> dict[str, dict[str, float]]:
    """Per judge kind: the share of rows with an interval, and how often each covers `rate`."""
    rows = table.filter((pl.col("test") == "all") if pooled else (pl.col("test") != "all")).with_columns(
        pl.col("judge").str.extract(r"^(\w+)-").alias("kind"))
    out = {}
    for (kind,), g in rows.group_by(["kind"]):
        shown = g.filter(pl.col("ppi_low").is_not_null() & pl.col("human_low").is_not_null())
        out[kind] = {"shown": shown.height / g.height,
                     "human": ((shown["human_low"] <= rate) & (rate <= shown["human_high"])).mean(),
                     "ppi": ((shown["ppi_low"] <= rate) & (rate <= shown["ppi_high"])).mean(),
                     "width_ratio": ((shown["ppi_high"] - shown["ppi_low"]) / (shown["human_high"] - shown["human_low"])).mean(),
                     "n_eff_over_n": (shown["n_eff"] / shown["n_labelled"]).median(),
                     "bias": g["ppi"].mean() - rate, "human_bias": g["human_only"].mean() - rate,
                     "width": (shown["ppi_high"] - shown["ppi_low"]).mean(), "lambda": g["lambda"].mean()}
    return out


SCENARIOS = [pytest.param(MIN_CLUSTERS, 0.15, 0.3, id="min-clusters-p0.15-rho0.3"),
             pytest.param(MIN_CLUSTERS, 0.15, 0.6, id="min-clusters-p0.15-rho0.6"),
             pytest.param(MIN_CLUSTERS, 0.34, 0.55, id="min-clusters-ttcw-like"),
             pytest.param(30, 0.15, 0.6, id="30-clusters-p0.15-rho0.6", marks=pytest.mark.slow),
             pytest.param(30, 0.5, 0.3, id="30-clusters-p0.5-rho0.3", marks=pytest.mark.slow)]


@pytest.mark.parametrize("labelled_stories,rate,rho", SCENARIOS)
def test_both_intervals_cover_with_a_useless_a_biased_and_a_good_judge(labelled_stories, rate, rho):
    rng = np.random.default_rng(int(rate * 1000) + labelled_stories + int(rho * 10))
    table = TTCW.prediction_powered({"all": frame(rng, labelled_stories, rate, rho)}, PPIConfig(SHARE, seed=3))
    assert set(table["clusters"].unique().to_list()) == {labelled_stories}      # the draw takes 20% of the stories
    # a judge given no weight is worth exactly the labels it was given, not more
    unweighted = table.filter((pl.col("lambda") == 0) & pl.col("n_eff").is_not_null())
    assert unweighted.height and (unweighted["n_eff"] == unweighted["n_labelled"]).all()
    for pooled in (True, False):
        found = coverage(table, rate, pooled)
        print(f"\n{'pooled' if pooled else 'per test'} {labelled_stories} labelled stories, p={rate}, rho={rho}: "
              + "; ".join(f"{k}: shown {v['shown']:.2f} human {v['human']:.3f} ppi {v['ppi']:.3f} "
                          f"width x{v['width_ratio']:.2f} n_eff/n {v['n_eff_over_n']:.2f} bias {v['bias']:+.4f} "
                          f"(human {v['human_bias']:+.4f})" for k, v in sorted(found.items())))
        for kind, v in found.items():
            assert v["human"] >= COVERAGE and v["ppi"] >= COVERAGE, (kind, v)
            # lambda tuned on the labelled items themselves biases PPI++ by O(1/n): small beside the interval
            assert abs(v["bias"]) < max(0.01, 0.1 * v["width"]) and abs(v["human_bias"]) < 0.01, (kind, v)
        if pooled:
            # no signal: lambda near 0, the interval no narrower than human-only beyond noise
            assert found["useless"]["width_ratio"] > 0.95 and found["useless"]["lambda"] < 0.2, found["useless"]
            # a good judge is worth more labels than it was given
            assert found["good"]["n_eff_over_n"] >= 1.0 and found["probability"]["n_eff_over_n"] >= 1.0, found
            assert found["good"]["shown"] >= 0.85, found["good"]


def test_fewer_labelled_stories_than_the_minimum_give_no_interval_and_say_so():
    rng = np.random.default_rng(5)
    table = TTCW.prediction_powered({"all": frame(rng, MIN_CLUSTERS - 1, 0.3, 0.3).filter(
        pl.col("judge").str.ends_with("-0"))}, PPIConfig(SHARE, seed=3))
    assert table["clusters"].max() == MIN_CLUSTERS - 1
    assert table["ppi_low"].is_null().all() and table["human_low"].is_null().all()
    assert table["ppi"].is_not_null().all()
    assert (table["ci_note"] == f"too few labelled clusters ({MIN_CLUSTERS - 1}; an interval needs {MIN_CLUSTERS})").all()
