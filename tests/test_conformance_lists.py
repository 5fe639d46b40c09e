"""Conformance of what listwise, permutation self-consistency, reference-based Likert,
classification and the ensembles publish, through the functions their tables call, on DRAWS
simulated judges: listwise's ANOVA p and self-preference (item groups the units: `anova_row`,
`ListwiseRanking._self_preference`), its ranked Spearman (`ListwiseRanking.rank_units`), the PSC
means over lists (`permutation._mean_ci`), reference-Likert's means over groups
(`reference_likert._group_intervals`), classification's item-level p (`_item_p_value`), the jury's
and the cascade's agreement (`ensembles._member_row`, `ensembles._cascade_summary`)."""
from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from litjudge.judges.base import RankBy
from litjudge.judges.classification import _item_p_value
from litjudge.judges.ensembles import CascadeOptions, JuryInputs, Split, _cascade_summary, _member_row
from litjudge.judges.listwise import ListwiseOptions, ListwiseRanking, anova_row
from litjudge.judges.metrics.bootstrap import MIN_CLUSTERS, too_few
from litjudge.judges.permutation import _mean_ci
from litjudge.judges.reference_likert import _group_intervals
from tests.conformance_data import COVERAGE, DRAWS, beta_rates, coverage, judges

LEVEL = 0.05 + 2.6 * 0.0069          # a test's rejection rate under its null: 5% up to the binomial band


def groups_of_items(rng: np.random.Generator, groups: int, own_effect: float = 0.0) -> pl.DataFrame:
    """item_scores as listwise writes them: DRAWS judges x `groups` groups of 12 items, each group
    dominated by one category (8 of its 12 items), a group-level shift shared by its items, no
    category effect; 3 items per group from the judge's own family, scored `own_effect` higher."""
    d, g, i = (a.ravel() for a in np.indices((DRAWS, groups, 12)))
    dominant = g % 3
    category = np.where(i < 8, dominant, (dominant + 1 + (i >= 10)) % 3)
    shift = rng.normal(0, 1, (DRAWS, groups))[d, g]
    own = i % 4 == 0
    score = 3 + shift + own_effect * own + rng.normal(0, 1, len(d))
    return pl.DataFrame({"judge": np.asarray(judges(DRAWS))[d], "group": [f"g{x}" for x in g],
                         "item_id": [f"{x}/{y}" for x, y in zip(g, i)], "mean_score": score, "mean_position": -score,
                         "category": [f"c{x}" for x in category], "source": np.where(own, "own", "other"),
                         "category_rank": category.astype(float), "human_score": None})


def test_the_listwise_anova_p_holds_its_level_with_lists_dominated_by_one_category():
    """D7: counting items, one-way ANOVA rejected 23% of true nulls at 0.05 where each list was
    dominated by one category; shuffling categories within item groups holds 5%."""
    items = groups_of_items(np.random.default_rng(1), MIN_CLUSTERS)
    p = np.asarray([anova_row(j, "mean_score")["p"] for _, j in items.group_by("judge")])
    naive = np.asarray([_scipy_anova_p(j) for _, j in items.group_by("judge")])
    print("rejects:", float((p < 0.05).mean()), "counting items:", float((naive < 0.05).mean()))
    assert (p < 0.05).mean() <= LEVEL and (naive < 0.05).mean() > 0.15


def _scipy_anova_p(j: pl.DataFrame) -> float:
    from scipy.stats import f_oneway

    return float(f_oneway(*[g["mean_score"].to_numpy() for _, g in j.group_by("category")]).pvalue)


@pytest.mark.parametrize("groups", [MIN_CLUSTERS, 30])
def test_self_preference_covers_its_truth_resampling_groups(groups):
    """Own items scored 0.4 higher, groups shifting all their items together: the interval of own
    minus others' mean covers 0.4; from one group (one list) it prints none (D3)."""
    items = groups_of_items(np.random.default_rng(2 + groups), groups, own_effect=0.4)
    table = ListwiseRanking._self_preference(items, ListwiseOptions(self_sources=dict.fromkeys(judges(DRAWS), "own")))
    score = table.filter(pl.col("score") == "score")
    got = coverage(score["ci_low"], score["ci_high"], 0.4)
    print(groups, got)
    assert got >= COVERAGE, got
    one = ListwiseRanking._self_preference(items.filter((pl.col("judge") == "d0000") & (pl.col("group") == "g0")),
                                           ListwiseOptions(self_sources={"d0000": "own"})).row(0, named=True)
    assert one["ci_low"] is None and one["ci_note"] == too_few(1)


