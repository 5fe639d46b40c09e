"""A rubric question's scale: everything that differs between binary, points, pairwise and
categorical questions, as the methods of one class. A new scale is one class in one file: a
subclass of `Scale` with a `name`, decorated `@SCALES.register` (judges/scales/ imports every
module of its folder; a file elsewhere registers when it is imported; a plugin's, through its
entry point in group `litjudge.scales`).

The rubric (judges/rubric.py, rubric_tables.py, engine/app/report/rubric_panels.py) asks a
question's scale, never its name: which keys of a question it reads (`settings`, `check`), the
verdict language the judge is constrained to (`language`), how the prompt asks for the answer
(`answer_line`, `rubric`), how the humans' column maps onto the scale (`human`, `human_between`),
what a parsed verdict means in the question's terms (`answer`, `scored`), the consistency rates
beyond repeats (`consistency`), the agreement tables (`schemas`, `agreement`), a sweep's ranked
estimate (`rank_units`) and a report panel of its own (`panel`).

A human value of None is missing (an empty CSV cell, JSON null, a NaN float from pandas): that text
or pair is left out of the agreement. Anything else must be an answer in the question's terms, and
what is not is refused naming the item (pair) and column, never guessed: a "nan" text (a CSV cell
is text; only an empty one is missing, as engine/data/readers.read_csv says) compared as a number
would tie every pair it is in; JSON true is no point on a scale.
"""
from __future__ import annotations

import math
import numbers
import re
import unicodedata
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import polars as pl

from litjudge.engine.core.registry import Named, Registry
from litjudge.engine.core.schema import Key
from litjudge.engine.data.table import fold, plain_number
from litjudge.grammars import LabelSet

from ..contract import MetricTable, Table
from ..metrics.estimates import Units
from ..metrics.proportion import rate_with_ci

Schema = dict[str, Any]
INTERVAL: Schema = {"n": pl.Int64, "ci_low": pl.Float64, "ci_high": pl.Float64, "ci_note": pl.Utf8}


# line breaks and other control characters: no prompt line may hold one (it writes a line of its own)
CONTROL = r"\x00-\x1f\x7f"
# what an answer's name may not hold: control characters, markup and template braces
NOT_PLAIN = re.compile(rf"[{CONTROL}<>\[\]{{}}|\\`]")


def check_answer_names(qid: str, names: list[str], what: str) -> None:
    """THE rule for the names a question's answers go by (a binary scale's labels, a categorical
    one's categories): plain and unpadded (no line breaks, markup, template braces; not 'unparsed',
    which names a verdict with no answer), and distinct in any case, spacing or invisible
    character or Unicode form (`comedy` and `comedy` with a zero-width space were two answers nobody could
    tell apart, as were `Café` with its é composed and decomposed)."""
    for name in names:
        if not name.strip() or name != name.strip() or NOT_PLAIN.search(name) or name.casefold() == "unparsed":
            raise ValueError(f"question {qid!r}: {what} {name!r:.60} is not a plain, unpadded name (no line breaks, "
                             "markup or any of <>[]{}|\\`; 'unparsed' names a verdict with no answer)")
    key = [" ".join(fold("".join(c for c in n if unicodedata.category(c) != "Cf")).split()) for n in names]
    twice = sorted({n for n, k in zip(names, key) if key.count(k) > 1})
    if twice:
        raise ValueError(f"question {qid!r}: {what} names must differ in more than case, spacing, invisible characters "
                         "or Unicode form, "
                         f"got {twice}")


def with_ci(cols: tuple[str, ...]) -> Schema:
    """Each metric's column with its interval's (`NAME`, `NAME_low`, `NAME_high`)."""
    return {k: v for m in cols for k, v in ((m, pl.Float64), (f"{m}_low", pl.Float64), (f"{m}_high", pl.Float64))}


def rate_row(metric: str, rows: pl.DataFrame, values: pl.Expr) -> dict:
    """A rate over `rows` (their `cluster` the clusters) with the project's rate interval."""
    v = rows.select("cluster", values.cast(pl.Float64).alias("v"))
    m = rate_with_ci(v["cluster"].to_list(), v["v"].to_list())
    return {"metric": metric, "value": m.value, "n": m.n, "ci_low": m.ci_low, "ci_high": m.ci_high, "ci_note": m.note}


def number(value: Any) -> float:
    """A human column's number: an int or float as it is, a string only as plain decimal digits; NaN
    for anything else (true/false are no numbers here), infinite for an integer too large for a float."""
    if isinstance(value, bool):
        return math.nan
    if isinstance(value, numbers.Real):
        try:
            return float(value)
        except OverflowError:              # an integer no float holds (10**400): beyond any scale
            return -math.inf if str(value).startswith("-") else math.inf
    parsed = plain_number(value) if isinstance(value, str) else None
    return math.nan if parsed is None else parsed


@dataclass(frozen=True)
class Setting(Key):
    """A key of a question only its scale reads (`categories = [...]`, at the question's level):
    its type as the loader checks it, its default, its line of the configuration reference, and
    why a question of another scale may not set it ("{scale}": that question's scale)."""

    why: str = ""


