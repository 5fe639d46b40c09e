"""The rubric's agreement tables through the path that publishes them (`Rubric.tables` on a verdict
frame): each statistic equal to its reference implementation (scikit-learn, scipy), and each
interval's coverage of a known truth at least 0.93 over 2,000 simulated data sets (4,000 for the
pairwise mean of both orders) at the smallest size it prints one for (10 texts; a binary
question's 10 texts of each human answer). The frames are synthetic verdicts, built in numpy:
2,000 data sets are 2,000 judges of one frame, so one `tables()` call computes every interval."""
from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy.stats import spearmanr
from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score

from litjudge.engine.core.config import load_config
from litjudge.engine.data.cards import load_card
from litjudge.judges import PROTOCOLS
from litjudge.judges.base import Context
from litjudge.judges.metrics.bootstrap import MIN_CLUSTERS
from litjudge.judges.rubric_stats import quadratic_kappa, tables_by_cluster

COVERAGE = 0.93
# at their minimum, intervals cover 0.93-0.94 (the project's rule: tests/test_conformance.py), so
# their estimates take 2,000 draws (standard error 0.005)
MEAN_DRAWS = 2000
# the mean of both orders' accuracies at 10 pairs covers 0.931-0.933 (4,000 draws, two seeds; 0.947
# at 12 pairs): just above the bound, so its estimate needs 4,000 draws (standard error 0.004)
PAIR_DRAWS = 4000
BINARY = {"id": "b", "text": "Is it good?", "human": "h"}
POINTS = {"id": "p", "text": "How good?", "scale": "points", "points": ["1", "2", "3", "4", "5"], "human": "h"}
PAIRWISE = {"id": "w", "text": "Which is better?", "scale": "pairwise", "human": "h"}


def rubric(*questions: dict, resamples: int = 500):
    config = load_config("rubric-test", {"name": "t", "protocol": "rubric", "dataset": "ttcw-demo", "judge": "x",
                                         "options": {"questions": list(questions), "resamples": resamples}})
    protocol = PROTOCOLS.get("rubric")()
    return protocol, Context(config, protocol.options(config), load_card("ttcw-demo"))


def verdicts(judge: np.ndarray, text: np.ndarray, q: dict, label: list[str], human: list[str | None],
             order: list[str] | None = None) -> pl.DataFrame:
    """A verdict frame as the store gives it (the fields the rubric's asks carry)."""
    n = len(judge)
    pair = q.get("scale") == "pairwise"
    ids = [f"t{x}" for x in text]
    return pl.DataFrame({
        "judge": [f"d{j}" for j in judge], "item_id": [f"{i}/{q['id']}" + (f"/{o}" if pair else "")
                                                      for i, o in zip(ids, order or [""] * n)],
        "question": [q["id"]] * n, "scale": [q.get("scale", "binary")] * n,
        "text_id": [None] * n if pair else ids, "pair_id": ids if pair else [None] * n, "order": order or [None] * n,
        "group": ["g"] * n, "human": human, "repeat": [0] * n, "status": ["ok"] * n, "label": label,
        "value": label, "distribution": [None] * n},
        schema_overrides={"text_id": pl.Utf8, "pair_id": pl.Utf8, "order": pl.Utf8, "human": pl.Utf8,
                          "distribution": pl.Null})


