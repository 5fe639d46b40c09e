"""The rubric's report: your questions' scores, the judge's agreement with the humans where a
human column is given, and its consistency (repeats, the two orders of a pair), each a chart with
its 95% intervals beside the table it draws."""
from __future__ import annotations

import polars as pl

from litjudge.judges.scales import scales
from litjudge.judges.scales.base import PanelSpec

from .panels import Panel, _grouped_bars, rate_interval


def rubric_panels(t: dict[str, pl.DataFrame]) -> list[Panel]:
    out = []
    scores = t.get("scores")
    if scores is not None and scores.height:
        out.append(Panel("Scores per question",
                         "Each question's mean score (binary: the share of the positive answer; points: the mean "
                         "point; a pairwise question's: text a's win rate, the mean of its two orders' rates, so an "
                         "order answered more often brings no position bias in; a categorical question has none, "
                         "its shares are label_distribution's) over the answered verdicts (n); a share's "
                         f"{rate_interval('texts or pairs')}; a mean point's, "
                         "the cluster bootstrap's. Unparsed verdicts are counted, not scored.",
                         [("scores", scores), ("label_distribution", t.get("label_distribution", pl.DataFrame()))],
                         score_figures(scores)))
    agreement = t.get("agreement")
    if agreement is not None and agreement.height:
        detail = [(kind.table, t[kind.table]) for kind in scales() if kind.table in t and t[kind.table].height]
        out.append(Panel("Agreement with the humans",
                         "One headline per question with a human column: Cohen's kappa (binary, categorical), "
                         "quadratic-weighted kappa (points), accuracy over both orders (pairwise), with 95% intervals "
                         "resampling texts (pairs); the tables below give every statistic of each scale.",
                         [("agreement", agreement), *detail],
                         [("agreement", _grouped_bars(agreement, "question", "agreement", "Agreement per question",
                                                      "agreement", "agreement_low", "agreement_high",
                                                      _agreement_axis(agreement)))]))
    consistency = t.get("consistency")
    if consistency is not None and consistency.height:
        shown = consistency.with_columns(pl.format("{} {}", "question", "metric").alias("question_metric"))
        out.append(Panel("Consistency of the judge",
                         "The same answer on every repeat of a text; a pair's two orders answered differently "
                         f"(swap flip); the text shown first winning; each rate's {rate_interval('texts or pairs')}.",
                         [("consistency", consistency)],
                         [("consistency", _grouped_bars(shown, "question_metric", "value", "Consistency", "rate",
                                                        "ci_low", "ci_high", (0, 1)))]))
    return out + [_drawn(spec) for kind in scales() if (spec := kind.panel(t)) is not None]


def _drawn(spec: PanelSpec) -> Panel:
    """A scale's own panel (judges/scales/), its bar charts drawn."""
    return Panel(spec.title, spec.note, list(spec.tables),
                 [(name, _grouped_bars(b.frame, b.x, b.y, b.title, b.ylabel, b.low, b.high, b.ylim))
                  for name, b in spec.bars])


def score_figures(scores: pl.DataFrame) -> list[tuple[str, object]]:
    """One chart per kind of score: shares (binary, pairwise questions) on [0, 1], mean points on
    the points' own axis. On one axis a share of 0.4 beside a mean point of 3.2 was a sliver."""
    kinds = {kind.name: kind.score for kind in scales()}
    shares = scores.filter(pl.col("scale").is_in([n for n, k in kinds.items() if k == "share"]))
    points = scores.filter(pl.col("scale").is_in([n for n, k in kinds.items() if k == "mean"]))
    out: list[tuple[str, object]] = []
    if shares.height:
        out.append(("scores", _grouped_bars(shares, "question", "mean_score", "Share of the positive answer per question",
                                            "share", "ci_low", "ci_high", (0.0, 1.0))))
    if points.height:
        out.append(("scores_points" if shares.height else "scores",
                    _grouped_bars(points, "question", "mean_score", "Mean point per question", "mean point",
                                  "ci_low", "ci_high", None)))
    return out


def _agreement_axis(agreement: pl.DataFrame) -> tuple[float, float]:
    """Kappas on [-1, 1] (below 0: worse than chance), accuracies on [0, 1]."""
    return (-1.0, 1.0) if any("kappa" in str(m) for m in agreement["metric"].to_list()) else (0.0, 1.0)
