"""Tables on the terminal."""
from __future__ import annotations

import polars as pl


def print_table(df: pl.DataFrame, title: str, max_rows: int = 60) -> None:
    with pl.Config(tbl_rows=max_rows, tbl_cols=20, tbl_width_chars=160, fmt_str_lengths=40,
                   tbl_hide_dataframe_shape=True, float_precision=3):
        print(f"\n{title}")
        print(df)
