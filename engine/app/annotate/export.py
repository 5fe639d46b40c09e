"""The exported labels (the page's CSV and JSONL links, `litjudge annotate --export`): one record a
label, carrying with it everything the page's estimate is computed from, so a reader recomputes the
estimate from the file alone (docs/annotate.md, "Method"): the cluster's every draw and its draw
probability, the answer on its question's scale and whether the question is in the quantity (a
rubric's questions after the first are not), the judges' total and the item count of the
cluster and of the whole queue, and the queue's number of clusters."""
from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import asdict
from typing import Any

from .labels import Labels
from .queue import Queue

FIELDS = ("annotator", "time", "cluster", "item", "label", "draw", "probability", "times_drawn", "key", "source", "shown",
          "standing", "draws", "score", "counted", "judge_total", "cluster_items", "judge_total_all", "items_all",
          "clusters_all")
FORMULA = ("=", "+", "-", "@", "\t", "\r")    # what a spreadsheet reads as the start of a formula


def draw_positions(labels: Labels) -> dict[str, str]:
    """cluster -> its every draw's position in the draw sequence, space-separated (`draws`)."""
    positions: dict[str, list[int]] = {}
    for k, c in enumerate(labels.draw_clusters):
        positions.setdefault(c, []).append(k)
    return {c: " ".join(map(str, ks)) for c, ks in positions.items()}


def records(queue: Queue, labels: Labels) -> list[dict[str, Any]]:
    """The labels, oldest first, as exported (`standing`: the annotator's latest answer to the item,
    the one the estimate reads). `draws`: every draw of the cluster (its
    positions in the draw sequence, space-separated); `score`: the answer on its question's
    scale (`Queue.score`; empty for a category, which has none); `counted`: whether that question
    is in the quantity; `judge_total` and `cluster_items`: the cluster's f and m;
    `judge_total_all`, `items_all` and `clusters_all`: F, M and N, over every cluster of the queue."""
    positions = draw_positions(labels)
    big_f, big_m = float(queue.judge_total.sum()), float(queue.size.sum())
    out = []
    for r in labels.rows():
        c = queue.index(r.cluster)
        score = queue.score(r.cluster, r.label, r.item)
        out.append({**asdict(r), "draws": positions.get(r.cluster, ""),
                    "score": None if math.isnan(score) else score,          # a category has no number
                    "counted": queue.question(r.item).counted, "judge_total": float(queue.judge_total[c]),
                    "cluster_items": int(queue.size[c]), "judge_total_all": big_f, "items_all": big_m,
                    "clusters_all": len(queue.clusters)})
    return out


def stored_records(labels: Labels) -> list[dict[str, Any]]:
    """The labels as `records` gives them, from the store alone: for a run judged again
    since its queue was drawn, whose labels stay the people's (the fields the queue gives, `score`
    to `clusters_all`, are empty: the run's judges no longer say what they did)."""
    positions = draw_positions(labels)
    derived = dict.fromkeys(FIELDS[FIELDS.index("score"):])
    return [{**asdict(r), "draws": positions.get(r.cluster, ""), **derived} for r in labels.rows()]


def jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)


def cell(value: Any) -> Any:
    """A CSV cell a spreadsheet will not run: text starting like a formula (= + - @, a tab or a
    carriage return: a judged item id, a category, an imported name) gets a leading ' (OWASP's
    advice; `uncell` takes it off again on import). JSONL and the dataset folder keep the text as is."""
    return "'" + value if isinstance(value, str) and value.startswith(FORMULA) else value


def uncell(value: str) -> str:
    """A cell as `cell` wrote it, back to its text."""
    return value[1:] if value.startswith("'") and value[1:].startswith(FORMULA) else value


def csv_text(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: cell(v) for k, v in r.items()} for r in rows)
    return out.getvalue()
