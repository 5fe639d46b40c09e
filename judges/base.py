"""What a protocol is: options, how items become requests, how verdicts aggregate into tables."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import polars as pl

from engine.config import RunConfig, build
from engine.requests import JudgeRequest, Sampling


@dataclass(frozen=True)
class Skip:
    """An item the protocol could not judge, and why (reported with the results)."""

    item_id: str
    reason: str


@dataclass
class Build:
    requests: list[JudgeRequest]
    skipped: list[Skip] = field(default_factory=list)


@dataclass(frozen=True)
class Context:
    """What a protocol may read: the validated run config, its options, the data location."""

    config: RunConfig
    options: Any
    data_root: Path
    dataset_path: Path
    replay: bool = False          # recorded responses are served; items without text are allowed

    def sampling(self, repeat: int = 0) -> Sampling:
        s = self.config.sampling
        return Sampling(temperature=s.temperature, top_p=s.top_p, seed=s.seed + repeat,
                        max_tokens=s.max_tokens or None)


class Protocol(ABC):
    name: ClassVar[str]
    version: ClassVar[str]
    Options: ClassVar[type]
    summary: ClassVar[tuple[str, ...]] = ()     # tables the CLI prints after a run, in order
    # Options used only when aggregating (cutoffs, thresholds): a sweep varies them at no model cost.
    post_options: ClassVar[tuple[str, ...]] = ()
    # Tables holding agreement metrics, each with its grouping columns: what a sweep's tidy table
    # (one row per cell, metric, group) is made of. Every float column of these tables is a metric.
    metric_tables: ClassVar[dict[str, tuple[str, ...]]] = {}
    default_rank_by: ClassVar[str] = ""          # "table.metric" a sweep ranks its cells by

    def rank_units(self, tables: dict[str, pl.DataFrame], rank_by: str):
        """(metric function, frame of resampling units with columns cluster, truth, pred) behind
        `rank_by`, for its bootstrap CI; None when the protocol has none for that metric."""
        return None

    def options(self, config: RunConfig) -> Any:
        return build(self.Options, dict(config.options), config.source or "config", prefix="options.")

    @abstractmethod
    def build(self, ctx: Context) -> Build:
        """Items -> requests (with metadata), plus the items skipped and why."""

    @abstractmethod
    def aggregate(self, table: pl.DataFrame, ctx: Context) -> dict[str, pl.DataFrame]:
        """One row per plan entry (meta + verdict columns) -> named result tables."""
