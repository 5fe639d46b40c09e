"""Pass rates corrected for a judge's measured error (Rogan & Gladen 1978).

A judge that says Yes with sensitivity Se (on items the experts passed) and specificity Sp (on
items they failed) reports a raw pass rate p that is biased; the true rate is estimated by
    pi = (p + Sp - 1) / (Se + Sp - 1),  clipped to [0, 1].
Se and Sp come from the human-labelled items; p from the items being scored (labelled or not).
The CI resamples clusters (stories: a story's tests move together), each drawn cluster bringing
its labelled items (for Se, Sp) and its scored items (for p); without clusters, every item is its
own cluster and the two sets are resampled independently.

>>> round(rogan_gladen(0.5, 0.8, 0.9), 4)
0.5714
"""
from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np

from .bootstrap import MIN_CLUSTERS, draw_counts, percentile_interval, resample_counts, too_few

NAN = float("nan")


def rogan_gladen(p_obs: float, se: float, sp: float) -> float:
    """The corrected rate; NaN when the judge is no better than chance (Se + Sp <= 1)."""
    denom = se + sp - 1
    if not denom > 0 or math.isnan(p_obs):
        return NAN
    return min(1.0, max(0.0, (p_obs + sp - 1) / denom))


def sensitivity_specificity(truth: Sequence[bool] | np.ndarray, pred: Sequence[bool] | np.ndarray
                            ) -> tuple[float, float]:
    t, p = np.asarray(truth, dtype=bool), np.asarray(pred, dtype=bool)
    se = float(p[t].mean()) if t.any() else NAN
    sp = float((~p[~t]).mean()) if (~t).any() else NAN
    return se, sp


def corrected_pass_rate(truth: Sequence[bool], pred_labelled: Sequence[bool], pred_scored: Sequence[bool],
                        resamples: int = 1000, seed: int = 0, alpha: float = 0.05,
                        clusters_labelled: Sequence[Hashable] | None = None,
                        clusters_scored: Sequence[Hashable] | None = None) -> dict[str, float | str | None]:
    """Raw and Rogan-Gladen corrected pass rate of `pred_scored`, with the judge's Se/Sp measured on
    (`truth`, `pred_labelled`), and a percentile cluster-bootstrap CI of the corrected rate. The
    interval's clusters are the labelled ones where fewer (Se and Sp rest on them alone: 10 scored
    stories with 2 labelled printed one, which covered 0.81); none where the rate is undefined (it
    was printed beside a NaN rate); [0, 1] where Se + Sp <= 1 in more than alpha / 2 of the
    resamples (the rate is not identified there: the resamples left had covered 0.92)."""
    truth_a, lab_a, scored = (np.asarray(x, dtype=bool) for x in (truth, pred_labelled, pred_scored))
    raw = float(scored.mean()) if len(scored) else NAN
    se, sp = sensitivity_specificity(truth_a, lab_a)
    point = rogan_gladen(raw, se, sp)
    out: dict[str, float | str | None] = {
        "raw_pass_rate": raw, "sensitivity": se, "specificity": sp, "corrected_pass_rate": point, "ci_low": NAN,
        "ci_high": NAN, "labelled": int(len(truth_a)), "scored": int(len(scored)), "note": None}
    if not len(truth_a) or not len(scored):
        return out
    if math.isnan(point):
        out["note"] = NO_BETTER
        return out
    draws: list[tuple[list[str] | None, list[str] | None]]
    if clusters_labelled is None or clusters_scored is None:   # every item its own cluster, each set on its own
        draws = [([f"l{i}" for i in range(len(truth_a))], None), (None, [f"s{i}" for i in range(len(scored))])]
        groups = min(len(truth_a), len(scored))
    else:
        labelled_ids, scored_ids = [str(c) for c in clusters_labelled], [str(c) for c in clusters_scored]
        draws = [(labelled_ids, scored_ids)]
        groups = min(len(set(labelled_ids)), len(set(scored_ids)))
    sums = _cluster_sums(truth_a, lab_a, scored, draws, seed, resamples)
    tp, pos, tn, neg, yes, n = sums
    with np.errstate(invalid="ignore", divide="ignore"):
        se_b, sp_b, p_b = tp / pos, tn / neg, yes / n
        denom = se_b + sp_b - 1
        stats = np.where(denom > 0, np.clip((p_b + sp_b - 1) / denom, 0.0, 1.0), np.nan)
    out["ci_low"], out["ci_high"] = percentile_interval(stats, groups, alpha)
    chance = float(np.mean(~(denom > 0)))
    if groups < MIN_CLUSTERS:
        out["note"] = too_few(groups)
    elif chance > alpha / 2:
        out["ci_low"], out["ci_high"] = 0.0, 1.0
        out["note"] = (f"the judge's sensitivity + specificity is at most 1 in {chance:.0%} of the story resamples "
                       f"(more than {alpha / 2:.1%}): the rate is not identified there, the interval is [0, 1]")
    return out


NO_BETTER = ("undefined: the judge is no better than chance on the labelled items (sensitivity + specificity <= 1), "
             "so there is no error to correct by")


def _cluster_sums(truth: np.ndarray, lab: np.ndarray, scored: np.ndarray, draws, seed: int, resamples: int):
    """Per resample: true positives, positives, true negatives, negatives among the labelled
    items, and passes and count among the scored items, summed over the drawn clusters. `draws`
    lists (labelled ids, scored ids) resampled together; a None side is not resampled by it.
    One list (the stories): the bootstrap's own draws (`resample_counts`); two (every item its
    own cluster, each set on its own), the second drawn on from where the first ended."""
    totals = np.zeros((6, resamples))
    rng = np.random.default_rng(seed)
    for lab_ids, sco_ids in draws:
        names = sorted(set(lab_ids or []) | set(sco_ids or []))
        where = {c: i for i, c in enumerate(names)}
        g = len(names)
        per = np.zeros((6, g))
        if lab_ids is not None:
            li = np.asarray([where[c] for c in lab_ids], dtype=int)
            for row, values in enumerate((truth & lab, truth, ~truth & ~lab, ~truth)):
                per[row] += np.bincount(li, weights=values.astype(float), minlength=g)
        if sco_ids is not None:
            si = np.asarray([where[c] for c in sco_ids], dtype=int)
            per[4] += np.bincount(si, weights=scored.astype(float), minlength=g)
            per[5] += np.bincount(si, minlength=g)
        # how often each resample drew each cluster, then one product: (6, g) x (g, resamples)
        drawn = resample_counts(seed, g, resamples) if len(draws) == 1 else draw_counts(rng.integers(0, g, (resamples, g)))
        totals += per @ drawn.T
    return totals
