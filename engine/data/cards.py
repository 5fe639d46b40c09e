"""Dataset cards (`datasets/*.toml`): declarative, validated at load. A card says where the files
are (relative to the data root, or inside the project for the demo sample), the license and
source, which loader reads it (and so which kinds of data it gives: a protocol reads a kind)."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..core.config import source_folder
from ..core.errors import ConfigError
from ..core.paths import cards_dir, data_root
from ..core.schema import FieldError, build, check_choices


@dataclass(frozen=True)
class DatasetCard:
    name: str                         # the card's name (`dataset = "NAME"`); inline tables: "inline"
    title: str                        # a human title, shown by `litjudge data list` and the report
    loader: str                       # which loader reads it (e.g. "ttcw")
    path: str                         # folder, relative to `root`
    root: Literal["data", "project", "card"] = "data"   # "data": the data root; "project": shipped samples;
                                                        # "card": beside the card
    source: str = ""                  # where the data comes from (documentation)
    license: str = ""                 # the data's license (documentation)
    citation: str = ""                # the paper to cite (documentation)
    protocols: list[str] = field(default_factory=list)     # documentation: the protocols it was made for (any
                                                           # protocol reading a kind its loader gives runs on it)
    files: dict[str, str] = field(default_factory=dict)      # file -> what it holds
    fields: dict[str, str] = field(default_factory=dict)     # documentation: litjudge field -> where it comes from
    category_order: list[str] = field(default_factory=list)  # ground-truth categories, worst first
    labels: bool = True               # the data carries human labels (a missing label file is then worth a warning)
    notes: str = ""                   # anything else a user should know (documentation)

    # The public source, for `litjudge data fetch`: repository, pinned commit, and per local file its
    # upstream path and sha256 (`files`), or the converter that derives it from another (`derived`).
    upstream: dict[str, Any] = field(default_factory=dict)
    # The `table` loader (your own data): the format (jsonl, csv, parquet, arrow; by default from the
    # file), a hub dataset {id, revision}, the split, and value renames per field ({label: {model_a: a}}).
    format: Literal["", "jsonl", "csv", "parquet", "arrow"] = ""
    hub: dict[str, str] = field(default_factory=dict)        # a hub dataset {id, revision} instead of `path`
    split: str = ""                   # the split of a hub or saved dataset
    values: dict[str, dict[str, str]] = field(default_factory=dict)   # renames per field: {label = {model_a = "a"}}
    # The `table` loader's renames: litjudge field -> the user's column (or "=constant").
    columns: dict[str, str] = field(default_factory=dict)
    base: str = ""                    # set by the loader: the folder of the card file ("card" roots)

    def __post_init__(self) -> None:
        check_choices(self)
        # a category named twice has two ranks: which one its items take is not the user's to guess
        twice = next((c for c in self.category_order if self.category_order.count(c) > 1), None)
        if twice is not None:
            raise FieldError("category_order", f"{twice!r} is named twice; name each category once, worst first")

    def folder(self, root_override: str = "") -> Path:
        """Where the data is: `path` under the data root, the shipped samples, or the card's folder."""
        if Path(self.path).is_absolute():
            return Path(self.path)
        if self.root == "project":
            return cards_dir() / self.path
        if self.root == "card":
            return Path(self.base) / self.path
        return Path(root_override or data_root()) / self.path


GENERIC = ("pairs_jsonl", "rated_items_jsonl", "reference_jsonl")    # the `table` loader reads these layouts too


def dataset_card(dataset: str | dict[str, Any], source: str = "", protocol: str = "") -> DatasetCard:
    """A run config's dataset: a shipped card by name, a card file (relative to the config file),
    or an inline [dataset] table (loader `table` by default; paths relative to the config file)."""
    config_dir = source_folder(source)
    if isinstance(dataset, dict):
        table = {"name": "inline", "title": "inline dataset", "loader": "table", "root": "card",
                 "protocols": [protocol] if protocol else [], **dataset}
        return build(DatasetCard, table, source or "config", prefix="dataset.", base=str(config_dir))
    if dataset.endswith(".toml") and not Path(dataset).is_absolute() and (config_dir / dataset).exists():
        return load_card(str(config_dir / dataset))
    return load_card(dataset)


def with_data(card: DatasetCard, file: str) -> dict[str, Any]:
    """The card's layout (fields, values, categories) over another file (`litjudge run --data FILE`),
    as an inline dataset table."""
    loader = "table" if card.loader in GENERIC else card.loader
    keep = ("title", "protocols", "category_order", "columns", "values", "labels", "split")
    return {"name": card.name, **{k: getattr(card, k) for k in keep}, "loader": loader,
            "path": str(Path(file).resolve()), "root": "card"}


def load_card(name: str) -> DatasetCard:
    """A shipped card by name (`datasets/NAME.toml`), or a card file anywhere (a path ending in .toml,
    whose data paths are then relative to the card file unless it says `root`)."""
    by_path = name.endswith(".toml") or "/" in name
    path = Path(name).expanduser() if by_path else cards_dir() / f"{name}.toml"
    if not path.exists():
        if by_path:
            raise ConfigError(f"dataset card {str(path)!r} not found", parameter="dataset")
        known = sorted(p.stem for p in cards_dir().glob("*.toml"))
        raise ConfigError(f"unknown dataset {name!r} (cards: {', '.join(known)}; or give a card file's path)",
                          parameter="dataset")
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", where=str(path)) from None
    except (UnicodeDecodeError, IsADirectoryError):
        raise ConfigError("not a TOML card file", where=str(path)) from None
    if by_path:
        table.setdefault("root", "card")
    return build(DatasetCard, table, str(path), base=str(path.resolve().parent))
