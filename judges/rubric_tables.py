"""A rubric's tables, from its verdict frame (judges/rubric.py asks; this aggregates; each
question's scale, judges/scales/, says what its answers mean and which agreement tables it adds).

Per verdict (`per_verdict`): the answer in the question's terms (a binary label, a point, the text
a pairwise verdict picked: a, b or tie, whichever order it was shown in; a category), its score
(1 for the positive label, the point, 1 for text a; none for a category), P(answer) and the
expected score in distribution mode (P(positive), sum of p(k) k, P(text a)), and the humans'
answer. Clusters: the text judged (the pair, for a pairwise question): its repeats and orders move
together.

Without human labels: each question's score distribution (`scores`, `label_distribution`) and the
judge's consistency (`consistency`: the same answer on every repeat; a pair's two orders giving
different answers; the text shown first winning). With a human column: each scale's agreement
tables (`Scale.agreement`), and one headline per question (`agreement`: the scale's `headline`)
a sweep ranks by. Missing answers (unparsed) are left out of every rate and counted in
`scores.unparsed`.
"""
from __future__ import annotations

import math

import polars as pl

from litjudge.engine.core.errors import did_you_mean
from litjudge.engine.core.verdicts import probability

from .base import group_columns
from .frames import split
from .metrics.bootstrap import joined_notes, mean_with_ci
from .metrics.estimates import Units
from .metrics.proportion import rate_with_ci
from .scales import scales
from .scales.base import INTERVAL, rate_row
from .tables import label_distribution

META = ("question", "scale", "text_id", "pair_id", "order", "group", "human")
SCHEMAS = {
    "scores": {"judge": pl.Utf8, "question": pl.Utf8, "scale": pl.Utf8, "verdicts": pl.Int64, "unparsed": pl.Int64,
               "mean_score": pl.Float64, **INTERVAL, "mean_expected": pl.Float64},
    "consistency": {"judge": pl.Utf8, "question": pl.Utf8, "metric": pl.Utf8, "value": pl.Float64, **INTERVAL},
    "agreement": {"judge": pl.Utf8, "question": pl.Utf8, "scale": pl.Utf8, "metric": pl.Utf8, "agreement": pl.Float64,
                  "agreement_low": pl.Float64, "agreement_high": pl.Float64, "n": pl.Int64, "ci_note": pl.Utf8},
}


def frame(name: str, rows: list[dict]) -> pl.DataFrame:
    """A table in its fixed schema (empty, but typed, when there are no rows): the rubric's own, or
    its scale's (`Scale.schemas`)."""
    schema = SCHEMAS.get(name) or next(s[name] for kind in scales() if name in (s := kind.schemas()))
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
    labels = q.language.labels()
    p = {lab: probability(t, lab).cast(pl.Float64) for lab in labels}
    answer = q.kind.answer(pl.when(ok).then(pl.col("label")))
    score, expected = q.kind.scored(q, answer, p)
    chosen = pl.coalesce([pl.when(pl.col("label") == lab).then(p[lab]) for lab in labels])
    return t.with_columns(answer.alias("answer"), score.cast(pl.Float64).alias("score"),
                          pl.when(ok).then(chosen).alias("p_answer"), expected.cast(pl.Float64).alias("expected"))


def human_view(verdicts: pl.DataFrame) -> pl.DataFrame:
    """For the item viewer: each verdict's answer (a pairwise one as the text it picked), the
    humans' answer beside it, and whether they agree."""
    v = verdicts.with_columns(pl.lit(None, pl.Utf8).alias(c) for c in META if c not in verdicts.columns)
    label = pl.when(pl.col("status") == "ok").then(pl.col("label"))
    answer = pl.coalesce(*(pl.when(pl.col("scale").eq(kind.name)).then(kind.answer(label)) for kind in scales()), label)
    return v.with_columns(answer.alias("answer"), pl.col("human").cast(pl.Utf8).alias("truth")).with_columns(
        pl.when(pl.col("answer").is_not_null() & pl.col("truth").is_not_null())
        .then(pl.col("answer") == pl.col("truth")).alias("agrees"))


