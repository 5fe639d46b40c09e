"""Report panels for tables any protocol's run may carry: an ensemble's cascade and jury
(`litjudge ensemble`, ensemble configs) and the reasoning-budget curve (`litjudge budgets`)."""
from __future__ import annotations

import polars as pl

from litjudge.judges import PANELS, PROTOCOLS
from litjudge.judges.frames import split

from .panels import Panel, _calibration_panels, _grouped_bars, plt  # plt: with panels' headless backend
from .ppi_panel import ppi_panels


def protocol_panels(protocol: str, t: dict[str, pl.DataFrame]) -> list[Panel]:
    """A run's panels: the ones its protocol declares (`Declaration.report`: the function, or its
    name in PANELS, both resolved when the protocol was declared), else one per metric table
    (`default_panels`); none for an ensemble's run (its panels are the extra ones)."""
    if protocol not in PROTOCOLS:
        return []
    named = PROTOCOLS.get(protocol).declared.report
    if not named:
        return default_panels(protocol, t)
    draw = PANELS.get(named) if isinstance(named, str) else named
    panels: list[Panel] = draw(t)
    return panels


def default_panels(protocol: str, t: dict[str, pl.DataFrame]) -> list[Panel]:
    """A protocol without panels of its own: one panel per table it declares as a metric table
    (`Declaration.tables`), with a bar chart of its first rankable metric per judge, so a new
    protocol's report shows its numbers with nothing written for the report."""
    if protocol not in PROTOCOLS:                 # an ensemble's run: its panels are the extra ones
        return []
    declared = PROTOCOLS.get(protocol).declared
    out = []
    for name, groups in declared.metric_tables.items():
        df = t.get(name)
        if df is None or not df.height:
            continue
        metric = next((m.partition(".")[2] for m in declared.rank_metrics if m.startswith(name + ".")
                       and m.partition(".")[2] in df.columns), None)
        figures = []
        if metric is not None and "judge" in df.columns:
            x = groups[0] if groups and groups[0] in df.columns else "judge"
            shown = df if x != "judge" else df.with_columns(pl.col("judge").alias("_x"))
            figures.append((f"{name}_{metric}", _grouped_bars(shown, x if x != "judge" else "_x", metric,
                                                              f"{name}: {metric}", metric)))
        out.append(Panel(name.replace("_", " ").capitalize(), f"The {protocol} protocol's {name} table.",
                         [(name, df)], figures))
    return out


def extra_panels(t: dict[str, pl.DataFrame]) -> list[Panel]:
    out = ppi_panels(t)                           # a run with [ppi]: human-only beside PPI++
    if "cascade" in t and t["cascade"].height:
        out.append(Panel("Cascade with an agreement guarantee",
                         "Per level: the threshold certified on the calibration clusters (stories or pairs as the "
                         "unit), the held-out items it answered, their agreement with humans (95% interval, clusters "
                         "the units) and its share of tokens. The summary's held_out_agreement_reaches_target is a "
                         "point estimate on the held-out split; the guarantee itself holds with probability 1 - delta "
                         "over calibration draws.",
                         [("cascade", t["cascade"]), ("cascade_summary", t.get("cascade_summary", pl.DataFrame()))]))
    if "jury" in t and t["jury"].height:
        jury = t["jury"].with_columns(pl.lit("held-out split").alias("judge"))
        out.append(Panel("Jury: each judge and each pooling on the held-out split",
                         "Agreement with humans with 95% intervals (clusters the units) over every held-out item: a pooled "
                         "probability of exactly 0.5 is a tie, scored as a fair coin (half credit; `ties` counts "
                         "them); stacking weights fitted on the calibration split.",
                         [("jury", t["jury"]), ("jury_weights", t.get("jury_weights", pl.DataFrame()))],
                         [("jury", _grouped_bars(jury, "member", "agreement", "Agreement with humans", "agreement",
                                                 "ci_low", "ci_high", ylim=(0, 1)))]))
    if "jury_calibration" in t:       # the jury's reliability diagram and ECE (pooled probabilities)
        out += _calibration_panels({"calibration": t["jury_calibration"],
                                    "calibration_summary": t.get("jury_calibration_summary")})
    if "budgets" in t and t["budgets"].height:
        out.append(Panel("Agreement against thinking tokens", "The verdict read after each budget of one analysis "
                                                              "trace (litjudge budgets).",
                         [("budgets", t["budgets"])], [("budgets", _budget_curve(t["budgets"]))]))
    return out


def _budget_curve(df: pl.DataFrame):
    fig, ax = plt.subplots(figsize=(6.0, 3.6))
    for (judge,), g in split(df, "judge").items():
        ax.plot(g["thinking_tokens"].to_list(), g["value"].to_list(), marker="o", label=str(judge))
    ax.set_xlabel("thinking tokens (mean per verdict)")
    ax.set_ylabel(str(df["metric"][0]))
    ax.axhline(0, color="black", linewidth=0.6)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
