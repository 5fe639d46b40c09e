"""The PPI++ estimator against ppi-python (Angelopoulos et al.'s reference implementation) on the
same data, one item per cluster: the point estimate and the tuned lambda through the published
table, and the plug-in CLT interval of the estimator, within 1e-6; the published jackknife
variance against a brute-force jackknife, and equal to ppi-python's variance (with n - 1) for a
fixed lambda.

ppi-python's values are recorded (tests/golden/ppi_python_reference.json, by
scripts/ppi_reference.py, run in a throwaway venv): it is no dev dependency, as it installs a
top-level `tests` package into site-packages that shadows a user's own tests/."""
from __future__ import annotations

import importlib.util
import json
import re
import tomllib
from importlib import metadata

import numpy as np
import polars as pl
import pytest

from litjudge.engine.core.paths import PROJECT_ROOT
from litjudge.engine.core.settings import PPIConfig
from litjudge.judges.metrics.ppi import ClusterSums, _moments, estimate, fit
from litjudge.judges.ppi_tables import ppi_tables

_spec = importlib.util.spec_from_file_location("ppi_reference", PROJECT_ROOT / "scripts" / "ppi_reference.py")
assert _spec is not None and _spec.loader is not None
reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference)
RECORDED = json.loads((PROJECT_ROOT / "tests" / "golden" / "ppi_python_reference.json").read_text())
CASES, LAMBDAS = reference.CASES, reference.LAMBDAS
Z = 1.959963984540054


def data(seed: int, n: int, big_n: int, probabilistic: bool):
    """The recorded draw (the same numbers ppi-python was given), or a failure saying to record again."""
    y, f, fu = reference.data(seed, n, big_n, probabilistic)
    assert reference.sums(y, f, fu) == pytest.approx(RECORDED["draws"][reference.key(seed, n, big_n, probabilistic,
                                                                                      None)], abs=1e-9), \
        "this numpy draws other data than the recorded ones: run scripts/ppi_reference.py again (see its docstring)"
    return y, f, fu


def ppi_python(seed: int, n: int, big_n: int, probabilistic: bool, lam: float | None) -> dict[str, float]:
    """ppi-python's point estimate and 95% CLT interval (`ppi_mean_pointestimate`, `ppi_mean_ci`), as recorded."""
    return RECORDED["values"][reference.key(seed, n, big_n, probabilistic, lam)]


def ppi_python_mean(y: np.ndarray, f: np.ndarray, fu: np.ndarray) -> float:
    """ppi-python 0.2.3's `ppi_mean_pointestimate(y, f, fu)` (lambda tuned) for one coordinate, written
    out (its `_calc_lam_glm` with the identity Hessian, clipped to [0, 1]); checked against the
    recorded values below, and used where the inputs come from a run (tests/test_hostile_newuser.py)."""
    n, big_n = len(y), len(fu)
    theta = fu.mean() + (y - f).mean()
    g, gh = y - theta, f - theta
    cov = 2 * ((g - g.mean()) * (gh - gh.mean())).sum() / n
    var = np.var(np.r_[f, fu] - theta, ddof=1)
    lam = float(np.clip(cov / (2 * (1 + n / big_n) * var), 0, 1))
    return float(lam * fu.mean() + (y - lam * f).mean())


def sums(y, f, fu) -> ClusterSums:
    n, big_n = len(y), len(fu)
    return ClusterSums.of(np.arange(n + big_n), np.r_[y, np.zeros(big_n)], np.r_[f, fu],
                          np.r_[np.ones(n, bool), np.zeros(big_n, bool)])


