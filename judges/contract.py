"""What a protocol declares about itself, in one place: the framework reads nothing else about it.

A protocol is a class with one `declared = Declaration(...)` and three methods: `units` (what
`limit` counts: stories, pairs, groups), `asks` (what it asks the judge about one unit, as the paper
asks it) and `aggregate` (verdicts -> tables). The framework does the rest the same way for every
protocol (judges.base.Protocol.build): the first `limit` units, each ask in the run's mode (analyze:
a free analysis, then the ask's marker, then the verdict), one request per repeat; the mode and
missing-answer checks; a sweep's ranking by a declared estimate in its declared direction.

The framework also holds the protocol to its declaration: a declaration that contradicts itself
fails where it is written; an ask carrying a field it does not declare, or a value of another type,
fails as the run's requests are built; the tables `aggregate` returns are compared with the
declared ones before anything is written (`Declaration.checked`). Each is one line (ContractError)
naming the protocol, the table and the column.
"""
from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

import polars as pl

from litjudge.engine.core.errors import ContractError, did_you_mean
from litjudge.engine.core.requests import Message
from litjudge.grammars import VerdictLanguage
from litjudge.judges import PANELS

MODES = ("label", "analyze", "distribution", "reward")
MISSING_POLICIES = ("drop", "label", "wrong")
FIELD_TYPES = {str: pl.Utf8, int: pl.Int64, float: pl.Float64, bool: pl.Boolean}
# When a declared table is in `aggregate`'s result: in every run; in every run whose data has human
# labels (a protocol that finds none says so with `Context.no_labels` and leaves such tables out);
# in some runs only (a mode, an option: say which in the protocol's docstring).
WHEN = ("always", "labelled", "sometimes")
# A protocol's report panels: the function drawing them from a run's tables (name -> polars frame)
# as a list of the report's Panels (litjudge.engine.app.report.panels.Panel).
PanelsFunction = Callable[[dict[str, pl.DataFrame]], list[Any]]
# Tables litjudge itself writes beside a protocol's (RUN/tables/NAME.parquet, an export's configs):
# export's `verdicts` (data/verdicts.parquet, the default config `load_dataset` gives), the run's
# `skipped`, a generation stage's `generation` / `generation_duplicates`, budgets' `budgets`. A
# protocol declaring one would replace litjudge's own.
RESERVED_TABLES = ("verdicts", "skipped", "generation", "generation_duplicates", "budgets")
TABLE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_]*")        # a file's name in tables/ and an export's config


@dataclass(frozen=True)
class Table:
    """A result table with no metric to rank (per-item rows, a grid, a distribution): written,
    printed and drawn, never tidied into a sweep's metrics. `by`: the columns it always carries;
    `when`: in which runs `aggregate` returns it (WHEN)."""

    by: tuple[str, ...] = ()
    when: str = "always"


@dataclass(frozen=True)
class MetricTable(Table):
    """A result table of agreement metrics: its grouping columns, which way each metric is better
    (a float column named in neither has no direction: a count, a bound, a p-value, and is never
    ranked), the metrics a sweep may rank by, and the group row that pools them ("all"; None: no
    pooled row, so only an explicit `table.metric@col=value` ranks; "": the protocol's
    `rank_group` picks it from the options). Its metric columns are floats (ints and all-null
    columns are cast; text is refused)."""

    higher: tuple[str, ...] = ()
    lower: tuple[str, ...] = ()
    rank: tuple[str, ...] = ()
    pooled: str | None = "all"
    # (metric, the count column behind it) where that is not the table's one count (n, stories, ...):
    # a mean over the groups where it is defined counts those, not every group
    counts: tuple[tuple[str, str], ...] = ()

    def direction(self, metric: str) -> bool | None:
        """True: higher is better; False: lower is; None: no direction."""
        return True if metric in self.higher else False if metric in self.lower else None


