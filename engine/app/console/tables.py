"""Tables on the terminal."""
from __future__ import annotations

from pathlib import Path

import polars as pl


def print_table(df: pl.DataFrame, title: str, max_rows: int = 60) -> None:
    """A table as polars draws it, never wrapping a cell inside its column (a judge name split as
    `replay:claude3-o` / `pus` over two lines misread as two rows): a wide table is as wide as it
    needs to be, and the terminal folds the lines. `max_rows` 0 (`--show 0`): none is printed (it
    printed each table's header over a row of ellipses)."""
    if max_rows == 0:
        return
    # shown to 3 decimals: a value rounding to zero is 0.000, not -0.000 (a kappa of -0.0001)
    df = df.with_columns(pl.when(pl.col(c).round(3) == 0).then(0.0).otherwise(pl.col(c)).cast(t).alias(c)
                         for c, t in df.schema.items() if t in (pl.Float32, pl.Float64))
    with pl.Config(tbl_rows=max_rows, tbl_cols=20, tbl_width_chars=65_000, fmt_str_lengths=80,
                   tbl_hide_dataframe_shape=True, float_precision=3):
        print(f"\n{title}")
        print(df)


def print_ensemble(out: Path, tables: dict, max_rows: int = 60) -> int:
    """An ensemble's tables on the terminal (the `ensemble` command and ensemble configs; `run
    --show N`'s rows, none at 0)."""
    for name in ("cascade", "cascade_summary", "jury", "jury_weights"):
        if name in tables:
            print_table(tables[name], name.replace("_", " ").capitalize(), max_rows=max_rows)
    print(f"Results: {out}")
    return 0