def test_the_ranked_listwise_spearman_covers_resampling_groups():
    """The sweep's interval of agreement.spearman_category (`rank_units`: item groups resampled,
    Spearman of category rank and mean score over the drawn groups' items): the truth is the
    Spearman of the same model on 200,000 groups."""
    def scored(rng, draws, groups):
        d, g, i = (a.ravel() for a in np.indices((draws, groups, 12)))
        category = (i % 3).astype(float)
        score = 0.5 * category + rng.normal(0, 1, (draws, groups))[d, g] * 0.7 + rng.normal(0, 1, len(d))
        return d, g, category, score
    _, _, cat, score = scored(np.random.default_rng(0), 1, 200_000)
    from scipy.stats import spearmanr
    truth = float(spearmanr(cat, score).statistic)
    d, g, cat, score = scored(np.random.default_rng(3), DRAWS, MIN_CLUSTERS)
    items = pl.DataFrame({"judge": np.asarray(judges(DRAWS))[d], "group": [f"g{x}" for x in g], "category_rank": cat,
                          "human_score": None, "mean_score": score}, schema_overrides={"human_score": pl.Float64})
    rank = RankBy("agreement.spearman_category")
    bounds = [ListwiseRanking().rank_units({"item_scores": items}, j, rank, ListwiseOptions()).interval(300)
              for j in judges(DRAWS)]
    got = coverage([b[0] for b in bounds], [b[1] for b in bounds], truth)
    print(truth, got)
    assert got >= COVERAGE, got


@pytest.mark.parametrize("lists, piled", [(MIN_CLUSTERS, False), (30, False), (MIN_CLUSTERS, True), (12, True)])
def test_psc_means_over_lists_cover(lists, piled):
    """A mean over lists of a per-list Spearman (skewed: 1 - 2 Beta(2, 5)), or piled at 1 (a judge
    right on 80% of lists, the rest U(-0.5, 0.9): the percentile interval covered 0.85 at 10 lists
    and 0.87 at 12 through the table, a hostile pass); one list: none."""
    rng = np.random.default_rng(lists + piled)
    if piled:
        values, truth = np.where(rng.random((DRAWS, lists)) < 0.8, 1.0, rng.uniform(-0.5, 0.9, (DRAWS, lists))), 0.84
    else:
        values, truth = 1 - 2 * rng.beta(2, 5, (DRAWS, lists)), 1 - 2 * 2 / 7
    rows = [_mean_ci([f"l{k}" for k in range(lists)], v.tolist()) for v in values]
    got = coverage([r["ci_low"] for r in rows], [r["ci_high"] for r in rows], truth)
    bias = float(np.mean([r["spearman"] for r in rows])) - truth
    print(lists, piled, got, bias)
    assert got >= COVERAGE and abs(bias) < 3 * values.std() / math.sqrt(lists * DRAWS), (got, bias)
    assert _mean_ci(["l0"], [0.3])["ci_note"] == too_few(1)


def test_reference_likert_means_over_groups_cover_and_a_constant_one_is_bounded():
    """Per-group rank agreement (10% of groups undefined, left out) averaged over 10 groups: each
    metric's interval covers its mean; every group at 1: the exact bound inside [-1, 1]."""
    rng = np.random.default_rng(7)
    d = np.repeat(np.arange(DRAWS), MIN_CLUSTERS + 1)
    spear = np.clip(0.3 + rng.normal(0, 0.35, len(d)), -1, 1)
    spear[rng.random(len(d)) < 0.1] = np.nan
    ranking = pl.DataFrame({"judge": np.asarray(judges(DRAWS))[d], "cutoff": -2, "spearman": spear,
                            "kendall": spear * 0.8, "pairwise_accuracy": (spear + 1) / 2})
    big = np.clip(0.3 + np.random.default_rng(0).normal(0, 0.35, 2_000_000), -1, 1).mean()
    out = _group_intervals(ranking, ["judge", "cutoff"], ("spearman", "kendall", "pairwise_accuracy"))
    got = {m: coverage(out[f"{m}_low"], out[f"{m}_high"], t)
           for m, t in (("spearman", big), ("kendall", big * 0.8), ("pairwise_accuracy", (big + 1) / 2))}
    print(got)
    assert not {m: c for m, c in got.items() if c < COVERAGE}, got
    ones = _group_intervals(ranking.head(MIN_CLUSTERS).with_columns(pl.lit(1.0).alias("spearman")), ["judge", "cutoff"],
                            ("spearman",)).row(0, named=True)
    assert ones["spearman_low"] == pytest.approx(1 - 2 * (1 - 0.025 ** (1 / MIN_CLUSTERS))) and ones["spearman_high"] == 1


