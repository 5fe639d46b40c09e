"""The report's panels, one function per protocol: tables from the runs' stored outputs (never
recomputed differently) and matplotlib figures of them. Several runs (`litjudge compare`) are
concatenated with a `run` column, and judges are labelled `run: judge` so they sit side by side."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import polars as pl

from .charts import heatmap as _heatmap
from .charts import strips as _strips
from .charts import with_who as _who


@dataclass
class Panel:
    title: str
    note: str = ""
    tables: list[tuple[str, pl.DataFrame]] = field(default_factory=list)
    figures: list[tuple[str, object]] = field(default_factory=list)     # (name, matplotlib Figure)


def _grouped_bars(df: pl.DataFrame, x: str, y: str, title: str, ylabel: str, lo: str | None = None,
                  hi: str | None = None, ylim: tuple[float, float] | None = None):
    df = _who(df)
    xs = df[x].unique(maintain_order=True).to_list()
    # judges in one order, each its own colour in every chart (in the order met, one judge was
    # orange in the kappa chart and pink in the pass-rate chart)
    whos = sorted(df["who"].unique().to_list(), key=str)
    names = [_legend_name(w) for w in whos]
    beside = 0.6 + 0.055 * max(map(len, names)) if len(whos) > 1 else 0.0      # the legend's room, in inches
    fig, ax = plt.subplots(figsize=(min(12.0, max(6.0, 0.35 * len(xs) * max(1, len(whos)) + 2)) + beside, 3.8))
    width = 0.8 / max(1, len(whos))
    for k, who in enumerate(whos):
        sub = df.filter(pl.col("who") == who)
        vals = {r[x]: r for r in sub.iter_rows(named=True)}
        heights = [vals[v][y] if v in vals and vals[v][y] is not None else np.nan for v in xs]
        pos = np.arange(len(xs)) + (k - (len(whos) - 1) / 2) * width
        # past 10 judges, tab20's 20 colours (C0-C9 repeat: two runs' judges were one red)
        colour = f"C{k}" if len(whos) <= 10 else plt.get_cmap("tab20")(k % 20)
        ax.bar(pos, heights, width, label=names[k], color=colour)
        if lo and hi:       # whiskers only where there is an interval: a missing one drawn flat read as exact
            bounds = [(p, h, vals[v][lo], vals[v][hi]) for p, v, h in zip(pos, xs, heights) if v in vals
                      and all(isinstance(e, int | float) and math.isfinite(e) for e in (vals[v][lo], vals[v][hi], h))]
            if bounds:
                b = np.asarray(bounds, dtype=float)
                ax.errorbar(b[:, 0], b[:, 1], yerr=np.clip([b[:, 1] - b[:, 2], b[:, 3] - b[:, 1]], 0, None),
                            fmt="none", ecolor="black", elinewidth=1, capsize=2)
    crowded = len(xs) > 6 or max((len(str(v)) for v in xs), default=0) * len(xs) > 60
    ax.set_xticks(np.arange(len(xs)), [str(v) for v in xs], rotation=30 if crowded else 0,
                  ha="right" if crowded else "center")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if ylim:
        ax.set_ylim(*ylim)
    ax.axhline(0, color="black", linewidth=0.6)
    if len(whos) > 1:           # beside the axes, never over a bar (a rate of 1.0 reaches the top)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
                  ncols=1 if len(whos) <= 12 else 2)
    fig.tight_layout()
    return fig


def _legend_name(who: object, most: int = 48) -> str:
    """A judge's name in a legend: its end where it is long (a replayed file's path ends with its name)."""
    text = str(who)
    return text if len(text) <= most else "…" + text[-(most - 1):]


def _comparable_view(df: pl.DataFrame) -> pl.DataFrame:
    """TTCW tables come in views: `all` and, for replayed judges that also answered on stories
    without text, `judgeable`. Judges compared side by side should stand on the same stories: the
    `judgeable` view where a judge has one, else `all` (which then holds only judgeable stories)."""
    keys = [c for c in ("run", "judge") if c in df.columns]
    has = df.filter(pl.col("view") == "judgeable").select(keys).unique()
    return pl.concat([df.filter(pl.col("view") == "judgeable"),
                      df.filter(pl.col("view") == "all").join(has, on=keys, how="anti")], how="diagonal_relaxed")


# -- TTCW ---------------------------------------------------------------------------------------
def ttcw_panels(t: dict[str, pl.DataFrame]) -> list[Panel]:
    out = []
    per_test = t.get("per_test")
    if per_test is not None and "kappa" in per_test.columns:
        view = _comparable_view(per_test)
        wide = _who(view).pivot(on="who", index="test", values="kappa", aggregate_function="first")
        fleiss = view.group_by("test", maintain_order=True).agg(pl.col("expert_fleiss_kappa").first())
        judgeable = (view["view"] == "judgeable").any()
        p = Panel("Agreement with the expert majority, per TTCW test",
                  "Cohen's kappa and balanced accuracy of each judge against the 2-of-3 expert majority; "
                  "the experts' own Fleiss' kappa per test is a ceiling of sorts."
                  + (" Over the judgeable stories (those with text), so that judges stand on the same stories; "
                     "the per_test table below has the all-items view too. A missing bar: undefined (one expert "
                     "class in that test)." if judgeable else "")
                  + " Whiskers: 95% intervals over stories, where each answer is in 10 of them.",
                  [("kappa_per_test", wide.join(fleiss, on="test")), ("per_test", per_test)])
        for name, metric, title in (("kappa_per_test", "kappa", "Cohen's kappa"),
                                    ("bacc_per_test", "balanced_accuracy", "Balanced accuracy")):
            ci = (f"{metric}_low", f"{metric}_high") if f"{metric}_low" in view.columns else (None, None)  # older runs
            p.figures.append((name, _grouped_bars(view, "test", metric, f"{title} per test", metric.replace("_", " "),
                                                  ci[0], ci[1], ylim=(0, 1) if metric != "kappa" else None)))
        out.append(p)
    if "overall" in t:
        out.append(_overall(t["overall"]))
    if "pass_rates_by_source" in t:
        by_source = t["pass_rates_by_source"]
        view = _comparable_view(by_source)
        fig = _grouped_bars(view, "source", "judge_pass_rate", "Judge pass rate per story source (mean over tests)",
                            "pass rate", ylim=(0, 1))
        ax = fig.axes[0]
        experts = view.unique("source", maintain_order=True)
        ax.scatter(np.arange(experts.height), experts["expert_pass_rate"].to_list(), color="black", marker="D",
                   zorder=5, label="experts")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)   # beside, not over a bar
        fig.tight_layout()
        out.append(Panel("Pass rates per story source", "", [("pass_rates_by_source", by_source)],
                         [("pass_rates_by_source", fig)]))
    if "story_counts" in t:
        out.append(Panel("Per-story pass counts vs the experts'", "", [("story_counts", t["story_counts"])]))
    cp = t.get("corrected_pass_rates")
    if cp is not None and cp.height:
        p = Panel("Corrected pass rates (Rogan-Gladen)",
                  "The raw pass rate is biased by the judge's errors; with its sensitivity and specificity "
                  "measured on the human-labelled items, (p + Sp - 1) / (Se + Sp - 1) estimates the true rate "
                  "(95% bootstrap CI; undefined when Se + Sp <= 1, i.e. the judge is no better than chance).",
                  [("corrected_pass_rates", cp)])
        per_test = cp.filter(pl.col("test") != "all")
        if per_test["corrected_pass_rate"].is_not_null().any():
            p.figures.append(("corrected_pass_rates", _grouped_bars(per_test, "test", "corrected_pass_rate",
                                                                    "Corrected pass rate per test", "pass rate",
                                                                    "ci_low", "ci_high", (0, 1))))
        else:                                     # an empty chart says nothing: the table's note says why
            why = cp["note"].drop_nulls().to_list()
            p.note += f" No rate to draw here: {why[0] if why else 'no rate was defined'}."
        out.append(p)
    out += _calibration_panels(t)
    out += _label_distribution(t)
    return out


def _overall(overall: pl.DataFrame) -> Panel:
    """Each judge's kappa and balanced accuracy over all tests, with their 95% intervals (stories
    resampled): the numbers a sweep ranks by, drawn so overlapping intervals are seen at once."""
    view = _comparable_view(overall)

    def bound(name: str) -> pl.Expr:          # a run written before kappa had one has no column
        return pl.col(name).fill_nan(None) if name in view.columns else pl.lit(None, dtype=pl.Float64)
    keys = [c for c in ("run", "judge", "view") if c in view.columns]     # compared runs: a bar per run's judge
    drawn = pl.concat([view.select(*keys, pl.lit(label).alias("metric"), pl.col(m).alias("value"),
                                   bound(f"{m}_low").alias("low"), bound(f"{m}_high").alias("high"))
                       for m, label in (("kappa", "Cohen's kappa"), ("balanced_accuracy", "balanced accuracy"))])
    judgeable = (view["view"] == "judgeable").any()
    note = ("Over every test judged, with 95% intervals resampling whole stories (none from fewer than 10 "
            "stories, or where an expert's or the judge's answer is in fewer than 10: the table's ci_note says why)."
            + (" Drawn over the judgeable stories (those with text), so that judges stand on the same stories; the "
               "table has the all-items view too." if judgeable else ""))
    return Panel("Overall agreement", note, [("overall", overall)],
                 [("overall", _grouped_bars(drawn, "metric", "value", "Agreement over all tests", "agreement",
                                            "low", "high"))])


def _label_distribution(t: dict[str, pl.DataFrame]) -> list[Panel]:
    counts = t.get("label_distribution")
    if counts is None or not counts.height:
        return []
    fig = _grouped_bars(counts, "label", "share", "Label distribution", "share of verdicts", "ci_low", "ci_high", (0, 1))
    return [Panel("Label distribution", "A judge that says one label almost always carries little information "
                                        f"({rate_interval('stories or pairs')}).", [("label_distribution", counts)],
                  [("label_distribution", fig)])]


def _calibration_panels(t: Mapping[str, pl.DataFrame | None]) -> list[Panel]:
    """Reliability diagram and ECE of the judge's label probabilities (distribution or analyze mode)."""
    raw, summary = t.get("calibration"), t.get("calibration_summary")
    if raw is None or summary is None or not raw.height:
        return []
    bins = _who(raw)
    fig, ax = plt.subplots(figsize=(5.2, 4.2))
    ax.plot([0, 1], [0, 1], color="grey", linewidth=0.8, linestyle="--", label="perfectly calibrated")
    for (who,), g in bins.group_by(["who"], maintain_order=True):
        ax.plot(g["mean_prediction"].to_list(), g["observed_frequency"].to_list(), "-o", label=str(who))
        for x, y, n in zip(g["mean_prediction"].to_list(), g["observed_frequency"].to_list(), g["n"].to_list()):
            ax.annotate(str(n), (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("judge's predicted probability (bin mean)")
    ax.set_ylabel("observed frequency (human label)")
    ax.set_title("Reliability diagram")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return [Panel("Calibration of the judge's probabilities",
                  "Predictions binned by the probability of the positive label (TTCW: Yes; pairwise: text a "
                  "better), against how often humans said so; numbers are verdicts per bin. The probability is "
                  "distribution mode's, or analyze mode's read right after the analysis (column read). "
                  "ECE = sum of (bin share x |mean prediction - observed frequency|), as the papers print it: biased "
                  "upward (a calibrated judge's ECE stays above 0), so no interval. squared_calibration_error: the "
                  "debiased CE^2 of Kumar, Liang & Ma (2019), unbiased (a calibrated judge's scatters around 0, below 0 "
                  "too), with its 95% interval (stories or pairs resampled, centred on the estimate); Brier = "
                  "mean squared error.", [("calibration_summary", summary), ("calibration", raw)],
                  [("reliability_diagram", fig)])]


ANOVA_NOTE = ("F over the items; p by shuffling the categories within each item group (999 shuffles): an item's "
              "score is relative to the items listed with it, so groups, not items, are the independent units.")


def rate_interval(units: str) -> str:
    """How a rate's interval is made (`metrics.proportion`), in a panel's words."""
    return (f"95% interval, {units} as the clusters: Clopper-Pearson on the effective sample size (Korn-Graubard), "
            "one trial per cluster where the rarer answer is in fewer than 5 clusters")


# -- reference-based Likert -------------------------------------------------------------------------
def reference_likert_panels(t: dict[str, pl.DataFrame]) -> list[Panel]:
    out = []
    sweep = t.get("cutoff_sweep")
    if sweep is not None and sweep.height:
        sweep = _who(sweep)
        fig, ax = plt.subplots(figsize=(6.5, 3.6))
        for who, g in sweep.group_by("who", maintain_order=True):
            g = g.sort("cutoff")
            for metric, style in (("spearman", "-o"), ("kendall", "--s"), ("pairwise_accuracy", ":^")):
                ax.plot(g["cutoff"].to_list(), g[metric].to_list(), style, label=f"{who[0]} {metric}")
        ax.set_xlabel("cutoff (L+ - L- >= cutoff passes)")
        ax.set_ylabel("agreement with human ranking")
        ax.set_title("Cutoff sweep (mean over groups)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        out.append(Panel("Cutoff sweep", "Computed from stored verdicts: no model call per cutoff.",
                         [("cutoff_sweep", t["cutoff_sweep"])], [("cutoff_sweep", fig)]))
    if "ranking" in t:
        out.append(Panel("Rank agreement per group", "", [("ranking", t["ranking"])]))
    if "bias" in t:
        out.append(Panel("Bias", "Swap-flip rate: the two orders disagree; first-position win rate: the story shown "
                                 "first is preferred.", [("bias", t["bias"])]))
    return out


# -- listwise -------------------------------------------------------------------------------
def listwise_panels(t: dict[str, pl.DataFrame]) -> list[Panel]:
    out = []
    cm = t.get("category_means")
    if cm is not None and cm.height:
        cm2 = cm.with_columns(pl.format("{} / {}", pl.col("source").fill_null(""),
                                        pl.col("category").fill_null("")).alias("cell"))
        out.append(Panel("Mean score per (source, category)", "Per item source (a generator, a writer), the mean "
                                                                 "score of its items in each ground-truth category, "
                                                                 "categories in the card's order, worst first (with "
                                                                 "AUT data: the AUT paper's bars).",
                         [("category_means", cm)],
                         [("category_means", _grouped_bars(cm2, "cell", "mean_score", "Mean 1-5 score", "score",
                                                           ylim=(0, 5))),
                          ("category_positions", _grouped_bars(cm2, "cell", "mean_position",
                                                               "Mean rank position (first listed 1, last 0)", "position"))]))
    items = t.get("item_scores")
    if items is not None and items.height and items["category"].is_not_null().any():
        out.append(Panel("Ordering strips", "Each cell is an item, ordered by the judge's mean score (best left), "
                                            "coloured by its ground-truth category: a perfect judge shows sorted colours.",
                         [], [("ordering_strips", _strips(items))]))
    if "agreement" in t:
        ag = t["agreement"]
        plots = [("oracle_spearman", _grouped_bars(ag, "score", "spearman_category", "Spearman with the category order",
                                                   "Spearman", ylim=(-1, 1)))] if ag.height else []
        out.append(Panel("Agreement with the ground truth", "Spearman of item mean scores (1-5 score and rank "
                                                           "position) against the category rank (the oracle) and "
                                                           "the human score. An empty Spearman is undefined: the "
                                                           "judge gave every item the same score (or the items have "
                                                           "one category), so there is no ranking to correlate.",
                         [("agreement", ag)], plots))
    sp = t.get("self_preference")
    if sp is not None and sp.height:
        out.append(Panel("Self-preference", "A judge's mean for the items its own family wrote minus its mean for the "
                                            "others' items (95% bootstrap CI, groups resampled: an item's score is "
                                            "relative to its list; none from fewer than 10 groups): above 0, it favours "
                                            "its own.", [("self_preference", sp)],
                         [("self_preference", _grouped_bars(sp.filter(pl.col("score") == "score"), "own_source",
                                                            "difference", "Own minus others' mean 1-5 score",
                                                            "difference", "ci_low", "ci_high"))]))
    gen, dup = _once(t.get("generation")), _once(t.get("generation_duplicates"))
    if gen is not None and gen.height:
        out.append(Panel("Generation", "Turns per generator and level, each constrained to a numbered list; uses "
                                       "written twice for one object (across levels: the oracle levels overlap).",
                         [("generation", gen)] + ([("generation_duplicates", dup)] if dup is not None and dup.height
                                                  else [])))
    for name, title, note in (("anova", "One-way ANOVA across categories", ANOVA_NOTE),
                              ("icc", "ICC across repeats", ""), ("success", "Complete lists per N", "")):
        if name in t and t[name].height:
            out.append(Panel(title, note, [(name, t[name])]))
    out += _permutation_panels(t)
    inter = t.get("inter_judge")
    if inter is not None and inter.width > 2 + ("run" in inter.columns):
        runs = inter["run"].unique(maintain_order=True).to_list() if "run" in inter.columns else [None]
        maps = [(f"inter_judge_{run}" if run else "inter_judge",
                 _heatmap(inter.filter(pl.col("run") == run).drop("run") if run else inter, run)) for run in runs]
        out.append(Panel("Inter-judge Spearman", "Spearman between judges' item mean scores.",
                         [("inter_judge", inter)], maps))
    return out


def _once(table: pl.DataFrame | None) -> pl.DataFrame | None:
    """A table every run of a report holds alike (the tasks of one run share its generation): once."""
    if table is None or "run" not in table.columns:
        return table
    return table.drop("run").unique(maintain_order=True)


def _permutation_panels(t: dict[str, pl.DataFrame]) -> list[Panel]:
    """Permutation self-consistency: agreement of one order vs the aggregated rankings, and the
    position bias before and after (means over lists, 95% CIs)."""
    out = []
    for name, title, note in (
            ("psc_agreement", "Permutation self-consistency: agreement with the ground truth",
             "Spearman with the category rank, mean over lists: the order as drawn, the central (Kemeny) ranking of "
             "all orders, and the mean score over orders."),
            ("psc_position_bias", "Permutation self-consistency: position bias before and after",
             "Spearman between where an item was shown and its rank: one order (before) and the central ranking "
             "against the same positions (after). Near 0 after: the order no longer decides.")):
        table = t.get(name)
        if table is not None and table.height:
            out.append(Panel(title, note, [(name, table)],
                             [(name, _grouped_bars(table, "ranking", "spearman", title.split(": ")[1], "Spearman",
                                                   "ci_low", "ci_high", ylim=(-1, 1)))]))
    return out


# -- pairwise -------------------------------------------------------------------------------
def pairwise_panels(t: dict[str, pl.DataFrame]) -> list[Panel]:
    out = []
    acc = t.get("accuracy")
    if acc is not None and acc.height:
        out.append(Panel("Accuracy against the human preference",
                         "Per order, averaged over the two orders, and the pair-level combined verdict (a tie earns "
                         f"half) ({rate_interval('pairs')}).", [("accuracy", acc)],
                         [("accuracy", _grouped_bars(acc, "order", "accuracy", "Accuracy", "accuracy", "ci_low", "ci_high",
                                                     (0, 1)))]))
    bias = t.get("bias")
    if bias is not None and bias.height:
        shown = bias.filter(~pl.col("metric").is_in(["unparsed_rate", "unparsed"]))   # (an older run's: a count)
        out.append(Panel("Bias panel", "Swap-flip rate (orders disagree), first-position win rate (of verdicts that "
                                       "prefer a side; ties left out), longer-text win rate and tie rate, each with "
                                       f"its {rate_interval('pairs')}, from the judge's real answers. Unbiased: 0, 0.5, "
                                       "0.5. Text a's win rate (a tie half) says which text the judge prefers: with two "
                                       "systems' texts as a and b, which system wins.", [("bias", bias)],
                         [("bias", _grouped_bars(shown, "metric", "value", "Bias", "rate", "ci_low", "ci_high", (0, 1)))]))
    lc = t.get("length_control")
    if lc is not None and lc.height:
        who = [c for c in ("run", "judge") if c in lc.columns]
        bars = pl.concat([lc.select(*who, pl.lit("raw").alias("kind"), pl.col("accuracy").alias("value")),
                          lc.select(*who, pl.lit("at equal length").alias("kind"), pl.col("lc_accuracy").alias("value"),
                                    "ci_low", "ci_high")], how="diagonal_relaxed")
        out.append(Panel("Length-controlled accuracy",
                         "Logistic regression of agreement with humans on the log length ratio of the human-preferred "
                         "text to the other (and markdown style differences when style_control is on), read at zero "
                         "difference: the accuracy the judge would have if both texts were equally long. A positive "
                         "length coefficient: the judge agrees with humans more when their choice is the longer text. "
                         "95% CI from the cluster-robust standard error (pairs as clusters); tie picks left out.",
                         [("length_control", lc)],
                         [("length_control", _grouped_bars(bars, "kind", "value", "Accuracy, raw vs length-controlled",
                                                           "accuracy", "ci_low", "ci_high", (0, 1)))]))
    out += _calibration_panels(t)
    out += _label_distribution(t)
    return out


# -- classification -----------------------------------------------------------------------------
def classification_panels(t: dict[str, pl.DataFrame]) -> list[Panel]:
    out = []
    if "metrics" in t:
        out.append(Panel("Accuracy and ordinal agreement", "", [("metrics", t["metrics"])]))
    conf = t.get("confusion")
    if conf is not None and conf.height:
        first = conf.filter(pl.col("judge") == conf["judge"][0])
        preds = [c for c in first.columns if c.startswith("pred_")]
        values = first.select(preds).to_numpy().astype(float)
        fig, ax = plt.subplots(figsize=(4.5, 3.6))
        ax.imshow(values, cmap="Blues")
        ax.set_xticks(range(len(preds)), [p.removeprefix("pred_") for p in preds])
        ax.set_yticks(range(first.height), first["true"].to_list())
        ax.set_xlabel("predicted")
        ax.set_ylabel("true")
        for i in range(values.shape[0]):
            for j in range(values.shape[1]):
                ax.text(j, i, f"{int(values[i, j])}", ha="center", va="center")
        ax.set_title(f"Confusion matrix: {first['judge'][0]}")
        fig.tight_layout()
        out.append(Panel("Confusion matrix", "", [("confusion", conf)], [("confusion", fig)]))
    counts = t.get("class_counts")
    if counts is not None and counts.height:
        out.append(Panel("Per-class counts", "The papers saw judges pile into the middle class.",
                         [("class_counts", counts)],
                         [("class_counts", _grouped_bars(counts, "label", "predicted", "Predicted per class", "items"))]))
    return out

