"""A rubric's tables, from its verdict frame (judges/rubric.py asks; this aggregates).

Per verdict (`per_verdict`): the answer in the question's terms (a binary label, a point, or the
text a pairwise verdict picked: a, b or tie, whichever order it was shown in), its score (1 for
the positive label, the point, 1 for text a), P(answer) and the expected score in distribution
mode (P(positive), sum of p(k) k, P(text a)), and the humans' answer. Clusters: the text judged
(the pair, for a pairwise question): its repeats and orders move together.

Without human labels: each question's score distribution (`scores`, `label_distribution`) and the
judge's consistency (`consistency`: the same answer on every repeat; a pair's two orders giving
different answers; the text shown first winning). With a human column: agreement per scale
(rubric_stats.py for binary and points, from contingency tables; pairwise accuracy per order and
the mean of both, as the pairwise protocol's), and one headline per question (`agreement`:
kappa, quadratic-weighted kappa, or the mean accuracy of both orders) a sweep ranks by.
Missing answers (unparsed) are left out of every rate and counted in `scores.unparsed`.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl

from litjudge.engine.core.errors import did_you_mean
from litjudge.engine.core.verdicts import probability

from .metrics.bootstrap import MIN_CLUSTERS, mean_with_ci
from .metrics.estimates import Units
from .metrics.proportion import rate_with_ci
from .rubric_stats import BINARY, POINTS, agreement_row, few_per_class, tables_by_cluster
from .tables import label_distribution

AGREEMENT = {"binary": ("kappa", "balanced_accuracy"), "points": ("spearman", "qwk", "exact", "within_one"),
             "pairwise": ("accuracy",)}
RANKABLE = AGREEMENT
HEADLINE = {"binary": "kappa", "points": "qwk", "pairwise": "accuracy"}
BOTH = "mean of both"
META = ("question", "scale", "text_id", "pair_id", "order", "group", "human")
INTERVAL = {"n": pl.Int64, "ci_low": pl.Float64, "ci_high": pl.Float64, "ci_note": pl.Utf8}


def _with_ci(cols: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for m in cols for k, v in ((m, pl.Float64), (f"{m}_low", pl.Float64), (f"{m}_high", pl.Float64))}


SCHEMAS = {
    "scores": {"judge": pl.Utf8, "question": pl.Utf8, "scale": pl.Utf8, "verdicts": pl.Int64, "unparsed": pl.Int64,
               "mean_score": pl.Float64, **INTERVAL, "mean_expected": pl.Float64},
    "consistency": {"judge": pl.Utf8, "question": pl.Utf8, "metric": pl.Utf8, "value": pl.Float64, **INTERVAL},
    "agreement": {"judge": pl.Utf8, "question": pl.Utf8, "scale": pl.Utf8, "metric": pl.Utf8, "agreement": pl.Float64,
                  "agreement_low": pl.Float64, "agreement_high": pl.Float64, "n": pl.Int64, "ci_note": pl.Utf8},
    "binary_agreement": {"judge": pl.Utf8, "question": pl.Utf8, "n": pl.Int64, "clusters": pl.Int64,
                         **_with_ci(AGREEMENT["binary"]), "ci_note": pl.Utf8, "judge_positive_rate": pl.Float64,
                         "human_positive_rate": pl.Float64},
    "points_agreement": {"judge": pl.Utf8, "question": pl.Utf8, "points": pl.Int64, "n": pl.Int64,
                         "clusters": pl.Int64, **_with_ci((*AGREEMENT["points"], "mean_difference")),
                         "ci_note": pl.Utf8},
    "pairwise_agreement": {"judge": pl.Utf8, "question": pl.Utf8, "order": pl.Utf8, "accuracy": pl.Float64, **INTERVAL},
}


def frame(name: str, rows: list[dict]) -> pl.DataFrame:
    """A table in its fixed schema (empty, but typed, when there are no rows)."""
    schema = SCHEMAS[name]
    return pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=schema, orient="row")


# -- per verdict ----------------------------------------------------------------------------------
def decisions(table: pl.DataFrame, questions: list) -> pl.DataFrame:
    """One row per verdict with its answer, score, P(answer), expected score and cluster."""
    t = table.with_columns(pl.lit(None, pl.Utf8).alias(c) for c in META if c not in table.columns)
    t = t.with_columns(pl.coalesce("text_id", "pair_id").alias("cluster"), pl.col("human").cast(pl.Utf8))
    parts = [_decided(t.filter(pl.col("question") == q.id), q) for q in questions]
    parts = [p for p in parts if p.height]
    cols = ["judge", "question", "scale", "item_id", "cluster", "group", "order", "repeat", "status", "label",
            "answer", "score", "p_answer", "expected", "human"]
    if not parts:
        return pl.DataFrame(schema={c: (pl.Float64 if c in ("score", "p_answer", "expected") else
                                        pl.Int64 if c == "repeat" else pl.Utf8) for c in cols})
    return pl.concat([p.select(cols) for p in parts], how="vertical_relaxed").sort(["judge", "question", "item_id",
                                                                                   "repeat"])


def _decided(t: pl.DataFrame, q) -> pl.DataFrame:
    ok = pl.col("status") == "ok"
    label = pl.when(ok).then(pl.col("label"))
    labels = q.language.labels()
    p = {lab: probability(t, lab).cast(pl.Float64) for lab in labels}
    answer: pl.Expr
    score: pl.Expr
    expected: pl.Expr
    if q.scale == "pairwise":
        ab = pl.col("order") == "ab"
        answer = pl.when(label == "tie").then(pl.lit("tie")).when((label == "A") == ab).then(pl.lit("a")) \
            .when(label.is_not_null()).then(pl.lit("b"))
        score = pl.when(answer == "a").then(1.0).when(answer == "b").then(0.0).when(answer == "tie").then(0.5)
        expected = pl.when(ab).then(p["A"]).otherwise(p["B"])
    elif q.scale == "binary":
        answer = label
        score = pl.when(answer.is_not_null()).then((answer == labels[0]).cast(pl.Float64))
        expected = p[labels[0]]
    else:
        answer = label
        score = answer.cast(pl.Float64, strict=False)
        expected = sum((p[lab].fill_null(0.0) * float(lab) for lab in labels), pl.lit(0.0))
        expected = pl.when(p[labels[0]].is_not_null()).then(expected)
    chosen = pl.coalesce([pl.when(pl.col("label") == lab).then(p[lab]) for lab in labels])
    return t.with_columns(answer.alias("answer"), score.cast(pl.Float64).alias("score"),
                          pl.when(ok).then(chosen).alias("p_answer"), expected.cast(pl.Float64).alias("expected"))


def human_view(verdicts: pl.DataFrame) -> pl.DataFrame:
    """For the item viewer: each verdict's answer (a pairwise one as the text it picked), the
    humans' answer beside it, and whether they agree."""
    v = verdicts.with_columns(pl.lit(None, pl.Utf8).alias(c) for c in META if c not in verdicts.columns)
    label = pl.when(pl.col("status") == "ok").then(pl.col("label"))
    picked = pl.when(label == "tie").then(pl.lit("tie")).when((label == "A") == (pl.col("order") == "ab")) \
        .then(pl.lit("a")).when(label.is_not_null()).then(pl.lit("b"))
    answer = pl.when(pl.col("scale") == "pairwise").then(picked).otherwise(label)
    return v.with_columns(answer.alias("answer"), pl.col("human").cast(pl.Utf8).alias("truth")).with_columns(
        pl.when(pl.col("answer").is_not_null() & pl.col("truth").is_not_null())
        .then(pl.col("answer") == pl.col("truth")).alias("agrees"))


