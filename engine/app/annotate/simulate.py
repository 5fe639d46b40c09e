"""`litjudge annotate RUN --simulate COLUMN`: the queue's three designs (human-only, uniform PPI++,
active) answered from a human column the run already holds, before anyone is paid. The column's
value of every item is the simulated person's answer; each repeat redraws the i.i.d. draws (the
queue's own probabilities for active) and `judges.metrics.active_sim.simulate` fits every
prefix of them at once. The truth a repeat's interval should cover is the estimate from every
label of the column (its mean per item)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from litjudge.judges.metrics.active import MIN
from litjudge.judges.metrics.active_sim import DESIGNS, Curves, Population, labels_needed, mean_width, simulate

from ...core.errors import ConfigError
from ..outputs import read_table
from .queue import Queue

# Where each protocol's human column lives (the run's table, the column naming the queue's item).
TABLES = {"ttcw": ("per_item", "item_id"), "pairwise": ("per_verdict", "pair_id")}
PLOT = "annotate-simulation.png"
REACH = 3            # the curves run to REACH x the budget: the labels a design needs beyond it


@dataclass(frozen=True)
class Row:
    design: str
    labels: int               # the budget
    half_width: float         # mean 95% half width over the repeats that give an interval (NaN: none does)
    coverage: float           # share of those repeats whose interval covers the column's full estimate
    intervals: float          # share of the repeats that give an interval
    needed: float             # labels for the target half width (NaN: more than the curves reach)


@dataclass(frozen=True)
class Simulation:
    column: str
    truth: float
    budget: int
    repeats: int
    target: float             # the target half width
    reach: int                # the most labels the curves were fitted for
    rows: tuple[Row, ...]
    curves: Curves
    plot: Path
    notes: tuple[str, ...] = ()   # what the plot says beyond its curves (a design without an interval)


def human_scores(queue: Queue, column: str) -> np.ndarray:
    """(N,) per cluster the simulated person's total: the column's answer to each of its items on
    the quantity's 0/1 scale (`Queue.score`)."""
    if queue.protocol not in TABLES:
        raise ConfigError(f"--simulate reads the human column of a {' or '.join(TABLES)} run; a {queue.protocol} run's "
                          "queue is served, not simulated, for now", where=str(queue.run))
    table, key = TABLES[queue.protocol]
    path = queue.run / "tables" / f"{table}.parquet"
    if not path.is_file():
        raise ConfigError(f"the run has no tables/{table}.parquet to read a human column from: run `litjudge reparse "
                          f"{queue.run}` to rebuild its tables", where=str(queue.run))
    frame = read_table(path)
    if column not in frame.columns:
        raise ConfigError(f"--simulate: the run has no column {column!r} in tables/{table} (its columns: "
                          f"{', '.join(frame.columns)})", where=str(queue.run))
    values = frame.select(pl.col(key).cast(pl.Utf8), pl.col(column)).drop_nulls().unique()
    if values.schema[column] == pl.Boolean:
        values = values.with_columns(pl.when(pl.col(column)).then(pl.lit(queue.positive))
                                     .otherwise(pl.lit(next(x for x in queue.labels if x != queue.positive)))
                                     .alias(column))
    answer: dict[str, str] = {}
    for item, value in values.cast({column: pl.Utf8}).iter_rows():
        if answer.setdefault(item, value) != value:
            raise ConfigError(f"--simulate: column {column!r} gives item {item[:60]!r} two answers ({answer[item]!r}, "
                              f"{value!r}): give a column with one answer per item", where=str(queue.run))
    totals = np.zeros(len(queue.clusters))
    for c, cluster in enumerate(queue.clusters):
        for q in cluster.questions:
            label = answer.get(q.item)
            if label not in queue.labels:
                got = "no answer" if label is None else f"answer {label[:40]!r}"
                # what to do (a new user with a column answered in part, or with ties, read only what was wrong)
                fix = ("simulate a run of the items it answers (a data file of those)" if label is None else
                       "a tie is an answer of a run with `tie = true` under [options]" if label == "tie" else
                       "give a column of those answers")
                raise ConfigError(f"--simulate: column {column!r} has {got} for item {q.item[:60]!r} (the simulation "
                                  f"needs one of {', '.join(queue.labels)} for every item of the queue: {fix})",
                                  where=str(queue.run))
            totals[c] += queue.score(cluster.cluster, label, q.item)
    return totals


