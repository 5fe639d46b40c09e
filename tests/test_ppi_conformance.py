"""Conformance of the prediction-powered estimates through the code that publishes them: the `ppi`
table as TTCW's aggregate writes it (TTCW.prediction_powered on frames shaped like its decisions:
story, test, repeat, status, P(Yes), pass decision, expert label, under the run's missing-answer
policy), with a known truth.

Each simulated data set is one judge of a single frame (DRAWS of them, five judges each: the
tables are computed for every judge at once, as a run computes them): stories of 14 tests (or of
3-14 tests: unequal sizes) whose expert labels are correlated inside a story, either through a
story-level pass rate drawn from a Beta with intra-story correlation RHO around the rate P, or a
two-point mixture (lopsided: 10% of stories pass 35% of tests, the rest 3%, a rate of 0.062); a
share of the stories labelled (the table's own seeded draw), the rest hidden. Judges: `useless`
(its answers independent of the experts', with a story-level tendency of their own), `biased`
(says Yes to 80% of passes and 40% of fails, more in some stories than others), `good` (90% / 5%),
`probability` (distribution mode: a P(Yes) that tracks the label through noise, story-level noise
included), `halfsilent` (the good judge, but its answer to half of the passes does not parse:
status unparsed, dropped by the default policy).

Coverage is counted over the rows that print an interval (a row without one states why; the
share printed is reported): at least COVERAGE = 0.93 over DRAWS = 1,000 data sets (a coverage of
0.95 has a standard error of 0.007 there, so 0.93 is three of them below) for the pooled rate
(clusters: stories) and, on the same draws, for each test's rate (one item a story). Every
published point lies in its interval and in [0, 1].
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import polars as pl
import pytest

from litjudge.engine.core.settings import PPIConfig
from litjudge.judges.metrics.bootstrap import MIN_CLUSTERS
from litjudge.judges.ppi_tables import _first_and_rank
from litjudge.judges.ttcw import TTCW

DRAWS = 1000
TESTS = 14
COVERAGE = 0.93
SHARE = 0.2
JUDGES = ("useless", "biased", "good", "probability", "halfsilent")
MIXTURE = (0.1, 0.35, 0.03)          # lopsided: a share of stories passing often, the rest rarely
LOPSIDED = MIXTURE[0] * MIXTURE[1] + (1 - MIXTURE[0]) * MIXTURE[2]


def beta(rng, mean: float, rho: float, size) -> np.ndarray:
    """Story-level rates with mean `mean` and intra-story correlation `rho` of the 0/1 labels."""
    spread = 1 / rho - 1
    return rng.beta(mean * spread, (1 - mean) * spread, size)


def story_rates(rng, rate: float | str, rho: float, size) -> np.ndarray:
    """Each story's pass rate: around `rate` (a Beta), or the two-point mixture for "lopsided"."""
    if rate == "lopsided":
        share, high, low = MIXTURE
        return np.where(rng.random(size) < share, high, low)
    return beta(rng, float(rate), rho, size)


