"""Rated items for the listwise and classification protocols: short texts grouped (by object,
prompt or story set), each with an optional ground-truth category, human score and source.

Readers, each failing with the file and line of a bad row:
- `rated_items_jsonl`: the generic format, one JSON object per line: `group`, `item_id`, `text`,
  optional `category`, `human_score` (number) and `source`.
- `aut_ocsai`: the AUT originality set; group = object, human score = mean rating (1-5), category =
  the rating tertile within the object (low / mid / high; equal ratings share one), the oracle
  order of the AUT paper.
- `confederacy`: the 65 stories in their 5 groups of 13; human score = mean rubric total.
"""
from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError, DataError, Setting
from .readers import first_use, id_text, optional_text, read_jsonl, require
from .reference import load_confederacy
from .ttcw import load_ttcw

ITEM_FIELDS = ("group", "item_id", "text", "category", "human_score", "source")

TERTILES = ("low", "mid", "high")
_AUT = re.compile(r"AUT Prompt:(?P<object>.*?)\nResponse:(?P<response>.*?)\nScore:\n?$", re.S)


@dataclass(frozen=True)
class RatedItem:
    item_id: str
    group: str
    text: str
    category: str | None = None
    human_score: float | None = None
    source: str = ""
    # the row's other columns (a rubric question's reference text or human label), by column name
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class ItemSet:
    items: tuple[RatedItem, ...]
    categories: tuple[str, ...] = ()      # ground-truth categories, worst first ("" order unknown)
    by_name: bool = False                 # no category_order was given: `categories` are sorted by name

    def groups(self) -> dict[str, list[RatedItem]]:
        out: dict[str, list[RatedItem]] = {}
        for item in self.items:
            out.setdefault(item.group, []).append(item)
        return out

    def category_rank(self, category: str | None) -> float:
        return float(self.categories.index(category) + 1) if category in self.categories else float("nan")


def select_groups(data: ItemSet, wanted: list[str], limit: int | None = None) -> list[tuple[str, list[RatedItem]]]:
    """The groups to judge, in order: the named ones (an unknown name is an error), else all in the
    order they first appear in the data (`--limit N`: the first N, as for every protocol)."""
    groups = data.groups()
    unknown = [g for g in wanted if g not in groups]
    if unknown:
        raise ConfigError(f"unknown group(s) {unknown} (known: {', '.join(sorted(groups)[:30])})",
                          parameter="options.groups")
    twice = sorted({g for g in wanted if wanted.count(g) > 1})
    if twice:              # each named group's lists were judged once and counted twice
        raise ConfigError(f"group(s) {twice} named twice in options.groups", parameter="options.groups")
    chosen = [(g, groups[g]) for g in wanted] if wanted else list(groups.items())
    return chosen[:limit] if limit else chosen


def sample_per_category(items: list[RatedItem], per_category: int, rng) -> list[RatedItem]:
    """Up to `per_category` items of each ground-truth category (categories in sorted order), drawn
    with `rng`; all items when per_category is 0."""
    if not per_category:
        return list(items)
    by_cat: dict[str | None, list[RatedItem]] = {}
    for item in items:
        by_cat.setdefault(item.category, []).append(item)
    return [x for cat in sorted(by_cat, key=str) for x in rng.sample(by_cat[cat], min(per_category, len(by_cat[cat])))]


def load_rated_jsonl(path: Path, category_order: list[str] | tuple[str, ...] = ()) -> ItemSet:
    return items_from_records(read_jsonl(Path(path)), Path(path), category_order)


def items_from_records(records: Iterable[tuple[int, dict]], path: Path,
                       category_order: list[str] | tuple[str, ...] = ()) -> ItemSet:
    """Rated items from (row number, record) rows in the generic fields; bad rows name their row."""
    items: list[RatedItem] = []
    seen: dict[str, int] = {}      # item_id -> its first row (`first_use`)
    for n, rec in records:
        group = id_text(rec, "group", path, n, absent=("texts with no groups: one for them all, ",
                                                        Setting("dataset.columns", {"group": "=all"})))
        item = id_text(rec, "item_id", path, n)
        require(rec, {"text": str}, path, n)
        first_use(seen, item, "item_id", path, n)
        score = rec.get("human_score")
        if score is not None:
            require(rec, {"human_score": (int, float)}, path, n)
        category = rec.get("category")
        if category is not None:
            category = str(category)
            if category_order and category not in category_order:
                raise DataError(f"category {category!r} is not one of {list(category_order)}", path=str(path), row=n)
        items.append(RatedItem(item, group, rec["text"], category,
                               float(score) if score is not None else None, optional_text(rec, "source"),
                               {k: v for k, v in rec.items() if k not in ITEM_FIELDS}))
    if not items:
        raise DataError("no items", path=str(path))
    categories = tuple(category_order) or tuple(sorted({i.category for i in items if i.category}))
    return ItemSet(tuple(items), categories, by_name=not category_order and len(categories) > 1)


def load_aut(path: Path) -> ItemSet:
    path = Path(path)
    raw: dict[str, list[tuple[int, str, float]]] = {}
    for n, rec in read_jsonl(path):
        require(rec, {"prompt": str, "completion": str}, path, n)
        m = _AUT.match(rec["prompt"])
        if not m:
            raise DataError("prompt is not 'AUT Prompt:OBJECT\\nResponse:TEXT\\nScore:'", path=str(path), row=n)
        try:
            score = float(rec["completion"]) / 10
        except ValueError:
            raise DataError(f"completion should be a number, got {rec['completion']!r:.40}", path=str(path), row=n) from None
        raw.setdefault(m["object"].strip(), []).append((n, m["response"].strip(), score))
    items = []
    for obj, rows in sorted(raw.items()):
        ranked = sorted(rows, key=lambda r: (r[2], r[0]))
        scores = [r[2] for r in ranked]
        for n, text, score in ranked:
            # equal ratings share a tertile, that of their block's middle rank: by line order, 584 of
            # the 3,030 responses had a response of the same object and rating in another tertile
            first, last = bisect_left(scores, score), bisect_right(scores, score) - 1
            tertile = TERTILES[min(2, 3 * (first + last) // (2 * len(ranked)))]
            items.append(RatedItem(f"{obj}-{n:04d}", obj, text, tertile, score, ""))
    return ItemSet(tuple(sorted(items, key=lambda i: i.item_id)), TERTILES)


def load_confederacy_items(folder: Path) -> ItemSet:
    items = []
    for g in load_confederacy(folder):
        for s in (g.reference, *g.candidates):
            items.append(RatedItem(s.item_id, s.group, s.text, None, s.human_score, s.source))
    return ItemSet(tuple(items))


def load_ttcw_items(folder: Path) -> ItemSet:
    """The TTCW stories with text as items (a rubric's texts): group = the plot's index, source the
    story's writer; the New Yorker stories (URLs only) are left out."""
    data = load_ttcw(folder, require_labels=False)
    return ItemSet(tuple(RatedItem(s.story_id, str(s.group), s.text, None, None, s.source, {"plot": s.plot})
                         for s in data.stories if s.text is not None))
