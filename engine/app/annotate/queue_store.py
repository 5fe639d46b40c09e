"""The queue of a run folder with its store, opened once for the app, the console's import and
export, and a later run that uses the labels (`[ppi] labelled = "annotations:RUN"`): settings not
given are the stored queue's, so a started queue reopens as it was drawn."""
from __future__ import annotations

import hashlib
import math
import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...core.errors import ConfigError, Option
from .labels import FILE, Labels, open_labels, stored_design
from .queue import FloorBy, PairsBy, Queue, build_queue

DEFAULT_BUDGET = 50


# Each option as the console and Python name it (a message says `--lock` to one, `lock_seconds` to the other).
OPTIONS = {"budget": Option("--budget", "budget"), "floor": Option("--floor", "floor"), "seed": Option("--seed", "seed"),
           "per_item": Option("--per-item", "per_item"), "lock_seconds": Option("--lock", "lock_seconds"),
           "host": Option("--host", "host"), "port": Option("--port", "port"),
           "new_token": Option("--new-token", "new_token")}


def _whole(value: Any) -> bool:
    """An integer, Python's or numpy's (a Python caller's np.int64), never a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _real(value: Any) -> bool:
    """A finite real number, Python's or numpy's, never a bool (as a rubric's human numbers)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


MAX_BUDGET = 1_000_000       # draws: 10**12 asked numpy for 7.28 TiB of draw indices


@dataclass(frozen=True)
class Options:
    """How a queue is drawn and served, checked here for the console and Python alike: each wrong
    value is one line naming its option (a NaN lock used to fail every request with a bare 500, a
    negative one turned the locks off, a port past 65535 was an internal error)."""

    budget: int | None = None
    floor: float | None = None
    seed: int | None = None
    per_item: int | None = None              # None: the queue's last given, else 1 (`per_item`)
    lock_seconds: float = 600.0
    host: str = "127.0.0.1"
    port: int = 8765
    new_token: bool = False                  # beyond loopback: replace the queue's kept token (revoke it)

    def __post_init__(self) -> None:
        for name, ok, need in (
                ("budget", self.budget is None or (_whole(self.budget) and 1 <= self.budget <= MAX_BUDGET),
                 f"a whole number from 1 to {MAX_BUDGET:,}"),
                ("floor", self.floor is None or (_real(self.floor) and 0.0 < self.floor <= 1.0), "a number in (0, 1]"),
                ("seed", self.seed is None or (_whole(self.seed) and self.seed >= 0), "a whole number >= 0"),
                ("per_item", self.per_item is None or (_whole(self.per_item) and self.per_item >= 1), "a whole number >= 1"),
                ("lock_seconds", _real(self.lock_seconds) and self.lock_seconds > 0, "a number of seconds > 0"),
                ("host", isinstance(self.host, str) and bool(self.host.strip()), "an address (127.0.0.1, ::1, 0.0.0.0)"),
                ("port", _whole(self.port) and 0 <= self.port <= 65535, "a port from 0 to 65535 (0: a free one)"),
                ("new_token", isinstance(self.new_token, bool), "True or False")):
            if not ok:
                raise ConfigError([OPTIONS[name], f" must be {need}, got {getattr(self, name)!r}"])
        # numpy's numbers as Python's: they are stored as JSON (np.int64(5) failed there, after the
        # store was made)
        for name in ("budget", "seed", "per_item", "port"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, int(getattr(self, name)))
        for name in ("floor", "lock_seconds"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, float(getattr(self, name)))


@dataclass(frozen=True)
class Settings:
    budget: int
    floor: float
    seed: int
    floor_by: FloorBy                        # a queue stored before the floor went by size: uniform
    pairs_by: PairsBy                        # as a stored pairwise queue was drawn (queue.PairsBy)


def settings(run: Path, options: Options) -> Settings:
    """Budget, floor and seed: those given, else the stored queue's, else the defaults; and how the
    stored queue's floor and pairs were drawn (a new queue's: by size, by P(text))."""
    was = stored_design(run)
    budget = options.budget if options.budget is not None else was.get("budget", DEFAULT_BUDGET)
    floor = options.floor if options.floor is not None else was.get("floor", 0.2)
    seed = options.seed if options.seed is not None else was.get("seed", 0)
    return Settings(budget, floor, seed, "uniform" if was and "floor_by" not in was else "size",
                    was.get("pairs_by", "picks") if was else "agreement")


def per_item(labels: Labels, options: Options, keep: bool = True) -> int:
    """Annotators per item: the one given, kept for the queue from now on; else the one last given
    (a page served with --per-item 2, then an import without it: the import took 1 and said the page
    did); else 1. `keep` False: an import not made yet, which keeps it once it is stored (a refused
    import kept it, and the next import and the page gave a second annotator stories of one)."""
    if options.per_item is not None:
        if keep:
            labels.set_meta("per_item", str(options.per_item))
        return options.per_item
    return int(labels.meta("per_item") or 1)


class QueueChanged(ConfigError):
    """The run's verdicts (or its items, or its protocol) changed since its queue was drawn: the
    queue cannot be served, its labels can still be exported (`open_stored`)."""


def open_stored(run: Path) -> Labels:
    """A started queue's store as it was drawn, without its run's queue (for its export)."""
    return Labels(Path(run) / FILE, (), np.empty(0), np.empty(0, dtype=np.int64), stored_design(run))


def open_queue(run: Path, options: Options) -> tuple[Queue, Labels]:
    """The run's queue and its store; settings not given are the stored queue's (or the defaults)."""
    s = settings(run, options)
    queue = build_queue(run, s.budget, floor=s.floor, seed=s.seed, floor_by=s.floor_by, pairs_by=s.pairs_by)
    ids = "\n".join(c.cluster for c in queue.clusters)
    design = {"budget": s.budget, "floor": s.floor, "seed": s.seed, "protocol": queue.protocol,
              "clusters": hashlib.sha256(ids.encode()).hexdigest()[:16],
              **({"floor_by": "size"} if s.floor_by == "size" else {}),       # a store of before keeps its own
              **({"pairs_by": s.pairs_by} if s.pairs_by != "picks" else {})}
    was = stored_design(run)
    moved = [k for k in ("protocol", "clusters") if was and k in was and was[k] != design[k]]
    if moved:        # the run's, not a setting: refused as a changed run (its export still works), not as a setting
        raise QueueChanged(f"the run's {' and '.join(moved)} changed since its annotation queue was drawn (other "
                           f"stories or pairs, or another protocol, than in {FILE}): annotate the run the queue was "
                           f"drawn from, or move {FILE} aside for a new queue (--export still writes its labels)",
                           where=str(run))
    labels = open_labels(run, (c.cluster for c in queue.clusters), queue.design.probability, queue.design.draws, design)
    drawn = [(queue.clusters[int(c)].cluster, float(queue.design.probability[int(c)])) for c in queue.design.draws]
    stored = [(c, labels.probability[c]) for c in labels.draw_clusters]
    if labels.meta("verdicts") is None:       # a queue started before the verdicts were recorded: from now on
        labels.set_meta("verdicts", queue.judged)
    if [c for c, _ in drawn] != [c for c, _ in stored] or not np.allclose([p for _, p in drawn], [p for _, p in stored]) \
            or labels.meta("verdicts") != queue.judged:
        labels.close()
        raise QueueChanged("the run's verdicts changed since its annotation queue was drawn (its judges' verdicts, "
                           f"the draws or their probabilities differ from those in {FILE}): annotate the run the "
                           f"queue was drawn from, or move {FILE} aside for a new queue (--export still writes its "
                           "labels)", where=str(run))
    return queue, labels