def frames(rng, labelled_stories: int, rate: float | str, rho: float, share: float = 0.2,
           unequal: bool = False, chunk: int = 200) -> Iterator[pl.DataFrame]:
    """DRAWS data sets x five judges as decisions frames (one row per judge, story and test), `chunk`
    data sets a frame: each data set's tables depend on its own rows only (the labelled stories are
    the same seeded draw in every frame), and a frame of all 1,000 held 7 million rows, a worker's
    memory grown by gigabytes; `unequal`: each story keeps a random 3-14 of its tests."""
    stories = int(round(labelled_stories / share))
    shape = (DRAWS, stories, TESTS)
    y = rng.random(shape) < story_rates(rng, rate, rho, (DRAWS, stories, 1))
    kept = (np.arange(TESTS) < rng.integers(3, TESTS + 1, (DRAWS, stories, 1))) if unequal else np.ones(shape, bool)
    columns = []
    for kind in JUDGES:
        r, p_yes, silent = rng.random(shape), None, None
        if kind == "useless":
            said = r < beta(rng, 0.4, 0.3, (DRAWS, stories, 1))
        elif kind == "biased":
            lean = rng.normal(0, 0.1, (DRAWS, stories, 1))
            said = r < np.clip(np.where(y, 0.8, 0.4) + lean, 0, 1)
        elif kind in ("good", "halfsilent"):
            said = np.where(y, r < 0.9, r < 0.05)
            silent = (y & (rng.random(shape) < 0.5)) if kind == "halfsilent" else None
        else:
            score = 2.0 * (2 * y - 1) + rng.normal(0, 1.5, shape) + rng.normal(0, 0.7, (DRAWS, stories, 1))
            p_yes = 1 / (1 + np.exp(-score))
            said = p_yes >= 0.5
        columns.append((kind, said, p_yes, silent if silent is not None else np.zeros(shape, bool)))
    for start in range(0, DRAWS, chunk):
        part = slice(start, start + chunk)
        keep = kept[part]
        draw, story, test = (a[keep] for a in np.indices(keep.shape))
        draw = draw + start
        parts = [pl.DataFrame({"kind": np.full(draw.size, i, dtype=np.int8), "draw": draw, "story": story,
                               "test": test + 1,
                               "p_yes": p_yes[part][keep] if p_yes is not None else np.full(draw.size, np.nan),
                               "judge_pass": np.where(silent[part][keep], np.nan, said[part][keep]),
                               "silent": silent[part][keep], "expert_pass": y[part][keep]})
                 for i, (kind, said, p_yes, silent) in enumerate(columns)]
        yield pl.concat(parts).select(
            pl.format("{}-{}", pl.col("kind").replace_strict(dict(enumerate(JUDGES)), return_dtype=pl.Utf8),
                      "draw").alias("judge"),
            pl.format("s{}", "story").alias("story_id"), "test", pl.format("s{}t{}", "story", "test").alias("item_id"),
            pl.lit(0, pl.Int64).alias("repeat"), pl.when(pl.col("silent")).then(pl.lit("unparsed")).otherwise(pl.lit("ok"))
            .alias("status"), pl.col("p_yes").fill_nan(None), pl.col("judge_pass").fill_nan(None).cast(pl.Boolean),
            "expert_pass")


def published(rng, labelled_stories: int, rate: float | str, rho: float, share: float, unequal: bool) -> pl.DataFrame:
    """The `ppi` table of every data set, computed a chunk of data sets at a time."""
    return pl.concat([TTCW.prediction_powered({"all": f}, PPIConfig(share, seed=3))["ppi"]
                      for f in frames(rng, labelled_stories, rate, rho, share, unequal)])


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


def check_ranges(table: pl.DataFrame) -> None:
    """Every published point inside its interval and [0, 1]; n_eff never above the items there are."""
    for point, low, high in (("ppi", "ppi_low", "ppi_high"), ("human_only", "human_low", "human_high")):
        assert table[point].is_between(0, 1).all(), point
        shown = table.filter(pl.col(low).is_not_null())
        assert ((shown[low] <= shown[point]) & (shown[point] <= shown[high])).all(), point
    assert (table["n_eff"].drop_nulls() <= (table["n_labelled"] + table["n_unlabelled"]).filter(
        table["n_eff"].is_not_null())).all()


SLOW = pytest.mark.slow
# (labelled stories, rate or "lopsided", rho, share labelled, unequal story sizes)
SCENARIOS = [pytest.param(MIN_CLUSTERS, 0.15, 0.3, SHARE, False, id="min-clusters-p0.15-rho0.3"),
             pytest.param(MIN_CLUSTERS, 0.15, 0.6, SHARE, False, id="min-clusters-p0.15-rho0.6"),
             pytest.param(MIN_CLUSTERS, 0.34, 0.55, SHARE, False, id="min-clusters-ttcw-like"),
             pytest.param(MIN_CLUSTERS, "lopsided", 0.0, SHARE, False, id="min-clusters-lopsided"),
             pytest.param(20, "lopsided", 0.0, 0.4, False, id="20-clusters-lopsided"),
             pytest.param(20, 0.5, 0.3, 0.4, True, id="20-clusters-p0.5-unequal-sizes"),
             pytest.param(MIN_CLUSTERS, "lopsided", 0.0, SHARE, True, id="min-clusters-lopsided-unequal-sizes"),
             pytest.param(50, "lopsided", 0.0, 0.5, False, id="50-clusters-lopsided", marks=SLOW),
             pytest.param(50, 0.5, 0.3, 0.5, False, id="50-clusters-p0.5-rho0.3", marks=SLOW)]


