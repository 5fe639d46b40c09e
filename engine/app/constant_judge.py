"""A constant judge, called out: one that gives one label to (nearly) every item, or whose verdict
follows the position a text is shown in rather than the text (first-position or swap-flip rate near
1). Its agreement with humans then measures the labels' balance, not the judge (a small model
answering "No" to every TTCW test agrees with the experts on every test they failed), and nothing
in the tables says so. One line per judge (and rubric question) joins the run's warnings, which
the console prints last, `Result.problems()` returns and the report lists."""
from __future__ import annotations

from collections.abc import Mapping

import polars as pl

CONSTANT_SHARE = 0.95      # the share of one label (or a position rate) that makes a judge constant
CONSTANT_MIN_N = 10        # fewer answers than this say nothing either way
CONSTANT = "a constant judge; its agreement measures the labels' balance, not the judge"
POSITIONAL = ("a positional judge: its verdict follows where a text is shown, not the text; its agreement in one "
              "order measures which text the data shows first, not the judge")
POSITION_RATES = {"first_position_win_rate": "picked the text shown first in",
                  "swap_flip_rate": "changed its verdict when the texts swapped places in"}


def constant_judge_warnings(verdicts: pl.DataFrame, tables: Mapping[str, pl.DataFrame]) -> list[str]:
    """One line per judge (per judge and question where the verdicts carry one, as a rubric's) that
    answered one label to at least CONSTANT_SHARE of its read verdicts, or whose first-position or
    swap-flip rate in the protocol's tables is at least CONSTANT_SHARE (each over CONSTANT_MIN_N or
    more), saying what that means."""
    found: dict[tuple[str, str | None], list[str]] = {}
    one_label = set()
    for key, said in _one_label(verdicts):
        found.setdefault(key, []).append(said)
        one_label.add(key)
    for key, said in _position(tables):
        found.setdefault(key, []).append(said)
    # a judge whose labels vary but follow the position shown is no constant judge (it answered A
    # and B alike, right in one order, wrong in the other): said as what it is
    return [f"{judge}{f' (question {question!r})' if question else ''}: " + "; ".join(said)
            + (f": {CONSTANT}" if (judge, question) in one_label else f": {POSITIONAL}")
            for (judge, question), said in found.items()]


def _labels(verdicts: pl.DataFrame) -> tuple[pl.DataFrame, str] | None:
    """judge, question and the label of each read verdict: the judge's own label, or, for a
    ranking (a list of [id, score] pairs), each score it gave; and what one row counts."""
    if not {"judge", "status", "value"} <= set(verdicts.columns):
        return None
    ok = verdicts.filter(pl.col("status") == "ok")
    question = pl.col("question").cast(pl.Utf8) if "question" in ok.columns else pl.lit(None, pl.Utf8)
    if isinstance(ok.schema["value"], pl.List):           # listwise: every score of every list counts
        scores = ok.select("judge", question.alias("question"), pl.col("value")).explode("value")
        scores = scores.drop_nulls("value")
        inner = scores.schema["value"]
        said = pl.col("value").list.last() if isinstance(inner, pl.List | pl.Array) else pl.col("value")
        return scores.select("judge", "question", said.cast(pl.Utf8).alias("said")), "listed items"
    label = pl.col("label") if "label" in ok.columns else pl.col("value")
    return ok.select("judge", question.alias("question"), label.cast(pl.Utf8).alias("said")).drop_nulls("said"), "verdicts"


def _one_label(verdicts: pl.DataFrame) -> list[tuple[tuple[str, str | None], str]]:
    found = _labels(verdicts)
    if found is None or not found[0].height:
        return []
    labels, unit = found
    counts = labels.group_by("judge", "question", "said", maintain_order=True).len()
    top = (counts.with_columns(pl.col("len").sum().over("judge", "question").alias("n"))
           .sort("len", descending=True, maintain_order=True).group_by("judge", "question", maintain_order=True).first())
    order = labels.select("judge", "question").unique(maintain_order=True)
    top = order.join(top, on=["judge", "question"], how="left", nulls_equal=True)
    return [((judge, question), f"answered {said!r} to {share:.0%} of {n} {unit}")
            for judge, question, said, k, n in top.select("judge", "question", "said", "len", "n").iter_rows()
            if n and n >= CONSTANT_MIN_N and (share := k / n) >= CONSTANT_SHARE]


def _position(tables: Mapping[str, pl.DataFrame]) -> list[tuple[tuple[str, str | None], str]]:
    """First-position and swap-flip rates wherever a table reports them: as rows (`metric`,
    `value`, `n`: pairwise's bias, the rubric's consistency) or as columns (reference-based Likert)."""
    out: list[tuple[tuple[str, str | None], str]] = []
    seen: set[tuple[str, str | None, str]] = set()
    for frame in tables.values():
        if "judge" not in frame.columns or not frame.height:
            continue
        question = pl.col("question").cast(pl.Utf8) if "question" in frame.columns else pl.lit(None, pl.Utf8)
        if {"metric", "value", "n"} <= set(frame.columns):
            rows = frame.filter(pl.col("metric").is_in(list(POSITION_RATES))).select(
                pl.col("judge").cast(pl.Utf8), question.alias("question"), pl.col("metric").cast(pl.Utf8),
                pl.col("value").cast(pl.Float64), pl.col("n").cast(pl.Int64)).iter_rows()
        else:
            rows = (row for metric in POSITION_RATES if metric in frame.columns for row in frame.select(
                pl.col("judge").cast(pl.Utf8), question.alias("question"), pl.lit(metric),
                pl.col(metric).cast(pl.Float64), _n_of(frame, metric)).iter_rows())
        for judge, q, metric, value, n in rows:
            if (judge, q, metric) in seen or value is None or value != value or value < CONSTANT_SHARE \
                    or n is None or n < CONSTANT_MIN_N:
                continue
            seen.add((judge, q, metric))
            out.append(((judge, q), f"{POSITION_RATES[metric]} {value:.0%} of {n} ({metric} {value:.2f})"))
    return out


RATE_COUNTS = {"swap_flip_rate": "pairs_both_orders", "first_position_win_rate": "verdicts"}


def _n_of(frame: pl.DataFrame, metric: str) -> pl.Expr:
    """The count behind a rate reported as a column (reference-based Likert's `pairs_both_orders`
    and `verdicts`), else the row's `n`."""
    for name in (RATE_COUNTS[metric], "n"):
        if name in frame.columns:
            return pl.col(name).cast(pl.Int64)
    return pl.lit(None, pl.Int64)
