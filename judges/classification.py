"""No-context classification (Sawicki et al. 2025, experiment 1): one item per prompt, reasoning
then a category from a configured label set (e.g. Good / Medium / Bad).

Method:
1. Each item alone, with the paper's prompt (or the project's); in analyze mode the judge reasons,
   then ends with `Category: <label>` (constrained); in label mode it gives the label only.
2. The dataset's ground-truth categories map onto the labels (`category_map`, e.g. AUT rating
   tertiles high/mid/low -> Good/Medium/Bad); items without a category are skipped.
3. Accuracy, the confusion matrix, per-class counts (the papers saw judges pile into the middle
   class), and Spearman of the predicted vs true ordinal category (labels are listed best first).
"""
from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

import polars as pl

import litjudge.grammars as grammars
from litjudge.engine.core.errors import ConfigError
from litjudge.engine.core.paths import paper_prompt
from litjudge.engine.core.schema import check_choices
from litjudge.engine.data.items import ItemSet, sample_per_category, select_groups

from .base import Ask, Context, Declaration, MetricTable, Protocol, RankBy, Skip, Table, imputed, units_where
from .frames import split
from .metrics import accuracy, spearman
from .metrics.estimates import Units, spearman_of
from .templates import TemplateFields, template_of

WRONG = "(missing: counted wrong)"     # the stand-in prediction of missing = "wrong": equals no truth
DEFAULT_TEMPLATE = ("Categorise the {kind} below as {labels}, from best to worst.\n\n<{kind}>\n{text}\n</{kind}>")


@dataclass(frozen=True)
class ClassificationOptions:
    labels: tuple[str, ...] = ("Good", "Medium", "Bad")     # best first
    category_map: dict[str, str] = field(default_factory=dict)   # dataset category -> label ({}: identical)
    template: Literal["paper", "default"] = "paper"    # "paper" (Sawicki et al.) or "default"
    item_kind: str = "poem"                            # what the prompt calls the item
    groups: tuple[str, ...] = ()       # which groups (objects, story sets), in this order; empty: all
    per_category: int = 0                              # items per category per group (0: all)
    seed: int = 0                                      # the seeded draw of per_category items
    analysis_tokens: int = 256                         # analyze mode: bound on the free analysis

    def __post_init__(self) -> None:
        check_choices(self)
        if len(self.labels) < 2 or len(set(self.labels)) != len(self.labels):
            raise ValueError(f"options.labels needs at least 2 distinct labels, got {list(self.labels)}")
        bad = [v for v in self.category_map.values() if v not in self.labels]
        if bad:
            raise ValueError(f"options.category_map maps to {bad}, which are not in options.labels {list(self.labels)}")


