"""The `ppi` table: for the quantity the humans measure (a protocol names it: TTCW's expert pass
rate per test and over all tests), the estimate from the labelled items alone beside the
prediction-powered one (PPI++, judges/metrics/ppi.py), each with its 95% interval, lambda, the
rectifier and n_eff, the human labels PPI++ is worth. Which human labels may be used is the run's
`[ppi] labelled` (engine/core/settings.py PPIConfig); every other label is hidden from both
estimates. Clusters (stories) are the units of the draw and of every interval.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl

from litjudge.engine.core.errors import ConfigError
from litjudge.engine.core.settings import PPIConfig

from .contract import Declaration
from .metrics.ppi import ClusterSums, Estimate, effective_labels, estimate

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
                          "(the ttcw protocol has): remove [ppi]", where=where, key="ppi")
    flags = [name for name, kind in declared.fields.items() if kind is bool]
    if ppi.column and ppi.column not in flags:
        raise ConfigError(f"{ppi.column!r} is no boolean field of protocol {declared.name!r}'s items "
                          f"(boolean fields: {', '.join(flags) or 'none'}); use a share or \"all\"",
                          where=where, key="ppi.labelled")


def labelled(rows: pl.DataFrame, ppi: PPIConfig, cluster: str, human: str) -> pl.Expr:
    """Which rows' human labels the estimators may use (the same for every judge and view): a
    seeded random share of the clusters that have labels, the rows a boolean field marks, or all."""
    has = pl.col(human).is_not_null()
    if ppi.column:
        return has & pl.col(ppi.column).fill_null(False)
    if ppi.share is None:
        return has
    pool = sorted(rows.filter(has)[cluster].cast(pl.Utf8).unique().to_list())
    take = min(len(pool), max(1, math.floor(ppi.share * len(pool) + 0.5))) if pool else 0
    picked = [pool[i] for i in np.random.default_rng(ppi.seed).choice(len(pool), size=take, replace=False)]
    return has & pl.col(cluster).cast(pl.Utf8).is_in(picked)


def ppi_table(views: Mapping[str, pl.DataFrame], ppi: PPIConfig, *, cluster: str, item: str, group: str,
              human: str, judge_value: pl.Expr, quantity: str, bounds: tuple[float, float] = (0.0, 1.0)) -> pl.DataFrame:
    """One row per view, judge and `group` value, plus the pooled group ("all"): human-only and
    PPI++ estimates of the mean of `human` (bool or float) with `judge_value` as the prediction.
    Repeats of an item are averaged into one judge value; an item without one is left out."""
    rows = pl.concat([v.with_columns(pl.lit(name).alias("view")) for name, v in views.items()], how="diagonal_relaxed")
    rows = rows.with_columns(judge_value.cast(pl.Float64).alias("_f"), pl.col(human).cast(pl.Float64).alias("_y"),
                             labelled(rows, ppi, cluster, human).alias("_lab"))
    keys = ["view", "judge", group, item, cluster]
    items = (rows.group_by(keys, maintain_order=True)
             .agg(pl.col("_f").mean(), pl.col("_y").first(), pl.col("_lab").first())
             .filter(pl.col("_f").is_not_null()).with_columns(pl.col(group).cast(pl.Utf8)))
    items = pl.concat([items, items.with_columns(pl.lit(POOLED).alias(group))])
    if not items.height:
        return pl.DataFrame(schema=COLUMNS)
    cells = items.select(["view", "judge", group]).unique(maintain_order=True)
    cell = items.join(cells.with_row_index("_cell"), on=["view", "judge", group], how="left")["_cell"].to_numpy()
    _, story = np.unique(items[cluster].cast(pl.Utf8).to_numpy(), return_inverse=True)
    width = int(story.max()) + 1
    index = cell.astype(np.int64) * width + story
    flat = ClusterSums.of(index, items["_y"].fill_null(0.0).to_numpy(), items["_f"].to_numpy(),
                          items["_lab"].to_numpy(), bounds, size=cells.height * width)
    sums = ClusterSums(*(a.reshape(cells.height, width) for a in vars(flat).values()))
    human_only, powered = estimate(sums, lam=0.0, bounds=bounds), estimate(sums, bounds=bounds)
    truth = items.group_by(["view", "judge", group], maintain_order=True).agg(
        pl.col("_y").mean().alias("all_labels"), (~pl.col("_lab") & pl.col("_y").is_not_null()).any().alias("_hidden"))
    out = cells.with_columns(pl.lit(quantity).alias("quantity"), *_columns(human_only, powered))
    out = out.join(truth, on=["view", "judge", group], how="left").with_columns(
        pl.when(pl.col("_hidden")).then(pl.col("all_labels")).alias("all_labels")).drop("_hidden")
    order = {name: i for i, name in enumerate(views)}
    return (out.rename({group: "test"}).with_columns(pl.col("view").replace_strict(order).alias("_v"),
                                                     (pl.col("test") != POOLED).alias("_p"),
                                                     pl.col("test").cast(pl.Int64, strict=False).alias("_t"))
            .sort(["_v", "_p", "_t"], maintain_order=True).select(list(COLUMNS)).cast(COLUMNS))  # type: ignore[arg-type]


def _columns(human: Estimate, powered: Estimate) -> list[pl.Series]:
    """The table's estimate columns from the two estimates (one element per row)."""
    def floats(name: str, a: np.ndarray) -> pl.Series:
        return pl.Series(name, np.where(np.isfinite(a), a, np.nan), dtype=pl.Float64).fill_nan(None)
    notes = [_note(human.note(i), powered.note(i)) for i in range(len(human.value))]
    return [pl.Series("n_labelled", powered.labelled_items.astype(np.int64)),
            pl.Series("n_unlabelled", powered.unlabelled_items.astype(np.int64)),
            pl.Series("clusters", powered.labelled_clusters.astype(np.int64)),
            pl.Series("unlabelled_clusters", powered.unlabelled_clusters.astype(np.int64)),
            floats("human_only", human.value), floats("human_low", human.low), floats("human_high", human.high),
            floats("ppi", powered.value), floats("ppi_low", powered.low), floats("ppi_high", powered.high),
            floats("lambda", powered.lam), floats("rectifier", powered.rectifier),
            floats("n_eff", effective_labels(powered.labelled_items, human.half_width, powered.half_width)),
            pl.Series("ci_note", notes, dtype=pl.Utf8)]


def _note(human: str | None, powered: str | None) -> str | None:
    if human == powered:
        return human
    return "; ".join(f"{who}: {why}" for who, why in (("human-only", human), ("PPI++", powered)) if why) or None


def ppi_manifest(ppi: PPIConfig, table: pl.DataFrame) -> dict[str, Any]:
    """What the manifest records of the labelled subset: the choice, its seed, and the most
    labelled clusters and items any pooled row used (a judge's unanswered items are left out)."""
    pooled = table.filter(pl.col("test") == POOLED)
    return {"labelled": ppi.labelled, "seed": ppi.seed, "choice": ppi.describe(),
            "labelled_clusters": int(pooled["clusters"].max() or 0) if pooled.height else 0,
            "labelled_items": int(pooled["n_labelled"].max() or 0) if pooled.height else 0,
            "unlabelled_items": int(pooled["n_unlabelled"].max() or 0) if pooled.height else 0}
