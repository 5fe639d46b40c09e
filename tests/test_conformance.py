"""Statistical conformance: every estimate litjudge publishes with an interval, simulated with a
known truth. For each: the coverage of its 95% interval at the SMALLEST number of clusters it
prints one for (MIN_CLUSTERS; below it no interval is printed, and that is tested too) is at least
0.93, and the bias of its point estimate is within a stated tolerance. A new published estimate
needs a test here (test_every_interval_helper_has_a_conformance_test checks the list).

The draws are seeded, so each figure is exact and repeatable; DRAWS = 1000 simulated data sets make
a coverage estimate's standard error about 0.007 around 0.95 (the story-resampled balanced
accuracy at 10 stories: 0.946 over 3,000 draws).
"""
from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from litjudge.judges.metrics.bootstrap import (
    MIN_CLUSTERS,
    balanced_accuracy_bootstrap,
    difference_of_means_ci,
    mean_of_means_with_ci,
    mean_with_ci,
    too_few,
)
from litjudge.judges.metrics.calibration import calibration_error
from litjudge.judges.metrics.estimates import Units, balanced_accuracy_of, kappa_of, mean_of, same_as_best
from litjudge.judges.metrics.prevalence import corrected_pass_rate
from litjudge.judges.pairwise import length_controlled

DRAWS = 1000
RESAMPLES = 500
N = MIN_CLUSTERS                 # the smallest cluster count an interval is printed for
COVERAGE = 0.93


def covered(low, high, truth) -> bool:
    return low is not None and high is not None and not math.isnan(low) and low <= truth <= high


# -- story-clustered binary agreement (TTCW overall: balanced accuracy and kappa) ---------------
def stories(rng, n: int, tests: int = 14):
    """n stories x 14 tests: a story-level pass prevalence and a story-level judge skill (so a
    story's verdicts are correlated), truth = the experts' label, pred = the judge's."""
    prev = rng.beta(1.5, 6, n)
    y = rng.random((n, tests)) < prev[:, None]
    u = rng.normal(0, 0.8, n)
    sens, spec = 1 / (1 + np.exp(-(1.0 + u))), 1 / (1 + np.exp(-(1.4 - u)))
    r = rng.random((n, tests))
    pred = np.where(y, r < sens[:, None], r > spec[:, None])
    return y, pred


def population_truth(metric) -> float:
    y, pred = stories(np.random.default_rng(12345), 400_000)
    return metric({"truth": y.ravel(), "pred": pred.ravel()})


def test_story_resampled_balanced_accuracy_covers_at_the_minimum_and_is_unbiased():
    truth = population_truth(balanced_accuracy_of)
    rng = np.random.default_rng(1)
    hits, estimates = 0, []
    for _ in range(DRAWS):
        y, pred = stories(rng, N)
        ids = np.repeat(np.arange(N), y.shape[1])
        low, high = balanced_accuracy_bootstrap(ids.tolist(), y.ravel().tolist(), pred.ravel().tolist(),
                                                resamples=RESAMPLES, seed=int(rng.integers(1 << 30)))
        hits += covered(low, high, truth)
        estimates.append(balanced_accuracy_of({"truth": y.ravel(), "pred": pred.ravel()}))
    assert hits / DRAWS >= COVERAGE, hits / DRAWS
    assert abs(np.nanmean(estimates) - truth) < 0.01


