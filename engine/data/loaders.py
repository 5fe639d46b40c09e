"""Dataset loading goes through one registry: a card names its `loader`, a protocol asks for the
kind of data it reads, and `load_dataset(card, kind)` finds the reader registered for that pair.

Kinds: `ttcw` (stories, tests, expert verdicts), `pairs` (two texts and the human preference),
`items` (rated items in groups), `groups` (story groups with one reference each). A new format is
one reader (a function `(location, card) -> data`) plus one `LOADERS.add` line.
"""
from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError, DataError, Setting
from ..core.paths import prompts_root
from ..core.registry import BUILT_IN, Registry
from .cards import DatasetCard
from .items import items_from_records, load_aut, load_confederacy_items, load_rated_jsonl, load_ttcw_items
from .pairs import PairsFile, load_litbench_csv, pairs_from_confederacy, pairs_from_records, pairs_from_ttcw
from .plugin_data import Loader, from_plugin
from .reference import groups_from_records, load_confederacy, load_reference_jsonl
from .table import checked, in_columns, mapped
from .ttcw import load_ttcw

Reader = Callable[[Path, DatasetCard], Any]
# Another distribution adds a reader under the entry-point group `litjudge.loaders`, named
# `LOADER.KIND` (e.g. `myformat.pairs = "mypkg.read:pairs"`); a card (or an inline [dataset]) with
# `loader = "myformat"` then feeds every protocol that reads that kind.
LOADERS: Registry[Reader] = Registry("dataset loader", group="litjudge.loaders")


def _ttcw(location: Path, card: DatasetCard):
    steps = prompts_root() / "ttcw_llm_instructions.json"
    return load_ttcw(location, steps if steps.exists() else None, require_labels=False)


def _file(location: Path, name: str) -> Path:
    return location / name if location.is_dir() else location


LOADERS.add("ttcw.ttcw", _ttcw)
LOADERS.add("ttcw.pairs", lambda loc, card: pairs_from_ttcw(loc))
LOADERS.add("ttcw.items", lambda loc, card: load_ttcw_items(loc))
LOADERS.add("confederacy.groups", lambda loc, card: load_confederacy(loc))
LOADERS.add("confederacy.items", lambda loc, card: load_confederacy_items(loc))
LOADERS.add("confederacy.pairs", lambda loc, card: pairs_from_confederacy(loc))
LOADERS.add("aut_ocsai.items", lambda loc, card: load_aut(_file(loc, "test.jsonl")))
LOADERS.add("rated_items_jsonl.items", lambda loc, card: load_rated_jsonl(loc, card.category_order))
LOADERS.add("pairs_jsonl.pairs", lambda loc, card: PairsFile(loc))                # streamed as read
LOADERS.add("litbench_csv.pairs", lambda loc, card: load_litbench_csv(loc))
LOADERS.add("reference_jsonl.groups", lambda loc, card: load_reference_jsonl(loc))
LOADERS.add("table.pairs", lambda loc, card: TablePairs(card, loc))                        # streamed as read
LOADERS.add("table.items", lambda loc, card: _named(card, lambda: items_from_records(
    mapped(card, loc, "items"), loc, card.category_order)))
LOADERS.add("table.groups", lambda loc, card: _named(card, lambda: groups_from_records(mapped(card, loc, "groups"), loc)))


def _named(card: DatasetCard, read: Callable[[], Any]) -> Any:
    try:
        return read()
    except DataError as exc:
        raise in_columns(card, exc) from None


class TablePairs:
    """Pairs of a table, read (and checked) each time they are iterated."""

    def __init__(self, card: DatasetCard, location: Path):
        self.card, self.location = card, location

    def __iter__(self):
        return checked(self.card, pairs_from_records(mapped(self.card, self.location, "pairs"), self.location))


# Loaders that read a folder of several files (what the folder holds), not one file.
FOLDER_LOADERS = {"ttcw": "stories.json, tests.json, expert_majority.json, ...",
                  "confederacy": "stories/, user_ratings.csv, mapping-grouped.csv"}
_CACHE: dict[tuple, Any] = {}


def _stamp(location: Path) -> tuple:
    """What the cache compares: every file's path, size and modification time."""
    if location.is_file():
        st = location.stat()
        return ((str(location), st.st_size, st.st_mtime_ns),)
    out = []
    for root, _, files in os.walk(location):
        for f in files:
            st = os.stat(os.path.join(root, f))
            out.append((os.path.join(root, f), st.st_size, st.st_mtime_ns))
    return tuple(sorted(out))


def _card_key(card: DatasetCard) -> str:
    return json.dumps(dataclasses.asdict(card), sort_keys=True, default=str)


def kinds_of(card: DatasetCard) -> list[str]:
    """The kinds of data a card's loader gives (what protocols it can feed)."""
    return sorted(n.split(".", 1)[1] for n in LOADERS.names() if n.startswith(card.loader + "."))


def load_dataset(card: DatasetCard, kind: str, location: Path) -> Any:
    """The card's data of `kind`, read once per content (a sweep aggregates the same data many times)."""
    name = f"{card.loader}.{kind}"
    if name not in LOADERS:
        kinds = kinds_of(card)
        raise ConfigError(f"dataset {card.name!r} (loader {card.loader!r}) gives no {kind}; it gives "
                          f"{', '.join(kinds) or 'nothing (unknown loader)'}", parameter="dataset")
    if not location.exists() and not card.hub:
        if card.name == "inline":
            raise DataError(("the ", Setting("dataset.path"), " does not exist"), path=str(location))
        raise DataError(f"dataset {card.name!r} is not at {location}" + (
            f": run `litjudge data fetch {card.name}` (from {card.upstream['repository']}, verified)" if card.upstream
            else " (set --data-root or LITJUDGE_DATA_ROOT)"))
    if not card.hub and not location.is_file() and not location.is_dir():
        # a device or a pipe: /dev/zero read as JSONL grew until the kernel killed the run, a FIFO waited forever
        raise DataError("is not a regular file or folder (a device or a pipe?): give a data file", path=str(location))
    if card.loader in FOLDER_LOADERS and location.is_file():
        raise DataError(f"dataset {card.name!r} (loader {card.loader!r}) reads a folder ({FOLDER_LOADERS[card.loader]}), "
                        "not a file: give the folder, or a config whose dataset layout reads files (e.g. "
                        "pairs-generic, rated-items-generic, reference-generic, or an inline [dataset])",
                        path=str(location))
    # the card is part of the key: the same file read with another columns / values map is other data
    # (a call mapping a column the file lacks must fail, not get the rows an earlier mapping made)
    key = (name, str(location), _card_key(card), _stamp(location) if location.exists() else ())
    if key not in _CACHE:
        if len(_CACHE) > 16:
            _CACHE.clear()
        reader, origin = LOADERS.get(name), LOADERS.origin(name)
        _CACHE[key] = reader(location, card) if origin == BUILT_IN else \
            from_plugin(Loader(name, origin), lambda: reader(location, card))      # untrusted: checked, normalised
    return _CACHE[key]
