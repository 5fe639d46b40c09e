"""Which way is better, for every metric a sweep may rank by: one definition per metric name.

A metric absent here has no direction (a count, a rate that is neither good nor bad, an interval
bound, a p-value) and cannot be a sweep's `rank_by`. Lower is better for the calibration errors;
higher for every agreement, correlation and reliability.

>>> higher_is_better("kappa"), higher_is_better("ece"), higher_is_better("ci_low")
(True, False, None)
"""
from __future__ import annotations

HIGHER_IS_BETTER: dict[str, bool] = {
    # agreement with human labels
    "kappa": True, "balanced_accuracy": True, "accuracy": True, "lc_accuracy": True, "pairwise_accuracy": True,
    # rank and count correlations with human scores
    "spearman": True, "kendall": True, "pearson": True, "spearman_category": True, "spearman_human": True,
    "spearman_ordinal": True,
    # reliability across repeats, separation of categories, complete lists
    "ICC1": True, "ICC2": True, "ICC3": True, "ICC1k": True, "ICC2k": True, "ICC3k": True, "F": True,
    "success_rate": True,
    # calibration errors
    "ece": False, "calibration_error": False, "brier": False,
}


def higher_is_better(metric: str) -> bool | None:
    """True / False for a metric with a direction; None for one without (not rankable)."""
    return HIGHER_IS_BETTER.get(metric)
