"""Groups of stories with one reference each and human scores: the reference-based protocol's data.

Two sources:
- Confederacy (Gomez-Rodriguez & Williams 2023): 65 stories on one prompt, 5 anonymised groups of
  13 (one per system), each group rated by 2 raters on 10 rubric items; the human score is the mean
  rubric total of the two raters, and the GPT-4 story of each group is the reference. 12 story files
  are cp1252, not UTF-8: decoded with that fallback.
- The generic reference format (JSONL, one story per line): `group`, `item_id`, `text`,
  `human_score` (number), `reference` (true for exactly one story per group), optional `source`.
"""
from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import DataError
from .readers import first_use, id_text, optional_text, read_jsonl, read_text, require

RUBRIC = ("Readability", "Narrative elts.", "Structural elts.", "Plot logic", "Creativity", "JKT style",
          "Epic genre", "Combat", "Acc. characters", "Humor")


@dataclass(frozen=True)
class GroupStory:
    item_id: str
    group: str
    source: str
    text: str
    human_score: float | None


@dataclass(frozen=True)
class StoryGroup:
    group: str
    reference: GroupStory
    candidates: tuple[GroupStory, ...]


def load_confederacy(folder: Path, reference_source: str = "chatgpt-gpt4") -> list[StoryGroup]:
    folder = Path(folder)
    mapping_path, ratings_path = folder / "mapping-grouped.csv", folder / "user_ratings.csv"
    code_to_file: dict[str, str] = {}
    for row, rec in enumerate(csv.DictReader(read_text(mapping_path).splitlines()), start=2):
        if not rec.get("Original") or not rec.get("Anonymized"):
            raise DataError("missing Original or Anonymized", path=str(mapping_path), row=row)
        code_to_file[Path(rec["Anonymized"]).stem] = rec["Original"]
    totals: dict[str, list[float]] = defaultdict(list)
    systems: dict[str, str] = {}
    raters: dict[str, set[str]] = defaultdict(set)
    for row, rec in enumerate(csv.DictReader(read_text(ratings_path).splitlines(), delimiter=";"), start=2):
        code = rec.get("story_id") or ""
        if code not in code_to_file:
            raise DataError(f"unknown story code {code!r}", path=str(ratings_path), row=row)
        try:
            totals[code].append(sum(float(rec[k]) for k in RUBRIC))
        except (KeyError, TypeError, ValueError):
            raise DataError("a rubric score is missing or not a number", path=str(ratings_path), row=row) from None
        systems[code] = rec["story_id_original"]
        raters[code].add(rec["user"])
    by_raters: dict[frozenset[str], list[str]] = defaultdict(list)
    for code, users in raters.items():
        by_raters[frozenset(users)].append(code)
    groups = []
    for n, (_users, codes) in enumerate(sorted(by_raters.items(), key=lambda kv: sorted(kv[0])), start=1):
        stories = []
        for code in sorted(codes):
            text = read_text(folder / "stories" / code_to_file[code], ("utf-8", "cp1252")).strip()
            if not text:
                raise DataError("empty story", path=str(folder / "stories" / code_to_file[code]))
            stories.append(GroupStory(code, f"group{n}", systems[code], text, sum(totals[code]) / len(totals[code])))
        groups.append(_split_reference(stories, lambda s: s.source == reference_source, str(ratings_path)))
    return groups


def load_reference_jsonl(path: Path) -> list[StoryGroup]:
    return groups_from_records(read_jsonl(Path(path)), Path(path))


def groups_from_records(records: Iterable[tuple[int, dict]], path: Path) -> list[StoryGroup]:
    """Story groups (one reference each) from (row number, record) rows; bad rows name their row."""
    stories: dict[str, list[tuple[GroupStory, bool]]] = defaultdict(list)
    seen: dict[str, int] = {}      # id -> its first row (`first_use`)
    for n, rec in records:
        group, item = id_text(rec, "group", path, n), id_text(rec, "item_id", path, n)
        require(rec, {"text": str, "human_score": (int, float)}, path, n)
        first_use(seen, item, "item_id", path, n)
        is_ref = rec.get("reference", False)
        if not isinstance(is_ref, bool):
            raise DataError("field 'reference' must be true or false", path=str(path), row=n)
        story = GroupStory(item, group, optional_text(rec, "source"), rec["text"], float(rec["human_score"]))
        stories[story.group].append((story, is_ref))
    if not stories:
        raise DataError("no stories", path=str(path))
    groups = []
    for _, items in stories.items():                 # file order: `--limit N` takes the first N groups
        refs = {story.item_id for story, is_ref in items if is_ref}
        groups.append(_split_reference([story for story, _ in items], lambda s, refs=refs: s.item_id in refs, str(path)))
    return groups


def _split_reference(stories: list[GroupStory], is_reference, where: str) -> StoryGroup:
    refs = [s for s in stories if is_reference(s)]
    if len(refs) != 1:
        raise DataError(f"group {stories[0].group}: expected exactly one reference story, found {len(refs)}",
                        path=where)
    candidates = tuple(s for s in stories if s is not refs[0])
    if not candidates:               # nothing to compare with its reference: the group went unjudged in silence
        raise DataError(f"group {stories[0].group}: only its reference story, no candidate to judge beside it",
                        path=where)
    return StoryGroup(refs[0].group, refs[0], candidates)
