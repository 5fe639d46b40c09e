"""Polars helpers the protocols' tables share."""
from __future__ import annotations

from typing import Any

import polars as pl


def split(frame: pl.DataFrame, by: str | list[str]) -> dict[tuple[Any, ...], pl.DataFrame]:
    """`frame.partition_by(by, as_dict=True, maintain_order=True)`: each group's rows (in the
    frame's order) under its key tuple, the groups in order of first appearance. polars reads each
    partition's key with a select of its own (4,000 groups: 0.8-1.1 s, where this takes 21-51 ms,
    EPYC Zen 3); here every key comes from one `unique`."""
    keys = [by] if isinstance(by, str) else list(by)
    parts = frame.partition_by(keys, maintain_order=True)
    names = frame.select(keys).unique(maintain_order=True).rows()
    return dict(zip(names, parts, strict=True))


def text_picked(label: pl.Expr, order: pl.Expr = pl.col("order")) -> pl.Expr:
    """THE text a pairwise verdict picked, whichever order the texts were shown in: its label names a
    position (A: the text shown first; order `ab` shows text a first, `ba` text b), the pick a text
    (a, b or tie); null where there is no label. A stored verdict's `value` is its label in lower
    case, a position too: never read it as a text."""
    return (pl.when(label == "tie").then(pl.lit("tie")).when((label == "A") == (order == "ab")).then(pl.lit("a"))
            .when(label.is_not_null()).then(pl.lit("b")))


def tie_credit(verdict: str, human: str = "human") -> pl.Expr:
    """THE tie rule of agreement with a human's pick (docs/statistics.md, Ties: a fair coin): 1 for
    the human's pick, 0.5 for a tie, 0 for the other text; of a verdict column (a single order's
    pick, a pair's combined verdict, a rubric's pairwise answer). A judge answering "tie" to half
    the pairs scored 0 on them in each order and 0.5 combined."""
    return (pl.when(pl.col(verdict) == pl.col(human)).then(1.0)
            .when(pl.col(verdict) == "tie").then(0.5).otherwise(0.0))
