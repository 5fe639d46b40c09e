"""Statistical conformance: every interval and p-value litjudge publishes, simulated with a known
truth through the code that writes it (the protocol's tables, the table function they call, the
sweep ranking's units). tests/estimate_registry.py lists every published column with its test
here or in tests/test_conformance_*.py, and test_every_published_estimate_has_a_conformance_test
(tests/test_estimate_registry.py) fails on a column a protocol writes without one. The data, the
hard cases and the binomial tolerance: tests/conformance_data.py.

This module: the rates every table shares (the label shares, through `tables.label_distribution`,
every hard case), the calibration error (`tables.calibration_tables`), the sweep ranking's
intervals (`Protocol.rank_units` -> `Units.interval_with_note`, as `sweep_rank.ranking` reads them)
and `same_as_best`'s family-wise error, the length-controlled accuracy, and no interval below the
minimum.
"""
from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from litjudge.engine.app.sweep import SweepSpec
from litjudge.engine.app.sweep_rank import Ranked, ranking
from litjudge.judges.base import RankBy
from litjudge.judges.length_control import length_controlled
from litjudge.judges.metrics.bootstrap import MIN_CLUSTERS, RESAMPLES, too_few
from litjudge.judges.metrics.calibration import calibration_units, squared_calibration_error
from litjudge.judges.metrics.estimates import Units, balanced_accuracy_of, kappa_of, same_as_best
from litjudge.judges.tables import calibration_tables, label_distribution
from litjudge.judges.ttcw import TTCW, TTCWOptions
from tests.conformance_data import COVERAGE, DRAWS, HARD, UNEQUAL, beta_rates, coverage, judges


# -- the rates every table shares -----------------------------------------------------------
def said_yes(rng: np.random.Generator, p: float, rho: float, clusters: int, sizes=UNEQUAL) -> pl.DataFrame:
    """DRAWS judges, each answering Yes with a story-level chance ~ Beta(p, rho) on stories of
    unequal sizes; 5% of verdicts unparsed."""
    m = np.resize(np.asarray(sizes), clusters)
    rate = beta_rates(rng, (DRAWS, clusters), p, rho)
    d, g = np.repeat(np.arange(DRAWS), m.sum()), np.tile(np.repeat(np.arange(clusters), m), DRAWS)
    yes = rng.random(len(d)) < rate[d, g]
    label = np.where(rng.random(len(d)) < 0.05, None, np.where(yes, "Yes", "No"))
    return pl.DataFrame({"judge": np.asarray(judges(DRAWS))[d], "story_id": [f"s{x}" for x in g],
                         "label": pl.Series(label.tolist(), dtype=pl.Utf8)})


@pytest.mark.parametrize("p, rho, clusters", HARD)
def test_label_shares_cover_every_hard_case(p, rho, clusters):
    """D5: the expanded percentile bootstrap covered 0.865-0.907 at 10 stories of 14 correlated
    tests for p = 0.15 and 0.95, and 0.83-0.89 at 15-30 stories; the published rule covers."""
    shares = label_distribution(said_yes(np.random.default_rng(int(100 * p + 10 * rho) + clusters), p, rho, clusters),
                                "story_id").filter(pl.col("label") == "Yes")
    got = coverage(shares["ci_low"], shares["ci_high"], 0.95 * p)
    print(p, rho, clusters, got)
    assert shares.height == DRAWS and got >= COVERAGE, got


def test_a_constant_share_gets_the_exact_bound():
    """Every verdict Yes (no resample varies): [0.025^(1/n), 1] over n stories, holding the truth 1."""
    frame = said_yes(np.random.default_rng(1), 0.5, 0.3, MIN_CLUSTERS).with_columns(pl.lit("Yes").alias("label"))
    shares = label_distribution(frame, "story_id")
    assert shares["ci_low"].to_list() == pytest.approx([0.025 ** (1 / MIN_CLUSTERS)] * DRAWS)
    assert shares["ci_high"].to_list() == [1.0] * DRAWS