# -- tables ---------------------------------------------------------------------------------------
def aggregate(table: pl.DataFrame, options) -> dict[str, pl.DataFrame]:
    d = decisions(table, list(options.questions))
    res = options.resamples
    scores, consistency, headline = [], [], []
    binary, points, pairwise = [], [], []
    for (judge, qid), g in d.group_by(["judge", "question"], maintain_order=True):
        q = next(x for x in options.questions if x.id == qid)
        answered = g.filter(pl.col("answer").is_not_null())
        scores.append({"judge": judge, "question": qid, "scale": q.scale, "verdicts": g.height,
                       "unparsed": g.height - answered.height,
                       **_mean(answered, "score", res, (1.0, float(len(q.points))) if q.scale == "points" else None,
                               "mean_score"),
                       "mean_expected": g["expected"].mean() if g["expected"].is_not_null().any() else None})
        consistency += [{"judge": judge, "question": qid, **row} for row in _consistency(answered, q, res)]
        labelled = answered.filter(pl.col("human").is_not_null())
        if not q.human or not labelled.height:
            continue
        if q.scale == "binary":
            row = _binary(labelled, q, res)
            binary.append({"judge": judge, "question": qid, **row})
        elif q.scale == "points":
            row = _points(labelled, q, res)
            points.append({"judge": judge, "question": qid, **row})
        else:
            rows = _pairwise(labelled, res)
            pairwise += [{"judge": judge, "question": qid, **r} for r in rows]
            row = rows[-1]
        metric = HEADLINE[q.scale]
        headline.append({"judge": judge, "question": qid, "scale": q.scale, "metric": metric, "agreement": row[metric],
                         "agreement_low": row.get(f"{metric}_low", row.get("ci_low")),
                         "agreement_high": row.get(f"{metric}_high", row.get("ci_high")), "n": row["n"],
                         "ci_note": row["ci_note"]})
    # per question over every judge: a label one judge never said is its share 0, with its interval
    shares = [label_distribution(g, "cluster", label="answer").with_columns(pl.lit(qid).alias("question"))
              for (qid,), g in d.group_by(["question"], maintain_order=True)]
    distribution = pl.concat(shares, how="vertical_relaxed") if shares else \
        label_distribution(d, "cluster", "answer").with_columns(pl.lit(None, pl.Utf8).alias("question"))
    return {"scores": frame("scores", scores),
            "label_distribution": distribution.select("judge", "question", pl.exclude("judge", "question")),
            "consistency": frame("consistency", consistency), "agreement": frame("agreement", headline),
            "binary_agreement": frame("binary_agreement", binary), "points_agreement": frame("points_agreement", points),
            "pairwise_agreement": frame("pairwise_agreement", pairwise), "per_verdict": d}


