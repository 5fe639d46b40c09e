"""What a protocol is: options, how items become requests, how verdicts aggregate into tables."""
from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, cast

import polars as pl

from litjudge.engine.core.config import MissingPolicy, RunConfig, Sampling
from litjudge.engine.core.console import say
from litjudge.engine.core.errors import ConfigError, ContractError, PluginError
from litjudge.engine.core.registry import Named
from litjudge.engine.core.requests import JudgeRequest, Mode, RequestMeta
from litjudge.engine.core.schema import build
from litjudge.engine.data.cards import DatasetCard, load_card
from litjudge.engine.data.loaders import load_dataset
from litjudge.grammars.analysis import Analyzed

from . import PROTOCOLS
from .contract import Ask, Declaration, MetricTable, Table  # noqa: F401  (a protocol imports its contract from here)
from .metrics.estimates import Units
from .ppi_annotated import Annotated
from .rank_by import RankBy, group_columns, parse_rank_by, units_where  # noqa: F401  (protocols import them here)
from .templates import Template, TemplateFields, checked, template_of


@dataclass(frozen=True)
class Skip:
    """An item the protocol could not judge, and why (reported with the results: tables/skipped;
    `warn`: and in a warning, where the user may not expect it, e.g. a text alone in its group)."""

    item_id: str
    reason: str
    warn: bool = False


def skip_warnings(skipped: list[dict]) -> list[str]:
    """One warning per reason of the skips marked `warn` (rows of tables/skipped, with `warn`)."""
    counts = Counter(r["reason"] for r in skipped if r.get("warn"))
    return [f"{n} item(s) not judged: {reason} (listed in tables/skipped)" for reason, n in counts.items()]


@dataclass
class Build:
    """A protocol's requests (a list, or an iterator the plan consumes as it streams) and the items
    it could not judge; `skipped` is complete once `requests` has been consumed."""

    requests: Iterable[JudgeRequest]
    skipped: list[Skip] = field(default_factory=list)
    taken: list[int] = field(default_factory=lambda: [0])    # the units judged (what `limit` counts), likewise

    @property
    def units(self) -> int:
        return self.taken[0]


@dataclass(frozen=True)
class Context:
    """What a protocol may read: the validated run config, its options, its dataset card (data is
    read through the card's loader). A protocol reports what the user must know but that is no
    error (ground truth absent, items left out) with `warn`: the runner prints each once and
    records them in the manifest; data without human labels with `no_labels`."""

    config: RunConfig
    options: Any
    card: DatasetCard
    replay: bool = False          # recorded responses are served; items without text are allowed
    annotations: Annotated | None = None      # `[ppi] labelled = "annotations:RUN"`: that queue's labels
    warnings: list[str] = field(default_factory=list, compare=False)
    found: set[str] = field(default_factory=set, compare=False)     # what aggregating found ("unlabelled")

    @property
    def data_root(self) -> Path:
        return self.config.data_root_path

    @property
    def dataset_path(self) -> Path:
        return self.card.folder(self.config.data_root)

    @property
    def expects_labels(self) -> bool:
        """The card promises human labels (the demo sample has none): their absence is worth a warning."""
        return self.card.labels

    def load(self, kind: str) -> Any:
        """The dataset, as `kind` (ttcw, pairs, items, groups), through the card's registered loader:
        the kind its protocol reads in this run (`Protocol.reads`: `Declaration.reads` unless the
        options choose, as a rubric of pairwise questions reads pairs)."""
        protocol = self.config.protocol
        reads = PROTOCOLS.get(protocol)().reads(self.options) if protocol in PROTOCOLS else kind
        if kind != reads:
            raise ContractError(f"protocol {protocol!r} loads {kind} data, and declares reads = {reads!r}: load the kind "
                                "it reads (other data through Context.load_from)")
        return load_dataset(self.card, kind, self.dataset_path)

    def load_from(self, card_name: str, kind: str) -> Any:
        """Another dataset this protocol reads beside its own (reference-based Likert reads the TTCW tests)."""
        other = load_card(card_name)
        return load_dataset(other, kind, other.folder(self.config.data_root))

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def no_labels(self, message: str) -> None:
        """The data has no human labels: the tables declared `when="labelled"` and the rank columns
        may be absent; `message` is a warning where the card promised labels."""
        self.found.add("unlabelled")
        if self.expects_labels:
            self.warn(message)

    @property
    def unlabelled(self) -> bool:
        return "unlabelled" in self.found

    def sampling(self, repeat: int = 0) -> Sampling:
        return self.config.sampling.for_repeat(repeat)


