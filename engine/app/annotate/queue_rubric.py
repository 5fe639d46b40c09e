"""The annotation queue's rubric and listwise clusters (queue.py builds the queue from them).

Rubric: a cluster is one text with all of its single-text questions, or one pair with all of its
pairwise questions; each question takes its scale's answers (a binary question's two labels, a
points question's 1..N each with its anchor, a pairwise question's two texts and a tie where the
question allows one). The headline is the first question's mean on its scale (binary: the share
of its positive label; points: the mean point; pairwise: text a's win rate, a tie half), the
other questions are asked and stored but not in it. The judges' side of the first question: per
cluster their mean distribution over its answers (P(label) where the run stored it, in distribution
mode or after an analysis, else each verdict's answer: the vote share across the run's judges,
repeats and both orders of a pair).

Listwise: a cluster is one item of the run's lists. A person gives it one of the data's
categories (worst first; its score the category's rank), or, when the data names none, a score
on the judge's scale; the headline is the mean of that score. The judges' side: the item's scores
over its lists, repeats and judges, mapped linearly onto the answers' range."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl

from litjudge.engine.core.verdicts import has_probabilities, judged_probability
from litjudge.grammars.listwise import Listwise
from litjudge.judges.base import Context
from litjudge.judges.frames import text_picked
from litjudge.judges.listwise import POETRY_CRITERIA, ListwiseRanking, singular

from ...core.errors import ConfigError
from .clusters import Answer, Built, Cluster, Question, points, spread, texts_ab, yes_no

VOTES = "the vote share across the run's judges"
AFTER = {"distribution": "", "analysis": " read after their analysis"}     # where a stored P(label) was read


NUMBERED = ("binary", "points", "pairwise")     # the scales whose answers have a number: a headline's


def answers_of(q: Any) -> tuple[Answer, ...]:
    """A rubric question's answers, from its public fields (scale, labels, points, tie, categories);
    one line for a scale the page has none for (a scale of your own)."""
    if q.scale == "binary":
        return yes_no(*q.labels)
    if q.scale == "points":
        return points(tuple(q.points))
    if q.scale == "pairwise":
        return texts_ab(bool(q.tie))
    if q.scale == "categorical":
        if len(q.categories) > 10:
            raise ConfigError(f"question {q.id!r} names {len(q.categories)} categories; the annotation page takes at "
                              "most 10 (one key each)")
        return tuple(Answer(c, c, str(k % 10), math.nan) for k, c in enumerate(q.categories, start=1))   # no number
    raise ConfigError(f"question {q.id!r}: the annotation page has no answers for its scale {q.scale!r} (it serves "
                      f"{', '.join(NUMBERED)} and categorical questions)")


def _headline(q: Any, n_points: int) -> tuple[str, tuple[float, float]]:
    if q.scale == "binary":
        return f"{q.id}: share {q.labels[0]}", (0.0, 1.0)
    if q.scale == "points":
        return f"{q.id}: mean score (1-{n_points})", (1.0, float(n_points))
    return f"{q.id}: win rate of text a (a tie half)", (0.0, 1.0)


def with_probabilities(verdicts: pl.DataFrame, labels: list[str]) -> pl.DataFrame:
    """The verdicts with what `votes_by` reads: `_p`, each label's stored probability
    (`judged_probability`), and `_picked`, the text a pairwise verdict picked."""
    return verdicts.with_columns(pl.struct([judged_probability(verdicts, lab).alias(lab) for lab in labels]).alias("_p"),
                                 text_picked(pl.col("label")).alias("_picked"))


def votes_by(rows: pl.DataFrame, key: str, answers: tuple[Answer, ...], pairwise: bool
             ) -> dict[Any, tuple[np.ndarray, bool]]:
    """Per value of `key` (a cluster): the judges' summed distribution over `answers` of its
    verdicts on a question (a verdict's P(label) where stored, else its answer; a pairwise
    question's positions read as the texts they showed), and whether any P was stored. Rows from
    `with_probabilities`; one pass over them (a frame per cluster: 8.3 s at 20,000 texts)."""
    sums: dict[Any, np.ndarray] = {}
    stored: set[Any] = set()
    values = [a.value for a in answers]
    labels = {"a": ("A", "B"), "b": ("B", "A"), "tie": ("tie", "tie")}
    for r in rows.iter_rows(named=True):
        acc = sums.setdefault(r[key], np.zeros(len(answers)))
        p = r.get("_p") or {}
        if pairwise:
            shown = [p.get(labels[v][r["order"] == "ba"]) for v in values]
            answer = r["_picked"]                  # the text picked (the stored value names a position)
        else:
            shown = [p.get(v) for v in values]
            answer = r["label"]
        given = np.asarray([np.nan if x is None else x for x in shown], dtype=float)
        if np.isfinite(given).all() and given.sum() > 0:
            acc += given / given.sum()
            stored.add(r[key])
        elif answer in values:
            acc[values.index(answer)] += 1.0
    return {k: (acc, k in stored) for k, acc in sums.items()}


def _texts(ctx: Context, reads_pairs: bool) -> tuple[dict, dict]:
    """(items by id, pairs by id): what the rubric's clusters show."""
    if reads_pairs:
        return {}, {str(p.pair_id): p for p in ctx.load("pairs")}
    return {str(i.item_id): i for i in ctx.load("items").items}, {}


def _shown(cid: str, first: dict, items: dict, pairs: dict) -> tuple[tuple[tuple[str, str], ...], str] | None:
    """A cluster's texts (and a pair's writing prompt), None when the data no longer holds them."""
    if first.get("text_id") is not None:
        item = items.get(cid)
        return ((("Text", item.text),), "") if item is not None else None
    if cid in pairs:
        p = pairs[cid]
        return (("Text A", p.text_a), ("Text B", p.text_b)), p.prompt or ""
    a, b = items.get(str(first.get("item_a"))), items.get(str(first.get("item_b")))
    return ((("Text A", a.text), ("Text B", b.text)), "") if a is not None and b is not None else None


def rubric(ctx: Context, verdicts: pl.DataFrame) -> Built:
    opts = ctx.options
    questions = list(opts.questions)
    head = questions[0]
    if head.scale not in NUMBERED:
        raise ConfigError(f"the annotation page estimates the first question's mean, and {head.id!r} is {head.scale}: "
                          f"its answers have no number. Put a {', '.join(NUMBERED[:-1])} or {NUMBERED[-1]} question "
                          "first (the others are asked and stored as well)")
    answers = {q.id: answers_of(q) for q in questions}
    items, pairs = _texts(ctx, opts.reads_pairs)
    v = verdicts.with_columns(pl.lit(None, pl.Utf8).alias(c) for c in ("text_id", "pair_id", "item_a", "item_b", "order")
                              if c not in verdicts.columns)
    labels = sorted({a.value for q in questions for a in answers[q.id]} | {"A", "B"})
    v = with_probabilities(v, labels).with_columns(
        pl.coalesce(pl.col("text_id").cast(pl.Utf8), pl.col("pair_id").cast(pl.Utf8)).alias("_cluster"))
    clusters, dist, has, stored = [], [], [], False
    # one aggregation and one pass, not a frame per text: 8.3 s to start at 20,000 texts
    firsts = v.group_by("_cluster").agg(pl.col("text_id", "item_a", "item_b").first(),
                                        pl.col("question").alias("_asked"))
    head_votes = votes_by(v.filter((pl.col("question") == head.id) & (pl.col("status") == "ok")), "_cluster",
                          answers[head.id], head.scale == "pairwise")
    for first in sorted(firsts.iter_rows(named=True), key=lambda r: str(r["_cluster"])):
        cid = first["_cluster"]
        shown = _shown(str(cid), first, items, pairs)
        if cid is None or shown is None:
            continue
        asked = set(first["_asked"])
        qs = tuple(Question(f"{cid}/{q.id}", q.text, answers[q.id], q.id == head.id, q.scale == "pairwise")
                   for q in questions if q.id in asked)
        clusters.append(Cluster(str(cid), str(cid), shown[0], qs, shown[1]))
        d, p = head_votes.get(cid, (np.zeros(len(answers[head.id])), False))
        dist.append(d)
        has.append(head.id in asked)
        stored = stored or p
    scores = np.asarray([a.score for a in answers[head.id]])
    counted = np.asarray(has, dtype=bool)
    # a cluster of the other kind (no item of the headline question) totals 0 whatever is answered
    total, u, totals = spread(np.asarray(dist, dtype=float), np.where(counted[:, None], scores[None, :], 0.0),
                              len(clusters))
    quantity, bounds = _headline(head, len(head.points))
    return Built(clusters, np.where(counted, total, 0.0), np.where(counted, u, 0.0),
                 "the judges' P(label)" + AFTER[has_probabilities(v) or "distribution"] if stored else VOTES, quantity,
                 "Read the text (or both texts), then answer every question on its scale. The order of two texts is "
                 f"random; answer on the texts, not their place. The estimate is of the first question ({head.id}).",
                 bounds, totals=totals, read_p=stored)


def listwise(ctx: Context, verdicts: pl.DataFrame) -> Built:
    opts = ctx.options
    data = ctx.load("items")
    scale = Listwise(("a", "b"))
    one = opts.item_one or singular(opts.item_kind)
    if len(data.categories) > 10:
        raise ConfigError(f"the data names {len(data.categories)} categories; the annotation page takes at most 10 "
                          "(one key each)")
    if data.categories:
        answers = tuple(Answer(c, c, str(k % 10), float(k)) for k, c in enumerate(data.categories, start=1))
        quantity = f"mean category rank (1 = {data.categories[0]} ... {len(data.categories)} = {data.categories[-1]})"
        question = f"Which category is this {one}? (worst first: {', '.join(data.categories)})"
    else:
        answers = points([str(k) for k in range(scale.lo, scale.hi + 1)], first=scale.lo)
        quantity = f"mean score ({scale.lo}-{scale.hi})"
        criterion = "originality" if opts.criterion == "aut" else opts.criterion if opts.criterion in POETRY_CRITERIA \
            else "the run's criterion"
        question = f"Score this {one} for {criterion}: {scale.lo} lowest, {scale.hi} highest."
    lo, hi = answers[0].score, answers[-1].score
    judged = ListwiseRanking().scores(verdicts)
    counts = (judged.with_columns(pl.col("score").cast(pl.Int64)).group_by("item_id", "score").len()
              .pivot(on="score", index="item_id", values="len").fill_null(0))
    by_id = {i.item_id: i for i in data.items}
    levels = list(range(scale.lo, scale.hi + 1))
    clusters, dist = [], []
    for row in counts.sort("item_id").iter_rows(named=True):
        item = by_id.get(row["item_id"])
        if item is None:
            continue
        clusters.append(Cluster(item.item_id, item.item_id, ((f"{one.capitalize()} of {item.group}", item.text),),
                                (Question(item.item_id, question, answers),)))
        dist.append([row.get(str(s), 0) for s in levels])
    mapped = lo + (np.asarray(levels, dtype=float) - scale.lo) * (hi - lo) / (scale.hi - scale.lo)
    total, u, totals = spread(np.asarray(dist, dtype=float), mapped, len(clusters))
    return Built(clusters, total, u, "the spread of the judges' scores over the item's lists", quantity,
                 f"Read the {one}, then answer its question. The judges' score ({scale.lo}-{scale.hi}) is mapped "
                 "onto these answers for the estimate.", (lo, hi), totals=totals)