# -- calibration ---------------------------------------------------------------------------
@pytest.mark.parametrize("stories", [MIN_CLUSTERS, 30])
def test_a_calibrated_judges_calibration_error_interval_holds_zero(stories):
    """P(Yes) drawn per item around a story-level mean, the truth drawn from it: the binned CE^2 is
    0; the published debiased CE^2 averages 0 and its interval holds it (the plug-in ECE's never
    did: 0 of 100)."""
    rng = np.random.default_rng(8 + stories)
    mu = beta_rates(rng, (DRAWS, stories), 0.3, 0.3)
    p = np.clip(mu[..., None] + rng.normal(0, 0.1, (DRAWS, stories, 14)), 0.01, 0.99)
    y = rng.random(p.shape) < p
    d, g, _ = (a.ravel() for a in np.indices(p.shape))
    frame = pl.DataFrame({"judge": np.asarray(judges(DRAWS))[d], "p": p.ravel(), "y": y.ravel(), "story": g})
    summary = calibration_tables(frame, "p", "y", resamples=300, cluster="story")["calibration_summary"]
    ce2 = summary["squared_calibration_error"].to_numpy()
    got = coverage(summary["squared_calibration_error_low"], summary["squared_calibration_error_high"], 0.0)
    print(stories, got, ce2.mean())
    assert abs(ce2.mean()) < 3 * ce2.std() / math.sqrt(DRAWS) and got >= COVERAGE, (got, ce2.mean())