def test_ranked_kappa_interval_covers_at_the_minimum():
    """The ranking's interval (Units: stories resampled, kappa recomputed)."""
    truth = population_truth(kappa_of)
    rng = np.random.default_rng(2)
    hits, estimates = 0, []
    for _ in range(DRAWS // 4):
        y, pred = stories(rng, N)
        units = Units.of(np.repeat(np.arange(N), y.shape[1]).tolist(), {"truth": y.ravel(), "pred": pred.ravel()},
                         kappa_of)
        hits += covered(*units.interval(RESAMPLES, seed=int(rng.integers(1 << 30))), truth)
        estimates.append(units.value())
    assert hits / (DRAWS // 4) >= COVERAGE, hits / (DRAWS // 4)
    assert abs(np.nanmean(estimates) - truth) < 0.02      # kappa is a ratio: a small-sample bias of ~0.01


# -- pair-clustered rates (pairwise accuracy per order, bias rates, label shares) --------------
def pairs(rng, n: int):
    """n pairs, each judged in both orders; a pair's difficulty is shared by its two orders, and
    the judge is better in order ab than in ba (a position effect)."""
    p = rng.beta(3, 2, n)
    ab = rng.random(n) < np.minimum(1, p + 0.15)
    ba = rng.random(n) < np.maximum(0, p - 0.15)
    return ab.astype(float), ba.astype(float)


def pair_truths() -> tuple[float, float]:
    p = np.random.default_rng(9).beta(3, 2, 2_000_000)
    ab, ba = np.minimum(1, p + 0.15).mean(), np.maximum(0, p - 0.15).mean()
    return float((ab + ba) / 2), float(ab)


def test_pair_resampled_rate_and_mean_of_both_orders_cover_at_the_minimum():
    both_truth, ab_truth = pair_truths()
    rng = np.random.default_rng(3)
    hits_rate = hits_both = 0
    est_rate, est_both = [], []
    for _ in range(DRAWS):
        ab, ba = pairs(rng, N)
        ids = [f"p{i}" for i in range(N)]
        seed = int(rng.integers(1 << 30))
        rate = mean_with_ci(ids, ab.tolist(), resamples=RESAMPLES, seed=seed)
        both = mean_of_means_with_ci(ids + ids, ["ab"] * N + ["ba"] * N, ab.tolist() + ba.tolist(),
                                     resamples=RESAMPLES, seed=seed)
        hits_rate += covered(rate.ci_low, rate.ci_high, ab_truth)
        hits_both += covered(both.ci_low, both.ci_high, both_truth)
        est_rate.append(rate.value)
        est_both.append(both.value)
    assert hits_rate / DRAWS >= COVERAGE and hits_both / DRAWS >= COVERAGE, (hits_rate / DRAWS, hits_both / DRAWS)
    assert abs(np.mean(est_rate) - ab_truth) < 0.02 and abs(np.mean(est_both) - both_truth) < 0.02    # 3 SE


@pytest.mark.parametrize("rate", [0.9, 0.97])
def test_a_rate_near_one_covers_at_the_minimum_with_the_constant_bound(rate):
    """Near the boundary most small samples are all right: there the bootstrap has no spread and
    the exact binomial bound (`constant_interval`) stands in; together they cover."""
    rng = np.random.default_rng(int(rate * 100))
    hits = 0
    for _ in range(DRAWS):
        values = (rng.random(N) < rate).astype(float)
        m = mean_with_ci(list(range(N)), values.tolist(), resamples=RESAMPLES, seed=int(rng.integers(1 << 30)),
                         bounds=(0.0, 1.0))
        hits += covered(m.ci_low, m.ci_high, rate)
    assert hits / DRAWS >= COVERAGE, hits / DRAWS


def test_mean_over_lists_covers_at_the_minimum():
    """A mean of per-list (or per-group) Spearman values: PSC agreement, reference-Likert groups."""
    rng = np.random.default_rng(4)
    truth = 0.35
    hits, estimates = 0, []
    for _ in range(DRAWS):
        values = np.clip(truth + rng.normal(0, 0.3, N), -1, 1)       # truth - clipping bias is tiny at 0.35
        m = mean_with_ci(list(range(N)), values.tolist(), resamples=RESAMPLES, seed=int(rng.integers(1 << 30)))
        hits += covered(m.ci_low, m.ci_high, truth)
        estimates.append(m.value)
    assert hits / DRAWS >= COVERAGE, hits / DRAWS
    assert abs(np.mean(estimates) - truth) < 0.01


def test_self_preference_difference_covers_at_the_minimum():
    rng = np.random.default_rng(5)
    hits, estimates = 0, []
    for _ in range(DRAWS):
        own, other = rng.normal(3.4, 0.8, N), rng.normal(3.0, 0.8, N)
        diff, low, high = difference_of_means_ci(own.tolist(), other.tolist(), resamples=RESAMPLES,
                                                 seed=int(rng.integers(1 << 30)))
        hits += covered(low, high, 0.4)
        estimates.append(diff)
    assert hits / DRAWS >= COVERAGE, hits / DRAWS
    assert abs(np.mean(estimates) - 0.4) < 0.02


def test_length_controlled_accuracy_covers_at_the_minimum():
    """sigmoid(intercept) of agreement on the log length ratio, cluster-robust with t(G - 1): the
    truth is the agreement at equal length, 0.7, with a length effect of 0.8 per log ratio."""
    rng = np.random.default_rng(6)
    truth = 0.7
    hits = tried = 0
    for _ in range(DRAWS):
        rows = []
        for i in range(N):
            wa, wb = int(rng.integers(80, 400)), int(rng.integers(80, 400))
            human = "a" if rng.random() < 0.5 else "b"
            x = math.log((wa if human == "a" else wb) + 1) - math.log((wb if human == "a" else wa) + 1)
            p = 1 / (1 + math.exp(-(math.log(truth / (1 - truth)) + 0.8 * x)))
            skill = rng.normal(0, 0.3)                       # a pair's two orders share its difficulty
            for order in ("ab", "ba"):
                right = rng.random() < min(1.0, max(0.0, p + skill * 0.1))
                pick = human if right else ("b" if human == "a" else "a")
                rows.append({"pair_id": f"p{i}", "order": order, "human": human, "pick": pick, "words_a": wa,
                             "words_b": wb})
        got = length_controlled(pl.DataFrame(rows), style=False)
        if got["separated"]:
            continue                                          # no interval under separation (tested elsewhere)
        tried += 1
        hits += covered(got["ci_low"], got["ci_high"], truth)
    assert tried > DRAWS * 0.8 and hits / tried >= COVERAGE, (tried, hits / tried)


def test_corrected_pass_rate_covers_at_the_minimum_and_is_nearly_unbiased():
    """Rogan-Gladen: half of each story's tests labelled (Se, Sp), all 14 scored; the truth is the
    population pass rate."""
    rng = np.random.default_rng(7)
    y_pop, _ = stories(np.random.default_rng(12345), 400_000)
    truth = float(y_pop.mean())
    hits, estimates = 0, []
    for _ in range(DRAWS):
        y, pred = stories(rng, N)
        ids = np.repeat(np.arange(N), 14)
        labelled = np.tile(np.arange(14) < 7, N)
        got = corrected_pass_rate(y.ravel()[labelled].tolist(), pred.ravel()[labelled].tolist(), pred.ravel().tolist(),
                                  resamples=RESAMPLES, seed=int(rng.integers(1 << 30)),
                                  clusters_labelled=ids[labelled].tolist(), clusters_scored=ids.tolist())
        hits += covered(got["ci_low"], got["ci_high"], truth)
        estimates.append(got["corrected_pass_rate"])
    assert hits / DRAWS >= COVERAGE, hits / DRAWS
    assert abs(np.nanmean(estimates) - truth) < 0.03


# -- calibration -------------------------------------------------------------------------------
def test_a_calibrated_judges_calibration_error_interval_reaches_zero():
    """36 stories x 14 tests, P(yes) drawn per item and the truth drawn from it: the debiased
    calibration error's interval reaches 0 in >= 80% of 100 draws (the plug-in ECE's: 0 of 100)."""
    rng = np.random.default_rng(8)
    reach = 0
    for _ in range(100):
        p = rng.beta(1, 3, (36, 14))
        y = rng.random((36, 14)) < p
        _, low, _ = calibration_error(p.ravel().tolist(), y.ravel().tolist(), resamples=RESAMPLES,
                                      clusters=np.repeat(np.arange(36), 14).tolist())
        reach += low == 0.0
    assert reach >= 80, reach


def test_the_debiased_squared_calibration_error_is_unbiased_and_its_interval_covers():
    """A miscalibrated judge (it says p, the truth is p^1.5): CE^2 over 10 bins has a known value;
    the debiased estimate's mean is within 0.002 of it, the plug-in ECE^2 is well above, and the
    interval of the calibration error covers its truth at the minimum clusters."""
    from litjudge.judges.metrics.calibration import squared_calibration_error

    big = np.random.default_rng(11).beta(2, 2, 4_000_000)
    index = np.minimum((big * 10).astype(int), 9)
    counts = np.bincount(index, minlength=10).astype(float)
    true_ce2 = float((counts / counts.sum() * (np.bincount(index, big ** 1.5, 10) / counts
                                               - np.bincount(index, big, 10) / counts) ** 2).sum())
    rng = np.random.default_rng(10)
    hits, est = 0, []
    for _ in range(DRAWS):
        p = rng.beta(2, 2, (N, 14))
        y = (rng.random((N, 14)) < p ** 1.5).astype(float)
        pi = np.minimum((p.ravel() * 10).astype(int), 9)
        c = np.bincount(pi, minlength=10).astype(float)
        est.append(float(squared_calibration_error(c, np.bincount(pi, p.ravel(), 10), np.bincount(pi, y.ravel(), 10))))
        _, low, high = calibration_error(p.ravel().tolist(), y.ravel().tolist(), resamples=RESAMPLES,
                                         seed=int(rng.integers(1 << 30)), clusters=np.repeat(np.arange(N), 14).tolist())
        hits += covered(low, high, math.sqrt(true_ce2))
    assert abs(np.mean(est) - true_ce2) < 0.002, (np.mean(est), true_ce2)
    assert hits / DRAWS >= COVERAGE, hits / DRAWS


# -- below the minimum: no interval, one rule ---------------------------------------------------
@pytest.mark.parametrize("n", [2, 3, MIN_CLUSTERS - 1])
def test_no_interval_below_the_minimum_clusters(n):
    m = mean_with_ci(list(range(n)), [float(i % 2) for i in range(n)], resamples=100)
    assert m.ci_low is None and m.ci_high is None and m.note == too_few(n)
    y, pred = stories(np.random.default_rng(n), n)
    ids = np.repeat(np.arange(n), 14).tolist()
    assert all(math.isnan(v) for v in balanced_accuracy_bootstrap(ids, y.ravel().tolist(), pred.ravel().tolist()))
    assert all(math.isnan(v) for v in Units.of(ids, {"truth": y.ravel(), "pred": pred.ravel()}, kappa_of).interval())


# -- the ranking's paired comparison -----------------------------------------------------------
def _cells(rng, n_stories: int, rates: list[float]) -> list[Units]:
    y, _ = stories(rng, n_stories)
    ids = np.repeat(np.arange(n_stories), 14).tolist()
    skill = rng.normal(0, 0.6, n_stories)                       # a story is easy or hard for every judge
    cells = []
    for rate in rates:
        logit = math.log(rate / (1 - rate)) + np.repeat(skill, 14)
        right = rng.random(len(ids)) < 1 / (1 + np.exp(-logit))
        cells.append(Units.of(ids, {"v": right.astype(float)}, mean_of("v")))
    return cells


@pytest.mark.parametrize("n_stories", [MIN_CLUSTERS, 30])
def test_same_as_best_keeps_its_family_wise_error(n_stories):
    """20 equally good cells judged on the same stories: some cell is marked worse than the best in
    at most ~5% of sweeps (the binomial band for 60 sweeps: <= 7), the best chosen on the data."""
    rng = np.random.default_rng(12 + n_stories)
    alarms = sum(not all(same_as_best(_cells(rng, n_stories, [0.8] * 20), True, resamples=300)) for _ in range(60))
    assert alarms <= 7, alarms


def test_same_as_best_finds_a_worse_cell_and_needs_clusters_of_its_own():
    rng = np.random.default_rng(5)
    cells = _cells(rng, 30, [0.85, 0.84, 0.65])
    assert same_as_best(cells, True, resamples=300) == [True, True, False]
    lower = _cells(rng, 30, [0.05, 0.06, 0.30])                 # an error rate: lower is better
    assert same_as_best(lower, False, resamples=300) == [True, True, False]
    few = Units.of(list(range(5)), {"v": np.ones(5)}, mean_of("v"))
    assert same_as_best([cells[0], few], True) == [True, None]   # 5 clusters of its own: no statement
