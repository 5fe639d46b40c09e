"""A plugin's dataset loader is untrusted input: what it returns is checked and its labels are
normalised as litjudge's own readers normalise a file's ("A" and " Tie" are the pair labels a and
tie; "yes" is a TTCW majority's Yes; a category in another case is the category of that name). Left
as they were, labels in another case matched no verdict and scored 0.000 in both orders, exit 0; a
loader returning tuples met a protocol's attribute access and was reported as litjudge's own bug.
Every refusal is one PluginError naming the loader, its distribution and the type expected."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..core.errors import DataError, LitjudgeError, PluginError
from ..core.registry import Origin
from .items import ItemSet, RatedItem
from .pairs import LABELS, Pair, as_label
from .readers import first_use, missing_value, require
from .reference import GroupStory, StoryGroup
from .ttcw import TTCWData

# What a loader of each kind returns (the built-in readers' types), as the refusal names it.
EXPECTED = {"pairs": "an iterable of litjudge.engine.data.pairs.Pair",
            "items": "a litjudge.engine.data.items.ItemSet of RatedItem",
            "groups": "a list of litjudge.engine.data.reference.StoryGroup",
            "ttcw": "a litjudge.engine.data.ttcw.TTCWData"}


@dataclasses.dataclass(frozen=True)
class Loader:
    """Who read the data: the loader's registered name (`LOADER.KIND`) and its distribution."""

    name: str
    origin: Origin

    @property
    def kind(self) -> str:
        return self.name.partition(".")[2]

    def refuse(self, why: str) -> PluginError:
        return PluginError(f"dataset loader {self.name!r} of {self.origin} {why}; fix or uninstall "
                           f"{self.origin.distribution}")

    def wrong(self, got: Any, where: str = "") -> PluginError:
        expected = EXPECTED.get(self.kind, "the kind's own type")
        return self.refuse(f"returned {_a(got)}{where}, where {expected} is expected")


# The fields a file's reader requires of each row, required of a loader's objects: ids and texts
# non-empty text, scores finite numbers (a NaN human score was counted in `items` and left out of
# the Spearman beside it; a duplicate id merged two items' verdicts; a number as a text was judged).
PAIR_FIELDS = {"pair_id": str, "prompt": str, "text_a": str, "text_b": str}
TEXT_FIELDS = {"item_id": str, "group": str, "text": str}      # a rated item's, a reference group's story's


def _as_a_file_row(loader: Loader, what: str, k: int, obj: Any, fields: dict[str, Any], seen: dict[str, int]) -> None:
    """`obj` (the loader's `k`th `what`) checked as a file's row: `fields` as `require` checks them,
    a human score present a finite number, its id used once (`seen`)."""
    rec = {name: getattr(obj, name) for name in (*fields, "human_score") if hasattr(obj, name)}
    if rec.get("human_score") is not None:
        fields = {**fields, "human_score": (int, float)}
    name = next(iter(fields))
    try:
        require(rec, fields, Path(loader.name), k)
        first_use(seen, rec[name], name, Path(loader.name), k)
    except DataError as e:
        said = e.message.replace("(first on line", f"(first as {what}")
        raise loader.refuse(f"gave {what} {k} ({getattr(obj, name)!r:.40}): {said}") from None


def from_plugin(loader: Loader, read: Callable[[], Any]) -> Any:
    """A plugin loader's data, read by `read`, checked and with its labels normalised. What the
    loader raises (other than litjudge's own one-line errors) is its own failure, named so."""
    try:
        data = read()
    except LitjudgeError:
        raise
    except Exception as exc:  # noqa: BLE001  (whatever someone else's reader raises is reported in one line)
        why = str(exc).splitlines()[0][:200] if str(exc) else ""
        raise loader.refuse(f"failed: {type(exc).__name__}{': ' + why if why else ''}") from None
    check = CHECKS.get(loader.kind)
    return check(loader, data) if check else data