def run_simulation(queue: Queue, column: str, repeats: int, *, seed: int = 0, target: float | None = None,
                   plot: Path | None = None) -> Simulation:
    """The three designs at the queue's budget over `repeats` repeats (the queue's floor and
    probabilities; draws seeded by `seed`), the labels each needs for `target` (default: uniform
    PPI++'s mean half width at the budget), and their width curves drawn to `plot` (default: the
    run folder's annotate-simulation.png)."""
    budget = len(queue.design.draws)
    if budget < MIN:
        raise ConfigError(f"--budget must be >= {MIN} to simulate (no interval from fewer labelled draws), got {budget}")
    if repeats < 1:
        raise ConfigError(f"--repeats must be >= 1, got {repeats}")
    if target is not None and not (math.isfinite(target) and target > 0):
        raise ConfigError(f"--target-width must be a half width > 0, got {target}")
    y = human_scores(queue, column)
    reach = REACH * budget
    ks = np.arange(MIN, reach + 1)
    pop = Population(y, queue.judge_total, queue.uncertainty, queue.size)
    curves = simulate(pop, ks, repeats, floor=queue.design.floor, seed=seed, probability=queue.design.probability,
                      needs=queue.min_draws)
    i = budget - MIN
    widths = {d: mean_width(curves.half[d]) for d in DESIGNS}
    goal = float(widths["uniform PPI++"][i]) if target is None else float(target)
    rows = tuple(Row(d, budget, float(widths[d][i]), _coverage(curves, d, i), float(np.isfinite(curves.half[d][i]).mean()),
                     labels_needed(ks, widths[d], goal)) for d in DESIGNS)
    path = plot if plot is not None else queue.run / PLOT
    notes = plot_widths({f"{queue.quantity}, {column}": curves}, path,
                        f"{queue.run.name}: mean half width against labels ({repeats} repeat{'s' * (repeats != 1)})",
                        budget=budget, target=goal, unit=queue.unit[1])
    return Simulation(column, float(y.sum() / queue.size.sum()), budget, repeats, goal, reach, rows, curves, path,
                      tuple(notes))


def _coverage(curves: Curves, design: str, i: int) -> float:
    """The share of the repeats' intervals that cover (NaN where none gives one): a repeat without
    an interval makes no claim (its value may well be the truth), as the tables count coverage."""
    shown = np.isfinite(curves.half[design][i])
    return float(curves.covered[design][i][shown].mean()) if shown.any() else math.nan


STYLES = {"human-only": ("tab:blue", "-", 2.4), "uniform PPI++": ("tab:orange", "--", 1.8),
          "active": ("tab:green", "-", 1.8)}     # drawn apart where curves lie on one another


def plot_widths(curves: dict[str, Curves], path: Path, title: str, *, budget: int | None = None,
                target: float | None = None, unit: str = "stories") -> list[str]:
    """Mean half width against labels of the three designs, one column per population (PNG,
    matplotlib's Agg: no display): above, the widths, with `budget` and `target` as labelled guides;
    below, each design's width over human-only's, where a saving shows (on one axis from 0.25 to
    0.05, three close curves were one line: a new user could not read the plot). Returns the notes
    written on it (a design without an interval), one per column that has one."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with plt.rc_context({"text.parse_math": False}):        # a run or column name drawn as written, not as maths
        names, notes = list(curves), []
        fig, axes = plt.subplots(2, len(names), figsize=(max(6.4, 4.4 * len(names)), 6.6), squeeze=False,
                                 sharex="col", gridspec_kw={"height_ratios": [3, 2]})
        for col, name in enumerate(names):
            c, top, low = curves[name], axes[0][col], axes[1][col]
            keep = c.ks >= MIN
            ks, widths = c.ks[keep], {d: mean_width(c.half[d][keep]) for d in DESIGNS}
            ratios = []
            for d, w in widths.items():
                color, style, width = STYLES[d]
                top.plot(ks, w, label=d, color=color, linestyle=style, linewidth=width)
                with np.errstate(invalid="ignore", divide="ignore"):
                    ratios.append(w / widths["human-only"])
                low.plot(ks, ratios[-1], color=color, linestyle=style, linewidth=width)
            seen = np.concatenate(ratios)
            seen = seen[np.isfinite(seen)]
            # a design without a width anywhere is said on the plot: empty panels read as a drawing fault
            blank = [d for d, w in widths.items() if not np.isfinite(w).any()]
            if blank:
                none = len(blank) == len(DESIGNS)
                said = ("No design gives an interval at any number of labels\n(every labelled draw scores the same, "
                        "say: no spread to measure)" if none else f"no interval within {int(ks[-1])} labels: "
                        f"{', '.join(blank)}")
                notes.append(said)
                if none:                               # no numbers for its axes to show (they read -0.04 to 0.04)
                    for ax in (top, low):
                        ax.set_yticks([])
                top.text(0.5, 0.5 if none else 0.97, said, transform=top.transAxes, ha="center",
                         va="center" if none else "top", fontsize=9, color="dimgrey")
            # at least 0.9-1.1: a 3% wobble of repeats' noise filled the panel and read as a saving
            low.set_ylim(max(0.0, min(0.9, float(seen.min(initial=1.0)) - 0.05)),
                         max(1.1, float(seen.max(initial=1.0)) + 0.05))
            if budget is not None:
                for ax in (top, low):
                    ax.axvline(budget, color="grey", linestyle=":", linewidth=1,
                               label=f"budget ({budget})" if ax is top else None)
            if target is not None and math.isfinite(target):
                top.axhline(target, color="grey", linestyle="--", linewidth=1, label=f"target half width ({target:.3g})")
            top.set_title(name, fontsize=10)
            top.set_ylabel("mean 95% half width")
            low.set_ylabel("width / human-only's")
            low.set_xlabel(f"labelled {unit} (draws)")
            low.set_xlim(float(ks[0]), float(ks[-1]))
            low.axhline(1.0, color="black", linewidth=0.6)
            for ax in (top, low):
                ax.grid(alpha=0.3)
        axes[0][0].legend(fontsize=8)
        fig.suptitle(title, fontsize=11 if len(names) > 1 else 9, wrap=True)     # one panel: a long title fits
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
    return notes
