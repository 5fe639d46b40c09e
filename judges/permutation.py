"""Permutation self-consistency for listwise ranking (Tang et al. 2023): a list judged in several
shuffled orders is aggregated to its central ranking, the Kemeny ranking of the orders' rankings
(exact up to 8 items, a documented local search beyond: `metrics.kemeny`), and to the mean score
over orders.

Reported, per judge, each as a mean over lists with a 95% CI (lists resampled):
- agreement with the ground truth (Spearman with the category rank) of the single order as drawn,
  of the central ranking, and of the mean score over orders;
- position bias before and after: Spearman between where an item was shown in the prompt and the
  judge's rank of it (and its 1-5 score), for the single order (before) and for the central ranking
  (the mean score over orders) against the same shown positions (after). A judge that ranks by
  prompt order has -1 before and about 0 after.
"""
from __future__ import annotations

import math

import polars as pl

from .metrics import spearman
from .metrics.bootstrap import mean_with_ci
from .metrics.kemeny import kemeny

UNIT = ["judge", "group", "list", "repeat"]


def central_rankings(s: pl.DataFrame) -> pl.DataFrame:
    """One row per (judge, group, list, repeat, item): its position score (N..1) in the order as
    drawn, in the central ranking of all orders, its mean score over orders, where it was shown in
    the order as drawn, and how many orders were judged."""
    rows = []
    for key, g in s.group_by(UNIT, maintain_order=True):
        rankings, first = [], None
        for (order,), o in g.group_by(["order"], maintain_order=True):
            ranking = o.sort("position", descending=True)["item_id"].to_list()
            rankings.append(ranking)
            if order == 0:
                first = o
        central = kemeny(rankings)
        n = len(central)
        mean_score = g.group_by("item_id").agg(pl.col("score").mean())
        means = dict(zip(mean_score["item_id"].to_list(), mean_score["score"].to_list(), strict=True))
        single, single_score, shown = (_by_item(first, c) for c in ("position", "score", "shown_at"))
        for rank, item in enumerate(central):
            rows.append({**dict(zip(UNIT, key, strict=True)), "item_id": item, "orders": len(rankings),
                         "single_position": single.get(item), "central_position": float(n - rank),
                         "single_score": single_score.get(item), "mean_score": means.get(item),
                         "shown_at": shown.get(item)})
    return pl.DataFrame(rows, schema={"judge": pl.Utf8, "group": pl.Utf8, "list": pl.Int64, "repeat": pl.Int64,
                                      "item_id": pl.Utf8, "orders": pl.Int64, "single_position": pl.Float64,
                                      "central_position": pl.Float64, "single_score": pl.Float64,
                                      "mean_score": pl.Float64, "shown_at": pl.Int64})


def _by_item(frame: pl.DataFrame | None, column: str) -> dict:
    """item -> its `column` in the order as drawn (empty when that order was not judged)."""
    if frame is None:
        return {}
    return dict(zip(frame["item_id"].to_list(), frame[column].to_list(), strict=True))


def _mean_ci(lists: list[str], values: list[float]) -> dict:
    return mean_with_ci(lists, values).row("spearman", n="lists")


def permutation_tables(s: pl.DataFrame, info: pl.DataFrame, orders: int) -> dict[str, pl.DataFrame]:
    ranks = central_rankings(s).join(info.select("item_id", "category_rank"), on="item_id", how="left")
    agreement, bias = [], []
    for (judge,), j in ranks.group_by(["judge"], maintain_order=True):
        per_list = [(f"{g}/{lst}/{rep}", u) for (g, lst, rep), u in j.group_by(["group", "list", "repeat"],
                                                                                 maintain_order=True)]
        names = [n for n, _ in per_list]
        for label, column in (("single order", "single_position"), ("central (Kemeny)", "central_position"),
                              ("mean score over orders", "mean_score")):
            values = [spearman(u["category_rank"].fill_null(math.nan).to_list(),
                               u[column].fill_null(math.nan).to_list()).value for _, u in per_list]
            agreement.append({"judge": judge, "ranking": label, "orders": orders, **_mean_ci(names, values)})
        for label, column in (("before: single order", "single_position"), ("after: central (Kemeny)", "central_position"),
                              ("before: single order's score", "single_score"),
                              ("after: mean score over orders", "mean_score")):
            values = [spearman(u["shown_at"].cast(pl.Float64).fill_null(math.nan).to_list(),
                               u[column].fill_null(math.nan).to_list()).value for _, u in per_list]
            bias.append({"judge": judge, "ranking": label, "orders": orders, **_mean_ci(names, values)})
    return {"psc_rankings": ranks, "psc_agreement": pl.DataFrame(agreement), "psc_position_bias": pl.DataFrame(bias)}