def group_spearmans(rng: np.random.Generator, groups: int) -> np.ndarray:
    """Per story group, the Spearman of a judge's 0-3 score (3 TTCW tests passed or not) of its 4
    candidates with the experts' scores (NaN where the judge scores them all alike): mostly high,
    with a long tail to -1 (a hostile pass's simulation, /tmp/hG/sim_reflikert.py)."""
    from scipy.stats import rankdata

    quality = rng.normal(0, 1, (groups, 4))
    human = quality + rng.normal(0, 0.7, quality.shape)
    passes = rng.random((groups, 4, 3)) < 1 / (1 + np.exp(-(1.5 * quality + rng.normal(0, 0.5, (groups, 1))))[..., None])
    a, b = rankdata(passes.sum(axis=2), axis=1), rankdata(human, axis=1)
    a, b = a - a.mean(axis=1, keepdims=True), b - b.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (a * b).sum(axis=1) / np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1))


def test_reference_likert_means_of_skewed_group_values_cover_at_ten_groups():
    """Per-group Spearmans over four candidates pile up near 1 with a tail to -1: the percentile
    interval of their mean over 10 groups covered 0.92 (4,036 data sets, a hostile pass); the
    bootstrap-t interval the table prints covers; a sweep ranks by the same interval."""
    from litjudge.judges.reference_likert import ReferenceLikert, ReferenceLikertOptions

    truth = float(np.nanmean(group_spearmans(np.random.default_rng(0), 400_000)))
    d = np.repeat(np.arange(DRAWS), MIN_CLUSTERS)
    ranking = pl.DataFrame({"judge": np.asarray(judges(DRAWS))[d], "cutoff": 0, "group": [f"g{k}" for k in range(len(d))],
                            "spearman": group_spearmans(np.random.default_rng(3), len(d))})
    out = _group_intervals(ranking, ["judge", "cutoff"], ("spearman",))
    got = coverage(out["spearman_low"], out["spearman_high"], truth)
    print(got, truth)
    assert got >= COVERAGE, got
    shown = out.filter(pl.col("spearman_low").is_not_null()).row(0, named=True)
    units = ReferenceLikert().rank_units({"ranking": ranking}, shown["judge"], ReferenceLikert().parse_rank_by("cutoff_sweep.spearman@cutoff=0"),
                                         ReferenceLikertOptions())
    assert units is not None and units.interval() == pytest.approx((shown["spearman_low"], shown["spearman_high"]))
    alone = ranking.drop("cutoff")                  # the ablation without a reference: its mean ranking, no cutoff
    mean = _group_intervals(alone, ["judge"], ("spearman",)).filter(pl.col("judge") == shown["judge"]).row(0, named=True)
    units = ReferenceLikert().rank_units({"ranking": alone}, shown["judge"], ReferenceLikert().parse_rank_by(
        "ranking_mean.spearman"), ReferenceLikertOptions(reference=False))
    assert units is not None and units.interval() == pytest.approx((mean["spearman_low"], mean["spearman_high"]))


@pytest.mark.parametrize("metric,values,share", [
    ("pairwise_accuracy", (0.0, 0.5, 1.0), (0.15, 0.16, 0.69)),          # two candidates a group
    ("spearman", (0.5, 0.866, 1.0), (0.15, 0.35, 0.5)),                  # three, a strong judge
    ("spearman", (-1.0, 1.0), (0.2, 0.8))])                              # two, without ties
def test_reference_likert_means_of_lumpy_group_values_cover_at_ten_groups(metric, values, share):
    """A hostile pass: resamples of one value drawn ten times (no spread, an infinite t) were
    dropped from the bootstrap-t, and the means of group values piled at a bound were covered
    0.73-0.90 at 10 groups; [1] * 9 + [-1] had its mean (0.8) for its lower bound, a narrower
    interval than ten groups at 1 get. Kept, and widened where fewer than 5 groups are off the
    bound, they cover (`proportion.bounded_mean_with_ci`)."""
    rng = np.random.default_rng(11)
    truth = float(np.dot(values, share))
    d = np.repeat(np.arange(DRAWS), MIN_CLUSTERS)
    ranking = pl.DataFrame({"judge": np.asarray(judges(DRAWS))[d], "cutoff": 0,
                            metric: rng.choice(np.asarray(values), len(d), p=np.asarray(share))})
    out = _group_intervals(ranking, ["judge", "cutoff"], (metric,))
    got = coverage(out[f"{metric}_low"], out[f"{metric}_high"], truth)
    print(metric, values, got)
    assert got >= COVERAGE, got
    one_off, all_at_one = (_group_intervals(pl.DataFrame({"judge": "j", "cutoff": 0, "spearman": v}), ["judge", "cutoff"],
                                            ("spearman",)).row(0, named=True) for v in ([1.0] * 9 + [-1.0], [1.0] * 10))
    assert one_off["spearman_low"] < all_at_one["spearman_low"] < 0.8 and "Clopper-Pearson" in one_off["spearman_ci_note"]