@pytest.mark.parametrize("labelled_stories,rate,rho,share,unequal", SCENARIOS)
def test_both_intervals_cover_with_a_useless_a_biased_a_good_and_a_half_silent_judge(labelled_stories, rate, rho,
                                                                                       share, unequal):
    rng = np.random.default_rng(labelled_stories + int(rho * 10) + 7 * unequal + (3 if rate == "lopsided" else
                                                                                  int(float(rate) * 1000)))
    table = published(rng, labelled_stories, rate, rho, share, unequal)
    assert set(table.filter(pl.col("test") == "all")["clusters"].to_list()) == {labelled_stories}   # the share drawn
    check_ranges(table)
    # a judge given no weight is worth exactly the labels it was given, not more
    unweighted = table.filter((pl.col("lambda") == 0) & pl.col("n_eff").is_not_null())
    assert unweighted.height and (unweighted["n_eff"] == unweighted["n_labelled"]).all()
    target = LOPSIDED if rate == "lopsided" else float(rate)
    for pooled in (True, False):
        found = coverage(table, target, pooled)
        print(f"\n{'pooled' if pooled else 'per test'} {labelled_stories} labelled stories, p={rate}, rho={rho}"
              f"{', unequal sizes' if unequal else ''}: "
              + "; ".join(f"{k}: shown {v['shown']:.2f} human {v['human']:.3f} ppi {v['ppi']:.3f} "
                          f"width x{v['width_ratio']:.2f} n_eff/n {v['n_eff_over_n']:.2f} bias {v['bias']:+.4f} "
                          f"(human {v['human_bias']:+.4f})" for k, v in sorted(found.items())))
        for kind, v in found.items():
            assert v["human"] >= COVERAGE and v["ppi"] >= COVERAGE, (kind, v)
            # lambda tuned on the labelled items themselves biases PPI++ by O(1/n): small beside the interval
            assert abs(v["bias"]) < max(0.01, 0.1 * v["width"]) and abs(v["human_bias"]) < 0.01, (kind, v)
        if pooled:
            # no signal: lambda near 0
            assert found["useless"]["lambda"] < 0.2, found["useless"]
            # a good judge is worth more labels than it was given, silent on half the passes or not
            assert found["good"]["n_eff_over_n"] >= 1.0 and found["probability"]["n_eff_over_n"] >= 1.0, found
            assert found["good"]["shown"] >= 0.8, found["good"]


def test_fewer_labelled_stories_than_the_minimum_give_no_interval_and_say_so():
    rng = np.random.default_rng(5)
    first = next(frames(rng, MIN_CLUSTERS - 1, 0.3, 0.3))
    table = TTCW.prediction_powered({"all": first.filter(pl.col("judge").str.ends_with("-0"))},
                                    PPIConfig(SHARE, seed=3))["ppi"]
    assert table["clusters"].max() == MIN_CLUSTERS - 1
    assert table["ppi_low"].is_null().all() and table["human_low"].is_null().all()
    assert table["ppi"].is_not_null().all()
    assert (table["ci_note"] == f"too few labelled clusters ({MIN_CLUSTERS - 1}; an interval needs {MIN_CLUSTERS})").all()


@pytest.mark.parametrize("top", [1, 50, 30_000, 10**12])
def test_cells_are_numbered_as_numpys_unique_numbers_them(top):
    """The PPI table's cells and clusters are numbered by counting integer keys (a sort of millions
    of rows was a fifth of its time): each key's first row and each row's rank are np.unique's,
    over a narrow range and a sparse one (where it sorts), and floats (a null among the codes)."""
    rng = np.random.default_rng(top)
    for n in (1, 7, 5_000):
        keys = rng.integers(0, top, n) if top > 1 else np.zeros(n, dtype=np.int64)
        _, first, rank = np.unique(keys, return_index=True, return_inverse=True)
        got_first, got_rank = _first_and_rank(keys)
        assert np.array_equal(got_first, first) and np.array_equal(got_rank, rank)
    floats = np.where(rng.random(50) < 0.2, np.nan, rng.integers(0, 5, 50))    # a null code, read as NaN
    assert all(np.array_equal(a, b) for a, b in zip(_first_and_rank(floats),
                                                   np.unique(floats, return_index=True, return_inverse=True)[1:]))
