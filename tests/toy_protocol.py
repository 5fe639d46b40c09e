"""A new protocol in one file (the test registers it with one line): each rated item scored 1-5 on
its own, the score's Spearman with the human score. It reads `items`, so any dataset whose loader
gives items feeds it; its report is the default panel built from its metric table."""
from __future__ import annotations

from dataclasses import dataclass

import polars as pl

import litjudge.grammars as grammars
from litjudge.judges.base import Ask, Context, Declaration, MetricTable, Protocol, Table
from litjudge.judges.metrics import spearman


@dataclass(frozen=True)
class SingleOptions:
    criterion: str = "creativity"


class SingleGrading(Protocol):
    declared = Declaration(name="single", version="1", reads="items", options=SingleOptions, limit_counts="items",
                           tables={"agreement": MetricTable(higher=("spearman",), rank=("spearman",)), "scores": Table()},
                           rank_by="agreement.spearman", summary=("agreement",),
                           fields={"human_score": float})

    def units(self, ctx: Context):
        return ctx.load("items").items

    def asks(self, ctx: Context, item):
        ask = f"Rate the {ctx.options.criterion} of this text from 1 to 5.\n\n{item.text}\n\nAnswer with the number only."
        yield Ask(item.item_id, ask, grammars.score(1, 5), (("human_score", item.human_score),))

    def aggregate(self, table: pl.DataFrame, ctx: Context) -> dict[str, pl.DataFrame]:
        ok = table.filter(pl.col("status") == "ok")
        rows = [{"judge": judge, "items": g.height,
                 "spearman": spearman(g["human_score"].to_list(), g["value"].cast(pl.Float64).to_list()).value}
                for (judge,), g in ok.group_by(["judge"], maintain_order=True)]
        return {"agreement": pl.DataFrame(rows), "scores": ok.select("judge", "item_id", "value", "human_score")}
