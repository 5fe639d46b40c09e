"""What a protocol declares about itself, in one place: the framework reads nothing else about it.

A protocol is a class with one `declared = Declaration(...)` and three methods: `units` (what
`limit` counts: stories, pairs, groups), `asks` (what it asks the judge about one unit, as the paper
asks it) and `aggregate` (verdicts -> tables). The framework does the rest the same way for every
protocol (judges.base.Protocol.build): the first `limit` units, each ask in the run's mode (analyze:
a free analysis, then the ask's marker, then the verdict), one request per repeat; the mode and
missing-answer checks; a sweep's ranking by a declared estimate in its declared direction.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

import polars as pl

from litjudge.engine.core.requests import Message
from litjudge.grammars import VerdictLanguage

MODES = ("label", "analyze", "distribution", "reward")
MISSING_POLICIES = ("drop", "label", "wrong")
FIELD_TYPES = {str: pl.Utf8, int: pl.Int64, float: pl.Float64, bool: pl.Boolean}


@dataclass(frozen=True)
class MetricTable:
    """A result table of agreement metrics: its grouping columns, which way each metric is better
    (a float column named in neither has no direction: a count, a bound, a p-value, and is never
    ranked), the metrics a sweep may rank by, and the group row that pools them ("all"; None: no
    pooled row, so only an explicit `table.metric@col=value` ranks; "": the protocol's
    `rank_group` picks it from the options)."""

    by: tuple[str, ...] = ()
    higher: tuple[str, ...] = ()
    lower: tuple[str, ...] = ()
    rank: tuple[str, ...] = ()
    pooled: str | None = "all"

    def direction(self, metric: str) -> bool | None:
        """True: higher is better; False: lower is; None: no direction."""
        return True if metric in self.higher else False if metric in self.lower else None


@dataclass(frozen=True)
class Declaration:
    """What a protocol is: its name and version (part of every request's identity), the kind of data
    it reads (ttcw, pairs, items, groups: any dataset whose loader gives that kind feeds it), its
    options, what `limit` counts, the verdict modes it aggregates (opt-in), its metric tables, the
    estimate a sweep ranks by unless told, the tables the console prints, the options used only when
    aggregating (a sweep varies them at no model cost), the missing-answer policies it honours, and
    the fields each verdict carries into the tables with their types (an ask naming another field is
    refused; a field null on every row is still typed, never polars' Null)."""

    name: str
    version: str
    reads: str
    options: type
    limit_counts: str
    modes: tuple[str, ...] = ("label",)
    tables: Mapping[str, MetricTable] = field(default_factory=dict)
    rank_by: str = ""
    summary: tuple[str, ...] = ()
    post_options: tuple[str, ...] = ()
    missing: tuple[str, ...] = ("drop",)
    fields: Mapping[str, type] = field(default_factory=dict)

    def __post_init__(self) -> None:
        def wrong(why: str) -> TypeError:
            return TypeError(f"protocol {self.name!r}: {why}")
        if not set(self.modes) <= set(MODES) or not self.modes:
            raise wrong(f"modes must be some of {MODES}, got {self.modes}")
        if "drop" not in self.missing or not set(self.missing) <= set(MISSING_POLICIES):
            raise wrong(f"missing must hold 'drop' and be some of {MISSING_POLICIES}, got {self.missing}")
        if not is_dataclass(self.options):
            raise wrong("options must be a dataclass")
        names = {f.name for f in fields(self.options)}
        if "analyze" in self.modes and "analysis_tokens" not in names:
            raise wrong("a protocol with analyze mode has an `analysis_tokens` option (the bound on the free analysis)")
        if not set(self.post_options) <= names:
            raise wrong(f"post_options {self.post_options} are not all options")
        for table_name, table in self.tables.items():
            undirected = [m for m in table.rank if table.direction(m) is None]
            if undirected:
                raise wrong(f"table {table_name!r} ranks by {undirected} with no direction: name them in higher or lower")
        untyped = {k: t for k, t in self.fields.items() if t not in FIELD_TYPES}
        if untyped or "repeat" in self.fields:
            raise wrong(f"fields are typed {' | '.join(t.__name__ for t in FIELD_TYPES)} and never 'repeat' "
                        f"(the framework's), got {untyped or 'repeat'}")
        if self.rank_by and self.rank_by not in self.rank_metrics:
            raise wrong(f"rank_by {self.rank_by!r} is none of the rankable metrics {list(self.rank_metrics)}")

    @property
    def rank_metrics(self) -> dict[str, str | None]:
        """Every rankable `table.metric`, with the group row holding its pooled value."""
        return {f"{name}.{metric}": table.pooled for name, table in self.tables.items() for metric in table.rank}

    @property
    def metric_tables(self) -> dict[str, tuple[str, ...]]:
        """Each metric table's grouping columns (a sweep's tidy table is made of these)."""
        return {name: table.by for name, table in self.tables.items()}

    def direction(self, table: str, metric: str) -> bool | None:
        """Which way `table.metric` is better (None: no direction)."""
        return self.tables[table].direction(metric) if table in self.tables else None

    def typed(self, verdicts: pl.DataFrame) -> pl.DataFrame:
        """The verdict frame with its declared fields in their declared types: a field null on every
        row (no human scores in this data) comes back typed, not as polars' Null. (A field no ask
        carried stays absent: its absence can mean something, e.g. no style counts were asked for.)"""
        return verdicts.with_columns(pl.col(name).cast(FIELD_TYPES[kind]) for name, kind in self.fields.items()
                                     if verdicts.schema.get(name) == pl.Null)


@dataclass(frozen=True)
class Ask:
    """One question to the judge about a unit, as the paper asks it: the prompt (a user message, or
    the messages), the verdict language, the item it judges and what its verdict carries into the
    tables (`fields`). The framework makes the run's requests from it (mode, repeats); `marker` is
    the line that ends a free analysis in analyze mode."""

    item_id: str
    prompt: str | tuple[Message, ...]
    verdict: VerdictLanguage
    fields: tuple[tuple[str, Any], ...] = ()
    marker: str = "Verdict:"

    @property
    def messages(self) -> tuple[Message, ...]:
        return (Message("user", self.prompt),) if isinstance(self.prompt, str) else self.prompt
