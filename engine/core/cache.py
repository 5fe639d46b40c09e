"""One verdict cache per user, shared by every run: the same content key is the same verdict
whichever run folder asks for it, so a second output folder for the same config (`--out`), or
another config that shares requests, generates nothing already generated anywhere. Each run
folder still keeps its own complete copy of every verdict it used (its store.sqlite), so a run
folder stands alone, and reparse and report read only it.

Where: `LITJUDGE_VERDICT_CACHE` (a file; `off` disables it), `--cache PATH` / `--no-cache` on the
command line, else ~/.cache/litjudge/verdicts.sqlite. Concurrent runs share it safely: it is a
store like any other (WAL, one transaction per write, a locked writer waits). Recorded (replay)
judges are not cached: their answers are already on disk.
"""
from __future__ import annotations

import os
from pathlib import Path

from .paths import cache_dir
from .store import Store

OFF = ("off", "0", "no", "none", "false")


def verdict_cache_path() -> Path | None:
    """The shared cache's file, or None when it is switched off."""
    value = os.environ.get("LITJUDGE_VERDICT_CACHE", "")
    if value.strip().lower() in OFF:
        return None
    return Path(value).expanduser() if value else cache_dir() / "verdicts.sqlite"


def open_verdict_cache() -> Store | None:
    path = verdict_cache_path()
    return None if path is None else Store.open(path)