# -- tables ---------------------------------------------------------------------------------------
def aggregate(table: pl.DataFrame, options) -> dict[str, pl.DataFrame]:
    d = decisions(table, list(options.questions))
    res = options.resamples
    scores, consistency, headline = [], [], []
    detail: dict[str, list[dict]] = {name: [] for kind in scales() for name in kind.tables()}
    # each judge's answers, labelled answers and repeats, split once (a filter and a group-by per
    # judge and question were most of a many-judge frame's tables)
    answers = d.filter(pl.col("answer").is_not_null())
    answered_by = split(answers, ["judge", "question"])
    labelled_by = split(answers.filter(pl.col("human").is_not_null()), ["judge", "question"])
    repeats_by = split(_repeats(answers), ["judge", "question"])
    asked = {x.id: x for x in options.questions}
    for (judge, qid), g in split(d, ["judge", "question"]).items():
        q = asked[qid]
        answered = answered_by.get((judge, qid), answers.clear())
        scores.append({"judge": judge, "question": qid, "scale": q.scale, "verdicts": g.height,
                       "unparsed": g.height - answered.height, **_mean(answered, q, res),
                       "mean_expected": g["expected"].mean() if g["expected"].is_not_null().any() else None})
        consistency += [{"judge": judge, "question": qid, **row}
                        for row in _consistency(answered, repeats_by.get((judge, qid)), q)]
        labelled = labelled_by.get((judge, qid))
        if not q.human:
            continue
        if labelled is None:        # no value, said (statistics.md: NaN with its n, never a missing row)
            why = (f"none of this judge's {g.height} answers could be read" if not answered.height else
                   "no text this judge answered has a human answer")
            headline.append({"judge": judge, "question": qid, "scale": q.scale, "metric": q.kind.headline, "n": 0,
                             "ci_note": f"{why}: no agreement"})
            continue
        parts = q.kind.agreement(labelled, q, res)
        for name, rows in parts.items():
            detail[name] += [{"judge": judge, "question": qid, **r} for r in rows]
        row, metric = parts[q.kind.table][-1], q.kind.headline
        undefined = row[metric] is None or (isinstance(row[metric], float) and math.isnan(row[metric]))
        headline.append({"judge": judge, "question": qid, "scale": q.scale, "metric": metric, "agreement": row[metric],
                         "agreement_low": row.get(f"{metric}_low", row.get("ci_low")),
                         "agreement_high": row.get(f"{metric}_high", row.get("ci_high")), "n": row["n"],
                         "ci_note": joined_notes(_undefined_why(labelled, metric) if undefined else None,
                                                 row.get(f"{metric}_note", row["ci_note"]))})   # its own note
    # per question over every judge: a label one judge never said is its share 0, with its interval
    shares = [label_distribution(g, "cluster", label="answer").with_columns(pl.lit(qid).alias("question"))
              for (qid,), g in d.group_by(["question"], maintain_order=True)]
    distribution = pl.concat(shares, how="vertical_relaxed") if shares else \
        label_distribution(d, "cluster", "answer").with_columns(pl.lit(None, pl.Utf8).alias("question"))
    return {"scores": frame("scores", scores),
            "label_distribution": distribution.select("judge", "question", pl.exclude("judge", "question")),
            "consistency": frame("consistency", consistency), "agreement": frame("agreement", headline),
            **{name: frame(name, rows) for name, rows in detail.items()}, "per_verdict": d}


def without_humans(d: pl.DataFrame, questions: list) -> list[str]:
    """Each question whose human column some texts (pairs) leave empty: its agreement reads the
    others only, which the headline's n shows but does not say (a column empty throughout is said
    in the headline's note)."""
    said = []
    for q in (q for q in questions if q.human):
        units = d.filter(pl.col("question") == q.id).unique("cluster")
        missing = units["human"].null_count()
        ties = int((units["human"] == "tie").sum()) if q.scale == "pairwise" else 0
        if 0 < missing < units.height:
            what = "pairs" if q.scale == "pairwise" else "texts"
            tied = f" ({ties} of them tied by the humans, which agreement leaves out)" if ties else ""
            said.append(f"question {q.id!r}: {missing} of {units.height} {what} have no human answer in "
                        f"{q.human!r}: its agreement reads the {units.height - missing} that have one{tied}, "
                        "of them those the judge's answer was read for (its n)")
        elif ties and missing == 0:          # said alone too (a hostile pass: 10 of 12 pairs tied, accuracy on 2, unsaid)
            said.append(f"question {q.id!r}: {ties} of {units.height} pairs were tied by the humans in {q.human!r}, "
                        f"which agreement leaves out: it reads the {units.height - ties} others")
    return said


