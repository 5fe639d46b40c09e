"""The report's chart primitives that several panels draw: who is who when runs are compared, a
strip of ranked categories per list, a correlation heatmap."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import polars as pl

CATEGORY_COLOURS = ["#d73027", "#fdae61", "#a6d96a", "#1a9850", "#4575b4", "#762a83"]


def with_who(df: pl.DataFrame) -> pl.DataFrame:
    """A `who` column: the judge, prefixed by the run when several runs are compared."""
    if "run" in df.columns and df["run"].n_unique() > 1:
        return df.with_columns(pl.format("{}: {}", "run", "judge").alias("who"))
    return df.with_columns(pl.col("judge").alias("who"))


def strips(items: pl.DataFrame):
    items = with_who(items)
    keys = items.select(["who", "group"]).unique(maintain_order=True).rows()[:12]
    cats = [c for c in items["category"].unique(maintain_order=True).to_list() if c is not None]
    colour = {c: CATEGORY_COLOURS[i % len(CATEGORY_COLOURS)] for i, c in enumerate(sorted(cats))}
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(keys) + 1.2))
    for row, (name, group) in enumerate(keys):
        g = items.filter((pl.col("who") == name) & (pl.col("group") == group)).sort("mean_score", descending=True)
        for col, cat in enumerate(g["category"].to_list()):
            ax.add_patch(plt.Rectangle((col, row), 0.95, 0.8, color=colour.get(cat, "#bbbbbb")))
    ax.set_xlim(0, max([1, *items.group_by(["who", "group"]).len()["len"].to_list()]))
    ax.set_ylim(0, len(keys))
    ax.set_yticks(np.arange(len(keys)) + 0.4, [f"{w} | {g}" for w, g in keys], fontsize=7)
    ax.set_xlabel("items, highest judge score first")
    ax.invert_yaxis()
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour[c]) for c in sorted(cats)]
    ax.legend(handles, sorted(cats), fontsize=7, loc="upper right", bbox_to_anchor=(1.0, 1.25), ncols=len(cats))
    fig.tight_layout()
    return fig


def heatmap(matrix: pl.DataFrame, title: str | None = None):
    names = matrix["judge"].to_list()
    values = matrix.select(names).to_numpy().astype(float)
    fig, ax = plt.subplots(figsize=(1.2 * len(names) + 2, 1.0 * len(names) + 1.5))
    im = ax.imshow(values, vmin=-1, vmax=1, cmap="RdBu")
    ax.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=7)
    ax.set_yticks(range(len(names)), names, fontsize=7)
    for i in range(len(names)):
        for j in range(len(names)):
            ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=7)
    fig.colorbar(im, ax=ax)
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig
