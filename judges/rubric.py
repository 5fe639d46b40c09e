"""Rubric: your own questions about each text, or each pair of texts, on the scale you choose.

Method, as you write it (`[[options.questions]]` in a config, `questions=[...]` in `litjudge.judge`):
1. A question has an id, its text and a scale (judges/scales/, one class each): `binary` (two
   labels, the first the positive one; Yes / No by default), `points` (an N-point scale with a
   description per point, as Prometheus' score rubrics: the judge answers 1..N), `pairwise` (which
   of two texts answers the question better: A or B, optionally a tie) or `categorical` (one of N
   unordered named categories). Optionally a `reference` column (a text shown after the judged
   one, e.g. a reference answer) and a `human` column (the humans' answer: agreement).
2. Data. Single-text questions read items (text, item_id, group, the row's other columns); pairwise
   ones compare each group's items two by two (the humans prefer the higher human value). Pairwise
   questions alone read pairs (prompt, text_a, text_b; `human = "label"`) unless `pairs_from =
   "groups"`. `limit` counts texts, groups (when a question is pairwise) or pairs.
3. Each text is asked each single-text question with the text first, so a text's questions share
   its prefix; each pair is asked each pairwise question in both orders (a shown first, then b
   first), the verdict mapped back to the texts. Labels are constrained by the scale's grammar
   (`Scale.language`: `grammars.binary(yes, no)`, `grammars.score(1, N)`,
   `grammars.preference("A", "B"[, "tie"])`, `grammars.categorical(names)`).
4. Modes: label; analyze (a bounded analysis, then `Verdict: <label>`); distribution (P(label) at
   the decision point, and from it P(positive), the expected score, P(text a)).
5. Tables (rubric_tables.py): each question's score distribution, the judge's consistency (across
   repeats; across orders: swap-flip and first-position win rates) and, where a human column is
   given, the scale's agreement tables (`Scale.agreement`): binary (kappa, balanced accuracy),
   points (Spearman, quadratic-weighted kappa, exact and within-one agreement, mean difference
   judge - human), pairwise (accuracy per order and the mean of both), categorical (kappa,
   accuracy, each category's shares). 95% intervals: texts (pairs) the clusters, none under 10.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from functools import lru_cache
from itertools import combinations
from pathlib import Path
from typing import Any

import polars as pl

import litjudge.grammars as grammars
from litjudge.engine.core.config import valid_name
from litjudge.engine.core.errors import ConfigError, DataError
from litjudge.engine.core.schema import Key, refuse
from litjudge.engine.data.items import RatedItem
from litjudge.engine.data.pairs import Pair

from .base import Ask, Context, Declaration, MetricTable, Protocol, RankBy, Skip, Table
from .metrics.bootstrap import RESAMPLES, resamples_problem
from .metrics.estimates import Units
from .rubric_columns import column
from .rubric_tables import aggregate, check_rank, human_view, rank_units, without_humans
from .scales import Live, Scale, names, own_settings, scales
from .scales import scale as scale_named
from .scales import settings as scale_settings
from .templates import Template, TemplateFields, checked, config_base, read

SINGLE_FIELDS = ("text", "question", "labels", "rubric", "reference", "group")
PAIR_TEMPLATE_FIELDS = ("text_a", "text_b", "prompt", "question", "labels", "reference", "group")


@dataclass(frozen=True, init=False)
class Question:
    """One question of a rubric, as written in `[[options.questions]]`: the keys below, and its
    scale's own (`labels`, `points`, `tie`, `categories`: declared by each scale, `Scale.settings`)."""

    id: str                                # letters, digits, '-' and '_' (part of each item id)
    text: str                              # the question the judge reads
    scale: str = "binary"                  # binary, points, pairwise, categorical or a scale of your own (judges/scales/)
    reference: str = ""                    # a column holding a reference text, shown after the judged text(s)
    human: str = ""                        # a column holding the humans' answer (agreement tables)
    template: str = ""                     # this question's own prompt template (judges/templates.py)
    # its scale's settings, each given or its default (read as attributes: q.categories)
    settings: tuple[tuple[str, Any], ...] = field(default=(), init=False)

    def __init__(self, id: str, text: str, scale: str = "binary", reference: str = "", human: str = "",
                 template: str = "", **settings: Any):
        for name, value in (("id", id), ("text", text), ("scale", scale), ("reference", reference),
                            ("human", human), ("template", template)):
            object.__setattr__(self, name, value)
        if not valid_name(self.id):
            raise ValueError(f"a question's id is letters, digits, '-' and '_', got {self.id!r}")
        if not self.text.strip():
            raise ValueError(f"question {self.id!r} has no text")
        try:
            kind = scale_named(self.scale)
        except ValueError as e:
            raise ValueError(f"question {self.id!r}: {e}") from None
        object.__setattr__(self, "settings", own_settings(self.id, kind, settings, COMMON))
        kind.check(self)

    @classmethod
    def extra_keys(cls) -> dict[str, Key]:
        """The scales' own keys, which a question writes beside its own (the loader's and the reference's)."""
        return {k: Key(s.type, s.default, "; ".join(f"{kind.name}: {kind.settings[k].doc}" for kind in kinds))
                for k, (s, kinds) in scale_settings(COMMON).items()}

    def __getattr__(self, name: str) -> Any:
        """A scale's setting: this question's value, else its default (q.labels of a points question: Yes, No)."""
        own = dict(self.__dict__.get("settings", ()))
        if name in own:
            return own[name]
        declared = scale_settings().get(name) if not name.startswith("_") else None
        if declared is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return declared[0].default

    @property
    def kind(self) -> Scale:
        """The question's scale (judges/scales/): its grammar, human mapping, tables."""
        return scale_named(self.scale)

    @property
    def pairwise(self) -> bool:
        return self.kind.pairwise

    @property
    def language(self) -> grammars.LabelSet:
        return self.kind.language(self)

    @property
    def labels_text(self) -> str:
        """The answers as the prompt lists them: "Yes or No", "1, 2, 3, 4 or 5", "A or B"."""
        names = self.language.labels()
        return ", ".join(names[:-1]) + " or " + names[-1]

    @property
    def rubric(self) -> str:
        return self.kind.rubric(self)


