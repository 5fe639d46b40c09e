"""Where things live: the data root (shared datasets and paper prompts), the model cache, run outputs.

Each can be overridden by an environment variable (and the data root by `--data-root`); a variable
set to the empty string counts as unset (`LITJUDGE_CACHE= make run` must not write models into the
current folder).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from .errors import DataError

PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent


def _env_path(name: str, default: Path) -> Path:
    return Path(os.environ.get(name) or default)


def data_root() -> Path:
    """Human-labelled datasets (never copied into the project). `LITJUDGE_DATA_ROOT` overrides."""
    return _env_path("LITJUDGE_DATA_ROOT", PROJECT_ROOT.parent / "shared" / "datasets")


def prompts_root() -> Path:
    """The seed papers' prompts. `LITJUDGE_PROMPTS_ROOT` overrides."""
    return _env_path("LITJUDGE_PROMPTS_ROOT", data_root().parent / "prompts")


def paper_prompt(name: str) -> dict:
    """One entry of the seed papers' prompts (`paper_prompts.json` under the prompts root)."""
    path = prompts_root() / "paper_prompts.json"
    if not path.exists():
        raise DataError("paper prompts not found (set LITJUDGE_PROMPTS_ROOT)", path=str(path))
    return json.loads(path.read_text(encoding="utf-8"))[name]


def cache_dir() -> Path:
    """Converted model folders and downloaded wheels. `LITJUDGE_CACHE` overrides."""
    return _env_path("LITJUDGE_CACHE", Path.home() / ".cache" / "litjudge")


def cards_dir() -> Path:
    return PROJECT_ROOT / "datasets"


def runs_output_dir() -> Path:
    """Run outputs (git-ignored). `LITJUDGE_RUNS_DIR` overrides."""
    return _env_path("LITJUDGE_RUNS_DIR", PROJECT_ROOT / "runs" / "out")