class Protocol(Named, ABC):
    """A protocol: one `declared = Declaration(...)` (judges.contract), the units `limit` counts,
    what it asks about each unit, and how verdicts aggregate. Everything else is the framework's."""

    declared: ClassVar[Declaration]

    @classmethod
    def registered_name(cls) -> str:
        return cls.declared.name

    @property
    def name(self) -> str:
        return self.declared.name

    @property
    def version(self) -> str:
        return self.declared.version

    def missing_labels(self, options: Any) -> tuple[str, ...]:
        """The labels `missing = "label:X"` may name."""
        return ()

    def reads(self, options: Any) -> str:
        """The kind of data this run reads (`declared.reads`, unless the options choose)."""
        return self.declared.reads

    def reads_hint(self, options: Any, gives: tuple[str, ...]) -> str:
        """What to change when the dataset gives only `gives` and this run reads another kind
        ("" when nothing but other data helps): said after the refusal."""
        return ""

    def orders_categories(self, options: Any) -> bool:
        """Whether `[dataset] category_order` means anything to this run: it orders rated items'
        categories (listwise reads them), so a run reading other data ignores it, and says so."""
        return self.reads(options) == "items"

    def template_fields(self, options: Any) -> TemplateFields | None:
        """The fields your own prompt template (`template = ...`) may and must name; None: none taken."""
        return None

    def templates(self, config: RunConfig, options: Any) -> dict[str, Template]:
        """Your own prompt templates this run uses, by the key that sets them, each checked against
        the protocol's fields (judges/templates.py); the manifest records their text."""
        own = template_of(config)
        where = config.source or "config"
        return {"template": checked(own, self.template_fields(options), self.name, where, "template")} if own else {}

    def rank_by_for(self, options: Any) -> str:
        """The estimate a run with these options is ranked by, its results' headline: the declared one."""
        return self.declared.rank_by

    def rank_group(self, rank: RankBy, options: Any) -> str:
        """The tidy group (`col=value,...`) whose row holds the value ranked: the one asked
        explicitly, else the protocol's pooled row."""
        return rank.group or self.declared.rank_metrics.get(rank.name) or "all"

    def check_rank(self, rank: RankBy, options: Any) -> None:
        """ValueError when a cell with these options can have no value of `rank` (a group naming
        what the run does not ask), said before anything runs instead of an empty ranking."""

    def group_rows(self, verdicts: pl.DataFrame, group: str, table: str = "") -> pl.DataFrame:
        """The verdicts behind a tidy group's row of `table` (what a sweep's `unread` counts): the
        group's columns that verdicts have (a rubric's question, a pairwise order) pick them; a value
        they never hold (the mean of both orders) picks all. A protocol whose table reads only some
        verdicts (those with a human label) narrows them."""
        for column, value in group_columns(group).items():
            if column in verdicts.columns:
                picked = verdicts.filter(pl.col(column).cast(pl.Utf8) == value)
                verdicts = picked if picked.height else verdicts
        return verdicts

    def rank_units(self, tables: dict[str, pl.DataFrame], judge: str, rank: RankBy, options: Any) -> Units | None:
        """The resampling units behind `rank` for one judge (its interval and the paired test
        against the best cell); None when the protocol has none for it."""
        return None

    def parse_rank_by(self, text: str) -> RankBy:
        """`table.metric` (the pooled estimate) or `table.metric@col=value[,col=value]` (one group,
        asked explicitly); ValueError naming what is rankable (`rank_by.parse_rank_by`)."""
        return parse_rank_by(self.name, self.declared, text)

    def options(self, config: RunConfig) -> Any:
        """The protocol's options, validated; also checks the run's missing-answer policy fits."""
        options = build(self.declared.options, dict(config.options), config.source or "config", prefix="options.")
        policy = config.missing_policy
        where = config.source or "config"
        if config.mode not in self.declared.modes:
            modes = " | ".join(self.declared.modes)
            raise ConfigError(f"protocol {self.name!r} aggregates mode {modes}, not {config.mode!r}",
                              where=where, parameter="mode")
        if policy.kind not in self.declared.missing:
            raise ConfigError(f"protocol {self.name!r} supports missing = {' | '.join(self._policy_forms(options))}, "
                              f"got {config.missing!r}", where=where, parameter="missing")
        if policy.kind == "label" and policy.label not in self.missing_labels(options):
            raise ConfigError(f"{policy.label!r} is not a verdict label of protocol {self.name!r} "
                              f"(labels: {', '.join(self.missing_labels(options))})", where=where, parameter="missing")
        self.templates(config, options)
        return options

    # -- the framework's part, the same for every protocol ---------------------------------------
    def build(self, ctx: Context) -> Build:
        """The first `limit` units (a `Skip` in their place is recorded, not counted), each unit's
        asks, each ask as this run's mode asks it, once per repeat. Units given as a list are built
        at once (their errors come before the run starts); an iterator (pairs read as they stream)
        streams, and `skipped` is complete once the requests are consumed."""
        skipped: list[Skip] = []
        taken = [0]
        with self._blamed("units"):
            units = self.units(ctx)
        requests = self._blamed_stream(request for unit in _counted(units, ctx.config.limit, skipped, taken)
                                        for ask in self.asks(ctx, unit) for request in _requests(self, ctx, ask, skipped))
        return Build(requests if isinstance(units, Iterator) else list(requests), skipped, taken)

    @contextmanager
    def _blamed(self, what: str) -> Iterator[None]:
        """A plugin protocol's own code failing (its units, asks, aggregate): one line naming the
        plugin and its distribution, not litjudge's 'internal error'."""
        try:
            yield
        except Exception as exc:
            blamed = PROTOCOLS.blame(self.declared.name, what, exc)
            if blamed is None:
                raise
            raise blamed from exc

    def viewed(self, verdicts: pl.DataFrame, tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
        """`human_view`, for the report's viewer and an export: a plugin's failing one is said in a
        warning naming it, and the verdicts go on without its answers (the export, the report and
        to_dataset crashed as litjudge's own bug)."""
        try:
            with self._blamed("human_view"):
                return self.human_view(verdicts, tables)
        except PluginError as exc:
            say(f"litjudge: warning: {exc}: the verdicts are shown without its answers", logging.WARNING)
            return Protocol.human_view(self, verdicts, tables)

    def _blamed_stream(self, requests: Iterator[JudgeRequest]) -> Iterator[JudgeRequest]:
        with self._blamed("units or asks"):
            yield from requests

    def _policy_forms(self, options: Any) -> list[str]:
        return [f'"label:{lab}"' if kind == "label" else f'"{kind}"' for kind in self.declared.missing
                for lab in (self.missing_labels(options) if kind == "label" else ("",))]

    def human_view(self, verdicts: pl.DataFrame, tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
        """For the report's item viewer: the verdicts with `truth` (the humans' answer, as text) and
        `agrees` (this verdict's answer is theirs; null for a verdict without an answer), and where
        the stored value reads badly, `answer` (the verdict's answer as text). By default
        the answer a request carries (`human`, `truth`); null where the data has no human answer to
        set beside one verdict (a ranked list, a candidate rated on another scale)."""
        for column in ("human", "truth"):
            if column in verdicts.columns:
                truth = pl.col(column).cast(pl.Utf8)
                answered = (pl.col("status") == "ok") & truth.is_not_null()
                return verdicts.with_columns(truth.alias("truth"), pl.when(answered).then(
                    pl.col("value").cast(pl.Utf8) == truth).otherwise(None).alias("agrees"))
        return verdicts.with_columns(pl.lit(None, pl.Utf8).alias("truth"), pl.lit(None, pl.Boolean).alias("agrees"))

    @abstractmethod
    def units(self, ctx: Context) -> Iterable[Any]:
        """What `limit` counts (`declared.limit_counts`), in order; a `Skip` for one that cannot be judged."""

    @abstractmethod
    def asks(self, ctx: Context, unit: Any) -> Iterable[Ask | Skip]:
        """What the judge is asked about one unit; a `Skip` for an item of it that cannot be judged."""

    def tables(self, verdicts: pl.DataFrame, ctx: Context) -> dict[str, pl.DataFrame]:
        """The result tables of a verdict frame: its declared fields typed, then `aggregate`, its
        tables held to the declaration (judges.contract) before anyone writes them."""
        kind = self.reads(ctx.options)
        if ctx.card.category_order and not self.orders_categories(ctx.options):
            why = f"reads {kind}, which have no categories" if kind != "items" else "does not order categories with it"
            ctx.warn(f"[dataset] category_order is ignored: protocol {self.declared.name!r} {why} (it orders rated items' "
                     "categories, as listwise reads them; a rubric's categorical question lists its own, best first, in "
                     "`categories`); remove it")
        with self._blamed("aggregate"):
            tables = self.aggregate(self.declared.typed(verdicts), ctx)
        return self.declared.checked(tables, ctx.unlabelled)

    @abstractmethod
    def aggregate(self, table: pl.DataFrame, ctx: Context) -> dict[str, pl.DataFrame]:
        """One row per plan entry (meta + verdict columns) -> named result tables."""


def _counted(units: Iterable[Any], limit: int | None, skipped: list[Skip], taken: list[int]) -> Iterator[Any]:
    """The first `limit` units (all when None), counted in `taken`; the skips met on the way are recorded."""
    for unit in units:
        if limit is not None and taken[0] >= limit:
            return
        if isinstance(unit, Skip):
            skipped.append(unit)
            continue
        taken[0] += 1
        yield unit


def _requests(protocol: Protocol, ctx: Context, ask: Ask | Skip, skipped: list[Skip]) -> Iterator[JudgeRequest]:
    """One ask as the run asks it: in analyze mode a free analysis (bounded by the protocol's
    `analysis_tokens` option), the ask's marker, then the verdict; one request per sample of
    `[sampling] repeats`, each its own seed, its number the metadata's last field ("repeat"). A
    reward model scores once (its score is not sampled)."""
    if isinstance(ask, Skip):
        skipped.append(ask)
        return
    protocol.declared.check_fields(ask.item_id, ask.fields)
    mode = ctx.config.mode
    language = Analyzed(ask.verdict, ask.marker, ctx.options.analysis_tokens) if mode == "analyze" else ask.verdict
    for repeat in range(1 if mode == "reward" else ctx.config.sampling.repeats):
        yield JudgeRequest(ask.messages, language, cast(Mode, mode), ctx.sampling(repeat),  # RunConfig checks mode
                           RequestMeta(protocol.name, ask.item_id, (*ask.fields, ("repeat", repeat))))


def imputed(policy: MissingPolicy, answer: pl.Expr, label: Callable[[str], pl.Expr] | None = None,
            wrong: pl.Expr | None = None, dtype: pl.DataType | type[pl.DataType] = pl.Utf8) -> pl.Expr:
    """THE missing-answer policy (config `missing`): a verdict's answer (null where the judge gave
    none), or in its place what the policy says: nothing (`drop`: null, left out of agreement), the
    named label (`label:X`: `label(X)` as the protocol reads a label), or a wrong answer (`wrong`).
    Bias and label-distribution tables read the real answers only."""
    if policy.kind == "label" and label is not None and policy.label is not None:
        stand_in = label(policy.label)
    elif policy.kind == "wrong" and wrong is not None:
        stand_in = wrong
    else:
        stand_in = pl.lit(None, dtype=dtype)
    return pl.when(answer.is_not_null()).then(answer).otherwise(stand_in)