def _mean(rows: pl.DataFrame, column: str, resamples: int, bounds: tuple[float, float] | None, name: str) -> dict:
    """A mean score with its interval: the project's mean interval on a points scale (`bounds`), the
    rate interval (proportion.rate_with_ci) for a 0/1 score (`bounds` None)."""
    m = (rate_with_ci(rows["cluster"].to_list(), rows[column].to_list()) if bounds is None else
         mean_with_ci(rows["cluster"].to_list(), rows[column].to_list(), resamples=resamples, bounds=bounds))
    return {name: m.value, "n": m.n, "ci_low": m.ci_low, "ci_high": m.ci_high, "ci_note": m.note}


def _consistency(answered: pl.DataFrame, q, resamples: int) -> list[dict]:
    """The same answer on every repeat of a text (or a pair in one order); for a pairwise question,
    the two orders' answers differing (swap-flip) and the text shown first winning."""
    out = []
    keys = ["cluster", "order"]
    repeats = answered.group_by(keys).agg(pl.len().alias("k"), (pl.col("answer").n_unique() == 1).alias("same"))
    repeats = repeats.filter(pl.col("k") > 1)
    if repeats.height:
        out.append(_rate("repeat_agreement", repeats, pl.col("same"), resamples))
    if q.scale == "pairwise":
        both = answered.group_by(["cluster", "repeat"]).agg(pl.col("order").n_unique().alias("orders"),
                                                            (pl.col("answer").n_unique() > 1).alias("flip"))
        out.append(_rate("swap_flip_rate", both.filter(pl.col("orders") == 2), pl.col("flip"), resamples))
        sided = answered.filter(pl.col("answer").is_in(["a", "b"]))
        out.append(_rate("first_position_win_rate", sided, pl.col("label") == "A", resamples))
    return out


