"""The `ppi` table: for the quantity the humans measure (a protocol names it: TTCW's expert pass
rate per test and over all tests), the estimate from the labelled items alone beside the
prediction-powered one (PPI++, judges/metrics/ppi.py), each with its 95% interval, lambda, the
rectifier and n_eff, the human labels PPI++ is worth. Which human labels may be used is the run's
`[ppi] labelled` (engine/core/settings.py PPIConfig); every other label is hidden from both
estimates. Clusters (stories) are the units of the draw and of every interval.

Neither estimate loses an item to the judge: the human-only rate is over every labelled item
whatever the judge said (its interval the rate tables' one, proportion.rate_interval), and where
the judge gave no answer PPI++ reads a stand-in that no human label decides (`unanswered`: the
missing-answer policy's label where it names one, else the midpoint of the range). Any fixed
function of the item is a valid prediction for PPI++; dropping the item instead made both
estimates depend on which items the judge could answer (a judge silent on half the passes printed
0.10 for a rate of 0.16).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import polars as pl

from litjudge.engine.core.errors import ConfigError
from litjudge.engine.core.settings import PPIConfig

from .contract import Declaration
from .metrics.bootstrap import MIN_CLUSTERS, joined_notes
from .metrics.ppi import TOO_FEW, ClusterSums, Estimate, effective_labels, estimate
from .metrics.proportion import rate_interval
from .ppi_annotated import Annotated, human_value
from .ppi_annotated import estimates as annotated_estimates
from .ppi_annotated import labelled_prefix as annotated_prefix

POOLED = "all"
COLUMNS = {"judge": pl.Utf8, "view": pl.Utf8, "test": pl.Utf8, "quantity": pl.Utf8, "n_labelled": pl.Int64,
           "n_unlabelled": pl.Int64, "clusters": pl.Int64, "unlabelled_clusters": pl.Int64,
           "human_only": pl.Float64, "human_low": pl.Float64, "human_high": pl.Float64, "ppi": pl.Float64,
           "ppi_low": pl.Float64, "ppi_high": pl.Float64, "lambda": pl.Float64, "rectifier": pl.Float64,
           "n_eff": pl.Float64, "all_labels": pl.Float64, "ci_note": pl.Utf8}


def check_ppi(ppi: PPIConfig, declared: Declaration, where: str) -> None:
    """At the edge, before anything runs: `[ppi]` needs a protocol that writes the table, and a
    `column:NAME` choice a boolean field of its items."""
    if not ppi.enabled:
        return
    if "ppi" not in declared.tables:
        raise ConfigError(f"protocol {declared.name!r} has no human quantity for prediction-powered estimates "
                          "(the ttcw protocol has): remove [ppi]", where=where, parameter="ppi")
    flags = [name for name, kind in declared.fields.items() if kind is bool]
    if ppi.column and ppi.column not in flags:
        raise ConfigError(f"{ppi.column!r} is no boolean field of protocol {declared.name!r}'s items "
                          f"(boolean fields: {', '.join(flags) or 'none'}); use a share or \"all\"",
                          where=where, parameter="ppi.labelled")


def labelled_clusters(rows: pl.DataFrame, ppi: PPIConfig, cluster: str, human: str) -> list[str]:
    """The clusters whose human labels the estimators may use, sorted (the same for every judge and
    view): a seeded random share of the clusters that have labels, those with a row a boolean field
    marks, or all that have labels. (With annotations: `ppi_annotated.labelled_prefix`.)"""
    has = pl.col(human).is_not_null()
    marked = has & pl.col(ppi.column).fill_null(False) if ppi.column else has
    pool = sorted(rows.filter(marked)[cluster].cast(pl.Utf8).unique().to_list())
    if ppi.column or ppi.share is None:
        return pool
    take = min(len(pool), max(1, math.floor(ppi.share * len(pool) + 0.5))) if pool else 0
    return sorted(pool[i] for i in np.random.default_rng(ppi.seed).choice(len(pool), size=take, replace=False))


def labelled(ppi: PPIConfig, cluster: str, human: str, drawn: list[str]) -> pl.Expr:
    """Which rows' human labels the estimators may use: those of the `drawn` clusters
    (`labelled_clusters`; the rows a boolean field marks, where it is the choice)."""
    has = pl.col(human).is_not_null()
    if ppi.column:
        return has & pl.col(ppi.column).fill_null(False)
    if ppi.share is None:
        return has
    return has & pl.col(cluster).cast(pl.Utf8).is_in(drawn)


def ppi_tables(views: Mapping[str, pl.DataFrame], ppi: PPIConfig, *, cluster: str, item: str, group: str,
               human: str, judge_value: pl.Expr, quantity: str, unanswered: float = 0.5,
               annotated: Annotated | None = None, warn: Callable[[str], None] | None = None
               ) -> dict[str, pl.DataFrame]:
    """`ppi`: one row per view, judge and `group` value, plus the pooled group ("all"): human-only
    and PPI++ estimates of the rate of `human` (bool, or a float in [0, 1]) with `judge_value` as the
    prediction. Repeats of an item are averaged into one judge value; an item with none reads
    `unanswered` (module docstring). With `annotated` (`[ppi] labelled = "annotations:RUN"`) the
    human labels are the annotators' and the estimates the active ones (judges/ppi_annotated.py).
    `ppi_labelled`: the clusters whose labels the estimates read (column `cluster`), drawn once here.
    `warn`: told of annotated clusters the estimates cannot read (after a draw not labelled whole)."""
    rows = pl.concat([v.with_columns(pl.lit(name).alias("view")) for name, v in views.items()], how="diagonal_relaxed")
    human_y = human_value(annotated, item) if annotated is not None else pl.col(human).cast(pl.Float64)
    rows = rows.with_columns(judge_value.cast(pl.Float64).alias("_f"), human_y.alias("_y"),
                             pl.col(human).cast(pl.Float64).alias("_h"))
    drawn = labelled_clusters(rows, ppi, cluster, human) if annotated is None else []
    rows = rows.with_columns(pl.col("_y").is_not_null().alias("_lab") if annotated is not None
                             else labelled(ppi, cluster, human, drawn).alias("_lab"))
    keys = ["view", "judge", group, item, cluster]
    if "repeat" in rows.columns and (rows.select(pl.col("repeat").max()).item() or 0) > 0:    # repeats: one value an item
        rows = (rows.group_by(keys, maintain_order=True)
                .agg(pl.col("_f").mean(), pl.col("_y").first(), pl.col("_h").first(), pl.col("_lab").first()))
    items = (rows.select([*keys, pl.col("_f").fill_null(unanswered), "_y", "_h", "_lab"])
             .with_columns(pl.col(group).cast(pl.Utf8)))
    items = pl.concat([items, items.with_columns(pl.lit(POOLED).alias(group))])
    if not items.height:
        table = pl.DataFrame(schema=COLUMNS)
    elif annotated is not None:
        table, drawn = _annotated(items, annotated, group, cluster, item, quantity, warn)
        table = _ordered(table, views, rows, group)
    else:
        table = _ordered(_estimated(items, group, cluster, quantity), views, rows, group)
    return {"ppi": table, "ppi_labelled": pl.DataFrame({cluster: drawn}, schema={cluster: pl.Utf8})}


def _estimated(items: pl.DataFrame, group: str, cluster: str, quantity: str) -> pl.DataFrame:
    """The table's rows by PPI++ (judges/metrics/ppi.py), every cell's cluster sums at once."""
    codes = items.select(pl.col(c).cast(pl.Utf8).cast(pl.Categorical).to_physical().cast(pl.Int64)
                         for c in ("view", "judge", group, cluster)).to_numpy()
    first, cell = _first_and_rank(_combined(codes[:, :3]))
    cluster_code = _first_and_rank(codes[:, 3])[1]
    cells = items[first].select(["view", "judge", group])
    width = int(cluster_code.max()) + 1
    y, lab = items["_y"].to_numpy(), items["_lab"].to_numpy()
    flat = ClusterSums.of(cell * width + cluster_code, np.nan_to_num(y), items["_f"].to_numpy(), lab,
                          size=cells.height * width)
    sums = ClusterSums(*(a.reshape(cells.height, width) for a in vars(flat).values()))
    human_only, powered = estimate(sums, lam=0.0), estimate(sums)
    known = ~np.isnan(y)                 # every label, hidden ones too: the number both estimates aim at
    with np.errstate(invalid="ignore", divide="ignore"):
        all_labels = (np.bincount(cell, np.where(known, y, 0.0), cells.height) / np.bincount(cell, known, cells.height))
    hidden = np.bincount(cell, known & ~lab, cells.height) > 0
    return cells.with_columns(pl.lit(quantity).alias("quantity"), *_columns(sums, human_only, powered),
                              pl.Series("all_labels", np.where(hidden, all_labels, np.nan)).fill_nan(None))


def _annotated(items: pl.DataFrame, annotated: Annotated, group: str, cluster: str, item: str, quantity: str,
               warn: Callable[[str], None] | None = None) -> tuple[pl.DataFrame, list[str]]:
    """The table's rows from the annotations (one per view, judge and group: `ppi_annotated.estimates`
    over the queue's labelled prefix), and the clusters that prefix reads; all_labels: the data's
    own human labels, all hidden here. The queue's clusters hold the items it asked: a row of an
    item it did not ask (a TTCW test its judges left unanswered) is not in the estimate, as on the
    page (it had stopped the labelled prefix at the first such story: 1 draw read of 30)."""
    queued = pl.col(cluster).cast(pl.Utf8).is_in(list(annotated.clusters))
    unasked = queued & ~pl.col(item).cast(pl.Utf8).is_in(list(annotated.asked)) if annotated.asked else pl.lit(False)
    left_out = items.filter(unasked & (pl.col(group) == POOLED)).group_by("view", "judge").len()
    items = items.filter(~unasked)
    k, drawn, held = annotated_prefix(items.filter(pl.col(group) == POOLED), annotated, cluster)
    blocked = held and (f"{len(held)} labelled clusters (e.g. {held[0][:60]!r}) not read: the estimates read the "
                        f"queue's draws up to draw {k + 1} ({annotated.clusters[annotated.draws[k]][:60]!r}), the "
                        "first not labelled whole; label it to read them")
    if blocked and warn is not None:
        warn(f"[ppi] from the annotations of {annotated.source}: {blocked}")
    out = []
    for key, cell in items.group_by(["view", "judge", group], maintain_order=True):
        # the estimates are of the queue's clusters: all_labels too (it was over the view's every
        # story, 0.339 beside estimates of the queue's 36 judgeable ones, whose rate is 0.149)
        known = cell.filter(queued)["_h"].drop_nulls()
        row = {"view": key[0], "judge": key[1], group: key[2], "quantity": quantity,
               **annotated_estimates(cell, annotated, cluster, k),
               "all_labels": float(known.mean()) if known.len() else None}     # type: ignore[arg-type]
        outside = cell.filter(~queued)[cluster].n_unique()
        if outside:
            said = (f"over the annotation queue's {len(annotated.clusters)} clusters, not this view's {outside} "
                    "others (the queue never drew them)")
            row["ci_note"] = joined_notes(row["ci_note"], said)
        if blocked:                       # every row: each test's estimate reads the same draws
            row["ci_note"] = joined_notes(row["ci_note"], blocked)
        unasked_n = left_out.filter((pl.col("view") == key[0]) & (pl.col("judge") == key[1]))["len"].sum()
        if unasked_n and key[2] == POOLED:
            row["ci_note"] = joined_notes(row["ci_note"], f"without {unasked_n} items of the queue's clusters that it "
                                                          "did not ask (no judge of the annotated run answered them)")
        out.append(row)
    frame = pl.DataFrame(out, infer_schema_length=None)
    return frame.with_columns(pl.col(c).fill_nan(None) for c, kind in frame.schema.items() if kind == pl.Float64), drawn


def _ordered(out: pl.DataFrame, views: Mapping[str, pl.DataFrame], rows: pl.DataFrame, group: str) -> pl.DataFrame:
    """The table in its order (views as given, tests in order with the pooled row first, judges as
    met) and schema."""
    view_order = {name: i for i, name in enumerate(views)}
    judge_order = {name: i for i, name in enumerate(rows["judge"].unique(maintain_order=True).to_list())}
    return (out.rename({group: "test"})
            .with_columns(pl.col("view").replace_strict(view_order).alias("_v"), (pl.col("test") != POOLED).alias("_p"),
                          pl.col("test").cast(pl.Int64, strict=False).alias("_t"),
                          pl.col("judge").replace_strict(judge_order).alias("_j"))
            .sort(["_v", "_p", "_t", "_j"]).select(list(COLUMNS)).cast(COLUMNS))  # type: ignore[arg-type]


def _first_and_rank(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(keys, return_index=True, return_inverse=True)[1:]`: each distinct key's first
    row, and each row's rank among the distinct keys. Counted, not sorted, where the keys are
    non-negative integers of a range near their number (2.8 million rows of 30,000 cells: 0.46 s
    sorted, 0.015 s counted, EPYC Zen 4)."""
    top = int(keys.max()) + 1 if len(keys) and keys.dtype.kind in "iu" else 0
    if keys.dtype.kind not in "iu" or top > 2 * len(keys) + (1 << 20):   # floats: a null code read as NaN
        _, first, rank = np.unique(keys, return_index=True, return_inverse=True)
        return first, rank
    present = np.zeros(top, dtype=bool)
    present[keys] = True
    rank = (np.cumsum(present) - 1)[keys]
    first = np.full(int(present.sum()), len(keys), dtype=np.intp)
    np.minimum.at(first, rank, np.arange(len(keys)))
    return first, rank


