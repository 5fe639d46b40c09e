"""A new protocol in one file (the test registers it with one line): single-answer grading, each
rated item scored 1-5 on its own, the score's Spearman with the human score. It reads `items`, so
any dataset whose loader gives items feeds it (no card names it); its report is the default panel
built from its metric table."""
from __future__ import annotations

from dataclasses import dataclass

import polars as pl

import litjudge.grammars as grammars
from litjudge.engine.core.requests import Message, RequestMeta
from litjudge.judges.base import Build, Context, Protocol
from litjudge.judges.metrics import spearman


@dataclass(frozen=True)
class SingleOptions:
    criterion: str = "creativity"


class SingleGrading(Protocol):
    name = "single"
    version = "1"
    data_kind = "items"
    Options = SingleOptions
    summary = ("agreement",)
    metric_tables = {"agreement": ()}
    rank_metrics = {"agreement.spearman": "all"}
    default_rank_by = "agreement.spearman"

    def build(self, ctx: Context) -> Build:
        lang = self.answer_language(ctx, grammars.score(1, 5), "Score:")
        out = Build([])
        for item in ctx.load("items").items[: ctx.config.limit]:
            ask = f"Rate the {ctx.options.criterion} of this text from 1 to 5.\n\n{item.text}\n\nAnswer with the number only."
            out.requests += self.repeated(ctx, (Message("user", ask),), lang,
                                          RequestMeta(self.name, item.item_id, (("human_score", item.human_score),)))
        return out

    def aggregate(self, table: pl.DataFrame, ctx: Context) -> dict[str, pl.DataFrame]:
        ok = table.filter(pl.col("status") == "ok")
        rows = [{"judge": judge, "items": g.height,
                 "spearman": spearman(g["human_score"].to_list(), g["value"].cast(pl.Float64).to_list()).value}
                for (judge,), g in ok.group_by(["judge"], maintain_order=True)]
        return {"agreement": pl.DataFrame(rows), "scores": ok.select("judge", "item_id", "value", "human_score")}
