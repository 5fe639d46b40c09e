"""The live estimates of a queue from its labels: the human total per drawn cluster (each item the
mean of its annotators' latest answers on the quantity's scale, `Queue.score`, summed over the
cluster's items in the quantity), the longest prefix of
draws whose clusters are all answered, and `judges.metrics.active`'s estimators on it. The page
and a recomputation from the exported labels both call `estimates`, so they agree exactly."""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from litjudge.judges.metrics import active
from litjudge.judges.metrics.annotator_alpha import annotator_alpha

from .queue import Queue


def latest(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], tuple[str, str]]:
    """(annotator, item) -> (cluster, label): each annotator's standing answer. `rows`: the labels
    oldest first (annotator, cluster, item, label, and `standing` where given), as `Labels.rows`
    or the export gives them; a row marked not standing was replaced by a later one."""
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for r in rows:
        if r.get("standing", True) not in (False, "False", "false"):
            out[(str(r["annotator"]), str(r["item"]))] = (str(r["cluster"]), str(r["label"]))
    return out


def agreement(queue: Queue, answers: Mapping[tuple[str, str], tuple[str, str]]) -> dict[str, Any]:
    """Krippendorff's alpha (nominal) between annotators, over the items of the quantity's questions
    that two or more answered (a rubric's other questions, another scale, were pooled into one
    alpha of unlike labels: a new user's try), with its interval over the clusters holding them
    (`annotator_alpha`)."""
    by_unit: dict[str, dict[str, list[str]]] = {}          # cluster -> item -> its labels
    for (_, item), (cluster, label) in answers.items():
        if queue.question(item).counted:
            by_unit.setdefault(cluster, {}).setdefault(item, []).append(label)
    alpha = annotator_alpha({cluster: list(items.values()) for cluster, items in by_unit.items()})
    return {"krippendorff_alpha": _num(alpha.value), "items": alpha.items, "level": "nominal", "low": _num(alpha.low),
            "high": _num(alpha.high), "clusters": alpha.units, "note": alpha.note}


def human_totals(queue: Queue, standing: Mapping[tuple[str, str], tuple[str, str]]) -> dict[int, float]:
    """cluster index -> human total, for every cluster whose every item has an answer (an item's
    answer: the mean of its annotators' scores, `standing` as `latest` gives them; a rubric's
    questions after the first are answered but not in the quantity)."""
    scores: dict[str, dict[str, list[float]]] = {}
    for (_, item), (cluster, label) in standing.items():
        scores.setdefault(cluster, {}).setdefault(item, []).append(queue.score(cluster, label, item))
    out = {}
    for cluster, by_item in scores.items():
        c = queue.index(cluster)
        questions = queue.clusters[c].questions
        if all(q.item in by_item for q in questions):
            out[c] = sum(sum(by_item[q.item]) / len(by_item[q.item]) for q in questions if q.counted)
    return out


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _one(e: active.ActiveEstimate) -> dict[str, Any]:
    return {"value": _num(e.value), "low": _num(e.low), "high": _num(e.high), "half_width": _num(e.half_width),
            "lam": _num(e.lam), "draws": e.draws, "clusters_read": e.clusters_read, "n_eff": _num(e.n_eff),
            "note": e.note}


def whole_range(e: active.ActiveEstimate, bounds: tuple[float, float]) -> str | None:
    """Why an interval spans the quantity's whole range, where it does: a new user read such an
    interval beside uniform PPI++'s projected width as a wrong number."""
    if e.note is not None or not (e.low <= bounds[0] and e.high >= bounds[1]):
        return None
    return (f"The interval spans the whole range at {e.draws} labelled draws: the labels so far vary a lot for "
            "their weight (a draw of small probability counts 1/p, and few such draws give the interval few "
            "degrees of freedom); it narrows as more draws are labelled")


def against(e: active.ActiveEstimate) -> str | None:
    """What a negative lam says, where the active interval is given with one: the judges' totals
    have moved against the people's answers over these draws, and the active estimate subtracts
    them (valid for any lam, but a new user read lam -3.45 from 11 pairs, the active point 0.09
    from human-only's, as a fault)."""
    if e.note is not None or not e.lam < 0:
        return None
    return (f"Over these {e.draws} labelled draws the judges' totals move against the people's answers (lam "
            f"{e.lam:.2f}), so the active estimate subtracts them; from few draws that is often chance, and the "
            "human-only row does not use the judges")


def estimates(queue: Queue, rows: Iterable[Mapping[str, Any]], *, curve: bool = True) -> dict[str, Any]:
    """Human-only, active and uniform PPI++'s projected width for the labelled prefix, and the
    curve of interval width against labelled draws (every prefix from 1 to it)."""
    standing = latest(rows)                               # each annotator's standing answers, read once
    totals = human_totals(queue, standing)
    k = active.labelled_prefix(queue.design, totals)
    args = (queue.design, queue.judge_total, queue.size, totals)
    b = queue.bounds                                      # the quantity's own scale (a points mean: 1..N)
    act = active.estimate(*args, k, bounds=b, needs=queue.min_draws)
    human = active.estimate(*args, k, lam=0.0, bounds=b)
    uniform = active.uniform_width(*args, k, bounds=b)
    points = []
    if curve:
        for j in range(1, k + 1):
            a, h = active.estimate(*args, j, bounds=b, needs=queue.min_draws), active.estimate(*args, j, lam=0.0, bounds=b)
            points.append({"draws": j, "active": _num(a.half_width), "human": _num(h.half_width),
                           "uniform": _num(active.uniform_width(*args, j, bounds=b))})
    gained = None if act.n_eff is None or not math.isfinite(act.n_eff) or act.note else act.n_eff - k
    return {"quantity": queue.quantity, "bounds": list(b), "labelled_draws": k, "budget": len(queue.design.draws),
            "min_draws": queue.min_draws,
            "clusters_labelled": len(totals), "active": _one(act), "human": _one(human),
            "uniform_half_width": _num(uniform), "labels_gained": _num(gained) if gained is not None else None,
            "whole_range": whole_range(act, b), "against": against(act),
            "agreement": agreement(queue, standing), "curve": points, "waiting": waiting(queue, totals, k, standing)}


def waiting(queue: Queue, totals: Mapping[int, float], k: int,
            standing: Mapping[tuple[str, str], tuple[str, str]]) -> dict[str, Any] | None:
    """Where answers wait: draw k + 1's cluster has no whole answer (skipped, or being read) while
    clusters first drawn after it have, which the estimates cannot use until it has (a lone
    annotator who skipped it saw the count stay put); None where nothing waits. A later draw of a
    cluster answered before it (draws are with replacement) waits for nobody. `partly`: who answered
    some of its items (an import of part of a story): the page keeps it for them to finish, so the
    page tells the others so, not that they can answer it."""
    draws = queue.design.draws.tolist()
    before = set(draws[:k + 1])
    later = len({c for c in draws[k + 1:] if c in totals and c not in before})
    if not later:                             # (every draw read: none after it)
        return None
    cluster = queue.clusters[draws[k]].cluster
    partly = sorted({a for (a, _), (c, _) in standing.items() if c == cluster})
    return {"draw": k + 1, "cluster": cluster, "clusters_after": later, "partly": partly}