def _combined(codes: np.ndarray) -> np.ndarray:
    """One integer per row for a few integer key columns (their mixed-radix number)."""
    out = np.zeros(len(codes), dtype=np.int64)
    for column in codes.T:
        out = out * (int(column.max()) + 1) + column
    return out


def _columns(sums: ClusterSums, human: Estimate, powered: Estimate) -> list[pl.Series]:
    """The table's estimate columns (one element per row): the human-only rate and interval as the
    rate tables give them (the labelled items' sums per cluster), PPI++'s from its estimate."""
    def floats(name: str, a: np.ndarray) -> pl.Series:
        return pl.Series(name, np.where(np.isfinite(a), a, np.nan), dtype=pl.Float64).fill_nan(None)
    rate, low, high, rule = rate_interval(sums.y[..., None], sums.m[..., None])
    withheld = rule == 3
    notes = [_note(TOO_FEW.format(int(human.labelled_clusters[i]), MIN_CLUSTERS) if withheld[i] else None,
                   powered.note(i)) for i in range(len(rate))]
    return [pl.Series("n_labelled", powered.labelled_items.astype(np.int64)),
            pl.Series("n_unlabelled", powered.unlabelled_items.astype(np.int64)),
            pl.Series("clusters", powered.labelled_clusters.astype(np.int64)),
            pl.Series("unlabelled_clusters", powered.unlabelled_clusters.astype(np.int64)),
            floats("human_only", rate), floats("human_low", low), floats("human_high", high),
            floats("ppi", powered.value), floats("ppi_low", powered.low), floats("ppi_high", powered.high),
            # no PPI++ estimate (every item labelled: the judge has nothing to add), so no lambda and
            # no labels it is worth either (they read 0 and the item count)
            floats("lambda", np.where(np.isnan(powered.value), np.nan, powered.lam)), floats("rectifier", powered.rectifier),
            floats("n_eff", np.where(np.isnan(powered.value), np.nan, effective_labels(human, powered))),
            pl.Series("ci_note", notes, dtype=pl.Utf8)]


