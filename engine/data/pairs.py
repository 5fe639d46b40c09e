"""Pairs of texts answering the same prompt, with the human preference where known, for the pairwise
protocol.

Readers (each failing with the file and line of a bad row):
- `pairs_jsonl`: the generic format: `prompt`, `text_a`, `text_b`; optional `label` in {a, b, tie}
  (absent, null or blank: no human preference, so the pair is judged and counts in the bias tables,
  not in agreement), `pair_id`, `source_a`, `source_b`.
- `litbench_csv`: LitBench's rehydrated CSV (`prompt, chosen_story, rejected_story, ...`); the
  chosen story is `text_a` (the protocol shows both orders anyway). Users rehydrate the texts from
  Reddit with LitBench's own script; they are not redistributed.
- `ttcw`: pairs of stories on the same plot, ordered by the experts' pass count (ties dropped).
- `confederacy`: pairs within a group of 13, ordered by mean rubric total (ties dropped).
"""
from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from ..core.errors import DataError, Setting
from .readers import first_use, id_text, missing_field, missing_value, optional_text, read_jsonl, read_text, require
from .reference import load_confederacy
from .ttcw import load_ttcw

LABELS = ("a", "b", "tie")
# a renaming's example for a preference another tool wrote, said with what it assumes (it once
# suggested "a" for every value: copied for "second", it reversed the humans' preference)
GUESSED = {"first": "a", "1": "a", "left": "a", "second": "b", "2": "b", "right": "b", "equal": "tie", "draw": "tie",
           "same": "tie", "none": "tie"}
MEANS = {"a": "text a is the better", "b": "text b is the better", "tie": "neither is better"}
PAIR_FIELDS = ("pair_id", "prompt", "text_a", "text_b", "label", "source_a", "source_b", "group")


@dataclass(frozen=True)
class Pair:
    pair_id: str
    prompt: str
    text_a: str
    text_b: str
    label: str | None             # which text humans preferred: a, b or tie; None: not known
    source_a: str = ""
    source_b: str = ""
    group: str = ""
    # the row's other columns (a rubric question's reference text or human label), by column name
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class PairsFile:
    """The generic pairs JSONL, read as it is iterated (each time): a million pairs never sit in
    memory at once. Every bad row fails naming its line, when iteration reaches it."""

    path: Path

    def __iter__(self) -> Iterator[Pair]:
        return iter_pairs_jsonl(self.path)


def load_pairs_jsonl(path: Path) -> list[Pair]:
    return list(iter_pairs_jsonl(Path(path)))


def iter_pairs_jsonl(path: Path) -> Iterator[Pair]:
    return pairs_from_records(read_jsonl(path), path)


def pairs_from_records(records: Iterable[tuple[int, dict]], path: Path) -> Iterator[Pair]:
    """Pairs from (row number, record) rows in the generic fields; each bad row fails naming its row."""
    seen: dict[str, int] = {}      # id -> its first row (`first_use`)
    count = 0
    for n, rec in records:
        require(rec, {"prompt": str, "text_a": str, "text_b": str}, path, n)
        label = human_label(rec, path, n)
        pid = id_text(rec, "pair_id", path, n, default=f"line{n}")       # absent: its line; null: an error
        first_use(seen, pid, "pair_id", path, n)
        count += 1
        yield Pair(pid, rec["prompt"], rec["text_a"], rec["text_b"], label, optional_text(rec, "source_a"),
                   optional_text(rec, "source_b"), optional_text(rec, "group"),
                   {k: v for k, v in rec.items() if k not in PAIR_FIELDS})
    if not count:
        raise DataError("no pairs", path=str(path))


def as_label(text: str) -> str | None:
    """THE reading of a pair's label: a, b or tie in any case and outer spaces; None for anything else."""
    label = text.strip().lower()
    return label if label in LABELS else None


