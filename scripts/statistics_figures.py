"""Figures docs/statistics.md states that no test prints: the time of an exact
Kemeny ranking of 12 items (`judges/metrics/kemeny.py`), as CPU seconds on this machine.

    .venv/bin/python scripts/statistics_figures.py

The coverage figures come from the conformance tests (`pytest -s tests/test_conformance*.py`
prints each one) and from scripts/proportion_intervals.py.
"""
from __future__ import annotations

import platform
import random
import time

from litjudge.judges.metrics.kemeny import is_exact, kemeny


def kemeny_seconds(items: int, orders: int, repeats: int = 5) -> float:
    """The fastest of `repeats` CPU times of one Kemeny ranking of `orders` shuffles of `items`."""
    rng = random.Random(0)
    names = [f"i{k}" for k in range(items)]
    rankings = [rng.sample(names, items) for _ in range(orders)]
    kemeny(rankings)
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        kemeny(rankings)
        best = min(best, time.process_time() - start)
    return best


def main() -> None:
    print(f"machine: {platform.processor() or platform.machine()}")
    for orders in (3, 8):
        print(f"Kemeny, 12 items, {orders} orders (exact: {is_exact(12)}): {kemeny_seconds(12, orders):.3f} CPU s")


if __name__ == "__main__":
    main()