@pytest.mark.parametrize("seed,n,big_n,probabilistic", CASES)
@pytest.mark.parametrize("lam", [None, 0.0, 0.35, 1.0])
def test_point_lambda_and_clt_interval_equal_ppi_python(seed, n, big_n, probabilistic, lam):
    y, f, fu = data(seed, n, big_n, probabilistic)
    mine = fit(_moments(sums(y, f, fu)), lam)
    recorded = ppi_python(seed, n, big_n, probabilistic, lam)
    point, low, high = recorded["point"], recorded["low"], recorded["high"]
    assert float(mine.theta) == pytest.approx(point, abs=1e-6)
    assert float(mine.theta) == pytest.approx((low + high) / 2, abs=1e-6)
    assert Z * float(np.sqrt(mine.clt_variance)) == pytest.approx((high - low) / 2, abs=1e-6)
    if lam is None:          # ppi-python's own tuned lambda, recovered from its point estimate
        slope = fu.mean() - f.mean()
        if abs(slope) > 1e-3:
            assert float(mine.lam) == pytest.approx((point - y.mean()) / slope, abs=1e-5)


@pytest.mark.parametrize("seed,n,big_n,probabilistic", CASES[:4])
def test_the_published_table_carries_ppi_pythons_estimate(seed, n, big_n, probabilistic):
    """Through ppi_tables (what TTCW's aggregate calls): one item per story, the stories whose label
    is used marked by a boolean field; its ppi and human_only columns are ppi-python's lam=None and
    lam=0 estimates of the same data."""
    y, f, fu = data(seed, n, big_n, probabilistic)
    total = n + big_n
    frame = pl.DataFrame({"judge": ["j"] * total, "item_id": [f"i{i}" for i in range(total)],
                          "story_id": [f"s{i}" for i in range(total)], "test": [1] * total,
                          "expert_pass": np.r_[y, np.zeros(big_n)].astype(bool), "score": np.r_[f, fu],
                          "marked": np.r_[np.ones(n, bool), np.zeros(big_n, bool)]})
    table = ppi_tables({"all": frame}, PPIConfig("column:marked"), cluster="story_id", item="item_id", group="test",
                       human="expert_pass", judge_value=pl.col("score"), quantity="rate")["ppi"]
    row = table.filter(pl.col("test") == "1").row(0, named=True)
    assert row["ppi"] == pytest.approx(ppi_python(seed, n, big_n, probabilistic, None)["point"], abs=1e-6)
    assert row["human_only"] == pytest.approx(ppi_python(seed, n, big_n, probabilistic, 0.0)["point"], abs=1e-6)
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
    seed, n, big_n, probabilistic, lam = reference.FIXED
    y, f, fu = data(seed, n, big_n, probabilistic)
    recorded = ppi_python(seed, n, big_n, probabilistic, lam)
    low, high = recorded["low"], recorded["high"]
    # ppi-python: std0(lam fu)^2 / N + std0(y - lam f)^2 / n; the jackknife: the same with ddof 1
    expected = np.var(lam * fu, ddof=1) / len(fu) + np.var(y - lam * f, ddof=1) / len(y)
    e = estimate(sums(y, f, fu), lam=lam)
    assert float(e.variance) == pytest.approx(expected, rel=1e-9)
    assert float(e.value) == pytest.approx((low + high) / 2, abs=1e-9)


@pytest.mark.parametrize("seed,n,big_n,probabilistic", CASES)
def test_ppi_pythons_tuned_mean_written_out_is_the_recorded_one(seed, n, big_n, probabilistic):
    assert ppi_python_mean(*data(seed, n, big_n, probabilistic)) == pytest.approx(
        ppi_python(seed, n, big_n, probabilistic, None)["point"], abs=1e-9)


def _top_level_packages(dist: metadata.Distribution) -> set[str]:
    return {f.parts[0] for f in dist.files or [] if len(f.parts) > 1 and f.parts[-1] == "__init__.py"
            and len(f.parts) == 2}


def test_no_dev_extra_installs_a_top_level_tests_package():
    """ppi-python 0.2.3 (a dev extra before) installs site-packages/tests/, which shadows a user's own
    tests/ (`import tests.conftest` found it). No distribution of the dev extras may ship one."""
    extras = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    shadowing = []
    for requirement in extras:
        name = re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0]
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue                     # not installed here: nothing it ships can be looked at
        if "tests" in _top_level_packages(dist):
            shadowing.append(name)
    assert shadowing == [], f"these dev extras install a top-level `tests` package: {shadowing}"
