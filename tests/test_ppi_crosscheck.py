"""The PPI++ estimator against ppi-python (Angelopoulos et al.'s reference implementation) on the
same data, one item per cluster: the point estimate and the tuned lambda through the published
table, and the plug-in CLT interval of the estimator, within 1e-6; the published jackknife
variance against a brute-force jackknife, and equal to ppi-python's variance (with n - 1) for a
fixed lambda."""
from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from litjudge.engine.core.settings import PPIConfig
from litjudge.judges.metrics.ppi import ClusterSums, _moments, estimate, fit
from litjudge.judges.ppi_tables import ppi_table

ppi_py = pytest.importorskip("ppi_py")
Z = 1.959963984540054


def data(seed: int, n: int, big_n: int, probabilistic: bool):
    """Human 0/1 labels on n items, the judge's value on n + N: a Yes (binary) or a P(Yes)."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n + big_n) < 0.3).astype(float)
    signal = rng.normal(1.5 * (2 * y - 1), 1.0)
    f = 1 / (1 + np.exp(-signal)) if probabilistic else (signal > 0).astype(float)
    return y[:n], f[:n], f[n:]


def sums(y, f, fu) -> ClusterSums:
    n, big_n = len(y), len(fu)
    return ClusterSums.of(np.arange(n + big_n), np.r_[y, np.zeros(big_n)], np.r_[f, fu],
                          np.r_[np.ones(n, bool), np.zeros(big_n, bool)])


CASES = [(seed, n, big_n, prob) for seed, (n, big_n) in enumerate([(20, 80), (50, 500), (200, 60), (12, 12)])
         for prob in (False, True)]


@pytest.mark.parametrize("seed,n,big_n,probabilistic", CASES)
@pytest.mark.parametrize("lam", [None, 0.0, 0.35, 1.0])
def test_point_lambda_and_clt_interval_equal_ppi_python(seed, n, big_n, probabilistic, lam):
    y, f, fu = data(seed, n, big_n, probabilistic)
    mine = fit(_moments(sums(y, f, fu)), lam)
    point = float(np.ravel(ppi_py.ppi_mean_pointestimate(y, f, fu, lam=lam))[0])
    low, high = (float(np.ravel(b)[0]) for b in ppi_py.ppi_mean_ci(y, f, fu, alpha=0.05, lam=lam))
    assert float(mine.theta) == pytest.approx(point, abs=1e-6)
    assert float(mine.theta) == pytest.approx((low + high) / 2, abs=1e-6)
    assert Z * float(np.sqrt(mine.clt_variance)) == pytest.approx((high - low) / 2, abs=1e-6)
    if lam is None:          # ppi-python's own tuned lambda, recovered from its point estimate
        slope = fu.mean() - f.mean()
        if abs(slope) > 1e-3:
            assert float(mine.lam) == pytest.approx((point - y.mean()) / slope, abs=1e-5)


@pytest.mark.parametrize("seed,n,big_n,probabilistic", CASES[:4])
def test_the_published_table_carries_ppi_pythons_estimate(seed, n, big_n, probabilistic):
    """Through ppi_table (what TTCW's aggregate calls): one item per story, the stories whose label
    is used marked by a boolean field; its ppi and human_only columns are ppi-python's lam=None and
    lam=0 estimates of the same data."""
    y, f, fu = data(seed, n, big_n, probabilistic)
    total = n + big_n
    frame = pl.DataFrame({"judge": ["j"] * total, "item_id": [f"i{i}" for i in range(total)],
                          "story_id": [f"s{i}" for i in range(total)], "test": [1] * total,
                          "expert_pass": np.r_[y, np.zeros(big_n)].astype(bool), "score": np.r_[f, fu],
                          "marked": np.r_[np.ones(n, bool), np.zeros(big_n, bool)]})
    table = ppi_table({"all": frame}, PPIConfig("column:marked"), cluster="story_id", item="item_id", group="test",
                      human="expert_pass", judge_value=pl.col("score"), quantity="rate")
    row = table.filter(pl.col("test") == "1").row(0, named=True)
    assert row["ppi"] == pytest.approx(float(np.ravel(ppi_py.ppi_mean_pointestimate(y, f, fu))[0]), abs=1e-6)
    assert row["human_only"] == pytest.approx(float(np.ravel(ppi_py.ppi_mean_pointestimate(y, f, fu, lam=0))[0]),
                                              abs=1e-6)
    assert (row["n_labelled"], row["n_unlabelled"], row["clusters"]) == (n, big_n, n)


def test_the_jackknife_is_a_brute_force_jackknife_with_lambda_tuned_again():
    """Clustered (3-5 items a story, labelled and unlabelled stories): each replicate refits
    everything, lambda included, without one story; the published variance is the stratified sum."""
    rng = np.random.default_rng(7)
    sizes = rng.integers(3, 6, 30)
    story = np.repeat(np.arange(30), sizes)
    y = (rng.random(len(story)) < rng.beta(2, 4, 30)[story]).astype(float)
    f = np.clip(0.6 * y + rng.normal(0.2, 0.25, len(story)), 0, 1)
    lab = story < 12
    s = ClusterSums.of(story, y, f, lab)
    replicate = []
    for g in range(30):
        keep = story != g
        _, idx = np.unique(story[keep], return_inverse=True)
        replicate.append(float(fit(_moments(ClusterSums.of(idx, y[keep], f[keep], lab[keep]))).theta))
    r = np.asarray(replicate)
    brute = 11 / 12 * ((r[:12] - r[:12].mean()) ** 2).sum() + 17 / 18 * ((r[12:] - r[12:].mean()) ** 2).sum()
    assert float(estimate(s).variance) == pytest.approx(brute, rel=1e-9)


def test_with_a_fixed_lambda_the_jackknife_is_ppi_pythons_variance_with_n_minus_1():
    y, f, fu = data(3, 40, 120, True)
    lam = 0.6
    low, high = (float(np.ravel(b)[0]) for b in ppi_py.ppi_mean_ci(y, f, fu, alpha=0.05, lam=lam))
    # ppi-python: std0(lam fu)^2 / N + std0(y - lam f)^2 / n; the jackknife: the same with ddof 1
    expected = np.var(lam * fu, ddof=1) / len(fu) + np.var(y - lam * f, ddof=1) / len(y)
    e = estimate(sums(y, f, fu), lam=lam)
    assert float(e.variance) == pytest.approx(expected, rel=1e-9)
    assert float(e.value) == pytest.approx((low + high) / 2, abs=1e-9)