class Classification(Protocol):
    declared = Declaration(
        name="classification", version="1", reads="items", options=ClassificationOptions, limit_counts="groups",
        modes=("label", "analyze", "distribution"), missing=("drop", "label", "wrong"),
        summary=("metrics", "confusion", "class_counts"),
        tables={"metrics": MetricTable(higher=("accuracy", "spearman_ordinal"), rank=("accuracy", "spearman_ordinal")),
                **dict.fromkeys(("confusion", "class_counts", "per_item"), Table())},
        rank_by="metrics.accuracy", fields={"group": str, "truth": str, "source": str},
        report="litjudge.engine.app.report.panels:classification_panels")

    def missing_labels(self, options: ClassificationOptions) -> tuple[str, ...]:
        return tuple(options.labels)

    def template_fields(self, options: ClassificationOptions) -> TemplateFields:
        return TemplateFields(("text", "labels", "kind", "group"), ("text",))

    def rank_units(self, tables: dict[str, pl.DataFrame], judge: str, rank: RankBy, options: ClassificationOptions):
        """Items are the clusters (an item's repeats move together)."""
        scored = tables.get("per_item")
        if scored is None or "pred" not in scored.columns:
            return None
        rows = units_where(scored.filter((pl.col("judge") == judge) & pl.col("pred").is_not_null()), rank)
        if rows is None:
            return None
        if rank.metric == "accuracy":
            return Units.rate(rows["item_id"].to_list(), (rows["pred"] == rows["truth"]).cast(pl.Float64).to_list())
        order = {lab: len(options.labels) - i for i, lab in enumerate(options.labels)}
        rows = rows.filter(pl.col("pred").is_in(list(order)))
        return Units.of(rows["item_id"].to_list(), {"x": [order[t] for t in rows["truth"].to_list()],
                                                    "y": [order[p] for p in rows["pred"].to_list()]}, spearman_of)

    def load(self, ctx: Context) -> ItemSet:
        return ctx.load("items")

    def prompt(self, opts: ClassificationOptions, mode: str, text: str) -> str:
        labels = ", ".join(f'"{lab}"' for lab in opts.labels)
        if opts.template == "paper":
            body = paper_prompt("poetry_without_context", "template").replace("{text}", text.strip())
            body = body.replace("poems", f"{opts.item_kind}s").replace("poem", opts.item_kind)
            body = body.split("Write your reasoning")[0].rstrip()
        else:
            body = DEFAULT_TEMPLATE.format(kind=opts.item_kind, labels=labels, text=text.strip())
        if mode == "analyze":
            return body + f"\n\nWrite your reasoning, then end with a last line 'Category: X' where X is one of {labels}."
        return body + f"\n\nAnswer with the category only: one of {labels}."

    def units(self, ctx: Context) -> list[tuple[str, list]]:
        """The groups (objects, story sets): the named ones, else all in the data's order."""
        return select_groups(self.load(ctx), list(ctx.options.groups))

    def asks(self, ctx: Context, unit: tuple[str, list]) -> Iterator[Ask | Skip]:
        """Each item of the group (`per_category` of each category when set), asked for its category;
        an item with no ground-truth category is skipped."""
        opts: ClassificationOptions = ctx.options
        group, items = unit
        verdict = grammars.categorical(list(opts.labels))
        for item in sample_per_category(items, opts.per_category, random.Random(f"{opts.seed}/{group}")):
            truth = opts.category_map.get(item.category, item.category) if item.category else None
            if truth is None:
                yield Skip(item.item_id, "no ground-truth category")
                continue
            if truth not in opts.labels:
                raise ConfigError(f"item {item.item_id}: category {item.category!r} maps to no label in "
                                  f"{list(opts.labels)} (set options.category_map)", parameter="options.category_map")
            own = template_of(ctx.config)
            asked = own.render({"text": item.text.strip(), "labels": ", ".join(f'"{lab}"' for lab in opts.labels),
                                "kind": opts.item_kind, "group": group}) if own else \
                self.prompt(opts, ctx.config.mode, item.text)
            yield Ask(item.item_id, asked, verdict,
                      (("group", group), ("truth", truth), ("source", item.source)), marker="Category:")

    def aggregate(self, table: pl.DataFrame, ctx: Context) -> dict[str, pl.DataFrame]:
        """Accuracy and ordinal Spearman over the verdicts the missing-answer policy keeps (a
        non-answer counted as wrong is a prediction no label matches); the confusion matrix and
        the class counts show the judge's real answers."""
        labels = list(ctx.options.labels)
        policy = ctx.config.missing_policy
        rank = {lab: len(labels) - i for i, lab in enumerate(labels)}     # best = highest
        metrics, confusion, counts, scored_all = [], [], [], []
        for (judge,), j in split(table, "judge").items():
            ok = j.filter(pl.col("status") == "ok")
            pred_expr = imputed(policy, pl.when(pl.col("status") == "ok").then(pl.col("label")), label=pl.lit,
                                wrong=pl.lit(WRONG))
            scored = j.with_columns(pred_expr.alias("pred")).filter(pl.col("pred").is_not_null())
            t_all, p_all = scored["truth"].to_list(), scored["pred"].to_list()
            rho = spearman([rank[t] for t, p in zip(t_all, p_all) if p in rank],
                           [rank[p] for p in p_all if p in rank])
            # a non-answer counted wrong has no place on the ordinal scale: the Spearman's own n says so
            # items are items (repeats of one counted once: 27 said for 9), verdicts every answer asked
            metrics.append({"judge": judge, "items": j["item_id"].n_unique(), "verdicts": j.height, "n": scored.height,
                            "unparsed": j.height - ok.height,
                            "accuracy": accuracy(t_all, p_all).value, "spearman_ordinal": rho.value,
                            "spearman_n": rho.n,
                            "p": _item_p_value(scored.filter(pl.col("pred").is_in(list(rank))), rank)})
            scored_all.append(scored.select("judge", "item_id", "group", "truth", "pred", "repeat"))
            truth, pred = ok["truth"].to_list(), ok["label"].to_list()
            for t in labels:
                row = {"judge": judge, "true": t}
                row.update({f"pred_{p}": sum(1 for a, b in zip(truth, pred) if a == t and b == p) for p in labels})
                confusion.append(row)
            # the truth over every verdict and item asked, not the parsed ones (no label was "true" of 3
            # Good items whose answers were all unparsed); predicted: the judge's parsed answers
            truths, items = j["truth"].to_list(), j.unique("item_id")["truth"].to_list()
            counts += [{"judge": judge, "label": lab, "items": items.count(lab), "true": truths.count(lab),
                        "predicted": pred.count(lab)} for lab in labels]
        return {"metrics": pl.DataFrame(metrics), "confusion": pl.DataFrame(confusion),
                "class_counts": pl.DataFrame(counts),
                "per_item": table.select(["judge", "item_id", "group", "truth", "status", "label", "repeat"]).join(
                    pl.concat(scored_all).select("judge", "item_id", "repeat", "pred") if scored_all else
                    pl.DataFrame(schema={"judge": pl.Utf8, "item_id": pl.Utf8, "repeat": pl.Int64, "pred": pl.Utf8}),
                    on=["judge", "item_id", "repeat"], how="left")}


def _item_p_value(scored: pl.DataFrame, rank: dict[str, int]) -> float | None:
    """The Spearman test's p-value over ITEMS (each item's mean predicted rank over its repeats):
    repeats of one item are not independent draws, and counting them shrank p from 1e-5 to 1e-23
    with 5 repeats."""
    per_item = (scored.with_columns(pl.col("truth").replace_strict(rank, return_dtype=pl.Float64).alias("t"),
                                    pl.col("pred").replace_strict(rank, return_dtype=pl.Float64).alias("r"))
                .group_by("item_id").agg(pl.col("t").first(), pl.col("r").mean()))
    return spearman(per_item["t"].to_list(), per_item["r"].to_list()).p_value