@pytest.mark.parametrize("link", ["calibrated", "squared"])
def test_the_calibration_error_interval_of_one_verdict_a_story_covers_from_twenty(link):
    """Stories of one verdict each (a TTCW run of one test, pairs of one order): 10 of them covered
    0.86-0.90 (a hostile pass); the interval needs 20 verdicts as well as 10 clusters, said where
    it is withheld, and covers a calibrated judge's 0 and a miscalibrated one's (y ~ p^2) CE^2 at 20."""
    from litjudge.judges.metrics.calibration import MIN_VERDICTS

    rng = np.random.default_rng(21 if link == "calibrated" else 22)
    p = rng.random((DRAWS, MIN_VERDICTS))
    y = rng.random(p.shape) < (p if link == "calibrated" else p ** 2)
    d, g = (a.ravel() for a in np.indices(p.shape))
    frame = pl.DataFrame({"judge": np.asarray(judges(DRAWS))[d], "p": p.ravel(), "y": y.ravel(), "story": g})
    summary = calibration_tables(frame, "p", "y", resamples=300, cluster="story")["calibration_summary"]
    fine = np.minimum(np.arange(2_000_000) // 200_000, 9)             # the true binned CE^2 of y ~ p^2
    q = (np.arange(2_000_000) + 0.5) / 2_000_000
    truth = 0.0 if link == "calibrated" else sum(0.1 * ((q[fine == k] ** 2).mean() - q[fine == k].mean()) ** 2
                                                 for k in range(10))
    got = coverage(summary["squared_calibration_error_low"], summary["squared_calibration_error_high"], truth)
    print(link, got, truth)
    assert got >= COVERAGE, got
    few = calibration_tables(frame.filter(pl.col("story") < 10), "p", "y", resamples=100,
                             cluster="story")["calibration_summary"]
    assert few["squared_calibration_error_low"].is_null().all()
    assert set(few["ci_note"]) == {f"too few verdicts (10; the calibration error's interval needs {MIN_VERDICTS}): "
                                   "no interval"}


# -- the sweep ranking's intervals ----------------------------------------------------------
def story_arrays(rng: np.random.Generator, stories: int, draws: int, prevalence: float = 0.35):
    """(truth, pred) of `draws` judges x stories x 14 tests: a story-level pass prevalence and
    judge skill (a story's verdicts are correlated)."""
    prev = beta_rates(rng, (draws, stories), prevalence, 0.2)
    u = rng.normal(0, 0.8, (draws, stories))
    y = rng.random((draws, stories, 14)) < prev[..., None]
    r = rng.random(y.shape)
    pred = np.where(y, r < (1 / (1 + np.exp(-(1.0 + u))))[..., None], r > (1 / (1 + np.exp(-(1.4 - u))))[..., None])
    return y, pred


def stories_frame(rng: np.random.Generator, stories: int, draws: int, prevalence: float = 0.35):
    """per_item rows as TTCW writes them (`story_arrays`)."""
    y, pred = story_arrays(rng, stories, draws, prevalence)
    d, g, t = (a.ravel() for a in np.indices(y.shape))
    return pl.DataFrame({"judge": np.asarray(judges(draws))[d], "story_id": [f"s{x}" for x in g], "test": t + 1,
                         "status": "ok", "p_yes": None, "expert_pass": y.ravel(), "judge_pass": pred.ravel()})


def per_judge(per_item: pl.DataFrame) -> dict[str, dict[str, pl.DataFrame]]:
    """Each simulated judge's tables as a sweep hands them to `rank_units`: its own rows (a sweep
    cell holds one judge). Filtering the frame of every draw for each judge instead cost each test
    a pass over all of them per judge."""
    return {judge: {"per_item": rows} for (judge,), rows in per_item.partition_by("judge", as_dict=True).items()}


def agreement_truth(metric) -> float:
    rng = np.random.default_rng(123)
    prev = beta_rates(rng, (200_000,), 0.35, 0.2)
    u = rng.normal(0, 0.8, 200_000)
    sens, spec = 1 / (1 + np.exp(-(1.0 + u))), 1 / (1 + np.exp(-(1.4 - u)))
    tp, fn = (prev * sens).sum(), (prev * (1 - sens)).sum()
    fp, tn = ((1 - prev) * (1 - spec)).sum(), ((1 - prev) * spec).sum()
    return float(metric.of(tp, fn, fp, tn))


@pytest.mark.parametrize("metric", ["kappa", "balanced_accuracy"])
@pytest.mark.parametrize("stories", [MIN_CLUSTERS, 30])
def test_the_ranked_agreement_interval_covers(metric, stories):
    """The sweep's interval of TTCW overall.kappa / balanced_accuracy: `TTCW.rank_units` (stories
    resampled, the metric recomputed; none where an expert answer is in fewer than 10 stories: at
    10 stories about 40% of draws print one, so 3,000 draws give over 1,000 intervals)."""
    draws = 3 * DRAWS if stories == MIN_CLUSTERS else DRAWS
    per_item = stories_frame(np.random.default_rng(stories + len(metric) + 1000), stories, draws)
    truth = agreement_truth(kappa_of if metric == "kappa" else balanced_accuracy_of)
    rank = RankBy(f"overall.{metric}")
    lows, highs = [], []
    tables = per_judge(per_item)
    for judge in judges(draws):
        low, high, _ = TTCW().rank_units(tables[judge], judge, rank, TTCWOptions()).interval_with_note(300)
        lows.append(low)
        highs.append(high)
    got = coverage(lows, highs, truth, printed=0.3)      # withheld where an expert answer is in < 10 stories
    assert np.sum(~np.isnan(lows)) >= DRAWS
    print(metric, stories, got, float(np.mean(~np.isnan(lows))))
    assert got >= COVERAGE, got


def rare_no_frame(rng: np.random.Generator, stories: int, draws: int, says_no: float):
    """per_item rows of judges that say Yes unless a story is one of the few (chance `says_no`)
    where they weigh it: there No with chance 0.6 on an expert No, 0.2 on an expert Yes."""
    prev = rng.beta(2, 5, (draws, stories))
    y = rng.random((draws, stories, 14)) < prev[..., None]
    weighs = rng.random((draws, stories)) < says_no
    pred = ~(rng.random(y.shape) < np.where(weighs[..., None], np.where(y, 0.2, 0.6), 0.0))
    d, g, t = (a.ravel() for a in np.indices(y.shape))
    frame = pl.DataFrame({"judge": np.asarray(judges(draws))[d], "story_id": [f"s{x}" for x in g], "test": t + 1,
                          "status": "ok", "p_yes": None, "expert_pass": y.ravel(), "judge_pass": pred.ravel()})
    return frame, (~pred).any(axis=2).sum(axis=1)


@pytest.mark.parametrize("metric", ["kappa", "balanced_accuracy"])
def test_no_agreement_interval_where_a_judge_answer_is_in_few_stories_and_the_rest_cover(metric):
    """A judge saying No in 5 of 36 stories: its kappa's story-resampled interval covered 0.91,
    balanced accuracy's 0.91 (0.87 at 2 stories). Withheld below 10 stories holding each of the
    judge's answers (the note says why); where printed, it covers."""
    from litjudge.judges.metrics.bootstrap import FEW_JUDGE_ANSWERS

    frame, with_no = rare_no_frame(np.random.default_rng(17 + len(metric)), 36, DRAWS, 0.3)
    big, _ = rare_no_frame(np.random.default_rng(5), 20_000, 1, 0.3)
    counts = [float(big.filter(pl.col("expert_pass") == e).filter(pl.col("judge_pass") == j).height)
              for e, j in ((True, True), (True, False), (False, True), (False, False))]
    truth = float((kappa_of if metric == "kappa" else balanced_accuracy_of).of(*counts))
    tables, rank = per_judge(frame), RankBy(f"overall.{metric}")
    got = [TTCW().rank_units(tables[j], j, rank, TTCWOptions()).interval_with_note(300) for j in judges(DRAWS)]
    lows = np.asarray([g[0] for g in got])
    assert all(math.isnan(g[0]) and g[2] == FEW_JUDGE_ANSWERS for g, n in zip(got, with_no) if n < MIN_CLUSTERS)
    covered = coverage(lows, [g[1] for g in got], truth, printed=0.3)
    print(metric, covered, float(np.mean(~np.isnan(lows))))
    assert covered >= COVERAGE, covered


# -- same_as_best: the family-wise error of the paired comparison ----------------------------
def cells(rng: np.random.Generator, stories: int, rates: list[float], shared: bool) -> list[Units]:
    """Cells of a sweep: each a rate over stories of 14 tests, a story easy or hard for every
    judge; `shared`: all cells judged on the same stories, else half of each cell's stories its own."""
    skill = rng.normal(0, 0.6, 2 * stories)
    out = []
    for k, rate in enumerate(rates):
        own = np.arange(stories) if shared else np.r_[np.arange(stories // 2), stories + k * 0 + np.arange(stories // 2)]
        ids = np.repeat(own, 14)
        logit = math.log(rate / (1 - rate)) + skill[ids]
        out.append(Units.rate([f"s{i}" if shared or i < stories // 2 else f"c{k}s{i}" for i in ids],
                              (rng.random(len(ids)) < 1 / (1 + np.exp(-logit))).astype(float)))
    return out


@pytest.mark.parametrize("stories", [MIN_CLUSTERS, 30])
@pytest.mark.parametrize("shared", [True, False])
def test_same_as_best_keeps_its_family_wise_error(stories, shared):
    """5 equally good cells (0.8): some cell is marked worse than the best in at most 5% of 1,000
    sweeps, up to the binomial band (0.05 + 2.6 x 0.0069), the best chosen on the data; cells on
    the same stories and cells with stories of their own."""
    rng = np.random.default_rng(12 + stories + shared)
    alarms = sum(not all(marked(cells(rng, stories, [0.8] * 5, shared), True, resamples=200)) for _ in range(DRAWS))
    print(stories, shared, alarms / DRAWS)
    assert alarms / DRAWS <= 0.05 + 2.6 * 0.0069, alarms


def marked(units: list[Units], up: bool, resamples: int = RESAMPLES) -> list[bool | None]:
    """`same_as_best` as a sweep's ranking publishes it, per cell in the order given."""
    table = ranking([Ranked({"cell": k}, u.value(), None, u) for k, u in enumerate(units)], up, resamples)
    return table.sort("cell")["same_as_best"].to_list()


def test_same_as_best_finds_a_worse_cell_and_needs_clusters_of_its_own():
    rng = np.random.default_rng(5)
    found = marked(cells(rng, 30, [0.85, 0.84, 0.65], True), True, resamples=300)
    assert found == [True, True, False]
    lower = cells(rng, 30, [0.05, 0.06, 0.30], True)                  # an error rate: lower is better
    assert marked(lower, False, resamples=300) == [True, True, False]
    few = Units.rate(list(range(5)), np.ones(5))
    assert marked([cells(rng, 30, [0.8], True)[0], few], True) == [True, None]   # 5 clusters: no statement
    assert same_as_best(lower, False, resamples=300) == [True, True, False]      # the ranking's is the function's


# -- the length-controlled accuracy (cluster-robust logistic, t(G - 1)) -----------------------
@pytest.mark.parametrize("truth", [0.7, 0.9])
def test_length_controlled_accuracy_covers_at_the_minimum(truth):
    """sigmoid(intercept) of agreement on the log length ratio, read at equal length; a length
    effect of 0.8 per log ratio; a pair's orders share its difficulty. Draws under separation
    print no interval (`separated`)."""
    rng = np.random.default_rng(int(truth * 10))
    lows, highs = [], []
    for _ in range(DRAWS):
        wa, wb = rng.integers(80, 400, MIN_CLUSTERS), rng.integers(80, 400, MIN_CLUSTERS)
        human = np.where(rng.random(MIN_CLUSTERS) < 0.5, "a", "b")
        x = np.where(human == "a", np.log((wa + 1) / (wb + 1)), np.log((wb + 1) / (wa + 1)))
        p = 1 / (1 + np.exp(-(math.log(truth / (1 - truth)) + 0.8 * x + rng.normal(0, 0.3, MIN_CLUSTERS))))
        right = rng.random((2, MIN_CLUSTERS)) < p
        other = np.where(human == "a", "b", "a")
        rows = pl.DataFrame({"pair_id": [f"p{i}" for i in range(MIN_CLUSTERS)] * 2, "order": ["ab"] * 10 + ["ba"] * 10,
                             "human": np.tile(human, 2), "pick": np.where(right.ravel(), np.tile(human, 2),
                                                                          np.tile(other, 2)),
                             "words_a": np.tile(wa, 2), "words_b": np.tile(wb, 2)})
        got = length_controlled(rows, style=False)
        lows.append(got["ci_low"])
        highs.append(got["ci_high"])
    printed = float(np.mean([v is not None for v in lows]))
    got = coverage(lows, highs, truth, printed=0.3)
    print(truth, got, printed)
    assert got >= COVERAGE, (got, printed)


# -- below the minimum: no interval, one rule ---------------------------------------------------
@pytest.mark.parametrize("n", [2, 3, MIN_CLUSTERS - 1])
def test_no_interval_below_the_minimum_clusters(n):
    frame = said_yes(np.random.default_rng(n), 0.5, 0.3, n).filter(pl.col("judge") == "d0000")
    share = label_distribution(frame, "story_id").row(0, named=True)
    assert share["ci_low"] is None and share["ci_note"] == too_few(n)
    ids = [f"s{i // 14}" for i in range(14 * n)]
    truth = np.tile([True, False], 7 * n)
    assert all(math.isnan(v) for v in Units.agreement(ids, truth, truth[::-1], kappa_of).interval())


def test_the_calibration_table_and_the_sweep_print_the_same_interval():
    """D4: a sweep ranked by the calibration error read another interval than the calibration
    table (no centring); both are now `calibration.centred_interval` on the same clusters."""
    rng = np.random.default_rng(4)
    p = rng.random(280)
    y = rng.random(280) < p ** 1.5
    stories = [f"s{i // 14}" for i in range(280)]
    per_item = pl.DataFrame({"judge": "j", "story_id": stories, "test": 1, "status": "ok", "p_yes": p,
                             "expert_pass": y, "judge_pass": p >= 0.5})
    table = calibration_tables(per_item, "p_yes", "expert_pass", cluster="story_id")     # both at their defaults
    row = table["calibration_summary"].row(0, named=True)
    units = TTCW().rank_units({"per_item": per_item}, "j", RankBy("calibration_summary.squared_calibration_error"),
                              TTCWOptions())
    low, high, _ = units.interval_with_note(SweepSpec().bootstrap)
    assert units.value() == pytest.approx(row["squared_calibration_error"])
    assert (low, high) == pytest.approx((row["squared_calibration_error_low"], row["squared_calibration_error_high"]))
    assert float(squared_calibration_error(*[np.asarray(a) for a in (
        [(np.minimum((p * 10).astype(int), 9) == b).sum() for b in range(10)],
        [p[np.minimum((p * 10).astype(int), 9) == b].sum() for b in range(10)],
        [y[np.minimum((p * 10).astype(int), 9) == b].sum() for b in range(10)])])) == pytest.approx(units.value())


def story_level_truths(prevalence: float) -> dict[str, float]:
    """The story-level estimands on 200,000 stories: Pearson and Spearman of the judge's and the
    experts' pass counts, kappa and balanced accuracy of "passes half its tests"."""
    from scipy.stats import pearsonr, spearmanr

    y, pred = story_arrays(np.random.default_rng(77), 200_000, 1, prevalence)
    judge, expert = pred[0].sum(axis=1), y[0].sum(axis=1)
    a, b = expert / 14 >= 0.5, judge / 14 >= 0.5
    counts = [float((a & b).sum()), float((a & ~b).sum()), float((~a & b).sum()), float((~a & ~b).sum())]
    return {"story_counts.pearson": float(pearsonr(judge, expert).statistic),
            "story_counts.spearman": float(spearmanr(judge, expert).statistic),
            "story_cutoff.kappa": float(kappa_of.of(*counts)), "story_cutoff.balanced_accuracy":
            float(balanced_accuracy_of.of(*counts))}


@pytest.mark.parametrize("name, stories, prevalence", [("story_counts.pearson", MIN_CLUSTERS, 0.35),
                                                       ("story_counts.spearman", MIN_CLUSTERS, 0.35),
                                                       ("story_cutoff.kappa", 30, 0.5),
                                                       ("story_cutoff.balanced_accuracy", 30, 0.5)])
def test_the_ranked_story_level_estimates_cover(name, stories, prevalence):
    """The sweep's intervals of TTCW's story-level estimates (one row per story, stories
    resampled): the pass-count correlations at the minimum; the story cutoff's agreement at 30
    (below 10 stories of each expert verdict it prints none)."""
    per_item = stories_frame(np.random.default_rng(len(name) + stories), stories, DRAWS, prevalence)
    tables = per_judge(per_item)
    bounds = [TTCW().rank_units(tables[j], j, RankBy(name), TTCWOptions()).interval(300) for j in judges(DRAWS)]
    got = coverage([b[0] for b in bounds], [b[1] for b in bounds], story_level_truths(prevalence)[name])
    print(name, got)
    assert got >= COVERAGE, got


def test_the_ranked_brier_score_covers():
    """calibration_summary.brier in a sweep (stories resampled): a calibrated judge's Brier is
    E[p (1 - p)]."""
    rng = np.random.default_rng(31)
    mu = beta_rates(rng, (DRAWS, MIN_CLUSTERS), 0.3, 0.3)
    p = np.clip(mu[..., None] + rng.normal(0, 0.1, (DRAWS, MIN_CLUSTERS, 14)), 0.01, 0.99)
    d, g, _ = (a.ravel() for a in np.indices(p.shape))
    per_item = pl.DataFrame({"judge": np.asarray(judges(DRAWS))[d], "story_id": g.astype(str), "test": 1, "status": "ok",
                             "p_yes": p.ravel(), "expert_pass": rng.random(p.size) < p.ravel(), "judge_pass": True})
    big = np.clip(beta_rates(np.random.default_rng(0), (400_000,), 0.3, 0.3)[:, None]
                  + np.random.default_rng(1).normal(0, 0.1, (400_000, 14)), 0.01, 0.99)
    tables = per_judge(per_item)
    bounds = [TTCW().rank_units(tables[j], j, RankBy("calibration_summary.brier"), TTCWOptions()).interval(300)
              for j in judges(DRAWS)]
    got = coverage([b[0] for b in bounds], [b[1] for b in bounds], float((big * (1 - big)).mean()))
    print(got)
    assert got >= COVERAGE, got


def test_a_ranked_rate_prints_the_interval_of_its_table():
    """pairwise accuracy.accuracy and length_control.lc_accuracy in a sweep read the same
    interval as the accuracy and length-control tables (`Units.rate`, `length_control.lc_fit`)."""
    from litjudge.judges.pairwise import Pairwise, PairwiseOptions
    from tests.conformance_data import context, pairwise_frame, right_in_both_orders

    rng = np.random.default_rng(2)
    human = rng.random((3, 12)) < 0.5
    frame = pairwise_frame(rng, right_in_both_orders(np.full((3, 12), 0.7), human), human)
    frame = frame.with_columns(pl.Series("words_a", rng.integers(50, 400, frame.height)))
    tables = Pairwise().tables(frame, context(Pairwise(), "pairs-generic"))
    for name, table, where in (("accuracy.accuracy", "accuracy", pl.col("order") == "mean of both"),
                               ("length_control.lc_accuracy", "length_control", pl.lit(True))):
        rows = tables[table].filter(where)
        for judge, low, high in zip(rows["judge"], rows["ci_low"], rows["ci_high"]):
            got = Pairwise().rank_units(tables, judge, RankBy(name), PairwiseOptions()).interval()
            assert got == pytest.approx((low, high)), (name, judge)


def test_a_sweep_ranked_by_calibration_error_publishes_it_inside_its_range():
    """The debiased CE^2 is unbiased, so a calibrated judge's is often below 0; its table says so
    (docs/statistics.md), a sweep's ranking prints it and its interval clipped at 0, ordered by the
    unclipped estimates."""
    rng = np.random.default_rng(8)
    rows, raw = [], {}
    for judge in ("calibrated", "also-calibrated", "off"):
        p = rng.random(280)
        y = rng.random(280) < (p if judge != "off" else p ** 3)
        units = calibration_units([f"s{i // 14}" for i in range(280)], p, y)
        raw[judge] = units.value()
        rows.append(Ranked({"judge": judge}, units.value(), 280, units))
    assert min(raw.values()) < 0                                              # the case: an estimate below 0
    table = ranking(rows, False)
    assert table["judge"].to_list() == sorted(raw, key=raw.__getitem__)      # ordered by the unclipped values
    assert (table["value"] >= 0).all() and (table["ci_low"].drop_nulls() >= 0).all()
    assert (table["ci_low"] <= table["value"]).all() and (table["value"] <= table["ci_high"]).all()