def _rate(metric: str, rows: pl.DataFrame, values: pl.Expr, resamples: int) -> dict:
    v = rows.select("cluster", values.cast(pl.Float64).alias("v"))
    m = rate_with_ci(v["cluster"].to_list(), v["v"].to_list())
    return {"metric": metric, "value": m.value, "n": m.n, "ci_low": m.ci_low, "ci_high": m.ci_high, "ci_note": m.note}


def _binary(rows: pl.DataFrame, q, resamples: int) -> dict:
    truth = (rows["human"] == q.labels[0]).cast(pl.Int64).to_numpy()
    pred = (rows["answer"] == q.labels[0]).cast(pl.Int64).to_numpy()
    # category 0 = the negative label, 1 = the positive: kappa and balanced accuracy are symmetric in them
    tables = tables_by_cluster(rows["cluster"].to_list(), truth, pred, 2)
    row = agreement_row(tables, BINARY, resamples, withheld=few_per_class(tables, q.labels[::-1]))
    return {"n": rows.height, **row, "judge_positive_rate": float(pred.mean()), "human_positive_rate": float(truth.mean())}


def _points(rows: pl.DataFrame, q, resamples: int) -> dict:
    """Spearman and quadratic-weighted kappa from contingency tables; exact and within-one
    agreement as rates (proportion.rate_with_ci), the mean difference as a mean of per-verdict
    values (the project's mean interval, with its exact bound where every text gives the same value)."""
    k = len(q.points)
    truth = rows["human"].cast(pl.Int64).to_numpy() - 1
    pred = rows["answer"].cast(pl.Int64).to_numpy() - 1
    clusters = rows["cluster"].to_list()
    row = agreement_row(tables_by_cluster(clusters, truth, pred, k), POINTS, resamples)
    note = row["ci_note"]
    notes = [note] if isinstance(note, str) and note else []     # agreement_row's note: a str or None
    for name, values, bounds in (("exact", pred == truth, None), ("within_one", abs(pred - truth) <= 1, None),
                                 ("mean_difference", pred - truth, (1.0 - k, k - 1.0))):
        m = (rate_with_ci(clusters, values.astype(float).tolist()) if bounds is None else
             mean_with_ci(clusters, values.astype(float).tolist(), resamples=resamples, bounds=bounds))
        row |= {name: m.value, f"{name}_low": m.ci_low, f"{name}_high": m.ci_high}
        if m.note and m.note not in notes and len(set(map(str, clusters))) >= MIN_CLUSTERS:
            notes.append(f"{name}: {m.note}")
    row["ci_note"] = "; ".join(notes) or None
    return {"points": k, "n": rows.height, **row}


def _pairwise(rows: pl.DataFrame, resamples: int) -> list[dict]:
    """Accuracy against the humans' pick per order and the mean of both (pairs resampled); pairs
    the humans tied are left out, a judge's tie counts as wrong."""
    rows = rows.filter(pl.col("human") != "tie").with_columns((pl.col("answer") == pl.col("human"))
                                                              .cast(pl.Float64).alias("v"))
    out = []
    for order in ("ab", "ba"):
        part = rows.filter(pl.col("order") == order)
        m = rate_with_ci(part["cluster"].to_list(), part["v"].to_list())
        out.append({"order": order, "accuracy": m.value, "n": m.n, "ci_low": m.ci_low, "ci_high": m.ci_high,
                    "ci_note": m.note})
    m = rate_with_ci(rows["cluster"].to_list(), rows["v"].to_list(), strata=rows["order"].to_list())
    out.append({"order": BOTH, "accuracy": m.value, "n": m.n, "ci_low": m.ci_low, "ci_high": m.ci_high,
                "ci_note": m.note})
    return out


