"""Permutation self-consistency for listwise ranking (Tang et al. 2023): a list judged in several
shuffled orders is aggregated to its central ranking, the Kemeny ranking of the orders' rankings
(exact up to 12 items by dynamic programming, a labelled local search beyond: `metrics.kemeny`), and to the mean score
over orders.

Reported, per judge, each as a mean over lists with a 95% CI (lists resampled):
- agreement with the ground truth (Spearman with the category rank) of the single order as drawn,
  of the central ranking, and of the mean score over orders;
- position bias before and after: Spearman between where an item was shown in the prompt and the
  judge's rank of it (and its 1-5 score). Before: each order's own ranking against that order's
  shown positions, averaged over the orders. After: what the aggregate inherits, the Spearman
  between each item's MEAN shown position over the orders and its place in the aggregate (the
  Kemeny ranking of all orders, the mean score over orders). A judge that ranks by prompt order
  has -1 before and stays strongly negative after (its aggregate follows the items' mean shown
  position: -0.8 to -1 with 3 orders); a judge blind to position is about 0 both ways. (An earlier
  "after" compared each order's positions with the other orders' aggregate: about 0 for every
  judge by construction, since the shuffles are independent; it could not see bias.) With one
  order there is no after.

Lists are the resampling unit of every interval: a list's repeats are not independent of each
other (the same items, the same prompt), so a repeat is averaged into its list's value first.
"""
from __future__ import annotations

import math

import polars as pl

from litjudge.grammars.listwise import position_scores

from .frames import split
from .metrics import spearman
from .metrics.bootstrap import joined_notes
from .metrics.kemeny import EXACT_MAX, is_exact, kemeny
from .metrics.proportion import bounded_mean_with_ci

UNIT = ["judge", "group", "list", "repeat"]


def central_rankings(units: dict[tuple, pl.DataFrame]) -> pl.DataFrame:
    """One row per (judge, group, list, repeat, item) of `units` (the verdicts split by UNIT): its
    position score as a share of the list (first 1, last 0) in the order as drawn and in the central
    ranking of all orders (one scale: the central one was N..1 beside the share), its mean score over
    orders, where it was shown in the order as drawn, and how many orders were judged."""
    rows = []
    for key, g in units.items():
        rankings, first = [], None
        for (order,), o in split(g, "order").items():
            ranking = o.sort("position", descending=True)["item_id"].to_list()
            rankings.append(ranking)
            if order == 0:
                first = o
        central = kemeny(rankings)
        n, at = len(central), position_scores(tuple((str(item), 0) for item in central))
        mean_score = g.group_by("item_id").agg(pl.col("score").mean())
        means = dict(zip(mean_score["item_id"].to_list(), mean_score["score"].to_list(), strict=True))
        single, single_score, shown = (_by_item(first, c) for c in ("position", "score", "shown_at"))
        for item in central:
            rows.append({**dict(zip(UNIT, key, strict=True)), "item_id": item, "orders": len(rankings),
                         "central_exact": is_exact(n),
                         "single_position": single.get(item), "central_position": at[str(item)],
                         "single_score": single_score.get(item), "mean_score": means.get(item),
                         "shown_at": shown.get(item)})
    return pl.DataFrame(rows, schema={"judge": pl.Utf8, "group": pl.Utf8, "list": pl.Int64, "repeat": pl.Int64,
                                      "item_id": pl.Utf8, "orders": pl.Int64, "central_exact": pl.Boolean,
                                      "single_position": pl.Float64,
                                      "central_position": pl.Float64, "single_score": pl.Float64,
                                      "mean_score": pl.Float64, "shown_at": pl.Int64})


def _by_item(frame: pl.DataFrame | None, column: str) -> dict:
    """item -> its `column` in the order as drawn (empty when that order was not judged)."""
    if frame is None:
        return {}
    return dict(zip(frame["item_id"].to_list(), frame[column].to_list(), strict=True))


SPEARMAN_BOUNDS = (-1.0, 1.0)