# -- equal to the reference implementations -------------------------------------------------------
def test_binary_and_points_agreement_equal_scikit_learn_and_scipy():
    rng = np.random.default_rng(0)
    n = 40
    h5 = rng.integers(1, 6, n)
    j5 = np.clip(h5 + rng.integers(-2, 3, n), 1, 5)
    hb, jb = h5 >= 3, j5 >= 4
    protocol, ctx = rubric(BINARY, POINTS)
    frame = pl.concat([
        verdicts(np.zeros(n, int), np.arange(n), BINARY, ["Yes" if x else "No" for x in jb], ["Yes" if x else "No" for x in hb]),
        verdicts(np.zeros(n, int), np.arange(n), POINTS, [str(x) for x in j5], [str(x) for x in h5])], how="diagonal")
    t = protocol.tables(frame, ctx)
    b = t["binary_agreement"].row(0, named=True)
    assert b["kappa"] == pytest.approx(cohen_kappa_score(hb, jb))
    assert b["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(hb, jb))
    p = t["points_agreement"].row(0, named=True)
    assert p["qwk"] == pytest.approx(cohen_kappa_score(h5, j5, weights="quadratic"))
    assert p["spearman"] == pytest.approx(spearmanr(h5, j5).statistic)
    assert p["exact"] == pytest.approx(np.mean(h5 == j5))
    assert p["within_one"] == pytest.approx(np.mean(abs(h5 - j5) <= 1))
    assert p["mean_difference"] == pytest.approx(np.mean(j5 - h5))
    assert p["qwk_low"] < p["qwk"] < p["qwk_high"] and p["clusters"] == n
    head = t["agreement"].sort("question")
    assert head["metric"].to_list() == ["kappa", "qwk"] and head["agreement"].to_list() == [b["kappa"], p["qwk"]]


def test_pairwise_accuracy_per_order_and_of_both_orders():
    rng = np.random.default_rng(1)
    n = 30
    human = rng.choice(["a", "b"], n)
    right_ab, right_ba = rng.random(n) < 0.8, rng.random(n) < 0.6
    pick_ab = np.where(right_ab, human, np.where(human == "a", "b", "a"))
    pick_ba = np.where(right_ba, human, np.where(human == "a", "b", "a"))
    # a label names a position: in order ab, "A" is text a; in order ba, "A" is text b
    label_ab = np.where(pick_ab == "a", "A", "B")
    label_ba = np.where(pick_ba == "a", "B", "A")
    protocol, ctx = rubric(PAIRWISE)
    frame = verdicts(np.zeros(2 * n, int), np.r_[np.arange(n), np.arange(n)], PAIRWISE,
                     [*label_ab, *label_ba], [*human, *human], ["ab"] * n + ["ba"] * n)
    t = protocol.tables(frame, ctx)
    acc = {r["order"]: r for r in t["pairwise_agreement"].iter_rows(named=True)}
    assert acc["ab"]["accuracy"] == pytest.approx(right_ab.mean()) and acc["ba"]["accuracy"] == pytest.approx(right_ba.mean())
    assert acc["mean of both"]["accuracy"] == pytest.approx((right_ab.mean() + right_ba.mean()) / 2)
    flips = {r["metric"]: r["value"] for r in t["consistency"].iter_rows(named=True)}
    assert flips["swap_flip_rate"] == pytest.approx(np.mean(pick_ab != pick_ba))
    assert flips["first_position_win_rate"] == pytest.approx(np.mean(np.r_[pick_ab == "a", pick_ba == "b"]))


# -- coverage of a known truth -----------------------------------------------------------------------
def _covered(table: pl.DataFrame, metric: str, truth: float) -> float:
    lo, hi = table[f"{metric}_low"].to_numpy(), table[f"{metric}_high"].to_numpy()
    return float(np.mean(~np.isnan(lo.astype(float)) & (lo <= truth) & (truth <= hi)))


def _binary_judge(rng, y: np.ndarray, sensitivity: float = 0.75, specificity: float = 0.8) -> np.ndarray:
    return np.where(y, rng.random(y.shape) < sensitivity, rng.random(y.shape) < 1 - specificity)


@pytest.mark.parametrize("positive, negative, judge", [(10, 10, (0.75, 0.8)), (10, 30, (0.75, 0.8)),
                                                       (10, 10, (0.9, 0.7)), (10, 90, (0.9, 0.97))])
def test_binary_agreement_intervals_cover_with_ten_texts_of_each_answer(positive, negative, judge):
    """Kappa's interval expanded for every text covered 0.93 with a judge right 90% / 70% of the time
    on the answers (a hostile pass, 3,000 data sets): it is expanded for the rarer human answer's texts.
    Balanced accuracy's covered 0.68 with the rarer answer in 10 texts of 100 and a judge right in
    90% / 97% of them (a hostile pass): where all 10 were right its resamples never varied; a lumpy
    recall is widened to its Clopper-Pearson bounds (`proportion.lumpy_recall_bounds`)."""
    big = np.random.default_rng(9).random(2_000_000) < positive / (positive + negative)
    pred = _binary_judge(np.random.default_rng(8), big, *judge)
    truth = {"kappa": cohen_kappa_score(big, pred), "balanced_accuracy": balanced_accuracy_score(big, pred)}
    rng = np.random.default_rng(1)
    n = positive + negative
    y = np.tile(np.r_[np.ones(positive, bool), np.zeros(negative, bool)], MEAN_DRAWS)
    p = _binary_judge(rng, y, *judge)
    protocol, ctx = rubric(BINARY)
    frame = verdicts(np.repeat(np.arange(MEAN_DRAWS), n), np.tile(np.arange(n), MEAN_DRAWS), BINARY,
                     np.where(p, "Yes", "No").tolist(), np.where(y, "Yes", "No").tolist())
    table = protocol.tables(frame, ctx)["binary_agreement"]
    assert table.height == MEAN_DRAWS
    got = {metric: _covered(table, metric, value) for metric, value in truth.items()}
    print(got)
    assert not {m: c for m, c in got.items() if c < COVERAGE}, got


def test_no_binary_interval_with_fewer_than_ten_texts_of_an_answer():
    protocol, ctx = rubric(BINARY)
    y = np.r_[np.ones(MIN_CLUSTERS - 1, bool), np.zeros(30, bool)]
    frame = verdicts(np.zeros(len(y), int), np.arange(len(y)), BINARY, np.where(~y, "Yes", "No").tolist(),
                     np.where(y, "Yes", "No").tolist())
    row = protocol.tables(frame, ctx)["binary_agreement"].row(0, named=True)
    assert row["kappa"] is not None and row["kappa_low"] is None and row["balanced_accuracy_high"] is None
    assert row["ci_note"] == ("too few texts of each human answer (No: 30, Yes: 9; an interval needs 10 of each): "
                              "no interval")


def _points(rng, n: int) -> tuple[np.ndarray, np.ndarray]:
    h = rng.integers(1, 6, n)
    return h, np.clip(np.round(h + rng.normal(0.3, 1.0, n)), 1, 5).astype(int)


def test_points_agreement_intervals_cover_at_ten_texts():
    big_h, big_j = _points(np.random.default_rng(99), 2_000_000)
    truth = {"spearman": spearmanr(big_h, big_j).statistic,
             "qwk": float(quadratic_kappa(tables_by_cluster([0] * len(big_h), big_h - 1, big_j - 1, 5)[0])),
             "exact": np.mean(big_h == big_j), "within_one": np.mean(abs(big_h - big_j) <= 1),
             "mean_difference": np.mean(big_j - big_h)}
    n = MIN_CLUSTERS
    h, j = _points(np.random.default_rng(3), n * MEAN_DRAWS)
    protocol, ctx = rubric(POINTS)
    frame = verdicts(np.repeat(np.arange(MEAN_DRAWS), n), np.tile(np.arange(n), MEAN_DRAWS), POINTS, [str(x) for x in j],
                     [str(x) for x in h])
    table = protocol.tables(frame, ctx)["points_agreement"]
    assert table.height == MEAN_DRAWS
    for metric, value in truth.items():
        assert _covered(table, metric, value) >= COVERAGE, (metric, _covered(table, metric, value))


def test_pairwise_accuracy_interval_covers_at_ten_pairs():
    p = np.random.default_rng(9).beta(3, 2, 2_000_000)
    truth = (np.minimum(1, p + 0.15).mean() + np.maximum(0, p - 0.15).mean()) / 2
    n = MIN_CLUSTERS
    rng = np.random.default_rng(4)
    skill = rng.beta(3, 2, n * PAIR_DRAWS)
    right = np.r_[rng.random(n * PAIR_DRAWS) < np.minimum(1, skill + 0.15), rng.random(n * PAIR_DRAWS) < np.maximum(0, skill - 0.15)]
    human = np.tile(np.where(rng.random(n * PAIR_DRAWS) < 0.5, "a", "b"), 2)
    order = np.repeat(["ab", "ba"], n * PAIR_DRAWS)
    pick = np.where(right, human, np.where(human == "a", "b", "a"))
    label = np.where((pick == "a") == (order == "ab"), "A", "B")
    protocol, ctx = rubric(PAIRWISE)
    draw = np.tile(np.repeat(np.arange(PAIR_DRAWS), n), 2)
    frame = verdicts(draw, np.tile(np.arange(n * PAIR_DRAWS), 2), PAIRWISE, label.tolist(), human.tolist(), order.tolist())
    table = protocol.tables(frame, ctx)["pairwise_agreement"].filter(pl.col("order") == "mean of both")
    assert table.height == PAIR_DRAWS
    lo, hi = table["ci_low"].to_numpy().astype(float), table["ci_high"].to_numpy().astype(float)
    assert np.mean(~np.isnan(lo) & (lo <= truth) & (truth <= hi)) >= COVERAGE


def test_without_human_labels_the_score_distribution_and_the_consistency_of_repeats():
    protocol, ctx = rubric({**POINTS, "human": ""})
    text = np.tile(np.arange(12), 2)
    answers = [str(1 + t % 5) for t in range(12)] + [str(1 + t % 5) if t < 9 else "3" for t in range(12)]
    frame = verdicts(np.zeros(24, int), text, POINTS, answers, [None] * 24).with_columns(
        pl.Series("repeat", [0] * 12 + [1] * 12))
    t = protocol.tables(frame, ctx)
    same = t["consistency"].filter(pl.col("metric") == "repeat_agreement").row(0, named=True)
    assert same["value"] == pytest.approx(9 / 12) and same["n"] == 12        # texts 9, 10, 11 changed their answer
    shares = dict(zip(t["label_distribution"]["label"], t["label_distribution"]["share"]))
    assert shares["3"] == pytest.approx(sum(a == "3" for a in answers) / 24) and sum(shares.values()) == pytest.approx(1)
    assert t["scores"]["mean_score"][0] == pytest.approx(np.mean([int(a) for a in answers]))
    assert all(t[name].height == 0 for name in ("agreement", "points_agreement"))


# -- rates and means without human labels, lopsided and correlated within a text -------------------

RATE_DRAWS = 1000       # coverage >= 0.93 over 1,000 draws: a true 0.95 falls below it with p < 0.002


def _correlated(rng, p: float, rho: float, texts: int, repeats: int) -> np.ndarray:
    """`repeats` answers per text, P(yes) = p, within-text correlation `rho` (a beta-binomial)."""
    a, b = p * (1 - rho) / rho, (1 - p) * (1 - rho) / rho
    return rng.random((texts, repeats)) < rng.beta(a, b, (texts, 1))


@pytest.mark.parametrize("p", [0.15, 0.95])
@pytest.mark.parametrize("rho", [0.3, 0.6])
def test_yes_rates_and_label_shares_cover_lopsided_correlated_answers(p, rho):
    """A binary question asked 3 times of each of 10 texts (the smallest count printed): the
    `scores` table's mean score (the Yes rate) and `label_distribution`'s shares cover p."""
    texts, repeats = MIN_CLUSTERS, 3
    rng = np.random.default_rng(int(p * 100) + int(rho * 10))
    yes = np.concatenate([_correlated(rng, p, rho, texts, repeats).ravel() for _ in range(RATE_DRAWS)])
    n = texts * repeats
    question = {**BINARY, "human": ""}
    protocol, ctx = rubric(question)
    frame = verdicts(np.repeat(np.arange(RATE_DRAWS), n), np.tile(np.repeat(np.arange(texts), repeats), RATE_DRAWS),
                     question, np.where(yes, "Yes", "No").tolist(), [None] * len(yes)).with_columns(
        pl.Series("repeat", np.tile(np.arange(repeats), texts * RATE_DRAWS)))
    t = protocol.tables(frame, ctx)
    assert t["scores"].height == RATE_DRAWS
    lo, hi = t["scores"]["ci_low"].to_numpy().astype(float), t["scores"]["ci_high"].to_numpy().astype(float)
    assert np.mean((lo <= p) & (p <= hi)) >= COVERAGE, np.mean((lo <= p) & (p <= hi))
    shares = t["label_distribution"].filter(pl.col("label") == "Yes")
    lo, hi = shares["ci_low"].to_numpy().astype(float), shares["ci_high"].to_numpy().astype(float)
    assert shares.height == RATE_DRAWS and np.mean((lo <= p) & (p <= hi)) >= COVERAGE


@pytest.mark.parametrize("p", [0.15, 0.95])
def test_consistency_rates_cover_a_lopsided_first_position_preference(p):
    """A pairwise question over 10 pairs, both orders, 2 repeats: `consistency`'s
    first_position_win_rate covers P(the text shown first wins) = p (within-pair correlation 0.5)."""
    pairs, repeats = MIN_CLUSTERS, 2
    rng = np.random.default_rng(int(p * 100))
    first = np.concatenate([_correlated(rng, p, 0.5, pairs, 2 * repeats).ravel() for _ in range(RATE_DRAWS)])
    per = pairs * 2 * repeats
    order = np.tile(np.repeat(["ab", "ba"], repeats), pairs * RATE_DRAWS)
    label = np.where(first, "A", "B")
    protocol, ctx = rubric({**PAIRWISE, "human": ""})
    frame = verdicts(np.repeat(np.arange(RATE_DRAWS), per), np.tile(np.repeat(np.arange(pairs), 2 * repeats), RATE_DRAWS),
                     PAIRWISE, label.tolist(), [None] * len(label), order.tolist()).with_columns(
        pl.Series("repeat", np.tile(np.tile(np.arange(repeats), 2), pairs * RATE_DRAWS)))
    c = protocol.tables(frame, ctx)["consistency"].filter(pl.col("metric") == "first_position_win_rate")
    lo, hi = c["ci_low"].to_numpy().astype(float), c["ci_high"].to_numpy().astype(float)
    assert c.height == RATE_DRAWS and np.mean((lo <= p) & (p <= hi)) >= COVERAGE, np.mean((lo <= p) & (p <= hi))


def test_points_mean_scores_cover_at_ten_texts():
    """A 5-point question asked twice of each of 10 texts: the `scores` mean covers the true mean."""
    texts, repeats = MIN_CLUSTERS, 2
    rng = np.random.default_rng(5)
    level = rng.integers(1, 6, (RATE_DRAWS * texts, 1))
    said = np.clip(level + rng.integers(-1, 2, (RATE_DRAWS * texts, repeats)), 1, 5)
    truth = np.mean(np.clip(np.arange(1, 6)[:, None] + np.arange(-1, 2)[None, :], 1, 5))
    question = {**POINTS, "human": ""}
    protocol, ctx = rubric(question)
    frame = verdicts(np.repeat(np.arange(RATE_DRAWS), texts * repeats),
                     np.tile(np.repeat(np.arange(texts), repeats), RATE_DRAWS), question,
                     [str(x) for x in said.ravel()], [None] * said.size).with_columns(
        pl.Series("repeat", np.tile(np.arange(repeats), texts * RATE_DRAWS)))
    s = protocol.tables(frame, ctx)["scores"]
    lo, hi = s["ci_low"].to_numpy().astype(float), s["ci_high"].to_numpy().astype(float)
    assert s.height == RATE_DRAWS and np.mean((lo <= truth) & (truth <= hi)) >= COVERAGE


def test_a_sweep_ranks_each_question_by_the_interval_its_table_prints():
    """Every rankable rubric metric (the headline and each scale's): the sweep's interval is the
    table's own, on 12 texts (pairs) of human-labelled answers."""
    from litjudge.judges.base import RankBy

    rng = np.random.default_rng(12)
    n = 12
    h_bin = np.r_[np.ones(n, bool), np.zeros(n, bool)]
    j_bin = np.where(h_bin, rng.random(2 * n) < 0.8, rng.random(2 * n) < 0.3)
    h_pts, j_pts = _points(rng, n)
    human = np.where(rng.random(n) < 0.5, "a", "b")
    right = rng.random(2 * n) < 0.7
    order = np.repeat(["ab", "ba"], n)
    pick = np.where(right, np.tile(human, 2), np.where(np.tile(human, 2) == "a", "b", "a"))
    frame = pl.concat([
        verdicts(np.zeros(2 * n, int), np.arange(2 * n), BINARY, np.where(j_bin, "Yes", "No").tolist(),
                 np.where(h_bin, "Yes", "No").tolist()),
        verdicts(np.zeros(n, int), np.arange(n), POINTS, [str(x) for x in j_pts], [str(x) for x in h_pts]),
        verdicts(np.zeros(2 * n, int), np.tile(np.arange(n), 2), PAIRWISE,
                 np.where((pick == "a") == (order == "ab"), "A", "B").tolist(), np.tile(human, 2).tolist(),
                 order.tolist())], how="diagonal_relaxed")
    protocol, ctx = rubric(BINARY, POINTS, PAIRWISE)
    tables = protocol.tables(frame, ctx)
    headline = {"b": "binary_agreement", "p": "points_agreement", "w": "pairwise_agreement"}
    for name in protocol.declared.rank_metrics:
        table, metric = name.split(".")
        for q in ("b", "p", "w"):
            if table not in ("agreement", headline[q]):
                continue
            rows = tables[table].filter(pl.col("question") == q)
            if table == "pairwise_agreement":
                rows = rows.filter(pl.col("order") == "mean of both")
            row = rows.row(0, named=True)
            low, high = (row["agreement_low"], row["agreement_high"]) if table == "agreement" else \
                (row.get(f"{metric}_low", row.get("ci_low")), row.get(f"{metric}_high", row.get("ci_high")))
            group = f"question={q}" + (",order=mean of both" if table == "pairwise_agreement" else "")
            got = protocol.rank_units(tables, "d0", RankBy(name, group), ctx.options).interval()
            assert low is not None and got == pytest.approx((low, high), abs=1e-9), (name, q, got, (low, high))
