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

Clustered calibration data. The binomial test counts every verdict as an independent draw, which
repeats of one item, both orders of one pair and the 14 tests of one story are not: with 5
identical repeats the guarantee failed in 26% of draws at delta = 0.1. With `clusters` (one id per
calibration row) the unit is the cluster: clusters are independent, verdicts inside one need not
be. Each cluster with an admitted row contributes one loss in [0, 1], its error rate among its
admitted rows, and H0 "the mean of that rate over clusters is at least 1 - target" is tested with
the Hoeffding-Bentkus p-value for a mean of independent bounded losses (Bates et al. 2021,
"Distribution-free, risk-controlling prediction sets"; Angelopoulos et al. 2021, "Learn then
Test"), valid whatever the dependence inside a cluster. The guarantee is then on agreement per
cluster, averaged over clusters (every story, or pair, weighs the same); with clusters of equal
answered size, as identical repeats or both orders of every pair, that is the agreement over the
answered verdicts. When every cluster is one row the exact binomial test above is used (valid, and
more powerful). Grid points admitting fewer clusters than an error-free sample needs to reject H0
((1 - risk)^k <= delta) are skipped rather than failed: they could never be certified, and failing
them would end the sequence before it reaches thresholds with enough clusters; the rule reads
confidences and cluster ids only, never a label.

A cascade (`cascade`) calibrates each of its K judges on the calibration items that reach it, at
delta / K each: with probability at least 1 - delta every level's answered items agree with humans
at rate >= target, and so do all answered items together.

>>> choose_threshold([i / 40 for i in range(40, 0, -1)], [True] * 40, target=0.8, delta=0.1)
0.025
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from .base import scipy_stats


def p_value(errors: int, n: int, risk: float) -> float:
    """P(at most `errors` errors in n | error rate = risk): small means the rate is below `risk`."""
    return float(scipy_stats().binom.cdf(errors, n, risk)) if n else 1.0


def hb_p_value(mean_loss: float, n: int, risk: float) -> float:
    """Hoeffding-Bentkus p-value of H0 "E[loss] >= risk" from the mean of n independent losses in
    [0, 1]: min(exp(-n h(min(mean, risk), risk)), e * P(Binomial(n, risk) <= ceil(n mean)))."""
    if not n:
        return 1.0
    a = min(mean_loss, risk)
    h = (a * math.log(a / risk) if a > 0 else 0.0) + (1 - a) * math.log((1 - a) / (1 - risk))
    bentkus = math.e * float(scipy_stats().binom.cdf(math.ceil(n * mean_loss - 1e-9), n, risk))
    return min(1.0, math.exp(-n * h), bentkus)


def clustered_p_value(errors: Sequence[int], admitted: Sequence[int], risk: float) -> float:
    """p-value of H0 "mean over clusters of each cluster's error rate among its admitted rows >=
    risk" from per-cluster counts (clusters with no admitted row left out; module doc)."""
    losses = [e / a for e, a in zip(errors, admitted, strict=True) if a]
    return hb_p_value(sum(losses) / len(losses), len(losses), risk) if losses else 1.0


def choose_threshold(confidence: Sequence[float], correct: Sequence[bool], target: float, delta: float,
                     min_answered: int = 30, step: int = 10,
                     clusters: Sequence[Hashable] | None = None) -> float | None:
    """The lowest confidence threshold certified by fixed-sequence testing (see the module doc).
    Thresholds are tested in a fixed grid: those admitting min_answered (or all, if fewer),
    min_answered + step, ... calibration items (ties admitted together), strictest first.
    `clusters` (one id per row): rows that share an id are not independent (repeats, orders of a
    pair, tests of a story); the test then counts clusters, not rows."""
    if len(confidence) != len(correct) or (clusters is not None and len(clusters) != len(correct)):
        raise ValueError(f"need equal lengths, got {len(confidence)}, {len(correct)}"
                         + ("" if clusters is None else f" and {len(clusters)}"))
    risk = 1.0 - target
    ids = list(range(len(correct))) if clusters is None else list(clusters)
    largest = max(Counter(ids).values(), default=1)
    ranked = sorted(zip(confidence, correct, ids), key=lambda t: -t[0])
    fewest = math.ceil(math.log(delta) / math.log(1.0 - risk)) if largest > 1 else 0
    chosen = None
    # from min_answered, or every item where there are fewer (known before any label is read: the
    # grid stays fixed; 24 error-free verdicts of 12 pairs were never tested, none certified)
    for n in range(min(min_answered, len(ranked)) or 1, len(ranked) + 1, step):
        level = ranked[n - 1][0]
        admitted = [(ok, g) for c, ok, g in ranked if c >= level]
        if len({g for _, g in admitted}) < fewest:
            continue
        if largest == 1:
            p = p_value(sum(not ok for ok, _ in admitted), len(admitted), risk)
        else:
            errors, counts = Counter(g for ok, g in admitted if not ok), Counter(g for _, g in admitted)
            p = clustered_p_value([errors[g] for g in counts], list(counts.values()), risk)
        if p > delta:
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
            min_answered: int = 30, clusters: Sequence[Hashable] | None = None) -> CascadeResult:
    """Thresholds from the calibration items (indices), then every item routed: the first level
    whose confidence reaches its threshold answers; past the last level the item is abstained.
    `clusters` (one id per item) makes every level's test count clusters (`choose_threshold`)."""
    thresholds: list[float | None] = []
    reaching = list(calibration)
    for level in levels:
        have = [i for i in reaching if level.answers[i] is not None]
        t = choose_threshold([level.confidence[i] for i in have], [level.answers[i] == truth[i] for i in have],
                             target, delta / len(levels), min_answered,
                             clusters=None if clusters is None else [clusters[i] for i in have])
        thresholds.append(t)
        reaching = [i for i in reaching if not _answers(level, i, t)]
    routed: list[int | None] = []
    for i in range(len(truth)):
        routed.append(next((k for k, (lv, t) in enumerate(zip(levels, thresholds)) if _answers(lv, i, t)), None))
    return CascadeResult(thresholds, routed)


def _answers(level: Level, i: int, threshold: float | None) -> bool:
    return threshold is not None and level.answers[i] is not None and level.confidence[i] >= threshold
