"""`scale = "points"`: an N-point scale, each point described (`points = [...]`, 2 to 10 of them,
as Prometheus' score rubrics); the judge answers 1..N. With a human column: Spearman and
quadratic-weighted kappa from the clusters' N x N tables; exact and within-one agreement as rates
(proportion.rate_with_ci), the mean difference (judge - human) as a mean of per-verdict values
(the project's mean interval, with its exact bound where every text gives the same value)."""
from __future__ import annotations

import math
import re
from typing import Any

import polars as pl

import litjudge.grammars as grammars
from litjudge.engine.core.errors import DataError

from ..metrics.bootstrap import MIN_CLUSTERS, joined_notes, mean_with_ci
from ..metrics.estimates import Units
from ..metrics.proportion import rate_with_ci
from ..rubric_stats import agreement_row, quadratic_kappa, spearman, table_units, tables_by_cluster
from .base import CONTROL, SCALES, Scale, Schema, Setting, number, with_ci

STATISTICS = {"spearman": spearman, "qwk": quadratic_kappa}
RATES = ("exact", "within_one")


@SCALES.register
class Points(Scale):
    name = "points"
    order = 20
    settings = {"points": Setting(tuple[str, ...], (), "a description per point, 1..N (2 <= N <= 10)",
                                  'points describe an N-point scale; set scale = "points"')}
    metrics = (*STATISTICS, *RATES)
    headline = "qwk"
    score = "mean"

    def schemas(self) -> dict[str, Schema]:
        return {self.table: {"judge": pl.Utf8, "question": pl.Utf8, "points": pl.Int64, "n": pl.Int64,
                             "clusters": pl.Int64, **with_ci((*self.metrics, "mean_difference")), "ci_note": pl.Utf8}}

    def check(self, q: Any) -> None:
        if not 2 <= len(q.points) <= 10:
            raise ValueError(f"question {q.id!r}: a points scale describes each point 1..N (2 to 10 of them), "
                             f"got {len(q.points)} description(s)")
        for i, text in enumerate(q.points, start=1):
            # one line each in the prompt ("i: text"): a line break in one wrote a point of its own ("5: fake")
            if not text.strip() or re.search(f"[{CONTROL}]", text):
                raise ValueError(f"question {q.id!r}: point {i}'s description {text!r:.60} is "
                                 f"{'blank' if not text.strip() else 'not one line (no line breaks or control characters)'}")

    def language(self, q: Any) -> grammars.LabelSet:
        return grammars.score(1, len(q.points))

    def answer_line(self, q: Any) -> str:
        return f"Answer with the score only: a whole number from 1 to {len(q.points)}."

    def rubric(self, q: Any) -> str:
        return "\n".join(f"{i}: {p.strip()}" for i, p in enumerate(q.points, start=1))

    def human(self, q: Any, value: Any, unit: str) -> str | None:
        """A whole point 1..N (a number, or its text), as text."""
        if value is None:
            return None
        point = number(value)
        if not math.isfinite(point) or point != round(point) or not 1 <= point <= len(q.points):
            raise DataError(f"question {q.id!r}: column {q.human!r} holds {value!r:.40}, not a whole point from 1 to "
                            f"{len(q.points)}", path=unit)
        return str(int(point))

    def scored(self, q: Any, answer: pl.Expr, p: dict[str, pl.Expr]) -> tuple[pl.Expr, pl.Expr]:
        """The point; sum of P(k) k."""
        labels = list(p)
        expected = sum((p[lab].fill_null(0.0) * float(lab) for lab in labels), pl.lit(0.0))
        return answer.cast(pl.Float64, strict=False), pl.when(p[labels[0]].is_not_null()).then(expected)

    def score_bounds(self, q: Any) -> tuple[float, float]:
        return 1.0, float(len(q.points))

    def agreement(self, labelled: pl.DataFrame, q: Any, resamples: int) -> dict[str, list[dict]]:
        k = len(q.points)
        truth = labelled["human"].cast(pl.Int64).to_numpy() - 1
        pred = labelled["answer"].cast(pl.Int64).to_numpy() - 1
        clusters = labelled["cluster"].to_list()
        row = agreement_row(tables_by_cluster(clusters, truth, pred, k), STATISTICS, resamples)
        note = row["ci_note"]
        notes = [note] if isinstance(note, str) and note else []     # agreement_row's note: a str or None
        for name, values, bounds in (("exact", pred == truth, None), ("within_one", abs(pred - truth) <= 1, None),
                                     ("mean_difference", pred - truth, (1.0 - k, k - 1.0))):
            m = (rate_with_ci(clusters, values.astype(float).tolist()) if bounds is None else
                 mean_with_ci(clusters, values.astype(float).tolist(), resamples=resamples, bounds=bounds))
            row |= {name: m.value, f"{name}_low": m.ci_low, f"{name}_high": m.ci_high, f"{name}_note": m.note}
            if m.note and m.note not in notes and len(set(map(str, clusters))) >= MIN_CLUSTERS:
                notes.append(f"{name}: {m.note}")
        row["ci_note"] = joined_notes(*notes)
        return {self.table: [{"points": k, "n": labelled.height, **row}]}

    def rank_units(self, rows: pl.DataFrame, q: Any, metric: str, where: dict[str, str], resamples: int) -> Units | None:
        h, j = rows["human"].cast(pl.Int64).to_numpy(), rows["answer"].cast(pl.Int64).to_numpy()
        if metric in RATES:
            return Units.rate(rows["cluster"].to_list(), (abs(h - j) <= (metric == "within_one")).astype(float).tolist())
        return table_units(rows["cluster"].to_list(), h - 1, j - 1, len(q.points), metric, STATISTICS[metric], resamples)
