"""`scale = "pairwise"`: which of two texts answers the question better, A or B (or a tie with
`tie = true`), asked in both orders and mapped back to the texts (a, b or tie). With a human
column: accuracy against the humans' pick per order and the mean of both (pairs resampled); pairs
the humans tied are left out, a judge's tie is half credit (frames.tie_credit). Consistency: a pair's two orders
answered differently (swap flip) and the text shown first winning."""
from __future__ import annotations

import math
from typing import Any

import polars as pl

import litjudge.grammars as grammars
from litjudge.engine.core.errors import DataError

from ..frames import text_picked, tie_credit
from ..metrics.estimates import Units
from ..metrics.proportion import rate_with_ci
from .base import INTERVAL, SCALES, Scale, Schema, Setting, number, rate_row

BOTH = "mean of both"


@SCALES.register
class Pairwise(Scale):
    name = "pairwise"
    order = 30
    pairwise = True
    settings = {"tie": Setting(bool, False, 'the judge may answer "tie"', "a tie is an answer of a pairwise question")}
    metrics = ("accuracy",)
    headline = "accuracy"
    by = ("question", "order")
    rank_where = f",order={BOTH}"
    row_values = {"order": ("ab", "ba", BOTH)}

    def schemas(self) -> dict[str, Schema]:
        return {self.table: {"judge": pl.Utf8, "question": pl.Utf8, "order": pl.Utf8, "accuracy": pl.Float64, **INTERVAL}}

    def check(self, q: Any) -> None:
        """Nothing of its own to check: A, B and the optional tie."""

    def language(self, q: Any) -> grammars.LabelSet:
        return grammars.preference("A", "B", "tie" if q.tie else None)

    def human(self, q: Any, value: Any, unit: str) -> str | None:
        """A pair's human preference from its column: a, b or tie (any case)."""
        if value is None:
            return None
        text = str(value).strip().lower()
        if text not in ("a", "b", "tie"):
            raise DataError(f"question {q.id!r}: column {q.human!r} holds {value!r:.40}, not a, b or tie", path=unit)
        return text

    def human_between(self, q: Any, x: Any, y: Any, a: str, b: str) -> str | None:
        """Two texts' preference from their human column: the higher value wins; equal values tie."""
        if x is None or y is None:
            return None
        fx, fy = number(x), number(y)
        for value, n, item in ((x, fx, a), (y, fy, b)):
            if not math.isfinite(n):
                raise DataError(f"question {q.id!r}: a pairwise question over items compares their {q.human!r} values, "
                                f"and this one holds {value!r:.30}, not a finite number (leave the cell empty for no "
                                "answer)", path=f"item {item}")
        return "a" if fx > fy else "b" if fy > fx else "tie"

    def answer(self, label: pl.Expr) -> pl.Expr:
        """The text picked, whichever order it was shown in: a, b or tie."""
        return text_picked(label)

    def scored(self, q: Any, answer: pl.Expr, p: dict[str, pl.Expr]) -> tuple[pl.Expr, pl.Expr]:
        """1 for text a, 0 for text b, 0.5 for a tie; P(text a)."""
        score = pl.when(answer == "a").then(1.0).when(answer == "b").then(0.0).when(answer == "tie").then(0.5)
        return score, pl.when(pl.col("order") == "ab").then(p["A"]).otherwise(p["B"])

    def consistency(self, answered: pl.DataFrame, q: Any) -> list[dict]:
        both = answered.group_by(["cluster", "repeat"]).agg(pl.col("order").n_unique().alias("orders"),
                                                            (pl.col("answer").n_unique() > 1).alias("flip"))
        sided = answered.filter(pl.col("answer").is_in(["a", "b"]))
        return [rate_row("swap_flip_rate", both.filter(pl.col("orders") == 2), pl.col("flip")),
                rate_row("first_position_win_rate", sided, pl.col("label") == "A")]

    def agreement(self, labelled: pl.DataFrame, q: Any, resamples: int) -> dict[str, list[dict]]:
        rows = self._decided(labelled)
        out = []
        for order in ("ab", "ba"):
            part = rows.filter(pl.col("order") == order)
            m = rate_with_ci(part["cluster"].to_list(), part["v"].to_list())
            out.append({"order": order, "accuracy": m.value, "n": m.n, "ci_low": m.ci_low, "ci_high": m.ci_high,
                        "ci_note": m.note})
        m = rate_with_ci(rows["cluster"].to_list(), rows["v"].to_list(), strata=rows["order"].to_list(), need=2)
        out.append({"order": BOTH, "accuracy": m.value, "n": m.n, "ci_low": m.ci_low, "ci_high": m.ci_high,
                    "ci_note": m.note})
        return {self.table: out}

    def rank_units(self, rows: pl.DataFrame, q: Any, metric: str, where: dict[str, str], resamples: int) -> Units | None:
        rows = self._decided(rows)
        order = where.get("order", BOTH)
        if order != BOTH:
            rows = rows.filter(pl.col("order") == order)
        return Units.rate(rows["cluster"].to_list(), rows["v"].to_list(), rows["order"].to_list() if order == BOTH else None,
                          need=2 if order == BOTH else None)

    @staticmethod
    def _decided(rows: pl.DataFrame) -> pl.DataFrame:
        """The pairs the humans did not tie, each verdict right (1), a tie (0.5) or wrong (0)."""
        return rows.filter(pl.col("human") != "tie").with_columns(tie_credit("answer").alias("v"))
