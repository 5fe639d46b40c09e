"""Agreement metrics. Each returns a `MetricResult(value, n)`; empty or degenerate input gives NaN
with its n, never 0.0. The math is scipy's wherever scipy has it."""
from .agreement import accuracy, balanced_accuracy, binary_agreement, cohen_kappa, fleiss_kappa
from .base import MetricResult
from .bootstrap import cluster_bootstrap
from .position import first_position_win_rate
from .prevalence import corrected_pass_rate, rogan_gladen
from .ranking import kendall, pairwise_accuracy, pearson, spearman
from .reliability import ICC_KINDS, icc, one_way_anova

__all__ = ["ICC_KINDS", "MetricResult", "accuracy", "icc", "one_way_anova", "balanced_accuracy", "binary_agreement",
           "cluster_bootstrap", "corrected_pass_rate", "rogan_gladen", "cohen_kappa", "first_position_win_rate",
           "fleiss_kappa", "kendall", "pairwise_accuracy", "pearson", "spearman"]