COMMON = tuple(f.name for f in fields(Question) if f.init)


@dataclass(frozen=True)
class RubricOptions:
    questions: tuple[Question, ...] = ()
    # where pairwise questions get their pairs: "data" (the dataset's pairs), "groups" (the items of
    # each group two by two); "": data when every question is pairwise, else groups
    pairs_from: str = ""
    analysis_tokens: int = 256             # analyze mode: bound on the free analysis
    resamples: int = RESAMPLES                  # bootstrap resamples of every interval

    def __post_init__(self) -> None:
        if not self.questions:
            known = names()
            raise ValueError("options.questions lists no question: give at least one, each with an id, its text and "
                             f"a scale ({', '.join(known[:-1])} or {known[-1]})")
        ids = [q.id for q in self.questions]
        if len(set(ids)) != len(ids):
            raise ValueError(f"options.questions: question ids must be distinct, got {ids}")
        refuse(resamples_problem(self.resamples), "resamples")
        if self.pairs_from not in ("", "data", "groups"):
            raise ValueError(f"options.pairs_from must be \"data\" or \"groups\" (or left out), got {self.pairs_from!r}")
        if self.pairs_from == "data" and self.single:
            raise ValueError("options.pairs_from = \"data\" reads pairs, and a single-text question reads items: ask "
                             "the single-text questions in a run of their own, or pair the items of each group "
                             "(pairs_from = \"groups\")")

    @property
    def single(self) -> list[Question]:
        return [q for q in self.questions if not q.pairwise]

    @property
    def pairwise(self) -> list[Question]:
        return [q for q in self.questions if q.pairwise]

    @property
    def reads_pairs(self) -> bool:
        return self.pairs_from == "data" or (not self.pairs_from and not self.single)


