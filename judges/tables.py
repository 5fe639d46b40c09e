"""Tables several protocols publish, built once here: calibration of label probabilities, pass
rates corrected for the judge's error, the label distribution. The report draws these tables; it
never computes a number of its own."""
from __future__ import annotations

import numpy as np
import polars as pl

from .frames import split
from .metrics import corrected_pass_rate
from .metrics.bootstrap import RESAMPLES, or_none, too_few
from .metrics.calibration import (
    brier_score,
    calibration_note,
    expected_calibration_error,
    reliability_bins,
    squared_calibration_error_ci,
)
from .metrics.proportion import NOTES, rate_interval

CALIBRATION_BINS = 10
AFTER_ANALYSIS = "_after_analysis"     # `p_yes_after_analysis`: analyze mode's P, read after the analysis


def stated_probability(frame: pl.DataFrame, prob: str) -> pl.Expr:
    """The probability a judge stated for the positive label: distribution mode's (`prob`), else the
    one analyze mode read right after its analysis (`prob` + AFTER_ANALYSIS, where the frame has it).
    What calibration reads; a verdict's decision reads `prob` alone (an analyze verdict is its label)."""
    after = prob + AFTER_ANALYSIS
    return pl.coalesce(pl.col(prob), pl.col(after)) if after in frame.columns else pl.col(prob)


def calibration_tables(df: pl.DataFrame, prob: str, truth: str, bins: int = CALIBRATION_BINS,
                       resamples: int = RESAMPLES, cluster: str | None = None,
                       given: str = "distribution") -> dict[str, pl.DataFrame]:
    """Per judge, from rows holding a probability of the positive label (`stated_probability`:
    `given`, what `prob` holds: distribution mode's, a reward model's, a jury's; else analyze
    mode's after the analysis; `read` says which) and the human
    truth (`truth`, bool): the reliability diagram's bins (`calibration`) and the plug-in ECE (as
    published, biased upward: no interval), the debiased squared calibration error with its 95%
    interval (clusters resampled: the `cluster` column's stories or pairs; each verdict when None),
    and Brier (`calibration_summary`). Empty when no row has a probability (label mode, an API
    judge's analysis)."""
    have = (df.with_columns(pl.col(prob).is_null().alias("_after"), stated_probability(df, prob).alias(prob))
            .filter(pl.col(prob).is_not_null() & pl.col(truth).is_not_null()))
    if not have.height:
        return {}
    bin_rows, summary = [], []
    for (judge,), g in split(have, "judge").items():
        p, y = g[prob].to_list(), [float(v) for v in g[truth].to_list()]
        read = "after the analysis" if g["_after"].all() else given if not g["_after"].any() else "both"
        for b in reliability_bins(p, y, bins):
            bin_rows.append({"judge": judge, "bin_low": b.low, "bin_high": b.high, "n": b.n,
                             "mean_prediction": b.mean_prediction, "observed_frequency": b.observed_frequency})
        clusters = g[cluster].to_list() if cluster else None
        ce2, lo, hi = squared_calibration_error_ci(p, y, bins, resamples=resamples, clusters=clusters)
        summary.append({"judge": judge, "read": read, "n": len(p), "ece": expected_calibration_error(p, y, bins),
                        "squared_calibration_error": ce2, "squared_calibration_error_low": or_none(lo),
                        "squared_calibration_error_high": or_none(hi),
                        "ci_note": calibration_note(len(set(map(str, clusters or range(len(p))))), len(p), lo),
                        "brier": brier_score(p, y).value,
                        "positive_rate": sum(y) / len(y), "mean_prediction": sum(p) / len(p)})
    return {"calibration": pl.DataFrame(bin_rows), "calibration_summary": pl.DataFrame(summary)}


def corrected_pass_rates(per_item: pl.DataFrame, resamples: int = RESAMPLES) -> pl.DataFrame:
    """Per judge and test (and over all tests): the raw pass rate of the judged items and its
    Rogan-Gladen correction by the judge's sensitivity and specificity on the labelled ones; the CI
    resamples stories (a story's labelled and scored items together). No correction where every
    scored item is labelled (`SELF_CORRECTED`)."""
    rows = []
    for (judge,), g in split(per_item.filter(pl.col("judge_pass").is_not_null()), "judge").items():
        tests = [("all", g)] + [(str(t), part) for (t,), part in sorted(split(g, "test").items())]
        for name, sub in tests:
            lab = sub.filter(pl.col("expert_pass").is_not_null())
            if not lab.height:
                continue
            res: dict[str, float | str | None] = dict(corrected_pass_rate(
                lab["expert_pass"].to_list(), lab["judge_pass"].to_list(), sub["judge_pass"].to_list(),
                resamples=resamples, clusters_labelled=lab["story_id"].to_list(),
                clusters_scored=sub["story_id"].to_list()))
            if lab.height == sub.height:
                # every scored item is labelled: Se and Sp measured on the same items make the
                # correction return the experts' own rate exactly; it says nothing about the judge
                res |= {"corrected_pass_rate": None, "ci_low": None, "ci_high": None,
                        "note": SELF_CORRECTED}
            rows.append({"judge": judge, "test": name, "note": None, **res})
    return pl.DataFrame(rows, infer_schema_length=None)


