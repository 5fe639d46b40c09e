from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class MetricResult:
    value: float
    n: int
    p_value: float | None = None

    @property
    def defined(self) -> bool:
        return not math.isnan(self.value)


NAN = float("nan")