class PluginPairs:
    """A plugin's pairs, each checked (and its label normalised) as it is iterated: pairs stream
    as a file's do; a one-shot iterator is kept as a list so every pass sees every pair."""

    def __init__(self, loader: Loader, pairs: Iterable[Any]):
        self.loader = loader
        self.pairs = list(pairs) if isinstance(pairs, Iterator) else pairs

    def __iter__(self) -> Iterator[Pair]:
        seen: dict[str, int] = {}
        for k, pair in enumerate(self.pairs, start=1):
            if not isinstance(pair, Pair):
                raise self.loader.wrong(pair, f" as pair {k}")
            _as_a_file_row(self.loader, "pair", k, pair, PAIR_FIELDS, seen)
            unknown = missing_value(pair.label)
            label = None if unknown or not isinstance(pair.label, str) else as_label(pair.label)
            if label is None and not unknown:
                raise self.loader.refuse(f"gave pair {pair.pair_id!r} the label {pair.label!r:.40}, which is none of "
                                         f"{list(LABELS)} (any case) or None (not known)")
            yield pair if label == pair.label else dataclasses.replace(pair, label=label)


def _pairs(loader: Loader, data: Any) -> PluginPairs:
    if isinstance(data, str | bytes | Mapping | Pair) or not isinstance(data, Iterable):
        raise loader.wrong(data)
    return PluginPairs(loader, data)


def _items(loader: Loader, data: Any) -> ItemSet:
    if not isinstance(data, ItemSet):
        raise loader.wrong(data)
    items = []
    by_case = {c.lower(): c for c in data.categories if isinstance(c, str)}
    seen: dict[str, int] = {}
    for k, item in enumerate(data.items, start=1):
        if not isinstance(item, RatedItem):
            raise loader.wrong(item, f" as item {k} of its ItemSet")
        _as_a_file_row(loader, "item", k, item, TEXT_FIELDS, seen)
        category = item.category
        if category is not None and data.categories and category not in data.categories:
            category = by_case.get(str(category).strip().lower())
            if category is None:
                raise loader.refuse(f"gave item {item.item_id!r} the category {item.category!r:.40}, which is none of "
                                    f"its ItemSet's categories {list(data.categories)}")
        items.append(item if category == item.category else dataclasses.replace(item, category=category))
    return dataclasses.replace(data, items=tuple(items))


def _groups(loader: Loader, data: Any) -> list[StoryGroup]:
    if isinstance(data, str | bytes | Mapping) or not isinstance(data, Iterable):
        raise loader.wrong(data)
    groups = list(data)
    seen: dict[str, int] = {}
    stories = 0
    for k, group in enumerate(groups, start=1):
        if not isinstance(group, StoryGroup):
            raise loader.wrong(group, f" as group {k}")
        for story in (group.reference, *group.candidates):
            if not isinstance(story, GroupStory):
                raise loader.refuse(f"returned {_a(story)} as a story of group {group.group!r}, where a "
                                    "litjudge.engine.data.reference.GroupStory is expected")
            stories += 1
            _as_a_file_row(loader, "story", stories, story, TEXT_FIELDS, seen)
    return groups


def _ttcw(loader: Loader, data: Any) -> TTCWData:
    if not isinstance(data, TTCWData):
        raise loader.wrong(data)
    majority = {}
    for key, verdict in data.majority.items():
        said = verdict.strip().capitalize() if isinstance(verdict, str) else verdict
        if said not in ("Yes", "No"):
            raise loader.refuse(f"gave story {key[0]!r}, test {key[1]} the majority verdict {verdict!r:.40}, which is "
                                "neither Yes nor No (any case)")
        majority[key] = said
    return dataclasses.replace(data, majority=majority)


CHECKS: dict[str, Callable[[Loader, Any], Any]] = {"pairs": _pairs, "items": _items, "groups": _groups, "ttcw": _ttcw}


def _a(value: Any) -> str:
    """A returned value as a refusal names it: its type, and a short view of it."""
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name} ({value!r:.60})"
