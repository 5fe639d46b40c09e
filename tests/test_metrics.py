"""Metric functions against scikit-learn / statsmodels / scipy and hand-computed cases."""
import math

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss

from litjudge.judges.metrics import (
    balanced_accuracy,
    binary_agreement,
    cohen_kappa,
    fleiss_kappa,
    kendall,
    pairwise_accuracy,
    pearson,
    spearman,
)


@pytest.mark.parametrize("seed", range(20))
def test_agreement_matches_sklearn(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 200))
    a = rng.choice(["Yes", "No"], n, p=[0.3, 0.7]).tolist()
    b = [x if rng.random() < 0.7 else rng.choice(["Yes", "No"]) for x in a]
    if len(set(a)) > 1 or len(set(b)) > 1:
        assert cohen_kappa(a, b).value == pytest.approx(cohen_kappa_score(a, b))
    assert balanced_accuracy(a, b).value == pytest.approx(balanced_accuracy_score(a, b))


def test_binary_agreement_from_counts_is_the_lists_to_the_last_bit():
    """Kappa and balanced accuracy from 2x2 counts (TTCW's tables: one group-by for every judge
    and test) equal cohen_kappa and balanced_accuracy of the lists exactly, degenerate tables (one
    class, one rater constant, nothing) included; and they match scikit-learn (on the first 300
    tables: the list functions are checked against it above; over all 3,006 its calls took 4.4 of
    this test's 5.2 s)."""
    rng = np.random.default_rng(0)
    cases = [(0, 0, 0, 0), (3, 0, 0, 0), (0, 0, 0, 4), (2, 0, 3, 0), (0, 2, 0, 3), (1, 1, 1, 1)]
    cases += [tuple(int(x) for x in rng.integers(0, rng.integers(1, 60), 4)) for _ in range(3000)]
    for k, (tp, fn, fp, tn) in enumerate(cases):
        truth = [True] * (tp + fn) + [False] * (fp + tn)
        pred = [True] * tp + [False] * fn + [True] * fp + [False] * tn
        kappa, ba = binary_agreement(tp, fn, fp, tn)
        for got, want in ((kappa, cohen_kappa(truth, pred)), (ba, balanced_accuracy(truth, pred))):
            assert got.n == want.n and (got.value == want.value or math.isnan(got.value) and math.isnan(want.value)), \
                ((tp, fn, fp, tn), got, want)
        if tp + fn and fp + tn and k < 300:
            assert ba.value == pytest.approx(balanced_accuracy_score(truth, pred))
            if not math.isnan(kappa.value):
                assert kappa.value == pytest.approx(cohen_kappa_score(truth, pred))


@pytest.mark.parametrize("seed", range(10))
def test_fleiss_matches_statsmodels(seed):
    rng = np.random.default_rng(seed)
    ratings = rng.choice(["Yes", "No"], size=(40, 3), p=[0.4, 0.6])
    table, _ = aggregate_raters(ratings)
    assert fleiss_kappa(ratings.tolist()).value == pytest.approx(sm_fleiss(table))


@pytest.mark.parametrize("seed", range(10))
def test_correlations_match_scipy(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=30)
    y = x + rng.normal(size=30)
    assert pearson(x.tolist(), y.tolist()).value == pytest.approx(stats.pearsonr(x, y).statistic)
    assert spearman(x.tolist(), y.tolist()).value == pytest.approx(stats.spearmanr(x, y).statistic)
    xi, yi = np.round(x), np.round(y)   # with ties: tau-b
    assert kendall(xi.tolist(), yi.tolist()).value == pytest.approx(stats.kendalltau(xi, yi).statistic)


