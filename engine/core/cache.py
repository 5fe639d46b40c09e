"""One verdict cache per user, shared by every run: the same content key is the same verdict
whichever run folder asks for it, so a second output folder for the same config (`--out`), or
another config that shares requests, generates nothing already generated anywhere. Each run
folder still keeps its own complete copy of every verdict it used (its store.sqlite), so a run
folder stands alone, and reparse and report read only it.

Where: the invocation's Session says (engine.core.session: `--cache PATH` / `--no-cache` on the
command line, `cache=` in Python, else `LITJUDGE_VERDICT_CACHE`: a file, or a folder to hold
verdicts.sqlite, `off` disables it; else verdicts.sqlite in LITJUDGE_CACHE, ~/.cache/litjudge by
default). A path ending in `/`, or naming a folder, is a folder: the cache is verdicts.sqlite inside
it. The file is marked as a verdict cache (`claim_role`): a run folder's store.sqlite is refused as
one, and the other way round.
Concurrent runs share it safely: it is a store like any other (WAL, one transaction per write, a
locked writer waits). Recorded (replay) judges are not cached: their answers are already on disk.
"""
from __future__ import annotations

import logging
from pathlib import Path

from .console import say
from .errors import ConfigError, LitjudgeError
from .store import Store

ROLES = {"run": "a run folder's store", "cache": "a verdict cache"}


def claim_role(store: Store, role: str, mark: bool = True) -> Store:
    """`store` as `role` ("run" or "cache"), by what its meta note `role` says the file is: the other
    is refused in one line (`--cache RUN/store.sqlite` wrote other runs' verdicts into that run's
    store), the store closed. A store written before the notes is a run's when it holds a plan (a cache
    never does); one without either is marked `role` here (`mark`: not when opened to read only)."""
    found = store.meta("role") or ("run" if store.has_results("plan") else None)
    if found is None and mark:
        found = store.meta("role", role)
    if found is not None and found != role:
        store.close()
        fix = ("give --cache (or LITJUDGE_VERDICT_CACHE) a new file, or a folder to hold verdicts.sqlite" if role == "cache"
               else "give the run an output folder of its own (--out)")
        raise ConfigError(f"{store.path} is {ROLES.get(found, found)}, not {ROLES[role]}: {fix}")
    return store


def warn_left_aside(path: Path, exc: LitjudgeError) -> None:
    """The one warning for a cache this run goes on without: what is wrong, and a fix that concerns the
    cache (never the run's folder): a corrupt file moved away, else another cache or none."""
    reason = str(exc).split(";")[0]          # what is wrong, without a store's or folder's own remedies
    fix = (f"to start a new one, move {path} away (e.g. mv {path} {path}.bad), or choose another with --cache PATH "
           "(cache= in Python)" if "corrupt" in reason or "layout" in reason else
           "choose a cache this run may write with --cache PATH (cache= in Python, or LITJUDGE_VERDICT_CACHE)")
    say(f"litjudge: warning: the shared verdict cache is left aside for this run ({reason}); {fix}, or run "
        "with --no-cache (cache=False)", logging.WARNING)


def leave_aside(cache: Store, exc: LitjudgeError) -> None:
    """A cache that failed after it opened (to write; to read, damaged past its first pages): the one
    warning, and marked so the invocation's later judges and reads skip it."""
    warn_left_aside(cache.path, exc)
    cache.left_aside = True


def open_verdict_cache(path: Path | None, readonly: bool = False) -> Store | None:
    """The shared cache at `path` (the Session's `verdict_cache`; None: off), or None when it is off,
    absent (read only: nothing to read) or cannot be opened: a corrupt, unreadable, locked, read-only
    or full cache is set aside for this run with one warning; the run's own store has every verdict it
    needs. A file that is not a verdict cache (a run folder's store) is refused in one line: writing
    into it would change that run."""
    if path is None or readonly and not path.exists():
        return None
    try:
        return claim_role(Store.open(path, create=not readonly, readonly=readonly), "cache", mark=not readonly)
    except ConfigError:
        raise
    except LitjudgeError as exc:
        warn_left_aside(path, exc)
        return None