@dataclass(frozen=True)
class Declaration:
    """What a protocol is: its name and version (part of every request's identity), the kind of data
    it reads (ttcw, pairs, items, groups: any dataset whose loader gives that kind feeds it), its
    options, what `limit` counts, the verdict modes it aggregates (opt-in), EVERY table `aggregate`
    returns (metric tables and plain ones), the estimate a sweep ranks by unless told, the tables
    the console prints, the options used only when aggregating (a sweep varies them at no model
    cost), the missing-answer policies it honours, the fields each verdict carries into the tables
    with their types (an ask naming another field, or carrying a value of another type, is refused;
    a field null on every row is still typed, never polars' Null), and three hooks for the
    application: the verdict columns naming one binary decision (a cascade's or jury's item; ():
    its runs are not pooled), the option a generation stage fills with {judge: its own items'
    source} (self-preference; "": none), and the report's panels (the function drawing them, or the
    name they are registered under in `litjudge.judges.PANELS`, resolved here; "": one panel per
    metric table)."""

    name: str
    version: str
    reads: str
    options: type
    limit_counts: str
    modes: tuple[str, ...] = ("label",)
    tables: Mapping[str, Table] = field(default_factory=dict)
    rank_by: str = ""
    summary: tuple[str, ...] = ()
    post_options: tuple[str, ...] = ()
    missing: tuple[str, ...] = ("drop",)
    fields: Mapping[str, type] = field(default_factory=dict)
    decision_key: tuple[str, ...] = ()
    self_preference: str = ""
    report: str | PanelsFunction = ""
    labels_when_aggregating: bool = False   # its aggregate reads the humans' labels from the dataset (a rebuild
                                            # reads them as they are now); else they travel in the requests' meta

    def __post_init__(self) -> None:
        if not set(self.modes) <= set(MODES) or not self.modes:
            raise self.wrong(f"modes must be some of {MODES}, got {self.modes}")
        if "drop" not in self.missing or not set(self.missing) <= set(MISSING_POLICIES):
            raise self.wrong(f"missing must hold 'drop' and be some of {MISSING_POLICIES}, got {self.missing}")
        if not is_dataclass(self.options):
            raise self.wrong("options must be a dataclass")
        names = {f.name for f in fields(self.options)}
        if "analyze" in self.modes and "analysis_tokens" not in names:
            raise self.wrong("a protocol with analyze mode has an `analysis_tokens` option (the bound on the free analysis)")
        unknown = [o for o in (*self.post_options, self.self_preference) if o and o not in names]
        if unknown:
            raise self.wrong(f"post_options and self_preference name options; {unknown} are not fields of "
                             f"{self.options.__name__}")
        self._check_tables()
        self._check_fields()

    def wrong(self, why: str) -> ContractError:
        """One line naming this protocol and what is wrong with it."""
        return ContractError(f"protocol {self.name!r}: {why}")

    def _check_tables(self) -> None:
        taken = [t for t in self.tables if t in RESERVED_TABLES]
        if taken:
            raise self.wrong(f"table {taken[0]!r} is a name litjudge writes itself (reserved: "
                             f"{', '.join(RESERVED_TABLES)}): rename the table")
        odd = [t for t in self.tables if not isinstance(t, str) or not TABLE_NAME.fullmatch(t)]
        if odd:
            raise self.wrong(f"table name {odd[0]!r} is not a plain name (letters, digits, _; it names a file): "
                             "rename the table")
        for table_name, table in self.tables.items():
            if not isinstance(table, Table) or table.when not in WHEN:
                raise self.wrong(f"table {table_name!r} is declared as a Table or MetricTable with when one of {WHEN}, "
                                 f"got {table!r}")
            undirected = [m for m in table.rank if table.direction(m) is None] if isinstance(table, MetricTable) else []
            if undirected:
                raise self.wrong(f"table {table_name!r} ranks by {undirected} with no direction: name them in higher "
                                 "or lower")
        if self.rank_by and self.rank_by not in self.rank_metrics:
            raise self.wrong(f"rank_by {self.rank_by!r} is none of the rankable metrics {list(self.rank_metrics)}")
        absent = [t for t in self.summary if t not in self.tables]
        if absent:
            raise self.wrong(f"summary names {absent}, which Declaration.tables does not declare "
                             f"(tables: {', '.join(self.tables) or 'none'})")

    def _check_fields(self) -> None:
        untyped = {k: t for k, t in self.fields.items() if t not in FIELD_TYPES}
        if untyped or "repeat" in self.fields:
            raise self.wrong(f"fields are typed {' | '.join(t.__name__ for t in FIELD_TYPES)} and never 'repeat' "
                             f"(the framework's), got {untyped or 'repeat'}")
        unknown = [c for c in self.decision_key if c not in self.fields and c not in ("item_id", "repeat")]
        if unknown:
            raise self.wrong(f"decision_key names {unknown}, which are neither fields nor item_id / repeat")
        self._check_report()

    def _check_report(self) -> None:
        """The report's panels resolved where they are declared, not when a report is drawn: a
        function, or the name of panels registered in PANELS (looked up without importing them)."""
        if not self.report or callable(self.report):
            return
        if not isinstance(self.report, str) or self.report not in PANELS:
            hint = did_you_mean(self.report, PANELS.names())
            raise self.wrong(f"report {self.report!r} names no registered report panels{hint}: give the function "
                             "drawing them (report=my_panels), or register it in litjudge.judges.PANELS")

    @property
    def rank_metrics(self) -> dict[str, str | None]:
        """Every rankable `table.metric`, with the group row holding its pooled value."""
        return {f"{name}.{metric}": table.pooled for name, table in self.metric_table_specs.items()
                for metric in table.rank}

    @property
    def metric_table_specs(self) -> dict[str, MetricTable]:
        """The declared tables that hold metrics (the plain ones left out)."""
        return {name: table for name, table in self.tables.items() if isinstance(table, MetricTable)}

    @property
    def metric_tables(self) -> dict[str, tuple[str, ...]]:
        """Each metric table's grouping columns (a sweep's tidy table is made of these)."""
        return {name: table.by for name, table in self.metric_table_specs.items()}

    def direction(self, table: str, metric: str) -> bool | None:
        """Which way `table.metric` is better (None: no direction)."""
        spec = self.metric_table_specs.get(table)
        return spec.direction(metric) if spec is not None else None

    @functools.cached_property
    def _exact_types(self) -> dict[str, frozenset[type]]:
        """Per field, the value types it takes at a glance (None: no value; an int is a float)."""
        return {name: frozenset({kind, type(None), *((int,) if kind is float else ())})
                for name, kind in self.fields.items()}

    def check_fields(self, item_id: str, carried: tuple[tuple[str, Any], ...]) -> None:
        """What an ask carries into the tables, against `fields`: a field it does not declare, or a
        value of another type, is one line naming the item, the field and the value."""
        exact = self._exact_types
        for name, value in carried:
            if type(value) in exact.get(name, ()):
                continue
            kind = self.fields.get(name)
            if kind is not None and not isinstance(value, bool) and (isinstance(value, kind) or kind is float
                                                                     and isinstance(value, int)):
                continue                             # a subclass (numpy's float64 is a float)
            raise self.wrong(f"item {item_id!r} is asked with field {name!r} = {value!r}, " + (
                f"not the {kind.__name__} its Declaration.fields types" if kind else
                f"a field its Declaration.fields does not type (fields: {', '.join(self.fields) or 'none'})"))

    def typed(self, verdicts: pl.DataFrame) -> pl.DataFrame:
        """The verdict frame with its declared fields in their declared types, strictly: a field null
        on every row (no human scores in this data) comes back typed, not as polars' Null; a field
        holding values of another type (text in a float field) is one line naming it. (A field no
        ask carried stays absent: its absence can mean something, e.g. no style counts were asked for.)"""
        present = {name: kind for name, kind in self.fields.items() if name in verdicts.columns}
        for name, kind in present.items():
            self._castable("verdicts", name, verdicts[name], kind)
        return verdicts.with_columns(pl.col(name).cast(FIELD_TYPES[kind]) for name, kind in present.items())

    def _castable(self, table: str, column: str, values: pl.Series, kind: type) -> None:
        dtype = values.dtype
        fits = (dtype == pl.Null or (kind is str and dtype == pl.Utf8) or (kind is bool and dtype == pl.Boolean)
                or (kind is int and dtype.is_integer()) or (kind is float and dtype.is_numeric()))
        if not fits:
            sample = values.drop_nulls().head(1).to_list()
            raise self.wrong(f"table {table!r}, column {column!r} is declared {kind.__name__} and holds {dtype} values"
                             + (f" (e.g. {sample[0]!r})" if sample else "") + f": give it {kind.__name__} values, or "
                             "declare the type it holds")

    def checked(self, tables: Mapping[str, pl.DataFrame], unlabelled: bool = False) -> dict[str, pl.DataFrame]:
        """`aggregate`'s tables held to this declaration before anything is written: no undeclared
        table; every table declared `always` returned (and `labelled` ones unless the data has no
        human labels), empty where there is nothing to show; each table with rows carries its `by`
        columns and, with labels, its rank columns; metric columns are floats. ONE line naming the
        protocol, the table and the column otherwise."""
        if not isinstance(tables, Mapping):
            raise self.wrong(f"aggregate returned {type(tables).__name__}, not a dict of table name -> polars DataFrame")
        other = next((name for name, frame in tables.items() if not isinstance(frame, pl.DataFrame)), None)
        if other is not None:
            raise self.wrong(f"aggregate returned table {other!r} as {type(tables[other]).__name__}, not a polars "
                             "DataFrame")
        undeclared = [name for name in tables if name not in self.tables]
        if undeclared:
            raise self.wrong(f"aggregate returned table(s) {undeclared} that Declaration.tables does not declare "
                             "(declare each: Table() for one without metrics, MetricTable(...) for metrics)")
        missing = [name for name, table in self.tables.items() if name not in tables
                   and (table.when == "always" or (table.when == "labelled" and not unlabelled))]
        if missing:
            raise self.wrong(f"aggregate did not return table(s) {missing}, declared "
                             f"when={self.tables[missing[0]].when!r}: return each (empty where there is nothing to "
                             "show), or declare in which runs it is absent (when=...)")
        return {name: self._checked_table(name, self.tables[name], frame, unlabelled) if frame.height else frame
                for name, frame in tables.items()}

    def _checked_table(self, name: str, table: Table, frame: pl.DataFrame, unlabelled: bool) -> pl.DataFrame:
        needed = (*table.by, *(table.rank if isinstance(table, MetricTable) and not unlabelled else ()))
        absent = [c for c in needed if c not in frame.columns]
        if absent:
            raise self.wrong(f"table {name!r} lacks column(s) {absent} it declares (by or rank); it has "
                             f"{', '.join(frame.columns)}")
        if not isinstance(table, MetricTable):
            return frame
        metrics = [c for c in dict.fromkeys((*table.higher, *table.lower, *table.rank)) if c in frame.columns]
        for column in metrics:
            self._castable(name, column, frame[column], float)
        return frame.with_columns(pl.col(c).cast(pl.Float64) for c in metrics)


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
