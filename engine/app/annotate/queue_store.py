"""The queue of a run folder with its store, opened once for the app, the console's import and
export, and a later run that uses the labels (`[ppi] labelled = "annotations:RUN"`): settings not
given are the stored queue's, so a started queue reopens as it was drawn."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...core.errors import ConfigError
from .labels import FILE, Labels, open_labels, stored_design
from .queue import FloorBy, Queue, build_queue

DEFAULT_BUDGET = 50


@dataclass(frozen=True)
class Options:
    budget: int | None = None
    floor: float | None = None
    seed: int | None = None
    per_item: int = 1
    lock_seconds: float = 600.0
    host: str = "127.0.0.1"
    port: int = 8765


@dataclass(frozen=True)
class Settings:
    budget: int
    floor: float
    seed: int
    floor_by: FloorBy                        # a queue stored before the floor went by size: uniform


def settings(run: Path, options: Options) -> Settings:
    """Budget, floor and seed: those given, else the stored queue's, else the defaults; and how the
    stored queue's floor was drawn (a new queue's: by size)."""
    was = stored_design(run)
    budget = options.budget if options.budget is not None else was.get("budget", DEFAULT_BUDGET)
    floor = options.floor if options.floor is not None else was.get("floor", 0.2)
    seed = options.seed if options.seed is not None else was.get("seed", 0)
    return Settings(budget, floor, seed, "uniform" if was and "floor_by" not in was else "size")


def open_queue(run: Path, options: Options) -> tuple[Queue, Labels]:
    """The run's queue and its store; settings not given are the stored queue's (or the defaults)."""
    s = settings(run, options)
    if options.per_item < 1:
        raise ConfigError(f"--per-item must be >= 1, got {options.per_item}")
    queue = build_queue(run, s.budget, floor=s.floor, seed=s.seed, floor_by=s.floor_by)
    ids = "\n".join(c.cluster for c in queue.clusters)
    design = {"budget": s.budget, "floor": s.floor, "seed": s.seed, "protocol": queue.protocol,
              "clusters": hashlib.sha256(ids.encode()).hexdigest()[:16],
              **({"floor_by": "size"} if s.floor_by == "size" else {})}      # a store of before keeps its own
    labels = open_labels(run, (c.cluster for c in queue.clusters), queue.design.probability, queue.design.draws, design)
    drawn = [(queue.clusters[int(c)].cluster, float(queue.design.probability[int(c)])) for c in queue.design.draws]
    stored = [(c, labels.probability[c]) for c in labels.draw_clusters]
    if [c for c, _ in drawn] != [c for c, _ in stored] or not np.allclose([p for _, p in drawn], [p for _, p in stored]):
        labels.close()
        raise ConfigError("the run's verdicts changed since its annotation queue was drawn (the draws or their "
                          f"probabilities differ from those in {FILE}): annotate the run the queue was drawn from, or "
                          f"move {FILE} aside for a new queue", where=str(run))
    return queue, labels
