"""Dataset cards (`datasets/*.toml`): declarative, validated at load. A card says where the files
are (relative to the data root, or inside the project for the demo sample), the license and
source, which loader reads it, and which protocols it feeds."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .config import build
from .errors import ConfigError
from .paths import cards_dir, data_root


@dataclass(frozen=True)
class DatasetCard:
    name: str
    title: str
    loader: str                       # which loader reads it (e.g. "ttcw")
    path: str                         # folder, relative to `root`
    root: str = "data"                # "data": the data root; "project": this repository
    source: str = ""
    license: str = ""
    citation: str = ""
    protocols: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)      # file -> what it holds
    fields: dict[str, str] = field(default_factory=dict)     # litjudge field -> dataset field
    category_order: list[str] = field(default_factory=list)  # ground-truth categories, worst first
    labels: bool = True               # the data carries human labels (a missing label file is then worth a warning)
    notes: str = ""

    def folder(self, root_override: str = "") -> Path:
        if self.root == "project":
            return cards_dir() / self.path
        return Path(root_override or data_root()) / self.path


def load_card(name: str) -> DatasetCard:
    path = cards_dir() / f"{name}.toml"
    if not path.exists():
        known = sorted(p.stem for p in cards_dir().glob("*.toml"))
        raise ConfigError(f"unknown dataset {name!r} (cards: {', '.join(known)})", key="dataset")
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", where=str(path)) from None
    card = build(DatasetCard, table, str(path))
    if card.root not in ("data", "project"):
        raise ConfigError("must be 'data' or 'project'", where=str(path), key="root")
    return card
