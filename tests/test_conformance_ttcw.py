"""Conformance of the TTCW tables through the published path: `TTCW().tables` in distribution mode
on a verdict frame of DRAWS judges over a TTCW-layout dataset written to disk, every interval read
from the table it writes: the overall kappa and balanced accuracy (and their bias), the label
shares, the Rogan-Gladen corrected pass rate, the debiased calibration error; and the story-count
p-values under the null.

The simulation: per story a mean P(Yes) mu ~ Beta(0.5, correlation 0.3); per test the judge's
P(Yes) p = clip(mu + N(0, 0.15)); the experts' verdict Yes with chance p^1.5 (the judge is
miscalibrated); the judge's label Yes when p >= 0.5, 5% of verdicts unparsed. 20 of each draw's 30
stories carry expert labels (the corrected pass rate corrects the other 10). Every truth is the
same quantity on 400,000 simulated stories."""
from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from litjudge.judges.base import RankBy
from litjudge.judges.metrics.bootstrap import FEW_PER_CLASS, MIN_CLUSTERS
from litjudge.judges.metrics.calibration import squared_calibration_error
from litjudge.judges.metrics.row_statistics import kappa_from
from litjudge.judges.ttcw import TTCW, TTCWOptions
from tests.conformance_data import COVERAGE, DRAWS, beta_rates, context, coverage, ttcw_dataset, ttcw_frame

TESTS = 6
STORIES = 3 * MIN_CLUSTERS          # per draw; the first two thirds labelled, the rest corrected


def simulate(rng: np.random.Generator, stories: int, tests: int = TESTS):
    mu = beta_rates(rng, (stories,), 0.5, 0.3)
    p = np.clip(mu[:, None] + rng.normal(0, 0.15, (stories, tests)), 0.01, 0.99)
    return p, rng.random(p.shape) < p ** 1.5


def truths() -> dict[str, float]:
    p, y = simulate(np.random.default_rng(99), 400_000)
    said = p >= 0.5
    bins = np.minimum((p.ravel() * 10).astype(int), 9)
    cells = [float((said & y).sum()), float((~said & y).sum()), float((said & ~y).sum()), float((~said & ~y).sum())]
    counts = np.bincount(bins, minlength=10).astype(float)
    return {"balanced_accuracy": 0.5 * (said[y].mean() + (~said[~y]).mean()), "kappa": float(kappa_from(*cells)),
            "yes_share": 0.95 * said.mean(),
            "pass_rate": y.mean(),
            "ce2": float(squared_calibration_error(counts, np.bincount(bins, p.ravel(), 10),
                                                   np.bincount(bins, y.ravel().astype(float), 10)) + 0)}


@pytest.fixture(scope="module")
def simulated(tmp_path_factory) -> tuple[pl.DataFrame, str]:
    """The verdicts of every draw's judge in distribution mode, and the dataset's card."""
    rng = np.random.default_rng(21)
    names = [f"{d}x{g}" for d in range(DRAWS) for g in range(STORIES)]
    draw = np.repeat(np.arange(DRAWS), STORIES)
    p, y = simulate(rng, len(names))
    labelled = np.tile(np.arange(STORIES) < 2 * MIN_CLUSTERS, DRAWS)
    majority = {(s, t + 1): bool(y[k, t]) for k, s in enumerate(names) if labelled[k] for t in range(TESTS)}
    card = ttcw_dataset(tmp_path_factory.mktemp("ttcw"), names, TESTS, majority)
    return ttcw_frame(draw, names, TESTS, p >= 0.5, p_yes=p, unparsed=rng.random(p.shape) < 0.05), card


@pytest.fixture(scope="module")
def tables(simulated):
    frame, card = simulated
    return TTCW().tables(frame, context(TTCW(), card, mode="distribution"))


