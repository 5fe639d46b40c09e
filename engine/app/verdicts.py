"""The verdict frame: one run id's plan entries joined with their stored results, the request
metadata as columns. What aggregation, sweeps, budgets and the generation stage all read."""
from __future__ import annotations

import polars as pl

from ..core.store import Store

VERDICT_QUERY = """
SELECT p.key, p.item_id, p.meta, r.status, r.label, r.value, r.reason, r.distribution, r.label_mass, r.analysis, r.raw
FROM plan p LEFT JOIN results r ON p.key = r.key WHERE p.run = ? ORDER BY p.rowid"""


def verdict_frame(store: Store, run_id: str, judge: str) -> pl.DataFrame:
    """Plan entries of one run joined with their results: one row per (item, order, repeat...),
    the request metadata as columns. Built column-wise from the store (a million rows fit)."""
    cols = ["key", "item_id", "meta", "status", "label", "value", "reason", "distribution", "label_mass", "analysis",
            "raw"]
    schema = {c: (pl.Float64 if c == "label_mass" else pl.Utf8) for c in cols}
    parts = [pl.DataFrame(rows, schema=schema, orient="row") for rows in store.query_batches(VERDICT_QUERY, (run_id,))]
    frame = pl.concat(parts) if parts else pl.DataFrame(schema=schema)
    if not frame.height:
        return frame.drop("meta").with_columns(pl.lit(judge).alias("judge"))
    meta = frame["meta"].str.json_decode(infer_schema_length=None).struct.unnest()
    frame = pl.concat([meta.drop([c for c in meta.columns if c in cols]), frame.drop("meta")], how="horizontal")
    return frame.with_columns(
        pl.lit(judge).alias("judge"),
        pl.col("status").fill_null("missing"),
        pl.when(pl.col("reason").is_null() & pl.col("status").is_null()).then(pl.lit("not generated"))
        .otherwise(pl.col("reason")).alias("reason"),
        pl.when(pl.col("value") == "null").then(None).otherwise(pl.col("value")).alias("value"))
