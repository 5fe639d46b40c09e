"""Selective judging with a guarantee (Jung et al. 2024, "Trust or Escalate"): a judge answers only
when its confidence reaches a threshold, and the threshold is chosen on human-labelled calibration
items so that, with probability at least 1 - delta, agreement with humans on the answered items
is at least `target`.

Threshold selection is fixed-sequence testing: candidate thresholds from the strictest down; at
each, H0 "the error rate among items at or above it exceeds 1 - target" is tested with an exact
binomial tail; the sequence stops at the first H0 it cannot reject, and the last rejected
threshold is used (None: no threshold can be certified). Fixed-sequence testing needs no
multiplicity correction, so the family-wise error is at most delta. The grid of thresholds (those
admitting 30, 40, 50... calibration items) is made from the confidences alone.

A cascade (`cascade`) calibrates each of its K judges on the calibration items that reach it, at
delta / K each: with probability at least 1 - delta every level's answered items agree with humans
at rate >= target, and so do all answered items together.

>>> choose_threshold([i / 40 for i in range(40, 0, -1)], [True] * 40, target=0.8, delta=0.1)
0.025
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats


def p_value(errors: int, n: int, risk: float) -> float:
    """P(at most `errors` errors in n | error rate = risk): small means the rate is below `risk`."""
    return float(stats.binom.cdf(errors, n, risk)) if n else 1.0


def choose_threshold(confidence: Sequence[float], correct: Sequence[bool], target: float, delta: float,
                     min_answered: int = 30, step: int = 10) -> float | None:
    """The lowest confidence threshold certified by fixed-sequence testing (see the module doc).
    Thresholds are tested in a fixed grid: those admitting min_answered, min_answered + step, ...
    calibration items (ties admitted together), strictest first."""
    if len(confidence) != len(correct):
        raise ValueError(f"need equal lengths, got {len(confidence)} and {len(correct)}")
    risk = 1.0 - target
    ranked = sorted(zip(confidence, correct), key=lambda t: -t[0])
    chosen = None
    for n in range(min_answered, len(ranked) + 1, step):
        level = ranked[n - 1][0]
        admitted = [ok for c, ok in ranked if c >= level]
        if p_value(sum(not ok for ok in admitted), len(admitted), risk) > delta:
            break
        chosen = level
    return chosen


@dataclass(frozen=True)
class Level:
    """One judge of a cascade, on every item: its answer (None: it gave none) and its confidence."""

    judge: str
    answers: Sequence[object]
    confidence: Sequence[float]


@dataclass(frozen=True)
class CascadeResult:
    thresholds: list[float | None]        # per level; None: the level never answers
    answered_by: list[int | None]         # per item: the level that answered it (None: abstained)


def cascade(levels: Sequence[Level], truth: Sequence[object], calibration: Sequence[int], target: float, delta: float,
            min_answered: int = 30) -> CascadeResult:
    """Thresholds from the calibration items (indices), then every item routed: the first level
    whose confidence reaches its threshold answers; past the last level the item is abstained."""
    thresholds: list[float | None] = []
    reaching = list(calibration)
    for level in levels:
        have = [i for i in reaching if level.answers[i] is not None]
        t = choose_threshold([level.confidence[i] for i in have], [level.answers[i] == truth[i] for i in have],
                             target, delta / len(levels), min_answered)
        thresholds.append(t)
        reaching = [i for i in reaching if not _answers(level, i, t)]
    routed: list[int | None] = []
    for i in range(len(truth)):
        routed.append(next((k for k, (lv, t) in enumerate(zip(levels, thresholds)) if _answers(lv, i, t)), None))
    return CascadeResult(thresholds, routed)


def _answers(level: Level, i: int, threshold: float | None) -> bool:
    return threshold is not None and level.answers[i] is not None and level.confidence[i] >= threshold