def test_an_analyze_runs_calibration_reads_its_p_yes_after_the_analysis(simulated, tables):
    """Analyze mode keeps the P(Yes) it read after its analysis (`analysis_distribution`): the same
    verdicts with their probabilities stored there publish the same calibration tables as
    distribution mode (so the coverage and bias above are theirs), with `read` saying where from,
    and per_item beside p_yes. The decision stays the label: a sampled analyze verdict may say the
    less likely answer (a fifth of them flipped here), and it passes by what it said."""
    frame, card = simulated
    frame = frame.filter(pl.col("judge").is_in(frame["judge"].unique(maintain_order=True).head(12).to_list()))
    flip = pl.Series(np.random.default_rng(3).random(frame.height) < 0.2)
    analyzed = frame.with_columns(
        pl.col("distribution").alias("analysis_distribution"),
        pl.lit(None, dtype=frame.schema["distribution"]).alias("distribution"),
        pl.when(flip & (pl.col("status") == "ok")).then(pl.when(pl.col("label") == "Yes").then(pl.lit("No"))
                                                         .otherwise(pl.lit("Yes"))).otherwise(pl.col("label")).alias("label"))
    out = TTCW().tables(analyzed, context(TTCW(), card, mode="analyze"))
    judges = out["calibration_summary"]["judge"]
    for name in ("calibration_summary", "calibration"):
        theirs = tables[name].filter(pl.col("judge").is_in(judges.to_list()))
        assert out[name].drop("read", strict=False).equals(theirs.drop("read", strict=False)), name
    assert set(out["calibration_summary"]["read"]) == {"after the analysis"}
    assert set(tables["calibration_summary"]["read"]) == {"distribution"}
    items = out["per_item"].filter(pl.col("status") == "ok")
    assert items["p_yes"].is_null().all() and items["p_yes_after_analysis"].is_not_null().all()
    assert (items["judge_pass"] == (items["label"] == "Yes")).all()


def test_every_interval_of_the_ttcw_tables_covers_its_truth(tables):
    t = truths()
    overall = tables["overall"].filter(pl.col("view") == "all")
    shares = tables["label_distribution"].filter(pl.col("label") == "Yes")
    corrected = tables["corrected_pass_rates"].filter(pl.col("test") == "all")
    calibration = tables["calibration_summary"]
    # printed where each expert answer is in 10 of the 20 labelled stories (bootstrap.clusters_per_class)
    printed = float(overall["balanced_accuracy_low"].fill_nan(None).is_not_null().mean())
    got = {"balanced_accuracy": coverage(overall["balanced_accuracy_low"], overall["balanced_accuracy_high"],
                                         t["balanced_accuracy"], printed=0.2),
           "kappa": coverage(overall["kappa_low"], overall["kappa_high"], t["kappa"], printed=0.2),
           "label share": coverage(shares["ci_low"], shares["ci_high"], t["yes_share"]),
           "corrected pass rate": coverage(corrected["ci_low"], corrected["ci_high"], t["pass_rate"]),
           "squared calibration error": coverage(calibration["squared_calibration_error_low"],
                                                 calibration["squared_calibration_error_high"], t["ce2"])}
    print(got, t, "balanced accuracy printed:", printed)
    assert all(table.height == DRAWS for table in (overall, shares, corrected, calibration))
    assert not {k: c for k, c in got.items() if c < COVERAGE}, got