def human_label(rec: dict[str, Any], path: Path, row: int) -> str | None:
    """A row's human preference: a, b or tie in any case ("A", " Tie"); None where the row has none
    (no `label` field, null, NaN or a blank cell, as an empty CSV cell reads). Anything else is one
    line naming the row and the renaming that would read it."""
    if "label" not in rec and any(isinstance(c, str) and c.strip() == "label" for c in rec):
        raise missing_field(rec, "label", path, row)      # ' label': a header's spaces, not a pair without one
    value = rec.get("label")
    if missing_value(value):
        return None
    if not isinstance(value, str):
        raise DataError(f"field 'label' should be text (a, b or tie), got {value!r:.40}", path=str(path), row=row)
    label = as_label(value)
    if label is None:
        target = GUESSED.get(value.strip().lower(), "a")
        raise DataError((f"field 'label' must be one of {list(LABELS)} (any case), got {value!r:.40}; map each of "
                         "your values to a, b or tie, e.g. ", Setting("dataset.values.label", {value[:20]: target}),
                         f" if {value[:20]!r} means {MEANS[target]}"), path=str(path), row=row)
    return label


def load_litbench_csv(path: Path) -> list[Pair]:
    path = Path(path)
    reader = csv.DictReader(read_text(path).splitlines(keepends=True))
    seen: set[str] = set()
    missing = [c for c in ("prompt", "chosen_story", "rejected_story") if c not in (reader.fieldnames or [])]
    if missing:
        raise DataError(f"missing column(s) {missing} (LitBench's rehydrated layout: prompt, chosen_story, "
                        f"rejected_story, ...)", path=str(path), row=1)
    pairs = []
    for n, rec in enumerate(reader, start=2):
        for col in ("prompt", "chosen_story", "rejected_story"):
            if not (rec.get(col) or "").strip():
                raise DataError(f"empty {col!r} (texts not rehydrated yet?)", path=str(path), row=n)
        pid = rec.get("chosen_comment_id") and f"{rec['chosen_comment_id']}-{rec.get('rejected_comment_id', '')}"
        if pid and pid in seen:
            raise DataError(f"duplicate pair (comment ids {pid}): each pair once, or its verdicts would merge",
                            path=str(path), row=n)
        seen.add(str(pid))
        pairs.append(Pair(pid or f"row{n}", rec["prompt"], rec["chosen_story"], rec["rejected_story"], "a"))
    if not pairs:
        raise DataError("no rows", path=str(path))
    return pairs


def _ordered(pid: str, prompt: str, a, b, score_a: float | None, score_b: float | None, group: str) -> Pair | None:
    """The pair with the human preference by score; None when tied or either score is missing."""
    if score_a is None or score_b is None or score_a == score_b:
        return None
    return Pair(pid, prompt, a.text, b.text, "a" if score_a > score_b else "b", a.source, b.source, group)


def pairs_from_ttcw(folder: Path) -> list[Pair]:
    data = load_ttcw(folder, require_labels=True)
    passes = {s.story_id: sum(data.majority.get((s.story_id, t.idx)) == "Yes" for t in data.tests) for s in data.stories}
    by_group: dict[int, list] = {}
    for s in data.stories:
        if s.judgeable:
            by_group.setdefault(s.group, []).append(s)
    pairs = []
    for group, stories in sorted(by_group.items()):
        for a, b in combinations(sorted(stories, key=lambda s: s.story_id), 2):
            p = _ordered(f"ttcw{group}/{a.story_id}-{b.story_id}", a.plot, a, b, passes[a.story_id],
                         passes[b.story_id], str(group))
            if p:
                pairs.append(p)
    return pairs


def pairs_from_confederacy(folder: Path) -> list[Pair]:
    prompt = ("Write an epic narration of a single combat between Ignatius J. Reilly and a pterodactyl, "
              "in the style of John Kennedy Toole.")
    pairs = []
    for g in load_confederacy(folder):
        stories = sorted((g.reference, *g.candidates), key=lambda s: s.item_id)
        for a, b in combinations(stories, 2):
            p = _ordered(f"{g.group}/{a.item_id}-{b.item_id}", prompt, a, b, a.human_score, b.human_score, g.group)
            if p:
                pairs.append(p)
    return pairs
