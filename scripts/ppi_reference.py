"""ppi-python's reference values for tests/test_ppi_crosscheck.py, recorded once and committed.

ppi-python (Angelopoulos et al.'s reference implementation of prediction-powered inference) is not
a dependency of litjudge, nor of its dev extras: version 0.2.3 installs a top-level `tests` package
into site-packages, which shadows a user's own tests/. So it runs here, in a throwaway venv that
needs nothing of litjudge:

    python3 -m venv /tmp/ppivenv && /tmp/ppivenv/bin/pip install ppi-python numpy
    /tmp/ppivenv/bin/python scripts/ppi_reference.py > tests/golden/ppi_python_reference.json

The test draws the same data (`data`, `CASES`: imported from this file) and checks first that its
draw is the one recorded (`sums`): a numpy whose generator draws otherwise is told to record again.
"""
from __future__ import annotations

import json
import sys

import numpy as np

LAMBDAS = [None, 0.0, 0.35, 1.0]
CASES = [(seed, n, big_n, prob) for seed, (n, big_n) in enumerate([(20, 80), (50, 500), (200, 60), (12, 12)])
         for prob in (False, True)]
FIXED = (3, 40, 120, True, 0.6)          # (seed, n, N, probabilistic, lambda): the jackknife's fixed-lambda check


def data(seed: int, n: int, big_n: int, probabilistic: bool):
    """Human 0/1 labels on n items, the judge's value on n + N: a Yes (binary) or a P(Yes)."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n + big_n) < 0.3).astype(float)
    signal = rng.normal(1.5 * (2 * y - 1), 1.0)
    f = 1 / (1 + np.exp(-signal)) if probabilistic else (signal > 0).astype(float)
    return y[:n], f[:n], f[n:]


def sums(y, f, fu) -> list[float]:
    """What identifies a draw: its sums (and f's sum of squares)."""
    return [float(y.sum()), float(f.sum()), float(fu.sum()), float((f ** 2).sum() + (fu ** 2).sum())]


def key(seed: int, n: int, big_n: int, probabilistic: bool, lam: float | None) -> str:
    return f"{seed}/{n}/{big_n}/{int(probabilistic)}/{lam}"


def record() -> dict:
    from importlib.metadata import version

    import ppi_py

    def values(y, f, fu, lam):
        point = float(np.ravel(ppi_py.ppi_mean_pointestimate(y, f, fu, lam=lam))[0])
        low, high = (float(np.ravel(b)[0]) for b in ppi_py.ppi_mean_ci(y, f, fu, alpha=0.05, lam=lam))
        return {"point": point, "low": low, "high": high}

    out: dict = {"ppi-python": version("ppi-python"), "numpy": np.__version__, "draws": {}, "values": {}}
    for seed, n, big_n, prob in CASES + [FIXED[:4]]:
        y, f, fu = data(seed, n, big_n, prob)
        out["draws"][key(seed, n, big_n, prob, None)] = sums(y, f, fu)
        for lam in LAMBDAS + ([FIXED[4]] if (seed, n, big_n, prob) == FIXED[:4] else []):
            out["values"][key(seed, n, big_n, prob, lam)] = values(y, f, fu, lam)
    return out


if __name__ == "__main__":
    json.dump(record(), sys.stdout, indent=1)
    sys.stdout.write("\n")
