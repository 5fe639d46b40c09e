"""`scale = "binary"`: two labels, the positive one first (Yes / No unless `labels = [...]`); with a
human column, Cohen's kappa and balanced accuracy, from the clusters' 2 x 2 tables."""
from __future__ import annotations

from typing import Any

import polars as pl

import litjudge.grammars as grammars
from litjudge.engine.core.errors import DataError

from ..metrics.estimates import Units
from ..rubric_stats import (
    agreement_row,
    balanced_accuracy,
    few_per_class,
    kappa,
    rarer_answer,
    table_units,
    tables_by_cluster,
)
from .base import SCALES, Scale, Schema, Setting, check_answer_names, fold, with_ci

TRUE, FALSE = ("true", "yes", "1", "1.0"), ("false", "no", "0", "0.0")


def synonyms(labels: tuple[str, ...]) -> dict[str, str]:
    """Which label true/false (yes/no, 1/0) stand for: the positive label and the other; by meaning
    when the labels are such words themselves; none when they are only partly (["Yes", "Maybe"])."""
    kinds = ["true" if lab.lower() in TRUE else "false" if lab.lower() in FALSE else None for lab in labels]
    if kinds == [None, None]:
        return {"true": labels[0], "false": labels[1]}
    if set(kinds) == {"true", "false"}:
        return {kind: lab for kind, lab in zip(kinds, labels) if kind}
    return {}


def _also(labels: tuple[str, ...]) -> str:
    return " (nor true/false, 1/0)" if synonyms(labels) else ""


STATISTICS = {"kappa": kappa, "balanced_accuracy": balanced_accuracy}


@SCALES.register
class Binary(Scale):
    name = "binary"
    order = 10
    settings = {"labels": Setting(tuple[str, ...], ("Yes", "No"), "the two answers, the positive one first",
                                  "labels name a binary question's answers (this one is {scale})")}
    metrics = tuple(STATISTICS)
    headline = "kappa"

    def schemas(self) -> dict[str, Schema]:
        return {self.table: {"judge": pl.Utf8, "question": pl.Utf8, "n": pl.Int64, "clusters": pl.Int64,
                             **with_ci(self.metrics), "ci_note": pl.Utf8, "judge_positive_rate": pl.Float64,
                             "human_positive_rate": pl.Float64}}

    def check(self, q: Any) -> None:
        labels = list(q.labels)
        if len(labels) != 2:
            raise ValueError(f"question {q.id!r}: a binary scale has two labels, the positive first, got {labels}")
        check_answer_names(q.id, labels, "label")

    def language(self, q: Any) -> grammars.LabelSet:
        return grammars.binary(*q.labels)

    def human(self, q: Any, value: Any, unit: str) -> str | None:
        """One of the labels (any case), or true/false, yes/no, 1/0 for the label that means it: the
        positive label and the other, unless the labels are such words themselves (["false", "true"]
        reads 0 as "false", whichever is listed first)."""
        if value is None:
            return None
        text = fold(str(value).strip())
        labels = {fold(lab): lab for lab in q.labels}
        if text in labels:
            return labels[text]
        meaning = "true" if value is True or text in TRUE else "false" if value is False or text in FALSE else None
        label = synonyms(q.labels).get(meaning) if meaning else None
        if label is None:
            raise DataError(f"question {q.id!r}: column {q.human!r} holds {value!r:.40}, which is none of "
                            f"{list(q.labels)}{_also(q.labels)}", path=unit)
        return label

    def scored(self, q: Any, answer: pl.Expr, p: dict[str, pl.Expr]) -> tuple[pl.Expr, pl.Expr]:
        """1 for the positive label, 0 for the other; P(positive)."""
        positive = q.labels[0]
        return pl.when(answer.is_not_null()).then((answer == positive).cast(pl.Float64)), p[positive]

    def agreement(self, labelled: pl.DataFrame, q: Any, resamples: int) -> dict[str, list[dict]]:
        truth, pred = self._sides(labelled, q)
        # category 0 = the negative label, 1 = the positive: kappa and balanced accuracy are symmetric in them
        tables = tables_by_cluster(labelled["cluster"].to_list(), truth, pred, 2)
        row = agreement_row(tables, STATISTICS, resamples, withheld=few_per_class(tables, q.labels[::-1]),
                            expand_for=rarer_answer(tables))
        return {self.table: [{"n": labelled.height, **row, "judge_positive_rate": float(pred.mean()),
                              "human_positive_rate": float(truth.mean())}]}

    def rank_units(self, rows: pl.DataFrame, q: Any, metric: str, where: dict[str, str], resamples: int) -> Units | None:
        h, j = self._sides(rows, q)
        return table_units(rows["cluster"].to_list(), h, j, 2, metric, STATISTICS[metric], resamples,
                           lambda tables: few_per_class(tables, q.labels[::-1]), rarer_answer)

    @staticmethod
    def _sides(rows: pl.DataFrame, q: Any):
        """(human, judge) as 1 for the positive label, 0 for the other."""
        return ((rows["human"] == q.labels[0]).cast(pl.Int64).to_numpy(),
                (rows["answer"] == q.labels[0]).cast(pl.Int64).to_numpy())