@pytest.mark.parametrize("n", [3, 5, 6])
def test_few_pairs_get_the_exact_permutation_p_value(n):
    """Up to 8 pairs a Pearson's or Spearman's p-value is exact over every pairing: scipy's t
    approximation read p = 0.000 for 3 items ranked perfectly (exact: 1/3). Checked against a
    brute force over itertools' pairings with scipy's own statistic, ties included; and under the
    null (independent data) its level holds at 5%, where the t approximation's exceeds it."""
    from itertools import permutations

    rng = np.random.default_rng(n)
    for _ in range(3):
        x, y = rng.integers(0, 4, n).astype(float), rng.integers(0, 4, n).astype(float)
        if len(set(x)) < 2 or len(set(y)) < 2:
            continue
        for ours, ref in ((pearson, stats.pearsonr), (spearman, stats.spearmanr)):
            observed = abs(ref(x, y).statistic)
            with np.errstate(all="ignore"):
                brute = np.mean([abs(ref(x, y[list(p)]).statistic) >= observed - 1e-12 for p in permutations(range(n))])
            assert ours(x.tolist(), y.tolist()).p_value == pytest.approx(float(brute), abs=1e-12)
    assert spearman([1, 2, 3], [1, 2, 3]).p_value == pytest.approx(1 / 3)
    if n != 5:
        return
    nulls = rng.normal(size=(2000, 2, 5))
    exact = np.mean([spearman(a.tolist(), b.tolist()).p_value <= 0.05 for a, b in nulls])
    approx = np.mean([stats.spearmanr(a, b).pvalue <= 0.05 for a, b in nulls])
    assert exact <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 2000) < approx, (exact, approx)


def test_nine_to_fifty_pairs_get_a_permutation_p_value():
    """Past the exact range, scipy's t approximation rejected 5.8% of independent pairs at 9 pairs
    (Spearman; 20,000 draws of a hostile pass) and 6.6-7.5% for skewed Pearson data at 9-12: from
    9 to 50 pairs the p-value is a permutation test's over 9,999 seeded pairings, (1 + hits) /
    10,000. Against every one of the 9! pairings (ties included), within its Monte Carlo error
    (0.005 at most); its smallest value is 1 / 10,000, and beyond 50 pairs it is scipy's."""
    from itertools import permutations

    every = np.asarray(list(permutations(range(9))))
    rng = np.random.default_rng(9)
    far = 0.0
    for _ in range(4):
        x, y = rng.integers(0, 4, 9).astype(float), rng.integers(0, 5, 9).astype(float)
        for ours, ref, prep in ((spearman, stats.spearmanr, stats.rankdata), (pearson, stats.pearsonr, np.asarray)):
            a, b = prep(x) - prep(x).mean(), prep(y) - prep(y).mean()
            brute = float(np.mean(np.abs(b[every] @ a) >= abs(a @ b) - 1e-9))
            got = ours(x.tolist(), y.tolist()).p_value
            assert got == pytest.approx(brute, abs=0.015) and got >= 1e-4, (got, brute)
            far = max(far, abs(ref(x, y).pvalue - brute))
    assert far > 0.015                               # where the t approximation was off by more
    line = np.arange(12.0)
    assert spearman(line.tolist(), line.tolist()).p_value == pytest.approx(1 / 10_000)
    x = rng.normal(size=60)
    y = x + rng.normal(size=60)
    assert spearman(x.tolist(), y.tolist()).p_value == pytest.approx(stats.spearmanr(x, y).pvalue)


def test_pairwise_accuracy_by_hand():
    assert pairwise_accuracy([1, 2, 3, 4], [1, 2, 3, 4]).value == 1.0
    assert pairwise_accuracy([1, 2, 3, 4], [4, 3, 2, 1]).value == 0.0
    # pairs (1,2) tie in truth -> ignored; predicted tie counts half
    r = pairwise_accuracy([1, 1, 2], [5, 5, 5])
    assert r.n == 2 and r.value == 0.5


def test_degenerate_inputs_are_nan_with_n_not_zero():
    assert math.isnan(cohen_kappa([], []).value)
    assert math.isnan(cohen_kappa(["Yes"] * 4, ["Yes"] * 4).value) and cohen_kappa(["Yes"] * 4, ["Yes"] * 4).n == 4
    assert math.isnan(spearman([1, 2], [1, 2]).value)
    assert math.isnan(pearson([1, 1, 1], [1, 2, 3]).value)
    with pytest.raises(ValueError):
        cohen_kappa(["Yes"], [])
