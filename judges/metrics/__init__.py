"""Agreement metrics. Each returns a `MetricResult(value, n)`; empty or degenerate input gives NaN
with its n, never 0.0. The math is scipy's wherever scipy has it."""
from .agreement import balanced_accuracy, cohen_kappa, fleiss_kappa
from .base import MetricResult
from .bootstrap import cluster_bootstrap
from .ranking import kendall, pairwise_accuracy, pearson, spearman

__all__ = ["MetricResult", "balanced_accuracy", "cluster_bootstrap", "cohen_kappa", "fleiss_kappa", "kendall",
           "pairwise_accuracy", "pearson", "spearman"]