def test_the_corrected_pass_rate_covers_at_ten_labelled_stories_and_says_where_it_cannot():
    """Sensitivity and specificity rest on the labelled stories: an interval from 10 scored stories of
    which 2 were labelled covered 0.81 (counted as 10 clusters); now the labelled ones count. At the
    fewest it prints one for (10 labelled of 12, 5 tests each, a judge of Se 0.8 / Sp 0.7, story
    effects), through the table; where Se + Sp <= 1 in many resamples the rate is not identified
    and the interval is [0, 1]; where the point itself is undefined, no interval (it was printed)."""
    from litjudge.judges.metrics.bootstrap import too_few
    from litjudge.judges.metrics.prevalence import NO_BETTER
    from litjudge.judges.tables import corrected_pass_rates

    def per_item(rng, stories, labelled, se, sp, rate=0.3, tests=5):
        p = rng.beta(rate * 4, (1 - rate) * 4, (DRAWS, stories, 1)).repeat(tests, axis=2)
        truth = rng.random(p.shape) < p
        said = np.where(truth, rng.random(p.shape) < se, rng.random(p.shape) >= sp)
        d, s, t = np.indices(p.shape).reshape(3, -1)
        return pl.DataFrame({"judge": [f"d{x}" for x in d], "story_id": [f"s{x}" for x in s],
                             "test": [f"t{x}" for x in t], "judge_pass": said.ravel(),
                             "expert_pass": np.where(s < labelled, truth.ravel(), None)})

    rng = np.random.default_rng(11)
    rows = corrected_pass_rates(per_item(rng, 12, 10, 0.8, 0.7), resamples=500).filter(pl.col("test") == "all")
    got = coverage(rows["ci_low"], rows["ci_high"], 0.3)
    points = rows["corrected_pass_rate"].drop_nulls().drop_nans()
    bias = points.mean() - 0.3
    print(got, bias, points.len())
    assert got >= COVERAGE and abs(bias) < 3 * points.std() / math.sqrt(points.len()), (got, bias)
    few = corrected_pass_rates(per_item(rng, 10, 2, 0.8, 0.7).head(10 * 5 * 20), resamples=200)
    assert few.filter(pl.col("test") == "all")["ci_low"].fill_nan(None).is_null().all()
    notes = set(few.filter(pl.col("test") == "all")["note"])
    assert too_few(2) in notes and notes <= {too_few(2), NO_BETTER}, notes
    chance = corrected_pass_rates(per_item(rng, 30, 10, 0.6, 0.5).head(30 * 5 * 50), resamples=200)
    chance = chance.filter(pl.col("test") == "all")
    undefined = chance.filter(pl.col("corrected_pass_rate").fill_nan(None).is_null())
    assert undefined.height and undefined["ci_low"].fill_nan(None).is_null().all()
    assert set(undefined["note"]) == {NO_BETTER}
    wide = chance.filter(pl.col("note").str.contains("not identified"))
    assert wide.height and set(wide["ci_low"]) == {0.0} and set(wide["ci_high"]) == {1.0}


def test_the_published_agreement_is_nearly_unbiased(tables):
    """The overall table's kappa and balanced accuracy over each draw's ~114 verdicts of 20 stories
    average their truth but for a ratio of counts' O(1/n) bias: -0.012 and -0.006 here (standard
    errors 0.003 and 0.0015), a tenth of the intervals' half-width; the check allows 0.01 and
    three standard errors of the mean."""
    t = truths()
    overall = tables["overall"].filter(pl.col("view") == "all")
    for name in ("kappa", "balanced_accuracy"):
        estimates = overall[name].drop_nans().drop_nulls().to_numpy()
        bias = estimates.mean() - t[name]
        print(name, round(float(bias), 4), round(float(estimates.std() / np.sqrt(len(estimates))), 4))
        assert abs(bias) < 0.01 + 3 * estimates.std() / np.sqrt(len(estimates)), (name, bias)


# The per_test table's interval needs each expert answer of the test in MIN_CLUSTERS stories (and each
# of the judge's): 26 labelled stories carry one in 44% of the tests, near the fewest it prints one for.
PER_TEST_DRAWS, PER_TEST_STORIES, PER_TEST_TESTS = 400, 26, 6


@pytest.fixture(scope="module")
def per_test(tmp_path_factory) -> pl.DataFrame:
    """The per_test table of PER_TEST_DRAWS judges, each over PER_TEST_STORIES labelled stories (one verdict
    per story and test; the tests are alike, so each test's truth is the overall one)."""
    rng = np.random.default_rng(23)
    names = [f"{d}x{g}" for d in range(PER_TEST_DRAWS) for g in range(PER_TEST_STORIES)]
    p, y = simulate(rng, len(names), PER_TEST_TESTS)
    majority = {(s, t + 1): bool(y[k, t]) for k, s in enumerate(names) for t in range(PER_TEST_TESTS)}
    card = ttcw_dataset(tmp_path_factory.mktemp("per-test"), names, PER_TEST_TESTS, majority)
    frame = ttcw_frame(np.repeat(np.arange(PER_TEST_DRAWS), PER_TEST_STORIES), names, PER_TEST_TESTS, p >= 0.5, p_yes=p,
                       unparsed=rng.random(p.shape) < 0.05)
    return TTCW().tables(frame, context(TTCW(), card, mode="distribution"))["per_test"]


