"""The second statistics audit's defects, each with the reproducing input it was found with:
the cascade's guarantee on clustered calibration data, jury ties, permutation self-consistency's
position bias and its resampling unit, the pairwise mean of both orders, degenerate intervals,
the small ones, and metric directions. Each statistic is checked against a reference or a
brute-force recomputation."""
from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from litjudge.judges.ensembles import CascadeOptions, JuryOptions, cascade_tables, jury_tables
from litjudge.judges.metrics.agreement import binary_agreement_with_ties, tie_credit
from litjudge.judges.metrics.bootstrap import (
    NO_SPREAD,
    expanded_alpha,
    mean_bootstrap,
    mean_of_means_with_ci,
    mean_with_ci,
    too_few,
)
from litjudge.judges.metrics.calibration import ece_bootstrap, expected_calibration_error
from litjudge.judges.metrics.jury import EPS, logit, stacked
from litjudge.judges.metrics.logistic import fit_logistic, separated
from litjudge.judges.metrics.prevalence import corrected_pass_rate, rogan_gladen, sensitivity_specificity
from litjudge.judges.metrics.selective import choose_threshold, hb_p_value

TARGET, DELTA = 0.8, 0.1
# Monte Carlo noise of a failure rate over 1,000 draws at delta = 0.1: 3 standard errors
SLACK = 3 * math.sqrt(DELTA * (1 - DELTA) / 1000)


def certified_share(draw, draws: int = 1000, seed: int = 0, clustered: bool = True) -> float:
    """Share of draws in which a threshold is certified; `draw(rng)` -> (confidence, correct, clusters)."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(draws):
        conf, ok, ids = draw(rng)
        hits += choose_threshold(conf.tolist(), ok.tolist(), TARGET, DELTA,
                                 clusters=ids.tolist() if clustered else None) is not None
    return hits / draws


def repeats(k: int, agreement: float = 0.7999, items: int = 60):
    """The audit's input: 60 items, each judged k times identically; true agreement just under target."""
    def draw(rng):
        ok = np.repeat(rng.random(items) < agreement, k)
        return np.repeat(rng.uniform(0.5, 1.0, items), k), ok, np.repeat(np.arange(items), k)
    return draw


def stories(agreement: float = 0.7999, icc: float = 0.3, n: int = 40, tests: int = 14):
    """Stories of 14 tests whose agreement shares a story effect (beta-binomial, intra-class correlation `icc`)."""
    s = 1 / icc - 1

    def draw(rng):
        p = rng.beta(agreement * s, (1 - agreement) * s, n)
        ok = (rng.random((n, tests)) < p[:, None]).ravel()
        return rng.uniform(0.5, 1.0, n * tests), ok, np.repeat(np.arange(n), tests)
    return draw


# -- 1. the cascade's guarantee under clustered calibration data -------------------------------
@pytest.mark.parametrize("k", [3, 5])
def test_identical_repeats_keep_the_guarantee_with_clusters(k):
    """True agreement 0.7999 < target: every certified threshold is a failure of the guarantee.
    Counting repeats as independent fails far more often than delta (the audit: 0.112 / 0.266)."""
    if k == 5:
        assert certified_share(repeats(k), clustered=False) > DELTA + SLACK      # the defect, reproduced
    assert certified_share(repeats(k)) <= DELTA + SLACK


def test_stories_with_correlated_tests_keep_the_guarantee():
    assert certified_share(stories(), draws=600) <= DELTA + SLACK


def test_the_clustered_test_still_certifies_good_judges():
    """Power: 60 items x 5 repeats at agreement 0.95 certify in most draws."""
    assert certified_share(repeats(5, agreement=0.95), draws=300) >= 0.4


def test_singleton_clusters_are_the_exact_binomial_test():
    rng = np.random.default_rng(4)
    conf, ok = rng.uniform(0.5, 1, 200), rng.random(200) < 0.9
    assert choose_threshold(conf.tolist(), ok.tolist(), TARGET, DELTA, clusters=list(range(200))) == \
        choose_threshold(conf.tolist(), ok.tolist(), TARGET, DELTA)