# -- a sweep's ranked estimate ----------------------------------------------------------------
def check_rank(rank, questions: list) -> None:
    """ValueError when `rank` names a question the rubric does not ask, one without a human column,
    or one of another scale than its table's: the ranking would be empty."""
    qid = rank.where().get("question")
    if qid is None:
        return
    q = next((x for x in questions if x.id == qid), None)
    if q is None:
        ids = [x.id for x in questions]
        raise ValueError(f"the rubric asks no question {qid!r} (questions: {', '.join(ids)}){did_you_mean(qid, ids)}")
    if not q.human:
        raise ValueError(f"question {qid!r} has no human column, so no agreement to rank by: give it one "
                         "(human = COLUMN) or rank by another question")
    scale = rank.table.removesuffix("_agreement") if rank.table != "agreement" else q.scale
    if scale != q.scale:
        raise ValueError(f"question {qid!r} is a {q.scale} question, not in {rank.table}: rank it by "
                         f"{q.scale}_agreement.{HEADLINE[q.scale]} (or agreement.agreement), or name a {scale} question")


def rank_units(tables: dict[str, pl.DataFrame], judge: str, rank, group: str, questions: list,
               resamples: int = 1000) -> Units | None:
    """The rows behind one question's ranked agreement, its clusters the texts (or pairs), with
    the interval the table prints (`resamples`: the rubric's)."""
    where = dict(part.split("=", 1) for part in group.split(",") if "=" in part)
    d = tables.get("per_verdict")
    q = next((x for x in questions if x.id == where.get("question")), None)
    if d is None or q is None:
        return None
    rows = d.filter((pl.col("judge") == judge) & (pl.col("question") == q.id)
                    & pl.col("answer").is_not_null() & pl.col("human").is_not_null())
    metric = rank.metric if rank.table != "agreement" else HEADLINE[q.scale]
    if q.scale == "pairwise":
        rows = rows.filter(pl.col("human") != "tie")
        order = where.get("order", BOTH)
        if order != BOTH:
            rows = rows.filter(pl.col("order") == order)
        v = (rows["answer"] == rows["human"]).cast(pl.Float64).to_list()
        return Units.rate(rows["cluster"].to_list(), v, rows["order"].to_list() if order == BOTH else None)
    if q.scale == "binary":
        h = (rows["human"] == q.labels[0]).cast(pl.Int64).to_numpy()
        j = (rows["answer"] == q.labels[0]).cast(pl.Int64).to_numpy()
        return Units.of(rows["cluster"].to_list(), {"h": h, "j": j}, _statistic(BINARY[metric], 2),
                        rule=_table_rule(metric, BINARY, 2, resamples, q.labels[::-1]))
    h, j = rows["human"].cast(pl.Int64).to_numpy(), rows["answer"].cast(pl.Int64).to_numpy()
    if metric in ("exact", "within_one"):
        return Units.rate(rows["cluster"].to_list(), (abs(h - j) <= (metric == "within_one")).astype(float).tolist())
    k = len(q.points)
    return Units.of(rows["cluster"].to_list(), {"h": h - 1, "j": j - 1}, _statistic(POINTS[metric], k),
                    rule=_table_rule(metric, POINTS, k, resamples, None))


def _statistic(stat, k: int):
    return lambda c: float(stat(_table(c["h"], c["j"], k)))


def _table_rule(metric: str, statistics: dict, k: int, resamples: int, withhold_names: tuple[str, ...] | None):
    """The interval the agreement table prints (rubric_stats.agreement_row over the clusters'
    contingency tables, the table's resamples and seed), so a sweep ranks by the same interval."""
    def rule(u: Units, _resamples: int, seed: int) -> tuple[float, float, str | None]:
        names = np.asarray(u.ids)[u.cluster_of_rows()].tolist()           # the table sorts clusters by name
        tables = tables_by_cluster(names, u.columns["h"], u.columns["j"], k)
        withheld = few_per_class(tables, withhold_names) if withhold_names is not None else None
        row = agreement_row(tables, {metric: statistics[metric]}, resamples, seed, withheld)
        low, high = row[f"{metric}_low"], row[f"{metric}_high"]
        return (math.nan if low is None else float(low), math.nan if high is None else float(high),
                None if row["ci_note"] is None else str(row["ci_note"]))
    return rule


def _table(h: np.ndarray, j: np.ndarray, k: int) -> np.ndarray:
    t = np.zeros((k, k))
    np.add.at(t, (h.astype(int), j.astype(int)), 1.0)
    return t
