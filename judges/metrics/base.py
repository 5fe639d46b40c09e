from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class MetricResult:
    value: float
    n: int
    p_value: float | None = None

    @property
    def defined(self) -> bool:
        return not math.isnan(self.value)


NAN = float("nan")


def is_missing(x: Any) -> bool:
    """None or a float NaN: no value (never a category, never a number)."""
    return x is None or x != x          # NaN is the one value unequal to itself


def known_pairs(a: Sequence[Any], b: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """The pairs (a[i], b[i]) where neither side is missing, as two lists."""
    kept = [(x, y) for x, y in zip(a, b) if not (is_missing(x) or is_missing(y))]
    return [x for x, _ in kept], [y for _, y in kept]


def scipy_stats():
    """scipy.stats, imported on first use: a protocol module loads (and a config error reports)
    without waiting the half second scipy.stats takes to import."""
    from scipy import stats

    return stats