def test_classification_p_counts_items_and_holds_its_level():
    """A judge whose category is unrelated to the truth but sticks to its answer over 5 repeats:
    the item-level p rejects in at most 5% of draws (counting repeats, the p of such a judge
    shrank from 1e-5 to 1e-23 with a real effect)."""
    rng = np.random.default_rng(9)
    rank = {"Good": 3, "Medium": 2, "Bad": 1}
    labels = np.asarray(list(rank))
    p = []
    for _ in range(DRAWS):
        truth, habit = rng.integers(0, 3, 30), rng.integers(0, 3, 30)
        pred = np.where(rng.random((5, 30)) < 0.8, habit, rng.integers(0, 3, (5, 30)))
        p.append(_item_p_value(pl.DataFrame({"item_id": np.tile(np.arange(30), 5).astype(str),
                                             "truth": labels[np.tile(truth, 5)], "pred": labels[pred.ravel()]}), rank))
    print(float((np.asarray(p) < 0.05).mean()))
    assert (np.asarray(p) < 0.05).mean() <= LEVEL


@pytest.mark.parametrize("rate, rho", [(0.95, 0.6), (0.15, 0.3)])
def test_jury_agreement_with_ties_covers(rate, rho):
    """A jury member right with a story-level chance ~ Beta(rate, rho), a tie (p = 0.5, half
    credit) on 10% of items, over 10 stories of unequal sizes: its agreement's interval covers
    0.9 rate + 0.05."""
    rng = np.random.default_rng(int(rate * 100))
    sizes = np.resize([3, 6, 10, 14, 20, 31], MIN_CLUSTERS)
    lows, highs = [], []
    for _ in range(DRAWS):
        right = beta_rates(rng, (MIN_CLUSTERS,), rate, rho)
        cluster = np.repeat(np.arange(MIN_CLUSTERS), sizes)
        truth = rng.random(len(cluster)) < 0.5
        hit = rng.random(len(cluster)) < right[cluster]
        p = np.where(rng.random(len(cluster)) < 0.1, 0.5, np.where(hit == truth, 0.9, 0.1))
        x = JuryInputs([[q] for q in p], [[False]] * len(p), truth.tolist(), [f"s{c}" for c in cluster],
                       [[float(q > 0.5) if q != 0.5 else 0.5] for q in p])
        row = _member_row("judge", p.tolist(), x, list(range(len(p))))
        lows.append(row["ci_low"])
        highs.append(row["ci_high"])
    got = coverage(lows, highs, 0.9 * rate + 0.05)
    print(rate, rho, got)
    assert got >= COVERAGE, got


def test_cascade_agreement_per_item_and_per_cluster_cover():
    """Answered held-out items of 10 clusters of unequal sizes, each right with a cluster-level
    chance ~ Beta(0.9, 0.6): the item-level agreement's and the certified per-cluster
    agreement's intervals each cover 0.9."""
    rng = np.random.default_rng(11)
    sizes = np.resize([1, 2, 4, 8, 12], MIN_CLUSTERS)
    opts = CascadeOptions(judges=["a"])
    items, cl = [], []
    for _ in range(DRAWS):
        cluster = np.repeat(np.arange(MIN_CLUSTERS), sizes)
        hits = (rng.random(len(cluster)) < beta_rates(rng, (MIN_CLUSTERS,), 0.9, 0.6)[cluster]).astype(float)
        names = [f"s{c}" for c in cluster]
        split = Split(names, [True] * len(names), [], list(range(len(names))), 0)
        row = _cascade_summary(opts, 1, [0.5], split, hits.tolist(), names)
        items.append((row["ci_low"], row["ci_high"]))
        cl.append((row["cluster_ci_low"], row["cluster_ci_high"]))
    got = {"items": coverage(*zip(*items), 0.9), "clusters": coverage(*zip(*cl), 0.9)}
    print(got)
    assert not math.isnan(got["items"]) and min(got.values()) >= COVERAGE, got