def _undefined_why(labelled: pl.DataFrame, metric: str) -> str:
    """Why a headline has no value: one answer on a side leaves an agreement beyond chance (and a
    rank correlation) nothing to measure."""
    humans, judge = labelled["human"].n_unique(), labelled["answer"].n_unique()
    if set(labelled["human"].to_list()) == {"tie"}:
        return (f"{metric} is undefined: the humans tied every pair (over {labelled.height} answers), and tied "
                "pairs are left out")
    side = ("the humans and the judge each gave one answer" if humans == 1 and judge == 1 else
            "the humans gave one answer" if humans == 1 else "the judge gave one answer" if judge == 1 else
            "too few texts")
    return f"{metric} is undefined: {side} (over {labelled.height} answers)"


def _mean(rows: pl.DataFrame, q, resamples: int) -> dict:
    """The mean score with its interval: the project's mean interval on a points scale, the rate
    interval (proportion.rate_with_ci) for 0/1 scores, over a pairwise question's two orders the
    mean of their rates (text a's win rate: an order answered less often brings no position bias
    in); none on a scale without a score."""
    if not q.kind.score:
        return {"mean_score": None, "n": None, "ci_low": None, "ci_high": None, "ci_note": None}
    bounds = q.kind.score_bounds(q)
    strata = rows["order"].to_list() if q.kind.pairwise else None
    m = (rate_with_ci(rows["cluster"].to_list(), rows["score"].to_list(), strata, 2 if strata else None)
         if bounds is None else
         mean_with_ci(rows["cluster"].to_list(), rows["score"].to_list(), resamples=resamples, bounds=bounds))
    return {"mean_score": m.value, "n": m.n, "ci_low": m.ci_low, "ci_high": m.ci_high, "ci_note": m.note}


def _repeats(answers: pl.DataFrame) -> pl.DataFrame:
    """Per judge, question, text (or pair) and order answered more than once: whether every
    repeat gave the same answer."""
    return answers.group_by(["judge", "question", "cluster", "order"]).agg(
        pl.len().alias("k"), (pl.col("answer").n_unique() == 1).alias("same")).filter(pl.col("k") > 1)


def _consistency(answered: pl.DataFrame, repeats: pl.DataFrame | None, q) -> list[dict]:
    """The same answer on every repeat of a text (or a pair in one order: `repeats`, none where
    nothing was repeated), then the scale's own rates (a pairwise question's swap flips and
    first-position wins)."""
    own = q.kind.consistency(answered, q)
    return [rate_row("repeat_agreement", repeats, pl.col("same")), *own] if repeats is not None else own


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
    if rank.table not in ("agreement", q.kind.table):
        other = next((k.name for k in scales() if k.table == rank.table), rank.table)
        raise ValueError(f"question {qid!r} is a {q.scale} question, not in {rank.table}: rank it by "
                         f"{q.kind.table}.{q.kind.headline} (or agreement.agreement), or name a {other} question")
    for column, value in rank.where().items():      # its columns are the table's (Protocol.parse_rank_by)
        allowed = q.kind.row_values.get(column)
        if allowed is not None and value not in allowed:
            raise ValueError(f"{rank.table}'s {column} is one of {', '.join(allowed)}, not {value!r}")


def rank_units(tables: dict[str, pl.DataFrame], judge: str, rank, group: str, questions: list,
               resamples: int = 1000) -> Units | None:
    """The rows behind one question's ranked agreement, its clusters the texts (or pairs), with
    the interval the table prints (`resamples`: the rubric's)."""
    where = group_columns(group)
    d = tables.get("per_verdict")
    q = next((x for x in questions if x.id == where.get("question")), None)
    if d is None or q is None or rank.table not in ("agreement", q.kind.table):     # another scale's table: none
        return None
    rows = d.filter((pl.col("judge") == judge) & (pl.col("question") == q.id)
                    & pl.col("answer").is_not_null() & pl.col("human").is_not_null())
    metric = rank.metric if rank.table != "agreement" else q.kind.headline
    return q.kind.rank_units(rows, q, metric, where, resamples)
