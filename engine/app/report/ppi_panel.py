"""The report panel of a run with `[ppi]`: the `ppi` table (judges/ppi_tables.py) and a forest plot
of its pooled rows, the human-only and PPI++ intervals of each judge one above the other, so the
width the judge's answers save (or cost) is seen at a glance. Numbers from the table only."""
from __future__ import annotations

import numpy as np
import polars as pl

from .panels import Panel, _who, plt  # plt: with panels' headless backend

HUMAN, POWERED = "#8c8c8c", "#1f77b4"


def ppi_panels(t: dict[str, pl.DataFrame]) -> list[Panel]:
    table = t.get("ppi")
    if table is None or not table.height:
        return []
    chosen = t.get("ppi_labelled")                # which stories' labels were used: a table of its own
    pooled = table.filter(pl.col("test") == "all")
    figures = [(f"ppi_{view}", _forest(rows, f"{rows['quantity'][0]}, all tests ({view} stories)"))
               for (view,), rows in pooled.group_by(["view"], maintain_order=True)]
    return [Panel("Prediction-powered estimates (PPI++)",
                  "The humans' quantity from the labelled stories alone (grey) and with the judge's answers on every "
                  "story (blue, PPI++: lambda-weighted judge mean plus the rectifier measured on the labelled items), "
                  "each with its 95% interval (stories resampled by a jackknife, lambda tuned again each time; with "
                  "an annotation queue's labels, the active estimator's interval; none from fewer than 10 labelled "
                  "stories). n_eff: how many human labels the PPI++ estimate's variance is worth (labelled rows; with "
                  "an annotation queue's labels, uniform draws of stories); the intervals also count degrees of "
                  "freedom, so compare them for what is published. The dashed line, where shown, is the rate over "
                  "every label, hidden ones too.",
                  [("ppi", table), *([("ppi_labelled", chosen)] if chosen is not None else [])], figures)]


def _forest(rows: pl.DataFrame, title: str):
    rows = _who(rows)
    whos = rows["who"].to_list()
    fig, ax = plt.subplots(figsize=(7.0, 0.55 * len(whos) + 1.8))
    y = np.arange(len(whos))[::-1].astype(float)
    for offset, (name, low, high, colour, label) in zip((0.17, -0.17), (
            ("human_only", "human_low", "human_high", HUMAN, "human-only"),
            ("ppi", "ppi_low", "ppi_high", POWERED, "PPI++"))):
        value = rows[name].to_numpy().astype(float)
        lo, hi = rows[low].to_numpy().astype(float), rows[high].to_numpy().astype(float)
        shown = ~np.isnan(lo)
        ax.hlines(y[shown] + offset, lo[shown], hi[shown], color=colour, linewidth=3, label=label)
        ax.plot(value[shown], y[shown] + offset, "o", color=colour, markersize=5)
        ax.plot(value[~shown], y[~shown] + offset, "o", markerfacecolor="white", color=colour, markersize=5)
    for yy, n_eff in zip(y, rows["n_eff"].to_list()):
        if n_eff is not None:             # not "/ n_labelled": from annotations it counts draws, not rows
            ax.annotate(f"n_eff {n_eff:.0f}", (1.0, yy - 0.17), xycoords=("axes fraction", "data"),
                        xytext=(4, 0), textcoords="offset points", va="center", fontsize=7, color=POWERED)
    truth = rows["all_labels"].drop_nulls()
    if truth.len():
        ax.axvline(float(truth[0]), color="black", linestyle="--", linewidth=0.8, label="every label")
    ax.set_yticks(y, whos, fontsize=8)
    ax.set_xlim(0, 1)
    ax.set_xlabel(str(rows["quantity"][0]))
    withheld = rows.filter(pl.col("ppi_low").is_null() & pl.col("human_low").is_null())["ci_note"].drop_nulls()
    if withheld.len() == rows.height:                # no interval at all: say why under the title
        title += f"\nno interval: {withheld[0]}"
    ax.set_title(title, fontsize=10, pad=18)
    ax.legend(fontsize=7, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncols=3, frameon=False)
    fig.tight_layout()
    return fig