def test_the_per_test_intervals_cover_at_the_fewest_stories_they_are_printed_for(per_test):
    """Each test's kappa and balanced accuracy over ~25 stories (one verdict each), printed where
    each expert answer is in 10 of them, cover their truth: 0.954 and 0.957 here (1,056 intervals;
    0.962 and 0.964 over 3,482; expanded for all the stories rather than the rarer answer's, 0.938
    and 0.931, under 95%); the rest say why there is none. The estimates'
    bias over every row: -0.010 (kappa) and -0.001 (balanced accuracy), standard errors 0.004 and
    0.002, a twentieth of their intervals' half-width."""
    t = truths()
    got = {name: coverage(per_test[f"{name}_low"].fill_nan(None), per_test[f"{name}_high"].fill_nan(None), t[name],
                          printed=0.4) for name in ("kappa", "balanced_accuracy")}
    shown = per_test["kappa_low"].fill_nan(None).is_not_null()
    print(got, "printed:", round(float(shown.mean()), 3))
    assert per_test.height == PER_TEST_DRAWS * PER_TEST_TESTS and not {k: c for k, c in got.items() if c < COVERAGE}, got
    withheld = per_test.filter(~shown)["ci_note"]
    assert withheld.is_not_null().all() and (withheld == FEW_PER_CLASS).mean() > 0.5   # each says why
    for name in ("kappa", "balanced_accuracy"):
        estimates = per_test[name].drop_nans().drop_nulls().to_numpy()
        bias, se = estimates.mean() - t[name], estimates.std() / np.sqrt(len(estimates))
        print(name, round(float(bias), 4), round(float(se), 4))
        assert abs(bias) < 0.02 + 3 * se, (name, bias)


def test_the_published_calibration_error_is_unbiased(tables):
    """D6: the published CE^2 averages its truth (the root, sqrt(max(CE^2, 0)), read +0.03 for a
    calibrated judge at 10 stories); its interval excludes 0 for this miscalibrated judge in most
    draws at 10 stories (it holds CE^2 > 0)."""
    t = truths()
    summary = tables["calibration_summary"]
    estimates = summary["squared_calibration_error"].to_numpy()
    assert abs(estimates.mean() - t["ce2"]) < 3 * estimates.std() / np.sqrt(DRAWS), (estimates.mean(), t["ce2"])
    print("excludes 0:", float((summary["squared_calibration_error_low"].fill_null(0) > 0).mean()))


def test_story_count_p_values_hold_their_level_under_the_null():
    """A judge whose pass counts are unrelated to the experts': Pearson's and Spearman's p over
    stories reject at 0.05 in at most 5% of draws, up to the binomial band (0.05 + 2.6 x 0.0069)."""
    rng = np.random.default_rng(5)
    k = np.repeat(np.arange(DRAWS), MIN_CLUSTERS)
    judge = rng.binomial(TESTS, beta_rates(rng, (len(k),), 0.4, 0.3))
    expert = rng.binomial(TESTS, beta_rates(rng, (len(k),), 0.4, 0.3))
    rows = pl.DataFrame({"judge": k, "story_id": [f"s{i}" for i in range(len(k))]})
    frame = pl.concat([rows.with_columns(pl.lit(t).alias("test"), pl.Series("judge_pass", judge > t),
                                         pl.Series("expert_pass", expert > t)) for t in range(TESTS)])
    p = pl.DataFrame([TTCW._story_correlation(j) for _, j in frame.group_by("judge")])
    rejects = {name: float((p[name].drop_nulls() < 0.05).mean()) for name in ("pearson_p", "spearman_p")}
    print(rejects)
    assert all(r <= 0.05 + 2.6 * 0.0069 for r in rejects.values()), rejects


