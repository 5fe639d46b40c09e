"""`scale = "categorical"`: one of N unordered named categories (`categories = ["comedy",
"tragedy", "romance"]`), the judge constrained to their names. A human column names a category
(any case). With one: Cohen's kappa (unweighted, from the clusters' N x N tables, its interval
withheld unless each category the humans gave is in 10 texts, as a binary question's) and accuracy
(a rate over texts); `categorical_shares` sets each category's share of the judge's answers beside
the humans' and the judge's recall of it. A category has no number: `scores.mean_score` is empty
(`label_distribution` gives each category's share of all the judge's answers, with intervals)."""
from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

import litjudge.grammars as grammars
from litjudge.engine.core.errors import DataError

from ..contract import Table
from ..metrics.bootstrap import MIN_CLUSTERS, joined_notes
from ..metrics.estimates import Units
from ..metrics.proportion import rate_with_ci
from ..rubric_stats import agreement_row, few_per_class, kappa, per_class, rarer_answer, table_units, tables_by_cluster
from .base import SCALES, Bars, PanelSpec, Scale, Schema, Setting, check_answer_names, fold, with_ci

SHARES = "categorical_shares"


@SCALES.register
class Categorical(Scale):
    name = "categorical"
    order = 40
    settings = {"categories": Setting(tuple[str, ...], (), "the names of its unordered categories (at least 2)",
                                      'categories name a categorical question\'s answers; set scale = "categorical"')}
    metrics = ("kappa", "accuracy")
    headline = "kappa"
    score = ""

    def tables(self) -> dict[str, Table]:
        return {**super().tables(), SHARES: Table(by=("question", "category"))}

    def schemas(self) -> dict[str, Schema]:
        return {self.table: {"judge": pl.Utf8, "question": pl.Utf8, "categories": pl.Int64, "n": pl.Int64,
                             "clusters": pl.Int64, **with_ci(self.metrics), "ci_note": pl.Utf8},
                SHARES: {"judge": pl.Utf8, "question": pl.Utf8, "category": pl.Utf8, "n": pl.Int64,
                         "human_share": pl.Float64, "judge_share": pl.Float64, "recall": pl.Float64}}

    def check(self, q: Any) -> None:
        names = list(q.categories)
        if len(names) < 2:
            raise ValueError(f"question {q.id!r}: a categorical scale names its categories (categories = [...], "
                             f"at least 2), got {names}")
        check_answer_names(q.id, names, "category")

    def language(self, q: Any) -> grammars.LabelSet:
        return grammars.categorical(list(q.categories))

    def human(self, q: Any, value: Any, unit: str) -> str | None:
        """The category the column names, in any case and Unicode form (and padding; `fold`); a whole
        number written as a float (a pandas column of numbers with an empty cell holds 2.0) names the
        category "2"."""
        if value is None:
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        found = {fold(c): c for c in q.categories}.get(fold(str(value).strip()))
        if found is None or isinstance(value, bool):
            raise DataError(f"question {q.id!r}: column {q.human!r} holds {value!r:.40}, which is none of "
                            f"{list(q.categories)} (in any case)", path=unit)
        return found

    def scored(self, q: Any, answer: pl.Expr, p: dict[str, pl.Expr]) -> tuple[pl.Expr, pl.Expr]:
        """No number: categories are unordered."""
        return pl.lit(None, pl.Float64), pl.lit(None, pl.Float64)

    def agreement(self, labelled: pl.DataFrame, q: Any, resamples: int) -> dict[str, list[dict]]:
        h, j = self._sides(labelled, q)
        k, clusters = len(q.categories), labelled["cluster"].to_list()
        tables = tables_by_cluster(clusters, h, j, k)
        row = agreement_row(tables, {"kappa": kappa}, resamples, withheld=self._withheld(tables, q),
                            expand_for=rarer_answer(tables))
        m = rate_with_ci(clusters, (h == j).astype(float).tolist())
        row |= {"accuracy": m.value, "accuracy_low": m.ci_low, "accuracy_high": m.ci_high}
        notes = [str(row["ci_note"])] if row["ci_note"] else []
        if m.note and len(tables) >= MIN_CLUSTERS:
            notes.append(f"accuracy: {m.note}")
        row["ci_note"] = joined_notes(*notes)
        shares = [{"category": c, "n": len(h), "human_share": float(np.mean(h == i)), "judge_share": float(np.mean(j == i)),
                   "recall": float(np.mean(j[h == i] == i)) if (h == i).any() else None}
                  for i, c in enumerate(q.categories)]
        return {SHARES: shares, self.table: [{"categories": k, "n": labelled.height, **row}]}

    def rank_units(self, rows: pl.DataFrame, q: Any, metric: str, where: dict[str, str], resamples: int) -> Units | None:
        h, j = self._sides(rows, q)
        if metric == "accuracy":
            return Units.rate(rows["cluster"].to_list(), (h == j).astype(float).tolist())
        return table_units(rows["cluster"].to_list(), h, j, len(q.categories), metric, kappa, resamples,
                           lambda tables: self._withheld(tables, q), rarer_answer)

    def panel(self, tables: dict[str, pl.DataFrame]) -> PanelSpec | None:
        shares = tables.get(SHARES)
        if shares is None or not shares.height:
            return None
        keep = [c for c in ("run", "judge") if c in shares.columns]
        judges = shares.select(keep).unique().height
        x = pl.format("{}: {}", "question", "category").alias("category_of")
        humans = shares.with_columns(x, pl.col("human_share").alias("share"), (
            pl.lit("humans") if judges == 1 else pl.format("humans (beside {})", "judge")).alias("judge"))
        said = shares.with_columns(x, pl.col("judge_share").alias("share"))
        bars = pl.concat([b.select(*keep, "category_of", "share") for b in (said, humans)])
        return PanelSpec("Categories: the judge beside the humans",
                         "Each category's share of the judge's answers and of the humans' answers, over the verdicts "
                         "with both (no interval: label_distribution gives each category's share of all the judge's "
                         "answers, with its interval), and the judge's recall of each category the humans gave.",
                         ((SHARES, shares),),
                         ((SHARES, Bars(bars, "category_of", "share", "Share of each category", "share",
                                        ylim=(0.0, 1.0))),))

    @staticmethod
    def _sides(rows: pl.DataFrame, q: Any) -> tuple[np.ndarray, np.ndarray]:
        """(human, judge) as category indices 0..N-1."""
        index = {c: i for i, c in enumerate(q.categories)}
        return (np.asarray([index[x] for x in rows["human"].to_list()], dtype=int),
                np.asarray([index[x] for x in rows["answer"].to_list()], dtype=int))

    @staticmethod
    def _withheld(tables: np.ndarray, q: Any) -> str | None:
        """Why kappa has no interval: the humans gave one category only, or a category they gave is
        in fewer than MIN_CLUSTERS texts (a binary question's rule, over the categories given)."""
        given = per_class(tables) > 0
        names = [c for c, g in zip(q.categories, given) if g]
        if len(names) < 2:
            return f"kappa: the humans gave one category only ({', '.join(names)}): no interval"
        few = few_per_class(tables[:, given, :], names)
        return f"kappa: {few}" if few else None
