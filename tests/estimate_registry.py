"""Every interval and p-value litjudge publishes, with the conformance test that simulates it with a
known truth through the code that writes it. tests/test_estimate_registry.py collects the columns
the protocols, the ensembles and a sweep's ranking write and fails on one without an entry here (a
new estimate cannot land without its test), on an entry no table writes, and on a named test that
does not exist. The report's panels and the console draw these tables and print no estimate of
their own; `litjudge compare --published` counts published numbers inside these intervals.

(source, table, column) -> the tests ("file::function") that cover it.
"""
from __future__ import annotations

C = "test_conformance.py::"
PW = "test_conformance_pairwise.py::"
TT = "test_conformance_ttcw.py::"
LI = "test_conformance_lists.py::"
RU = "test_rubric_conformance.py::"
PPI = ("test_ppi_conformance.py::test_both_intervals_cover_with_a_useless_a_biased_a_good_and_a_half_silent_judge",
       "test_ppi_run.py::test_neither_estimate_depends_on_which_answers_the_judge_could_give",
       "test_ppi_crosscheck.py::test_the_published_table_carries_ppi_pythons_estimate",
       "test_annotate_ppi.py::test_a_later_run_uses_the_annotations_with_the_queues_draw_probabilities",
       "test_active_inference.py::test_coverage_at_every_budget")    # [ppi] labelled = "annotations:RUN"
RUBRIC_BINARY = (RU + "test_binary_agreement_intervals_cover_with_ten_texts_of_each_answer",
                 RU + "test_no_binary_interval_with_fewer_than_ten_texts_of_an_answer")
RUBRIC_POINTS = (RU + "test_points_agreement_intervals_cover_at_ten_texts",)
RUBRIC_PAIRWISE = (RU + "test_pairwise_accuracy_interval_covers_at_ten_pairs",)
RUBRIC_RANKED = (RU + "test_a_sweep_ranks_each_question_by_the_interval_its_table_prints",)
CA = "test_rubric_categorical.py::"
RUBRIC_CATEGORICAL = (CA + "test_kappa_and_accuracy_intervals_cover_with_ten_texts_of_each_category",
                      CA + "test_the_accuracy_interval_covers_at_ten_texts",
                      CA + "test_no_kappa_interval_with_fewer_than_ten_texts_of_a_category_the_humans_gave")

RATES = (C + "test_label_shares_cover_every_hard_case", C + "test_a_constant_share_gets_the_exact_bound")
CALIBRATION = (TT + "test_every_interval_of_the_ttcw_tables_covers_its_truth",
               TT + "test_the_published_calibration_error_is_unbiased",
               C + "test_a_calibrated_judges_calibration_error_interval_holds_zero")
PAIR_RATES = (PW + "test_accuracy_and_bias_rates_cover_the_truth",
              PW + "test_position_bias_tie_and_label_shares_cover_the_truth",
              PW + "test_a_constant_judge_gets_the_exact_bound_and_covers")


def both(source: str, table: str, tests: tuple[str, ...], low: str = "ci_low", high: str = "ci_high") -> dict:
    return {(source, table, low): tests, (source, table, high): tests}


