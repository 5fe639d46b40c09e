"""Tables several protocols publish, built once here: calibration of label probabilities, pass
rates corrected for the judge's error, the label distribution. The report draws these tables; it
never computes a number of its own."""
from __future__ import annotations

import polars as pl

from .metrics import corrected_pass_rate
from .metrics.bootstrap import interval_note, mean_bootstrap, or_none
from .metrics.calibration import brier_score, calibration_error, expected_calibration_error, reliability_bins

CALIBRATION_BINS = 10


def calibration_tables(df: pl.DataFrame, prob: str, truth: str, bins: int = CALIBRATION_BINS,
                       resamples: int = 500, cluster: str | None = None) -> dict[str, pl.DataFrame]:
    """Per judge, from rows holding a probability of the positive label (`prob`, distribution
    mode) and the human truth (`truth`, bool): the reliability diagram's bins (`calibration`) and
    the plug-in ECE (as published, biased upward: no interval), the debiased calibration error with
    its 95% bootstrap CI, and Brier (`calibration_summary`), resampling the
    `cluster` column's units (stories, pairs; each verdict when None). Empty when no row has a
    probability (label or analyze mode)."""
    have = df.filter(pl.col(prob).is_not_null() & pl.col(truth).is_not_null())
    if not have.height:
        return {}
    bin_rows, summary = [], []
    for (judge,), g in have.group_by(["judge"], maintain_order=True):
        p, y = g[prob].to_list(), [float(v) for v in g[truth].to_list()]
        for b in reliability_bins(p, y, bins):
            bin_rows.append({"judge": judge, "bin_low": b.low, "bin_high": b.high, "n": b.n,
                             "mean_prediction": b.mean_prediction, "observed_frequency": b.observed_frequency})
        clusters = g[cluster].to_list() if cluster else None
        ce, lo, hi = calibration_error(p, y, bins, resamples=resamples, clusters=clusters)
        summary.append({"judge": judge, "n": len(p), "ece": expected_calibration_error(p, y, bins),
                        "calibration_error": ce, "calibration_error_low": or_none(lo),
                        "calibration_error_high": or_none(hi),
                        "ci_note": interval_note(len(set(map(str, clusters or range(len(p))))), lo),
                        "brier": brier_score(p, y).value,
                        "positive_rate": sum(y) / len(y), "mean_prediction": sum(p) / len(p)})
    return {"calibration": pl.DataFrame(bin_rows), "calibration_summary": pl.DataFrame(summary)}


def corrected_pass_rates(per_item: pl.DataFrame, resamples: int = 500) -> pl.DataFrame:
    """Per judge and test (and over all tests): the raw pass rate of the judged items and its
    Rogan-Gladen correction by the judge's sensitivity and specificity on the labelled ones; the CI
    resamples stories (a story's labelled and scored items together). No correction where every
    scored item is labelled (`SELF_CORRECTED`)."""
    rows = []
    for (judge,), g in per_item.filter(pl.col("judge_pass").is_not_null()).group_by(["judge"], maintain_order=True):
        tests = [("all", g)] + [(str(t), g.filter(pl.col("test") == t)) for t in sorted(g["test"].unique().to_list())]
        for name, sub in tests:
            lab = sub.filter(pl.col("expert_pass").is_not_null())
            if not lab.height:
                continue
            res = corrected_pass_rate(lab["expert_pass"].to_list(), lab["judge_pass"].to_list(),
                                      sub["judge_pass"].to_list(), resamples=resamples,
                                      clusters_labelled=lab["story_id"].to_list(),
                                      clusters_scored=sub["story_id"].to_list())
            if lab.height == sub.height:
                # every scored item is labelled: Se and Sp measured on the same items make the
                # correction return the experts' own rate exactly; it says nothing about the judge
                res |= {"corrected_pass_rate": None, "ci_low": None, "ci_high": None,
                        "note": SELF_CORRECTED}
            rows.append({"judge": judge, "test": name, "note": None, **res})
    return pl.DataFrame(rows, infer_schema_length=None)


SELF_CORRECTED = ("every scored item is labelled: the correction would return the experts' rate exactly (it "
                  "corrects unlabelled items)")


def label_distribution(df: pl.DataFrame, cluster: str, label: str = "label", resamples: int = 500) -> pl.DataFrame:
    """Share of each label per judge among its real answers (unparsed ones counted as the label
    "unparsed"), with a 95% bootstrap CI resampling the `cluster` column's units (a story's
    verdicts, a pair's orders)."""
    rows = []
    for (judge,), g in df.group_by(["judge"], maintain_order=True):
        labels = g[label].fill_null("unparsed").to_list()
        clusters = g[cluster].to_list()
        for lab in sorted(set(labels), key=str):
            lo, hi = mean_bootstrap(clusters, [float(x == lab) for x in labels], resamples=resamples)
            rows.append({"judge": judge, "label": lab, "n": labels.count(lab), "share": labels.count(lab) / len(labels),
                         "ci_low": or_none(lo), "ci_high": or_none(hi),
                         "ci_note": interval_note(len(set(map(str, clusters))), lo)})
    return pl.DataFrame(rows, schema={"judge": pl.Utf8, "label": pl.Utf8, "n": pl.Int64, "share": pl.Float64,
                                      "ci_low": pl.Float64, "ci_high": pl.Float64, "ci_note": pl.Utf8})
