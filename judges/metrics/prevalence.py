"""Pass rates corrected for a judge's measured error (Rogan & Gladen 1978).

A judge that says Yes with sensitivity Se (on items the experts passed) and specificity Sp (on
items they failed) reports a raw pass rate p that is biased; the true rate is estimated by
    pi = (p + Sp - 1) / (Se + Sp - 1),  clipped to [0, 1].
Se and Sp come from the human-labelled items; p from the items being scored (labelled or not).
The CI resamples both: the labelled items (for Se, Sp) and the scored items (for p).

>>> round(rogan_gladen(0.5, 0.8, 0.9), 4)
0.5714
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

NAN = float("nan")


def rogan_gladen(p_obs: float, se: float, sp: float) -> float:
    """The corrected rate; NaN when the judge is no better than chance (Se + Sp <= 1)."""
    denom = se + sp - 1
    if not denom > 0 or math.isnan(p_obs):
        return NAN
    return min(1.0, max(0.0, (p_obs + sp - 1) / denom))


def sensitivity_specificity(truth: Sequence[bool], pred: Sequence[bool]) -> tuple[float, float]:
    t, p = np.asarray(truth, dtype=bool), np.asarray(pred, dtype=bool)
    se = float(p[t].mean()) if t.any() else NAN
    sp = float((~p[~t]).mean()) if (~t).any() else NAN
    return se, sp


def corrected_pass_rate(truth: Sequence[bool], pred_labelled: Sequence[bool], pred_scored: Sequence[bool],
                        resamples: int = 1000, seed: int = 0, alpha: float = 0.05) -> dict[str, float]:
    """Raw and Rogan-Gladen corrected pass rate of `pred_scored`, with the judge's Se/Sp measured on
    (`truth`, `pred_labelled`), and a percentile bootstrap CI of the corrected rate."""
    truth_a, lab_a, scored = (np.asarray(x, dtype=bool) for x in (truth, pred_labelled, pred_scored))
    raw = float(scored.mean()) if len(scored) else NAN
    se, sp = sensitivity_specificity(truth_a, lab_a)
    point = rogan_gladen(raw, se, sp)
    rng, stats = np.random.default_rng(seed), []
    if len(truth_a) and len(scored):
        for _ in range(resamples):
            i = rng.integers(0, len(truth_a), len(truth_a))
            j = rng.integers(0, len(scored), len(scored))
            value = rogan_gladen(float(scored[j].mean()), *sensitivity_specificity(truth_a[i], lab_a[i]))
            if not math.isnan(value):
                stats.append(value)
    lo, hi = (np.quantile(stats, [alpha / 2, 1 - alpha / 2]) if stats else (NAN, NAN))
    return {"raw_pass_rate": raw, "sensitivity": se, "specificity": sp, "corrected_pass_rate": point,
            "ci_low": float(lo), "ci_high": float(hi), "labelled": int(len(truth_a)), "scored": int(len(scored))}