def _note(human: str | None, powered: str | None) -> str | None:
    if human == powered:
        return human
    return "; ".join(f"{who}: {why}" for who, why in (("human-only", human), ("PPI++", powered)) if why) or None


def ppi_manifest(ppi: PPIConfig, table: pl.DataFrame, chosen: pl.DataFrame) -> dict[str, Any]:
    """What the manifest records of the labelled subset: the choice, its seed, which clusters it
    labelled (`chosen`: one row each, the cluster in its first column), and the most labelled
    clusters and items any pooled row used (a judge's unanswered items are left out)."""
    most = table.filter(pl.col("test") == POOLED).select(pl.col("clusters", "n_labelled", "n_unlabelled").max()).row(0)
    return {**ppi_choice(ppi, chosen), "labelled_clusters": most[0] or 0, "labelled_items": most[1] or 0,
            "unlabelled_items": most[2] or 0}


def ppi_choice(ppi: PPIConfig, chosen: pl.DataFrame) -> dict[str, Any]:
    """The labelled subset as drawn: the choice, its seed and which clusters (a sweep records it per
    cell, whose tables it does not write)."""
    return {"labelled": ppi.labelled, "seed": ppi.seed, "choice": ppi.describe(),
            "labelled_ids": [str(c) for c in chosen.to_series(0).to_list()] if chosen.width else []}
