"""Position bias of comparative judges: the one definition of the first-position win rate.

Of the verdicts that prefer one side, the share that prefer the side shown first. A tie prefers
neither side and is left out (the tie rate is reported on its own), so an unbiased judge scores
0.5 whatever its tie rate. Used by every protocol that shows two items in an order.

>>> first_position_win_rate([True, True, False, None]).value   # 2 of the 3 non-tie verdicts
0.6666666666666666
"""
from __future__ import annotations

from collections.abc import Sequence

from .base import NAN, MetricResult, is_missing


def first_position_win_rate(first_won: Sequence[bool | None]) -> MetricResult:
    """`first_won[i]`: True when verdict i preferred the first-shown item, False when it preferred
    the second, None for a tie (or no verdict)."""
    decided = [bool(x) for x in first_won if not is_missing(x)]
    return MetricResult(sum(decided) / len(decided) if decided else NAN, len(decided))