class Rubric(Protocol):
    # Ranked by one question's headline agreement (kappa, quadratic-weighted kappa or the mean
    # accuracy of both orders), never pooled across questions: `agreement.agreement@question=ID`,
    # else the first question with a human column. Missing answers are left out (drop).
    declared = Declaration(
        name="rubric", version="1", reads="items", options=RubricOptions,
        limit_counts="texts (groups when a question is pairwise; pairs when the rubric reads pairs)",
        modes=("label", "analyze", "distribution"),
        summary=("scores", "agreement", "consistency"),
        tables=Live(lambda: {     # read when used: every scale registered by then adds its tables
                "scores": MetricTable(by=("question",), pooled=None),
                "label_distribution": MetricTable(by=("question", "label"), pooled=None),
                "consistency": MetricTable(by=("question", "metric"), pooled=None),
                "agreement": MetricTable(by=("question",), pooled="", higher=("agreement",), rank=("agreement",)),
                **{name: table for kind in scales() for name, table in kind.tables().items()},
                "per_verdict": Table()}),
        rank_by="agreement.agreement", report="litjudge.engine.app.report.rubric_panels:rubric_panels",
        fields={"question": str, "scale": str, "text_id": str, "pair_id": str, "order": str, "group": str,
                "human": str, "item_a": str, "item_b": str})

    def reads(self, options: RubricOptions) -> str:
        return "pairs" if options.reads_pairs else "items"

    def orders_categories(self, options: RubricOptions) -> bool:
        return False                                 # a categorical question's order is its `categories`

    def reads_hint(self, options: RubricOptions, gives: tuple[str, ...]) -> str:
        pair = options.reads_pairs and "items" in gives
        return '; to pair the texts of each group two by two, set options.pairs_from = "groups"' if pair else ""

    def rank_group(self, rank: RankBy, options: RubricOptions) -> str:
        """The question asked for, else the first question (of the table's scale) with a human column."""
        if rank.group:
            return rank.group
        chosen = [q for q in options.questions if q.human and rank.table in ("agreement", q.kind.table)]
        group = f"question={chosen[0].id}" if chosen else "question="
        return group + next((k.rank_where for k in scales() if k.table == rank.table), "")

    def check_rank(self, rank: RankBy, options: RubricOptions) -> None:
        check_rank(rank, list(options.questions))

    def group_rows(self, verdicts: pl.DataFrame, group: str, table: str = "") -> pl.DataFrame:
        """Every rankable table is an agreement with the humans: it reads the verdicts that have a
        human answer (a pairwise question's human tie left out), so a sweep's `unread` counts those."""
        rows = super().group_rows(verdicts, group, table)
        if not table.endswith("agreement") or "human" not in rows.columns:
            return rows
        read = pl.col("human").is_not_null()
        return rows.filter(read & (pl.col("human") != "tie") if table == "pairwise_agreement" else read)

    def rank_units(self, tables: dict[str, pl.DataFrame], judge: str, rank: RankBy, options: RubricOptions) -> Units | None:
        return rank_units(tables, judge, rank, self.rank_group(rank, options), list(options.questions),
                          options.resamples)

    def missing_labels(self, options: RubricOptions) -> tuple[str, ...]:
        return ()

    # -- your own templates -----------------------------------------------------------------
    def template_fields(self, options: RubricOptions) -> TemplateFields | None:
        """A template for every question: it names the text(s) and, over several questions, the question."""
        kinds = {q.pairwise for q in options.questions}
        if len(kinds) > 1:
            return None
        asked = ("question",) if len(options.questions) > 1 else ()
        return TemplateFields(PAIR_TEMPLATE_FIELDS, ("text_a", "text_b", *asked)) if True in kinds else \
            TemplateFields(SINGLE_FIELDS, ("text", *asked))

    def templates(self, config, options: RubricOptions) -> dict[str, Template]:
        where = config.source or "config"
        if config.template and self.template_fields(options) is None:
            raise ConfigError("a rubric with single-text and pairwise questions takes a template per question "
                              "(options.questions[N].template), not one for all", where=where, key="template")
        out = super().templates(config, options)
        for n, q in enumerate(options.questions):
            if q.template:
                key = f"options.questions[{n}].template"
                fields = TemplateFields(PAIR_TEMPLATE_FIELDS, ("text_a", "text_b")) if q.pairwise else \
                    TemplateFields(SINGLE_FIELDS, ("text",))
                out[key] = checked(read(q.template, config_base(config), where, key), fields, self.name, where, key)
        return out

    # -- what is asked ------------------------------------------------------------------------
    def units(self, ctx: Context) -> Any:
        opts: RubricOptions = ctx.options
        if opts.reads_pairs:
            return _pairs(ctx, hint=not opts.pairs_from)     # read as the plan consumes them
        data = ctx.load("items")
        return list(data.groups().items()) if opts.pairwise else list(data.items)

    def asks(self, ctx: Context, unit: Any) -> Iterator[Ask | Skip]:
        """A text's single-text questions (the text first); a pair's pairwise questions in both
        orders; a group: each of its texts, then each pair of them."""
        opts: RubricOptions = ctx.options
        if isinstance(unit, Pair):
            yield from self._pair_asks(ctx, unit, unit.pair_id, (unit.text_a, unit.text_b), unit.prompt, unit.group,
                                       lambda q: column(ctx, unit, q.reference) if q.reference else "",
                                       lambda q: _pair_human(ctx, q, unit), ())
            return
        group, items = unit if isinstance(unit, tuple) else (unit.group, [unit])
        clash = next((x.item_id for x in items if opts.pairwise and "|" in x.item_id), None)
        if clash is not None:     # "a|b" names the pair of a and b: such an id would name two asks
            raise DataError(f"item id {clash!r} holds '|', which joins the two ids of a pair "
                            "(a pairwise question's asks are 'A|B/question/order'): rename it", path=f"item {clash}")
        for item in items:
            yield from self._text_asks(ctx, item)
        if len(items) == 1:                 # no other text to pair it with: said, not dropped in silence
            yield from (Skip(f"{items[0].item_id}/{q.id}", f"a text alone in its group has no pair for pairwise "
                             f"question {q.id!r}", warn=True) for q in opts.pairwise)
        for a, b in combinations(items if opts.pairwise else (), 2):
            yield from self._pair_asks(ctx, a, f"{a.item_id}|{b.item_id}", (a.text, b.text), "", group,
                                       lambda q, a=a: column(ctx, a, q.reference) if q.reference else "",
                                       lambda q, a=a, b=b: _items_human(ctx, q, a, b),
                                       (("item_a", a.item_id), ("item_b", b.item_id)))

    def _text_asks(self, ctx: Context, item: RatedItem) -> Iterator[Ask | Skip]:
        own = _own_templates(ctx)
        for q in ctx.options.single:
            reference = _text(column(ctx, item, q.reference)) if q.reference else ""
            if q.reference and not reference.strip():
                yield _no_reference(f"{item.item_id}/{q.id}", q)
                continue
            values = {"text": item.text, "question": q.text, "labels": q.labels_text, "rubric": q.rubric,
                      "reference": reference, "group": item.group}
            prompt = own[q.id].render(values) if q.id in own else single_prompt(q, values, ctx.config.mode)
            human = q.kind.human(q, column(ctx, item, q.human), f"item {item.item_id}") if q.human else None
            yield Ask(f"{item.item_id}/{q.id}", prompt, q.language, (
                ("question", q.id), ("scale", q.scale), ("text_id", item.item_id), ("group", item.group),
                ("human", human)))

    def _pair_asks(self, ctx: Context, row: Any, pair_id: str, texts: tuple[str, str], prompt: str, group: str,
                   reference, human, extra: tuple) -> Iterator[Ask | Skip]:
        own = _own_templates(ctx)
        for q in ctx.options.pairwise:
            ref, answer = _text(reference(q)), human(q) if q.human else None
            if q.reference and not ref.strip():
                yield _no_reference(f"{pair_id}/{q.id}", q)
                continue
            for order in ("ab", "ba"):
                first, second = texts if order == "ab" else texts[::-1]
                values = {"text_a": first, "text_b": second, "prompt": prompt, "question": q.text,
                          "labels": q.labels_text, "reference": ref, "group": group}
                asked = own[q.id].render(values) if q.id in own else pair_prompt(q, values, ctx.config.mode)
                yield Ask(f"{pair_id}/{q.id}/{order}", asked, q.language, (
                    ("question", q.id), ("scale", q.scale), ("pair_id", pair_id), ("order", order), ("group", group),
                    ("human", answer), *extra))

    # -- aggregation --------------------------------------------------------------------------
    def human_view(self, verdicts: pl.DataFrame, tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
        return human_view(verdicts)

    def aggregate(self, table: pl.DataFrame, ctx: Context) -> dict[str, pl.DataFrame]:
        tables = aggregate(table, ctx.options)
        for message in without_humans(tables["per_verdict"], list(ctx.options.questions)):
            ctx.warn(message)
        return tables


# -- prompts ----------------------------------------------------------------------------------
def _answer_line(q: Question, mode: str) -> str:
    if mode == "analyze":
        return f"Write a brief assessment, then end with a last line 'Verdict: X', where X is {q.labels_text}."
    return q.kind.answer_line(q)


def _no_reference(ask: str, q: Question) -> Skip:
    """A question with a reference column, for a text whose cell is empty: asked without it, it
    would be another question (a hostile pass: asked so, silently, and pooled with the rest)."""
    return Skip(ask, f"no reference text in {q.reference!r} for question {q.id!r}", warn=True)


def single_prompt(q: Question, v: dict[str, str], mode: str) -> str:
    """The text first (a text's questions share it as a prefix), then the question and its scale."""
    reference = f"Reference:\n{v['reference']}\n\n" if v["reference"] else ""
    rubric = f"\nScore rubric:\n{q.rubric}" if q.rubric else ""
    return (f"Read the text below, then answer the question about it.\n\nText:\n{v['text']}\n\n{reference}"
            f"Question: {q.text}{rubric}\n{_answer_line(q, mode)}")


def pair_prompt(q: Question, v: dict[str, str], mode: str) -> str:
    """The writing prompt (if any), text A (shown first), text B, then the question."""
    prompt = f"Writing prompt:\n{v['prompt']}\n\n" if v["prompt"] else ""
    reference = f"Reference:\n{v['reference']}\n\n" if v["reference"] else ""
    return (f"Read the two texts below, then answer the question about them.\n\n{prompt}Text A:\n{v['text_a']}\n\n"
            f"Text B:\n{v['text_b']}\n\n{reference}Question: {q.text}\n{_answer_line(q, mode)}")


def _own_templates(ctx: Context) -> dict[str, Template]:
    """Each question's own template (its `template`, else the run's `template`), by question id."""
    return _resolved(ctx.config.template, tuple((q.id, q.template) for q in ctx.options.questions),
                     str(config_base(ctx.config)), ctx.config.source or "config")


@lru_cache(maxsize=32)
def _resolved(top: str, per: tuple[tuple[str, str], ...], base: str, where: str) -> dict[str, Template]:
    out = {}
    run_wide = read(top, Path(base), where, "template") if top else None
    for qid, spec in per:
        own = read(spec, Path(base), where, "template") if spec else run_wide
        if own is not None:
            out[qid] = own
    return out


def _pairs(ctx: Context, hint: bool) -> Iterator[Pair]:
    """The data's pairs; a row without a pair's fields (items data, read as pairs because every
    question is pairwise) says how to pair the texts of each group instead."""
    try:
        yield from ctx.load("pairs")
    except DataError as e:
        if not hint:
            raise
        fields = e.message.startswith(tuple(f"missing field {f!r}" for f in ("prompt", "text_a", "text_b")))
        raise DataError(f"{e.message}: a rubric of pairwise questions only reads " + (
                        "pairs (prompt, text_a, text_b)" if fields else f"the pairs of dataset {ctx.card.name!r}") +
                        '; to compare the texts of each group two by two, set options.pairs_from = "groups"',
                        path=e.path, row=e.row) from None


# -- the data's columns (rubric_columns.py: `column`) ---------------------------------------------
def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _pair_human(ctx: Context, q: Question, pair: Pair) -> str | None:
    return q.kind.human(q, column(ctx, pair, q.human), f"pair {pair.pair_id}")


def _items_human(ctx: Context, q: Question, a: RatedItem, b: RatedItem) -> str | None:
    return q.kind.human_between(q, column(ctx, a, q.human), column(ctx, b, q.human), a.item_id, b.item_id)