SELF_CORRECTED = ("every scored item is labelled: the correction would return the experts' rate exactly (it "
                  "corrects unlabelled items)")


def label_distribution(df: pl.DataFrame, cluster: str, label: str = "label") -> pl.DataFrame:
    """Share of each label per judge among its answers (unparsed ones counted as the label
    "unparsed"), with its 95% interval, the `cluster` column's units (a story's verdicts, a pair's
    orders) the clusters (`proportion.rate_interval`, every judge and label at once). Every label
    any judge of the frame said has a row for each judge (a judge that never says it: share 0,
    with its interval)."""
    answers = df.select("judge", pl.col(cluster).cast(pl.Utf8).alias("cluster"),
                        pl.col(label).cast(pl.Utf8).fill_null("unparsed").alias("said"))
    labels = answers.select(pl.col("said").alias("label")).unique()
    shares = (answers.join(labels, how="cross").with_columns((pl.col("said") == pl.col("label")).cast(pl.Float64)
                                                             .alias("v")))
    counts = answers.group_by("judge", "said").agg(pl.len().alias("n")).rename({"said": "label"})
    out = rate_rows(shares, ["judge", "label"], "cluster", "v").rename({"v": "share"}).drop("n")
    order = df.select("judge").unique(maintain_order=True).with_row_index("_j")
    return (out.join(counts, on=["judge", "label"], how="left").with_columns(pl.col("n").fill_null(0))
            .join(order, on="judge").sort("_j", "label")
            .select(pl.col("judge").cast(pl.Utf8), pl.col("label"), pl.col("n").cast(pl.Int64), "share", "ci_low",
                    "ci_high", "ci_note"))


def rate_rows(frame: pl.DataFrame, by: list[str], cluster: str, value: str, stratum: str | None = None,
              groups: pl.DataFrame | None = None, need: int | None = None, empty: str | None = None
              ) -> pl.DataFrame:
    """One row per `by` group (`groups`, default the frame's in first-seen order): the rate of
    `value` (in [0, 1]; nulls left out; None where a group has none), over `stratum` the mean of
    each stratum's rate (None where fewer than `need` strata hold a value), `n` the values, and its
    95% interval with `cluster` as the units (`proportion.rate_interval`: every group's at once);
    `empty`, the note of a group without a value (what it lacks)."""
    keys = [*by, cluster] + ([stratum] if stratum else [])
    f = frame.select(*keys, pl.col(value).cast(pl.Float64)).drop_nulls(value)
    groups = (frame.select(by) if groups is None else groups.select(by)).unique(maintain_order=True).with_row_index("_d")
    if not f.height:
        return groups.drop("_d").with_columns(pl.lit(None, pl.Float64).alias(value), pl.lit(0, pl.Int64).alias("n"),
                                              *(pl.lit(None, pl.Float64).alias(c) for c in ("ci_low", "ci_high")),
                                              pl.lit(empty, pl.Utf8).alias("ci_note"))
    cells = (f.group_by(keys).agg(pl.col(value).sum().alias("_s"), pl.len().alias("_m")).join(groups, on=by)
             .with_columns((pl.col(cluster).cast(pl.Utf8).rank("dense").over(by) - 1).alias("_g"),
                           (pl.col(stratum).cast(pl.Utf8).rank("dense") - 1 if stratum else pl.lit(0)).alias("_t")))
    d, g, t = (cells[c].to_numpy().astype(int) for c in ("_d", "_g", "_t"))
    shape = (groups.height, int(g.max()) + 1, int(t.max()) + 1)
    sums, counts = np.zeros(shape), np.zeros(shape)
    sums[d, g, t], counts[d, g, t] = cells["_s"].to_numpy(), cells["_m"].to_numpy()
    rate, low, high, rule = rate_interval(sums, counts, need=need)
    clusters = (counts.sum(axis=2) > 0).sum(axis=1)
    n = counts.sum(axis=(1, 2))
    notes = [empty if m == 0 and empty is not None else too_few(int(k)) if r == 3 else NOTES.get(int(r))
             for r, k, m in zip(rule, clusters, n)]
    return groups.drop("_d").with_columns(
        pl.Series(value, np.where(n > 0, rate, np.nan)).fill_nan(None),
        pl.Series("n", n.astype(np.int64)), pl.Series("ci_low", low).fill_nan(None),
        pl.Series("ci_high", high).fill_nan(None), pl.Series("ci_note", notes, dtype=pl.Utf8))