PUBLISHED: dict[tuple[str, str, str], tuple[str, ...]] = {
    # TTCW
    **{key: (TT + "test_every_interval_of_the_ttcw_tables_covers_its_truth",
             TT + "test_the_published_agreement_is_nearly_unbiased",
             TT + "test_no_balanced_accuracy_interval_where_the_rarer_expert_answer_is_in_few_stories",
             C + "test_no_agreement_interval_where_a_judge_answer_is_in_few_stories_and_the_rest_cover")
       for m in ("kappa", "balanced_accuracy") for key in both("ttcw", "overall", (), f"{m}_low", f"{m}_high")},
    **{key: (TT + "test_the_per_test_intervals_cover_at_the_fewest_stories_they_are_printed_for",
             C + "test_no_agreement_interval_where_a_judge_answer_is_in_few_stories_and_the_rest_cover")
       for m in ("kappa", "balanced_accuracy") for key in both("ttcw", "per_test", (), f"{m}_low", f"{m}_high")},
    **both("ttcw", "label_distribution", RATES + (TT + "test_every_interval_of_the_ttcw_tables_covers_its_truth",)),
    **both("ttcw", "corrected_pass_rates", (TT + "test_every_interval_of_the_ttcw_tables_covers_its_truth",)),
    **both("ttcw", "calibration_summary", CALIBRATION, "squared_calibration_error_low", "squared_calibration_error_high"),
    ("ttcw", "story_counts", "pearson_p"): (TT + "test_story_count_p_values_hold_their_level_under_the_null",),
    ("ttcw", "story_counts", "spearman_p"): (TT + "test_story_count_p_values_hold_their_level_under_the_null",),
    **both("ttcw", "ppi", PPI, "human_low", "human_high"),
    **both("ttcw", "ppi", PPI, "ppi_low", "ppi_high"),
    # rubric: your own questions
    **both("rubric", "scores", (RU + "test_yes_rates_and_label_shares_cover_lopsided_correlated_answers",
                                RU + "test_points_mean_scores_cover_at_ten_texts")),
    **both("rubric", "label_distribution", (RU + "test_yes_rates_and_label_shares_cover_lopsided_correlated_answers",)),
    **both("rubric", "consistency", (RU + "test_consistency_rates_cover_a_lopsided_first_position_preference",)),
    **both("rubric", "agreement", RUBRIC_BINARY + RUBRIC_POINTS + RUBRIC_PAIRWISE + RUBRIC_CATEGORICAL, "agreement_low",
           "agreement_high"),
    **{key: RUBRIC_BINARY for m in ("kappa", "balanced_accuracy")
       for key in both("rubric", "binary_agreement", (), f"{m}_low", f"{m}_high")},
    **{key: RUBRIC_POINTS for m in ("spearman", "qwk", "exact", "within_one", "mean_difference")
       for key in both("rubric", "points_agreement", (), f"{m}_low", f"{m}_high")},
    **both("rubric", "pairwise_agreement", RUBRIC_PAIRWISE),
    **{key: RUBRIC_CATEGORICAL for m in ("kappa", "accuracy")
       for key in both("rubric", "categorical_agreement", (), f"{m}_low", f"{m}_high")},
    # pairwise
    **both("pairwise", "accuracy", PAIR_RATES),
    **both("pairwise", "bias", PAIR_RATES),
    **both("pairwise", "label_distribution", PAIR_RATES + RATES),
    **both("pairwise", "length_control", (C + "test_length_controlled_accuracy_covers_at_the_minimum",)),
    **both("pairwise", "calibration_summary", CALIBRATION, "squared_calibration_error_low",
           "squared_calibration_error_high"),
    # listwise and permutation self-consistency
    ("listwise", "anova", "p"): (LI + "test_the_listwise_anova_p_holds_its_level_with_lists_dominated_by_one_category",),
    **both("listwise", "self_preference", (LI + "test_self_preference_covers_its_truth_resampling_groups",)),
    **both("listwise", "psc_agreement", (LI + "test_psc_means_over_lists_cover",)),
    **both("listwise", "psc_position_bias", (LI + "test_psc_means_over_lists_cover",)),
    # reference-based Likert
    **{key: (LI + "test_reference_likert_means_over_groups_cover_and_a_constant_one_is_bounded",)
       for m in ("spearman", "kendall", "pairwise_accuracy")
       for key in both("reference_likert", "cutoff_sweep", (), f"{m}_low", f"{m}_high")},
    # classification
    ("classification", "metrics", "p"): (LI + "test_classification_p_counts_items_and_holds_its_level",),
    # ensembles
    **both("ensemble", "cascade", (LI + "test_cascade_agreement_per_item_and_per_cluster_cover",)),
    **both("ensemble", "cascade_summary", (LI + "test_cascade_agreement_per_item_and_per_cluster_cover",)),
    **both("ensemble", "cascade_summary", (LI + "test_cascade_agreement_per_item_and_per_cluster_cover",),
           "cluster_ci_low", "cluster_ci_high"),
    **both("ensemble", "jury", (LI + "test_jury_agreement_with_ties_covers",)),
    **both("ensemble", "jury_calibration_summary", CALIBRATION, "squared_calibration_error_low",
           "squared_calibration_error_high"),
    # a sweep's ranking: every rankable estimate, below
    **both("sweep", "ranking", (C + "test_same_as_best_keeps_its_family_wise_error",
                                C + "test_a_sweep_ranked_by_calibration_error_publishes_it_inside_its_range")),
    ("sweep", "ranking", "same_as_best"): (C + "test_same_as_best_keeps_its_family_wise_error",
                                           C + "test_same_as_best_finds_a_worse_cell_and_needs_clusters_of_its_own"),
}

# The annotation page's live estimate (/api/estimate: issue 55's queue), flattened as active_low, ...
ANNOTATE = ("test_active_inference.py::test_coverage_at_every_budget",
            "test_annotate_conformance.py::test_the_page_estimate_equals_a_recomputation_from_the_exported_labels")