def test_hb_p_value_is_valid_for_bounded_losses():
    """The Hoeffding-Bentkus p-value is super-uniform under H0: for means of 20 [0, 1] losses with
    mean exactly the risk, P(p <= 0.1) <= 0.1 (Beta-distributed losses, 20,000 draws)."""
    rng = np.random.default_rng(0)
    risk = 0.2
    losses = rng.beta(0.5, 2.0, (20_000, 20))          # mean 0.2
    p = np.array([hb_p_value(float(m), 20, risk) for m in losses.mean(axis=1)])
    assert (p <= 0.1).mean() <= 0.1
    assert hb_p_value(0.0, 0, risk) == 1.0


def test_cascade_tables_certify_with_story_clusters():
    """The cascade passes its clusters: 5 identical repeats of items at 0.7999 agreement reach a
    certified threshold no more often than delta (and the summary names the held-out point
    estimate for what it is)."""
    rng = np.random.default_rng(11)
    certified = 0
    for d in range(60):
        ok = np.repeat(rng.random(120) < 0.7999, 5)
        conf = np.repeat(rng.uniform(0.5, 1.0, 120), 5)
        truth = rng.random(600) < 0.5
        frame = pl.DataFrame({"judge": "j", "item": [f"i{i:04d}" for i in range(600)],
                              "cluster": [f"c{i // 5:03d}" for i in range(600)], "truth": truth,
                              "pred": np.where(ok, truth, ~truth), "p": np.where(ok == truth, conf, 1 - conf),
                              "tokens": 1, "cost": 0.0})
        out = cascade_tables(frame, CascadeOptions(judges=["j"], target=TARGET, delta=DELTA, seed=d))
        certified += out["cascade"]["threshold"][0] is not None
    assert certified / 60 <= 0.25                     # binomial noise of 60 draws around <= 0.1
    assert "held_out_agreement_reaches_target" in out["cascade_summary"].columns
    assert "guarantee_held" not in out["cascade_summary"].columns


# -- 2. jury ties -----------------------------------------------------------------------------
def test_two_judges_tie_counts_every_item():
    """Two independent 70%-right judges: majority and average tie on about half the items. Ties are
    a fair coin: agreement about 0.70 over all 1,000 items (the audit: 0.873 on 552 items)."""
    rng = np.random.default_rng(2)
    truth = rng.random(1000) < 0.5
    rows = []
    for j in ("a", "b"):
        right = rng.random(1000) < 0.7
        pred = np.where(right, truth, ~truth)
        rows += [{"judge": j, "item": f"i{i:04d}", "cluster": f"i{i:04d}", "truth": bool(truth[i]),
                  "pred": bool(pred[i]), "p": None, "tokens": None, "cost": None} for i in range(1000)]
    out = jury_tables(pl.DataFrame(rows), JuryOptions(calibration_fraction=0.01), resamples=100)
    table = {r["member"]: r for r in out["jury"].iter_rows(named=True)}
    n_test = table["judge: a"]["n"]
    for pooling in ("majority vote", "average"):
        row = table[pooling]
        assert row["n"] == n_test > 900                          # every held-out item
        assert 0.40 * n_test < row["ties"] < 0.60 * n_test
        assert row["agreement"] == pytest.approx(0.70, abs=0.04)


def test_agreement_with_ties_equals_sklearn_with_half_weights():
    from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score

    rng = np.random.default_rng(5)
    for _ in range(50):
        n = int(rng.integers(2, 40))
        truth = (rng.random(n) < rng.uniform(0.2, 0.8)).tolist()
        said = rng.choice([0.0, 0.5, 1.0], n).tolist()
        if len(set(truth)) < 2:
            continue
        got = binary_agreement_with_ties(truth, said)
        # a tie = the item twice, once per label, each weighing half
        t2, p2, w2 = [], [], []
        for t, q in zip(truth, said, strict=True):
            for label, weight in ((True, q), (False, 1 - q)):
                if weight:
                    t2.append(t), p2.append(label), w2.append(weight)
        assert got["accuracy"].value == pytest.approx(np.average(np.equal(t2, p2), weights=w2))
        assert got["balanced_accuracy"].value == pytest.approx(balanced_accuracy_score(t2, p2, sample_weight=w2))
        ref = cohen_kappa_score(t2, p2, sample_weight=w2)
        assert (math.isnan(got["kappa"].value) and math.isnan(ref)) or got["kappa"].value == pytest.approx(ref)
    assert [tie_credit(q) for q in (0.2, 0.5, 0.7, None)] == [0.0, 0.5, 1.0, None]