def test_no_balanced_accuracy_interval_where_the_rarer_expert_answer_is_in_few_stories(tmp_path):
    """The hard case the bootstrap cannot cover (experts passing 5% of tests, stories alike inside:
    the story-resampled balanced accuracy covered 0.38-0.62 at 10 stories): no interval, and the
    note says why."""
    rng = np.random.default_rng(2)
    names = [f"0x{g}" for g in range(12)]
    y = rng.random((12, TESTS)) < np.where(np.arange(12) < 2, 0.5, 0.0)[:, None]        # Yes in 2 stories only
    card = ttcw_dataset(tmp_path, names, TESTS, {(s, t + 1): bool(y[k, t]) for k, s in enumerate(names)
                                                 for t in range(TESTS)})
    out = TTCW().tables(ttcw_frame(np.zeros(12, dtype=int), names, TESTS, y), context(TTCW(), card))
    row = out["overall"].row(0, named=True)
    assert math.isnan(row["balanced_accuracy_low"]) and math.isnan(row["kappa_low"]) and row["ci_note"] == FEW_PER_CLASS


def test_the_overall_table_prints_the_interval_a_sweep_ranks_by(tables):
    """One rule for both: a judge's overall kappa and balanced accuracy intervals, and their note,
    are what `TTCW.rank_units` gives a sweep for the same verdicts."""
    overall = tables["overall"].filter(pl.col("view") == "all")
    printed = 0
    for row in overall.head(40).iter_rows(named=True):
        for metric in ("kappa", "balanced_accuracy"):
            units = TTCW().rank_units(tables, row["judge"], RankBy(f"overall.{metric}"), TTCWOptions())
            low, high, _ = units.interval_with_note()
            assert units.value() == pytest.approx(row[metric], nan_ok=True)
            assert (low, high) == pytest.approx((row[f"{metric}_low"], row[f"{metric}_high"]), nan_ok=True)
            printed += not math.isnan(low)
    assert printed >= 40


def test_an_overall_row_without_a_labelled_verdict_says_why():
    """A judge with no verdict in a view (no story of it answered) printed n 0 and NaNs with no note."""
    from litjudge.judges.ttcw_agreement import with_intervals

    empty = pl.DataFrame(schema={"story_id": pl.Utf8, "judge_pass": pl.Boolean, "expert_pass": pl.Boolean})
    row = with_intervals({"n": 0, "kappa": math.nan, "balanced_accuracy": math.nan}, empty, "story_id")
    assert math.isnan(row["kappa_low"]) and row["ci_note"] == "no verdict with an expert label was read: no agreement"


@pytest.mark.parametrize("rarer, recall", [(0.05, 0.97), (0.1, 0.9)])
def test_balanced_accuracy_covers_where_the_rarer_answers_recall_is_lumpy(rarer, recall):
    """A hostile pass: 30 stories of 14 tests, the experts' rarer answer 5-10% of them, the judge
    right on it 90-97% of the time: its misses are in a few stories, the recall hardly varies over
    story resamples, and balanced accuracy's interval covered 0.77-0.84 (0.955 with balanced
    answers). Widened to the lumpy recall's Clopper-Pearson bounds, one trial per story, it covers
    (`proportion.lumpy_recall_bounds`), through `agreement_intervals`, the tables' path."""
    from litjudge.judges.ttcw_agreement import agreement_intervals

    rng = np.random.default_rng(int(rarer * 100))
    got, printed = 0, 0
    for _ in range(300):
        lean = rng.beta(1, (1 - rarer) / rarer, 30)                     # stories differ in how often they fail
        expert = rng.random((30, 14)) >= lean[:, None]
        judge = np.where(expert, rng.random(expert.shape) < 0.9, rng.random(expert.shape) >= recall)
        rows = pl.DataFrame({"story_id": np.repeat([f"s{i:02d}" for i in range(30)], 14),
                             "expert_pass": expert.ravel(), "judge_pass": judge.ravel()})
        out = agreement_intervals(rows, "story_id")
        if math.isnan(out["balanced_accuracy_low"]):
            continue
        printed += 1
        got += out["balanced_accuracy_low"] <= (0.9 + recall) / 2 <= out["balanced_accuracy_high"]
    print(rarer, recall, got / printed, printed)
    assert printed >= 250 and got / printed >= 0.93, (got, printed)
