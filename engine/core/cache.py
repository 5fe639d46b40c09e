"""One verdict cache per user, shared by every run: the same content key is the same verdict
whichever run folder asks for it, so a second output folder for the same config (`--out`), or
another config that shares requests, generates nothing already generated anywhere. Each run
folder still keeps its own complete copy of every verdict it used (its store.sqlite), so a run
folder stands alone, and reparse and report read only it.

Where: the invocation's Session says (engine.core.session: `--cache PATH` / `--no-cache` on the
command line, `cache=` in Python, else `LITJUDGE_VERDICT_CACHE`: a file, or a folder to hold
verdicts.sqlite, `off` disables it; else ~/.cache/litjudge/verdicts.sqlite).
Concurrent runs share it safely: it is a store like any other (WAL, one transaction per write, a
locked writer waits). Recorded (replay) judges are not cached: their answers are already on disk.
"""
from __future__ import annotations

from pathlib import Path

from .console import terminal
from .errors import LitjudgeError
from .store import Store


def open_verdict_cache(path: Path | None) -> Store | None:
    """The shared cache, or None when it is off or cannot be opened: a corrupt, unreadable, locked,
    read-only or full cache is set aside for this run with one warning (naming the file, how to
    move it aside, and --cache / --no-cache); the run's own store has every verdict it needs.
    `path`: the Session's `verdict_cache` (None: off)."""
    if path is None:
        return None
    try:
        return Store.open(path)
    except LitjudgeError as exc:
        reason = str(exc).split(";")[0]          # what is wrong, without a store's own remedies
        print(f"litjudge: warning: the shared verdict cache is left aside for this run ({reason}); to start a new one, "
              f"move {path} away (e.g. mv {path} {path}.bad), or choose another with --cache PATH, or run with "
              "--no-cache", file=terminal())
        return None