# -- 3. and 4. permutation self-consistency --------------------------------------------------
def positional_scores(lists: int, items: int, orders: int, repeats: int = 1, seed: int = 0) -> pl.DataFrame:
    """A judge that ranks every list exactly in the order shown (first shown = best), each list
    shown in `orders` seeded shuffles."""
    rng = np.random.default_rng(seed)
    rows = []
    for lst in range(lists):
        for order in range(orders):
            shown = list(range(items)) if order == 0 else rng.permutation(items).tolist()
            for rep in range(repeats):
                for at, item in enumerate(shown):
                    rows.append({"judge": "pos", "group": "g", "list": lst, "order": order, "repeat": rep,
                                 "n_items": items, "item_id": f"{lst}-{item}", "score": float(5 - at * 4 // items),
                                 "position": (items - 1 - at) / (items - 1), "shown_at": at + 1})
    from litjudge.judges.listwise import SCORES
    return pl.DataFrame(rows, schema=SCORES)


def info_for(s: pl.DataFrame) -> pl.DataFrame:
    ids = s["item_id"].unique().to_list()
    return pl.DataFrame({"item_id": ids, "category_rank": [float(int(i.split("-")[1]) % 3) for i in ids]})


@pytest.mark.parametrize("orders", [2, 3, 8])
def test_a_purely_positional_judge_keeps_its_bias_after_aggregation(orders):
    """The aggregate of a judge that ranks by prompt order follows the items' mean shown position:
    "after" must see that (the earlier leave-one-out definition read about 0 here by construction)."""
    from litjudge.judges.permutation import permutation_tables

    s = positional_scores(lists=200, items=8, orders=orders)
    bias = {r["ranking"]: r for r in permutation_tables(s, info_for(s), orders)["psc_position_bias"].iter_rows(named=True)}
    assert bias["before: single order"]["spearman"] == pytest.approx(-1.0)
    assert bias["after: central (Kemeny)"]["spearman"] < -0.8
    assert bias["after: mean score over orders"]["spearman"] < -0.8


def test_a_judge_blind_to_position_shows_no_bias_before_or_after():
    """Rankings drawn at random, whatever the shown order: before and after both about 0."""
    from litjudge.judges.permutation import permutation_tables

    s = positional_scores(lists=200, items=8, orders=3)
    rng = np.random.default_rng(1)
    shuffled = []
    for (_, _), g in s.group_by(["list", "order"], maintain_order=True):
        perm = rng.permutation(g.height)
        shuffled.append(g.with_columns(pl.Series("position", g["position"].to_numpy()[perm]),
                                       pl.Series("score", g["score"].to_numpy()[perm])))
    s = pl.concat(shuffled)
    bias = {r["ranking"]: r for r in permutation_tables(s, info_for(s), 3)["psc_position_bias"].iter_rows(named=True)}
    for key in ("before: single order", "after: central (Kemeny)", "after: mean score over orders"):
        assert abs(bias[key]["spearman"]) < 0.06, (key, bias[key]["spearman"])
        assert bias[key]["ci_low"] < 0 < bias[key]["ci_high"]


def test_psc_intervals_resample_lists_not_repeats():
    """A copy of a repeat adds no information: the CI (lists resampled) does not narrow."""
    from litjudge.judges.permutation import permutation_tables

    one = positional_scores(lists=12, items=6, orders=3, repeats=1, seed=3)
    two = pl.concat([one, one.with_columns(pl.lit(1, dtype=pl.Int64).alias("repeat"))])
    a = permutation_tables(one, info_for(one), 3)["psc_agreement"].sort("ranking")
    b = permutation_tables(two, info_for(two), 3)["psc_agreement"].sort("ranking")
    assert a["ci_low"].to_list() == pytest.approx(b["ci_low"].to_list())
    assert a["ci_high"].to_list() == pytest.approx(b["ci_high"].to_list())
    assert (b["lists"] == 12).all() and (b["units"] == 24).all()


# -- 5. the pairwise mean of both orders ------------------------------------------------------
def test_mean_of_both_orders_lies_in_its_own_interval():
    """Under `drop`, 100 answers in one order (90% right) and 10 in the other (10% right): the point
    is the mean of the two per-order means (0.5) and the CI is of that same statistic, recomputed
    here by brute force with the same draws (the audit: value 0.5, CI [0.862, 0.952])."""
    pairs = [f"p{i:03d}" for i in range(100)]
    clusters = pairs + pairs[:10]
    strata = ["ab"] * 100 + ["ba"] * 10
    values = [1.0] * 90 + [0.0] * 10 + [1.0] + [0.0] * 9
    m = mean_of_means_with_ci(clusters, strata, values, resamples=400, seed=1)
    assert m.value == pytest.approx(0.5) and m.ci_low < 0.5 < m.ci_high and m.n == 110
    # brute force: the same cluster draws, the statistic recomputed per resample
    uniq = sorted(set(clusters))
    rng = np.random.default_rng(1)
    idx = rng.integers(0, len(uniq), (400, len(uniq)))
    stats = []
    for draw in idx:
        counts = {c: 0 for c in uniq}
        for i in draw:
            counts[uniq[i]] += 1
        means = []
        for s in ("ab", "ba"):
            num = sum(counts[c] * v for c, st, v in zip(clusters, strata, values, strict=True) if st == s)
            den = sum(counts[c] for c, st in zip(clusters, strata, strict=True) if st == s)
            if den:
                means.append(num / den)
        stats.append(sum(means) / len(means))
    a = expanded_alpha(len(uniq))
    assert (m.ci_low, m.ci_high) == pytest.approx(tuple(np.quantile(stats, [a / 2, 1 - a / 2])))


# -- 6. degenerate intervals ------------------------------------------------------------------
def test_no_interval_on_degenerate_input():
    one = mean_with_ci(["s1"], [0.3])
    assert one.value == 0.3 and one.ci_low is None and one.ci_high is None and one.note == too_few(1)
    perfect = mean_with_ci([f"s{i}" for i in range(20)], [1.0] * 20)
    assert perfect.value == 1.0 and perfect.ci_low is None and perfect.note == NO_SPREAD
    assert all(math.isnan(x) for x in mean_bootstrap(["a", "a"], [0.1, 0.9]))
    from litjudge.judges.metrics.bootstrap import difference_of_means_ci
    diff, lo, hi = difference_of_means_ci(list(range(5)), [2.0, 2.0, 2.0, 1.0, 1.0], [True] * 3 + [False] * 2)
    assert diff == 1.0 and math.isnan(lo) and math.isnan(hi)


def test_length_control_on_one_pair_and_under_separation():
    from litjudge.judges.length_control import SEPARATED, length_controlled

    def frame(n_pairs, right):
        rows = []
        for i in range(n_pairs):
            for order in ("ab", "ba"):
                rows.append({"pair_id": f"p{i}", "order": order, "human": "a", "pick": "a" if right(i) else "b",
                             "words_a": 100 + 10 * i, "words_b": 100})
        return pl.DataFrame(rows)

    single = length_controlled(frame(1, lambda i: i == 0), style=False)
    assert single["ci_low"] is None and single["ci_note"] == too_few(1)
    always = length_controlled(frame(12, lambda i: True), style=False)          # 100% accuracy
    assert always["separated"] and always["ci_low"] is None and always["ci_note"] == SEPARATED
    assert always["lc_accuracy"] is None and always["coef_length"] is None and always["accuracy"] == 1
    by_length = length_controlled(frame(12, lambda i: i >= 6), style=False)    # right exactly when a is longer
    assert by_length["separated"] and by_length["ci_note"] == SEPARATED and by_length["lc_accuracy"] is None
    # a hostile pass: 19 of 20 right, the wrong one at the shortest preferred text, printed 0.99999999
    one_wrong = length_controlled(frame(20, lambda i: i > 0), style=False)
    assert one_wrong["separated"] and one_wrong["lc_accuracy"] is None and one_wrong["accuracy"] == 0.95
    rng = np.random.default_rng(0)
    mixed = length_controlled(frame(40, lambda i: rng.random() < 0.7), style=False)
    assert not mixed["separated"] and mixed["ci_low"] < mixed["lc_accuracy"] < mixed["ci_high"]


def test_length_control_of_a_judge_that_always_picks_one_position_prints_no_zero_width_interval():
    """A hostile pass: a judge answering "A" every time is right in exactly one order of each pair at
    the pair's one length ratio, so each pair's score contribution is 0 and the clustered standard
    error is exactly 0: the table printed [0.5, 0.5] with no note (as the sweep's interval did)."""
    from litjudge.judges.length_control import CANCELLED, control_features, lc_accuracy_of, lc_rule, length_controlled
    from litjudge.judges.metrics.estimates import Units

    human = ["a", "b"] * 6
    rows = pl.DataFrame([{"pair_id": f"p{i}", "order": order, "human": human[i],
                          "pick": human[i] if order == "ab" else ("b" if human[i] == "a" else "a"),
                          "words_a": 100 + 17 * i, "words_b": 90 + 5 * i} for i in range(12) for order in ("ab", "ba")])
    got = length_controlled(rows, style=False)
    assert got["lc_accuracy"] == pytest.approx(0.5) and not got["separated"]
    assert got["ci_low"] is None and got["ci_high"] is None and got["ci_note"] == CANCELLED
    x = control_features(rows, style=False)
    units = Units.of(rows["pair_id"].to_list(), {"x0": np.asarray([r[0] for r in x]),
                                                 "y": (rows["pick"] == rows["human"]).to_numpy().astype(float)},
                     lc_accuracy_of, rule=lc_rule)                             # a sweep's, as pairwise.py builds it
    low, high, note = units.interval_with_note(0, 0)
    assert math.isnan(low) and math.isnan(high) and note == CANCELLED


def test_separation_check_against_the_fitted_coefficients():
    """Where the LP finds separation, an unpenalised fit runs off (|coef| grows with iterations);
    where it finds none, the fit converges to a finite optimum."""
    rng = np.random.default_rng(1)
    for _ in range(40):
        n = int(rng.integers(4, 30))
        x = rng.normal(size=(n, 1))
        y = (rng.random(n) < 0.5).astype(float)
        if rng.random() < 0.3:
            y = (x[:, 0] > 0).astype(float)
        short = fit_logistic(x, y, ridge=0.0, iterations=20, tol=0)
        long = fit_logistic(x, y, ridge=0.0, iterations=60, tol=0)
        grows = np.abs(long).max() > np.abs(short).max() + 1.0 or np.abs(long).max() > 30
        assert separated(x, y) == grows


# -- 7. the small ones ------------------------------------------------------------------------
def test_fit_logistic_with_no_rows_is_nan():
    assert np.isnan(fit_logistic([], [])).all()
    assert len(fit_logistic(np.zeros((0, 3)), [])) == 4


def test_jury_of_judges_without_a_shared_item_is_refused():
    rows = [{"judge": "a", "item": "i1", "cluster": "s1", "truth": True, "pred": True, "p": None, "tokens": None,
             "cost": None},
            {"judge": "b", "item": "i2", "cluster": "s2", "truth": True, "pred": False, "p": None, "tokens": None,
             "cost": None}]
    with pytest.raises(ValueError, match="share 0 human-labelled item"):
        jury_tables(pl.DataFrame(rows), JuryOptions())
    with pytest.raises(ValueError, match="share 0 human-labelled item"):
        cascade_tables(pl.DataFrame(rows), CascadeOptions(judges=["a", "b"]))


def test_ece_and_label_shares_resample_stories():
    """Copying every verdict of a story twice more (same story) adds no information: the
    story-resampled intervals stay as they were; a verdict-resampled one would narrow."""
    from litjudge.judges.tables import label_distribution

    rng = np.random.default_rng(8)
    p = rng.random(60)
    y = (rng.random(60) < p).astype(float)
    story = [f"s{i // 6}" for i in range(60)]
    base = ece_bootstrap(p.tolist(), y.tolist(), clusters=story, resamples=300)
    tripled = ece_bootstrap(np.tile(p, 3).tolist(), np.tile(y, 3).tolist(), clusters=story * 3, resamples=300)
    assert base == pytest.approx(tripled)
    assert expected_calibration_error(p, y) == pytest.approx(expected_calibration_error(np.tile(p, 3), np.tile(y, 3)))
    labels = pl.DataFrame({"judge": "j", "label": np.where(y > 0, "Yes", "No"), "story_id": story})
    a = label_distribution(labels, "story_id").sort("label")
    b = label_distribution(pl.concat([labels] * 3), "story_id").sort("label")
    # the same effective sample size; only Korn-Graubard's t(n - 1) reads the number of values
    assert a["ci_low"].to_list() == pytest.approx(b["ci_low"].to_list(), abs=0.005)
    assert a["ci_high"].to_list() == pytest.approx(b["ci_high"].to_list(), abs=0.005)


def test_corrected_pass_rate_resamples_stories_by_brute_force():
    rng = np.random.default_rng(3)
    stories_l = [f"s{i // 7}" for i in range(70)]
    truth = (rng.random(70) < 0.4).tolist()
    lab = [t if rng.random() < 0.8 else not t for t in truth]
    scored = lab + (rng.random(30) < 0.5).tolist()
    stories_s = stories_l + [f"s{i % 10}" for i in range(30)]
    got = corrected_pass_rate(truth, lab, scored, resamples=300, seed=2, clusters_labelled=stories_l,
                              clusters_scored=stories_s)
    names = sorted(set(stories_l) | set(stories_s))
    draws = np.random.default_rng(2).integers(0, len(names), (300, len(names)))
    stats = []
    for d in draws:
        picked = [names[i] for i in d]
        t = [x for s in picked for x, c in zip(truth, stories_l, strict=True) if c == s]
        pl_ = [x for s in picked for x, c in zip(lab, stories_l, strict=True) if c == s]
        sc = [x for s in picked for x, c in zip(scored, stories_s, strict=True) if c == s]
        v = rogan_gladen(float(np.mean(sc)), *sensitivity_specificity(t, pl_))
        stats.append(v)
    stats = np.asarray(stats)
    stats = stats[~np.isnan(stats)]
    a = expanded_alpha(len(names))
    assert (got["ci_low"], got["ci_high"]) == pytest.approx(tuple(np.quantile(stats, [a / 2, 1 - a / 2])))


def test_jury_logit_clips_only_one_hot_judges():
    assert logit(0.999) == pytest.approx(math.log(999))                     # a real probability keeps its log-odds
    assert logit(1.0, one_hot=True) == pytest.approx(math.log((1 - EPS) / EPS))
    assert stacked([0.0, 1.0], [[0.999]]) != stacked([0.0, 1.0], [[0.999]], one_hot=[[True]])


# -- 8. metric directions ---------------------------------------------------------------------
def test_every_rankable_metric_has_a_direction_and_ece_ranks_ascending():
    from litjudge.engine.app.sweep_rank import Ranked, ranking
    from litjudge.judges import PROTOCOLS
    from litjudge.judges.contract import Declaration, MetricTable

    for name in PROTOCOLS.names():
        declared = PROTOCOLS.get(name).declared
        assert declared.rank_by in declared.rank_metrics
        for metric in declared.rank_metrics:
            table, _, column = metric.partition(".")
            assert declared.direction(table, column) is not None, metric
    assert PROTOCOLS.get("ttcw").declared.direction("calibration_summary", "ece") is False
    assert PROTOCOLS.get("ttcw").declared.direction("overall", "expert_pass_rate") is None
    rows = [Ranked({"cell": c}, v, None, None) for c, v in (("worst", 0.30), ("best", 0.02), ("mid", 0.10))]
    assert ranking(rows, up=False)["cell"].to_list() == ["best", "mid", "worst"]
    assert ranking(rows, up=True)["cell"].to_list() == ["worst", "mid", "best"]
    # a rankable metric without a direction is refused where it is declared, naming it
    with pytest.raises(TypeError, match="ranks by \\['kappa'\\] with no direction"):
        Declaration("x", "1", "items", Ranked, "items", tables={"t": MetricTable(rank=("kappa",))})