PUBLISHED.update({**both("annotate", "estimate", ANNOTATE, "active_low", "active_high"),
                  **both("annotate", "estimate", ANNOTATE, "human_low", "human_high"),
                  # annotators' alpha (`annotator_alpha`): coverage through the page's function, and the reference
                  **both("annotate", "estimate", (
                      "test_annotate.py::test_the_pages_alpha_interval_covers_from_the_fewest_stories_it_is_given_for",
                      "test_annotate.py::test_the_pages_alpha_interval_is_the_cluster_bootstrap_of_alpha"),
                      "agreement_low", "agreement_high")})

# Calibration bin edges are the diagram's fixed bins, not estimates.
NOT_ESTIMATES = ("bin_low", "bin_high")

AGREEMENT = (C + "test_the_ranked_agreement_interval_covers",
             C + "test_no_agreement_interval_where_a_judge_answer_is_in_few_stories_and_the_rest_cover")
STORY = (C + "test_the_ranked_story_level_estimates_cover",)
SPEARMAN = (LI + "test_the_ranked_listwise_spearman_covers_resampling_groups",)
RANKED_CALIBRATION = (C + "test_the_calibration_table_and_the_sweep_print_the_same_interval",) + CALIBRATION

# (protocol, table.metric) a sweep may rank by -> the tests of the interval its ranking prints
RANKED: dict[tuple[str, str], tuple[str, ...]] = {
    ("ttcw", "overall.kappa"): AGREEMENT, ("ttcw", "overall.balanced_accuracy"): AGREEMENT,
    ("ttcw", "per_test.kappa"): AGREEMENT, ("ttcw", "per_test.balanced_accuracy"): AGREEMENT,
    ("ttcw", "story_counts.pearson"): STORY, ("ttcw", "story_counts.spearman"): STORY,
    ("ttcw", "story_cutoff.kappa"): STORY, ("ttcw", "story_cutoff.balanced_accuracy"): STORY,
    ("ttcw", "calibration_summary.squared_calibration_error"): RANKED_CALIBRATION,
    ("ttcw", "calibration_summary.brier"): (C + "test_the_ranked_brier_score_covers",),
    ("pairwise", "accuracy.accuracy"): (C + "test_a_ranked_rate_prints_the_interval_of_its_table",) + PAIR_RATES,
    ("pairwise", "length_control.lc_accuracy"): (C + "test_a_ranked_rate_prints_the_interval_of_its_table",
                                                 C + "test_length_controlled_accuracy_covers_at_the_minimum"),
    ("pairwise", "calibration_summary.squared_calibration_error"): RANKED_CALIBRATION,
    ("pairwise", "calibration_summary.brier"): (C + "test_the_ranked_brier_score_covers",),
    ("listwise", "agreement.spearman_category"): SPEARMAN, ("listwise", "agreement.spearman_human"): SPEARMAN,
    ("reference_likert", "cutoff_sweep.spearman"): (LI + "test_reference_likert_means_over_groups_cover_and_a_constant_one"
                                                    "_is_bounded",),
    ("reference_likert", "cutoff_sweep.kendall"): (LI + "test_reference_likert_means_over_groups_cover_and_a_constant_one"
                                                   "_is_bounded",),
    ("reference_likert", "cutoff_sweep.pairwise_accuracy"): (LI + "test_reference_likert_means_over_groups_cover_and_a"
                                                             "_constant_one_is_bounded",),
    # the ablation without a reference: the same means over groups, no cutoff (its rank_units checked there)
    **{("reference_likert", f"ranking_mean.{m}"): (LI + "test_reference_likert_means_over_groups_cover_and_a_constant_one"
                                                   "_is_bounded",
                                                   LI + "test_reference_likert_means_of_skewed_group_values_cover_at_ten_groups")
       for m in ("spearman", "kendall", "pairwise_accuracy")},
    ("rubric", "agreement.agreement"): RUBRIC_RANKED + RUBRIC_BINARY + RUBRIC_POINTS + RUBRIC_PAIRWISE
    + (CA + "test_a_sweep_ranks_by_the_interval_the_table_prints",) + RUBRIC_CATEGORICAL,
    **{("rubric", f"binary_agreement.{m}"): RUBRIC_RANKED + RUBRIC_BINARY for m in ("kappa", "balanced_accuracy")},
    **{("rubric", f"points_agreement.{m}"): RUBRIC_RANKED + RUBRIC_POINTS for m in ("spearman", "qwk", "exact", "within_one")},
    ("rubric", "pairwise_agreement.accuracy"): RUBRIC_RANKED + RUBRIC_PAIRWISE,
    **{("rubric", f"categorical_agreement.{m}"): (CA + "test_a_sweep_ranks_by_the_interval_the_table_prints",)
       + RUBRIC_CATEGORICAL for m in ("kappa", "accuracy")},
    ("classification", "metrics.accuracy"): RATES, ("classification", "metrics.spearman_ordinal"): SPEARMAN,
}
