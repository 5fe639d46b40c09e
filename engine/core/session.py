"""One invocation's settings, passed down explicitly: where run folders go, which verdict cache is
shared, where litjudge's own files (logs, crash reports) are kept, and how the console talks. The
console builds one from its flags, `litjudge.judge` / `litjudge.run` one per call from their
arguments; everything else takes the Session it is given. Two calls in two threads with different
`out=` / `cache=` therefore never see each other's settings, and nothing writes the environment to
pass them on (the environment is only read, in engine.core.envs, for the defaults).

Process-wide settings stay in `envs` and are read where they are used: the model cache
(`paths.model_cache_dir`), the data and prompts roots (a run's own `data_root` overrides the data
root per config), the planner process switch, the lock wait.

The session also carries what the invocation has spent on API judges (`Spend`): every API judge of
it (a run's, a sweep's, an ensemble's member runs') is attached to this one total, which the
budget caps (`[api] max_cost_usd`, `max_tokens_total`) hold for, so two judges under one cap spend
it once, whichever entry (console, `litjudge.run`, `litjudge.judge`) started them."""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import envs
from .console import say
from .paths import cache_dir, runs_output_dir

CACHE_FILE = "verdicts.sqlite"
_SAID: set[str] = set()          # the misspelt variables this process has named


@dataclass
class Spend:
    """What one invocation has spent on API judges: the budget caps hold for this total, not per
    judge (two judges under one $1 cap spend $1 between them, not $2). Shared by the judges'
    worker threads."""

    tokens: int = 0
    dollars: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    # provider batches submitted and not yet read: batch id -> their worst case (tokens, dollars), held
    # against the caps until their results are counted (a batch left open by a failed poll let the
    # next judge submit a second full cap)
    reserved: dict[str, tuple[int, float]] = field(default_factory=dict, repr=False, compare=False)

    def add(self, tokens: int, dollars: float) -> None:
        with self.lock:
            self.tokens += tokens
            self.dollars += dollars

    def reserve(self, batch: str, tokens: int, dollars: float) -> None:
        with self.lock:
            self.reserved[batch] = (tokens, dollars)

    def release(self, batch: str) -> None:
        with self.lock:
            self.reserved.pop(batch, None)

    def held(self) -> tuple[int, float]:
        """Spent and reserved, tokens and dollars: what the caps are held against."""
        with self.lock:
            return (self.tokens + sum(t for t, _ in self.reserved.values()),
                    self.dollars + sum(d for _, d in self.reserved.values()))


@dataclass(frozen=True)
class Session:
    runs_dir: Path                 # run folders are runs_dir / NAME
    verdict_cache: Path | None     # the shared verdict cache's file; None: off
    cache_dir: Path                # console logs and crash reports (engine.core.paths.cache_dir)
    progress: bool = True          # progress bars
    verbose: bool = False          # third-party messages on the terminal rather than in a log
    # the invocation's API spend, one per Session (so one per command or call; `quiet()` shares it)
    spend: Spend = field(default_factory=Spend, compare=False, repr=False)

    @classmethod
    def current(cls, *, out: str | Path | None = None, cache: bool | str | Path | None = None,
                progress: bool = True, verbose: bool = False) -> Session:
        """The settings of one invocation: `out` (a folder for run folders) and `cache` (True or
        None: the environment's or the default verdict cache; False: none; a path: that file, or a
        folder to hold verdicts.sqlite) as given, everything else from the environment."""
        for line in envs.misspelt():
            if line not in _SAID:                # once a process: a notebook's every call said it again
                _SAID.add(line)
                say(f"litjudge: warning: {line}", logging.WARNING)
        runs = Path(out).expanduser().resolve() if out is not None else runs_output_dir().resolve()
        if cache is False:
            shared = None
        elif cache is None or cache is True:
            shared = verdict_cache_path(envs.LITJUDGE_VERDICT_CACHE, cache_dir())
        else:
            shared = verdict_cache_path(str(cache), cache_dir())
        return cls(runs, shared, cache_dir(), progress, verbose)

    def run_dir(self, name: str) -> Path:
        return self.runs_dir / name

    def quiet(self) -> Session:
        return replace(self, progress=False)


def verdict_cache_path(value: str, default_folder: Path) -> Path | None:
    """The verdict cache a setting names: None for off; a folder (one that exists, or a path
    written with a trailing slash) holds verdicts.sqlite; anything else is the file itself."""
    text = value.strip()
    if text.lower() in envs.OFF:
        return None
    if not text:
        return default_folder / CACHE_FILE
    path = Path(text).expanduser().resolve()
    folder = path.is_dir() or text.endswith(("/", "\\"))
    return path / CACHE_FILE if folder else path