def _mean_ci(lists: list[str], values: list[float]) -> dict:
    """Mean over lists of each list's mean over its repeats (the module's rule: a list with a repeat
    left undefined weighed less when every (list, repeat) counted alike), with a CI resampling
    lists; `units` counts the (list, repeat) values defined, `lists` the lists with one (those the
    mean and its interval read: a list whose every repeat is undefined was counted and not read)."""
    per: dict[str, list[float]] = {}
    for name, v in zip(lists, values, strict=True):
        if v is not None and not math.isnan(v):
            per.setdefault(name, []).append(v)
    names = sorted(per)
    # a Spearman's bounds: the percentile interval covered 0.85 at 10 lists with most of them at 1
    row = bounded_mean_with_ci([sum(per[n]) / len(per[n]) for n in names], SPEARMAN_BOUNDS).row("spearman", n="lists")
    return row | {"units": sum(len(v) for v in per.values()), "lists": len(names)}


def _spearman(x: list, y: list) -> float:
    return spearman([math.nan if v is None else v for v in x], [math.nan if v is None else v for v in y]).value


def order_bias(unit: pl.DataFrame) -> dict[str, float]:
    """Position bias of one list at one repeat, from all its orders (rows: order, item_id,
    position, score, shown_at): each order's ranking / score against its own shown positions
    (before, averaged over the orders), and the aggregate of all orders (Kemeny ranking, mean
    score) against each item's mean shown position (after). NaN where undefined (one order has
    no after)."""
    orders = {o: g for (o,), g in unit.group_by(["order"], maintain_order=True)}
    before_rank = [_spearman(g["shown_at"].to_list(), g["position"].to_list()) for g in orders.values()]
    before_score = [_spearman(g["shown_at"].to_list(), g["score"].to_list()) for g in orders.values()]
    out = {"before_rank": _mean(before_rank), "before_score": _mean(before_score),
           "after_rank": math.nan, "after_score": math.nan}
    if len(orders) < 2:
        return out
    central = kemeny([g.sort("position", descending=True)["item_id"].to_list() for g in orders.values()])
    place = {item: float(len(central) - r) for r, item in enumerate(central)}
    per_item = unit.group_by("item_id").agg(pl.col("shown_at").cast(pl.Float64).mean(), pl.col("score").mean())
    items, shown = per_item["item_id"].to_list(), per_item["shown_at"].to_list()
    out["after_rank"] = _spearman(shown, [place.get(i) for i in items])
    out["after_score"] = _spearman(shown, per_item["score"].to_list())
    return out


def _mean(values: list[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else math.nan


def permutation_tables(s: pl.DataFrame, info: pl.DataFrame, orders: int) -> dict[str, pl.DataFrame]:
    by_unit = split(s, UNIT)
    ranks = central_rankings(by_unit).join(info.select("item_id", "category_rank"), on="item_id", how="left")
    agreement, bias = [], []
    units_of: dict[str, list[tuple[str, pl.DataFrame]]] = {}
    for (judge, g, lst, _rep), u in by_unit.items():
        units_of.setdefault(judge, []).append((f"{g}/{lst}", u))
    for (judge,), j in split(ranks, "judge").items():
        per_list = [(f"{g}/{lst}", u) for (g, lst, _rep), u in split(j, ["group", "list", "repeat"]).items()]
        lists = [n for n, _ in per_list]
        for label, column in (("single order", "single_position"), ("central (Kemeny)", "central_position"),
                              ("mean score over orders", "mean_score")):
            values = [spearman(u["category_rank"].fill_null(math.nan).to_list(),
                               u[column].fill_null(math.nan).to_list()).value for _, u in per_list]
            row = {"judge": judge, "ranking": label, "orders": orders, **_mean_ci(lists, values)}
            approximate = j.filter(~pl.col("central_exact"))["list"].n_unique() if column == "central_position" else 0
            if approximate:               # lists over EXACT_MAX items: a local search's order, not the optimum
                said = f"central ranking of lists over {EXACT_MAX} items by local search, not exact"
                row["ci_note"] = joined_notes(row["ci_note"], said)
            agreement.append(row)
        units = [(name, order_bias(u)) for name, u in units_of.get(judge, [])]
        for label, key in (("before: single order", "before_rank"), ("after: central (Kemeny)", "after_rank"),
                           ("before: single order's score", "before_score"),
                           ("after: mean score over orders", "after_score")):
            bias.append({"judge": judge, "ranking": label, "orders": orders,
                         **_mean_ci([n for n, _ in units], [b[key] for _, b in units])})
    return {"psc_rankings": ranks, "psc_agreement": pl.DataFrame(agreement), "psc_position_bias": pl.DataFrame(bias)}