@dataclass(frozen=True, eq=False)
class Bars:
    """A bar chart of a table: `x` along the axis, a bar per judge (the `judge` column), `y` high."""

    frame: pl.DataFrame
    x: str
    y: str
    title: str
    ylabel: str
    low: str | None = None
    high: str | None = None
    ylim: tuple[float, float] | None = None


@dataclass(frozen=True, eq=False)
class PanelSpec:
    """A report panel a scale adds (drawn by the report layer: judges import no matplotlib)."""

    title: str
    note: str
    tables: tuple[tuple[str, pl.DataFrame], ...]
    bars: tuple[tuple[str, Bars], ...] = ()


class Scale(Named):
    """One kind of rubric question. Stateless: the question (`q`, a judges.rubric.Question) is an
    argument of every method."""

    name: ClassVar[str] = ""
    # where the scale comes in the docs, errors and tables: by order, then name (a new scale: after the four)
    order: ClassVar[int] = 100
    pairwise: ClassVar[bool] = False      # asked about two texts, in both orders
    settings: ClassVar[dict[str, Setting]] = {}   # the question's keys only this scale reads
    metrics: ClassVar[tuple[str, ...]] = ()   # the agreement metrics (higher is better; a sweep may rank by each)
    headline: ClassVar[str] = ""          # the one of them `agreement.agreement` (a sweep's default) publishes
    score: ClassVar[str] = "share"        # `scores.mean_score`: "share" (of 0/1 scores), "mean" (a point), "" (none)
    by: ClassVar[tuple[str, ...]] = ("question",)     # the agreement table's rows
    rank_where: ClassVar[str] = ""        # the agreement row a sweep ranks by, beside the question (",order=...")
    row_values: ClassVar[dict[str, tuple[str, ...]]] = {}   # the values of `by`'s columns beside the question

    @classmethod
    def registered_name(cls) -> str:
        return cls.name

    @property
    def table(self) -> str:
        """The scale's agreement table."""
        return f"{self.name}_agreement"

    def tables(self) -> dict[str, Table]:
        """The tables the scale adds to the rubric's declaration (its agreement table first)."""
        return {self.table: MetricTable(by=self.by, pooled="", higher=self.metrics, rank=self.metrics)}

    @abstractmethod
    def schemas(self) -> dict[str, Schema]:
        """Each of `tables()`'s columns and types (judge and question first)."""

    # -- the question ---------------------------------------------------------------------------
    @abstractmethod
    def check(self, q: Any) -> None:
        """ValueError, one line naming the question, where its own settings do not make a scale."""

    @abstractmethod
    def language(self, q: Any) -> LabelSet:
        """The labels the judge is constrained to (and its answer parsed by)."""

    def answer_line(self, q: Any) -> str:
        """The prompt's last line in label mode."""
        return f"Answer {q.labels_text} only."

    def rubric(self, q: Any) -> str:
        """A description of the scale the prompt shows under the question ("": none)."""
        return ""

    # -- the humans' answers --------------------------------------------------------------------
    @abstractmethod
    def human(self, q: Any, value: Any, unit: str) -> str | None:
        """A text's (a pair's) human answer from its column, in the question's terms; None when
        missing; DataError (one line, `unit` its path: "item X", "pair X") when it is none."""

    def human_between(self, q: Any, x: Any, y: Any, a: str, b: str) -> str | None:
        """Two texts' human preference from their own column values (pairwise scales only)."""
        raise NotImplementedError(f"a {self.name} question is asked of one text, not a pair")

    # -- a verdict in the question's terms ------------------------------------------------------
    def answer(self, label: pl.Expr) -> pl.Expr:
        """The answer of a parsed verdict (`label`, null when unparsed), as the humans' is written."""
        return label

    @abstractmethod
    def scored(self, q: Any, answer: pl.Expr, p: dict[str, pl.Expr]) -> tuple[pl.Expr, pl.Expr]:
        """(score, expected score): the answer as a number, and its expectation from P(label) (`p`,
        distribution mode); null expressions where the scale has none."""

    def score_bounds(self, q: Any) -> tuple[float, float] | None:
        """A mean score's range ("mean" scales); None: a rate of 0/1 scores."""
        return None

    def consistency(self, answered: pl.DataFrame, q: Any) -> list[dict]:
        """Consistency rates beyond the same answer on every repeat (rate_row's rows)."""
        return []

    # -- agreement with the humans --------------------------------------------------------------
    @abstractmethod
    def agreement(self, labelled: pl.DataFrame, q: Any, resamples: int) -> dict[str, list[dict]]:
        """The rows of each table (without judge and question) from one judge's answered verdicts
        with a human answer; the agreement table's last row carries the headline."""

    @abstractmethod
    def rank_units(self, rows: pl.DataFrame, q: Any, metric: str, where: dict[str, str], resamples: int) -> Units | None:
        """The rows behind one ranked metric, with the interval its table prints."""

    def panel(self, tables: dict[str, pl.DataFrame]) -> PanelSpec | None:
        """A report panel of the scale's own (beside the scores, agreement and consistency ones)."""
        return None


# Every scale by its name: built-ins register where they are defined (`@SCALES.register`), plugins
# through entry-point group `litjudge.scales` ("module:Class").
SCALES: Registry[type[Scale]] = Registry("scale", base="litjudge.judges.scales.base:Scale", group="litjudge.scales")
