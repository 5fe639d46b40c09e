"""Pairwise preference (LitBench, 2025): which of two texts answering the same prompt is better?

Method:
1. Every pair is judged in both orders (text a shown first, then text b first); verdict A or B
   (optionally a tie label) about the positions shown, mapped back to the texts.
2. Templates: the project's default, or one of LitBench's printed templates (from the paper
   prompts). Modes: label only (the GenRM setting: one constrained token; `distribution` reads
   P(A) at the decision point), or analysis then `Preferred: A|B`.
   Reward-model judges (`reward:MODEL`, mode "reward"): each text scored alone by a Bradley-Terry
   reward model; the higher wins, P(a) = sigmoid(r_a - r_b); no order, so no swap or position bias.
3. Accuracy against the human label (a tie verdict half credit), per order and averaged over the
   two orders, over the pairs that have one (pairs without are judged for the bias tables; data
   with no human label at all has no accuracy, length-control or calibration table); swap-flip rate
   (the two orders disagree), first-position win rate, longer-text win rate, tie rate and text a's
   win rate (which text the judge prefers, a tie half: two systems' texts need no human), each with
   a 95% interval, pairs the clusters (`metrics.proportion`). A pair's combined verdict follows the
   tie rule: `inconsistent` (orders that disagree make a tie) or `probability` (average P(text a)
   over the orders).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, get_args

import polars as pl

import litjudge.grammars as grammars
from litjudge.engine.core.config import MissingPolicy
from litjudge.engine.core.errors import ConfigError
from litjudge.engine.core.paths import paper_prompt
from litjudge.engine.core.requests import Message
from litjudge.engine.core.schema import check_choices, refuse
from litjudge.engine.core.verdicts import probability
from litjudge.engine.data.pairs import Pair

from .base import Ask, Context, Declaration, MetricTable, Protocol, RankBy, Table, imputed, units_where
from .frames import split, text_picked, tie_credit
from .length_control import (
    FEATURE_COLUMNS,
    STYLE,
    control_features,
    lc_accuracy_of,
    lc_rule,
    length_controlled,
    text_features,
)
from .metrics.bootstrap import RESAMPLES, resamples_problem
from .metrics.calibration import brier_units, calibration_units
from .metrics.estimates import Units
from .metrics.proportion import ONE_ORDER
from .tables import AFTER_ANALYSIS, calibration_tables, label_distribution, rate_rows, stated_probability
from .templates import TemplateFields, template_of

ORDERS = ("ab", "ba")
# which text is longer in words (None when equal): the longer-text bias is measured against it
LONGER = (pl.when(pl.col("words_a") > pl.col("words_b")).then(pl.lit("a"))
          .when(pl.col("words_b") > pl.col("words_a")).then(pl.lit("b")).otherwise(None))
# "default", or a LitBench template
Template = Literal["default", "writerly_criteria", "minimal", "reddit_minimal", "reddit_verbose", "reddit_verbose_permuted"]
LITBENCH = get_args(Template)[1:]
DEFAULT_TEMPLATE = ("You are comparing two creative writing responses (A and B) to the same writing prompt. "
                    "Decide which one is the better piece of writing: more original, engaging, vivid and "
                    "well crafted.")


@dataclass(frozen=True)
class PairwiseOptions:
    template: Template = "default"       # "default" or a LitBench template name
    tie: bool = False                    # allow a "tie" verdict
    tie_rule: Literal["inconsistent", "probability"] = "inconsistent"   # combined verdict (distribution mode)
    analysis_tokens: int = 256           # analyze mode: bound on the free analysis
    resamples: int = RESAMPLES                # bootstrap resamples for the calibration interval
    style_control: bool = False          # length control also holds markdown headers, lists and bold equal

    def __post_init__(self) -> None:
        check_choices(self)
        refuse(resamples_problem(self.resamples), "resamples")


class Pairwise(Protocol):
    # Ranked pooled over both orders: a judge that always answers "A" is right on every pair whose
    # better text is shown first, so one order's accuracy ranks position bias, not judgement.
    declared = Declaration(
        name="pairwise", version="1", reads="pairs", options=PairwiseOptions, limit_counts="pairs",
        modes=("label", "analyze", "distribution", "reward"), missing=("drop", "label", "wrong"),
        summary=("accuracy", "bias"), post_options=("tie_rule",),
        tables={"accuracy": MetricTable(by=("order",), pooled="order=mean of both", higher=("accuracy",),
                                        rank=("accuracy",), when="labelled"),
                "bias": MetricTable(by=("metric",)),
                # not for a reward model
                "length_control": MetricTable(higher=("accuracy", "lc_accuracy"), rank=("lc_accuracy",), when="sometimes"),
                # with probabilities (distribution mode, a reward model) on labelled pairs
                "calibration_summary": MetricTable(lower=("ece", "squared_calibration_error", "brier"),
                                                   rank=("squared_calibration_error", "brier"), when="sometimes"),
                "calibration": Table(when="sometimes"),
                **dict.fromkeys(("pairs", "per_verdict", "label_distribution"), Table())},
        rank_by="accuracy.accuracy",
        fields={"pair_id": str, "order": str, "side": str, "human": str, "group": str,
                **dict.fromkeys(FEATURE_COLUMNS, int)},
        decision_key=("pair_id", "order", "repeat"), report="litjudge.engine.app.report.panels:pairwise_panels")

    def missing_labels(self, options: PairwiseOptions) -> tuple[str, ...]:
        return ("A", "B", "tie") if options.tie else ("A", "B")

    def template_fields(self, options: PairwiseOptions) -> TemplateFields:
        """{text_a} is the text shown first (as A), {text_b} the one shown second: they swap in order ba."""
        return TemplateFields(("prompt", "text_a", "text_b", "labels"), ("text_a", "text_b"))

    def group_rows(self, verdicts: pl.DataFrame, group: str, table: str = "") -> pl.DataFrame:
        """Accuracy and calibration read the pairs the humans labelled a or b (a human tie, or no
        label, is left out): the verdicts behind them are those (a sweep's `unread` counted a
        judge's unreadable answers on unlabelled pairs, 0.25 where every answer behind was read)."""
        rows = super().group_rows(verdicts, group, table)
        if table in ("accuracy", "length_control", "calibration_summary") and "human" in rows.columns:
            rows = rows.filter(pl.col("human").is_in(["a", "b"]))
        return rows

    def rank_units(self, tables: dict[str, pl.DataFrame], judge: str, rank: RankBy, options: PairwiseOptions):
        """Pairs are the clusters of every rankable estimate (a pair's orders and repeats move together)."""
        verdicts = tables.get("per_verdict")
        if verdicts is None:
            return None
        rows = units_where(verdicts.filter(pl.col("judge") == judge), rank)
        if rows is None:
            return None
        if rank.table == "calibration_summary":
            rows = rows.with_columns(stated_probability(rows, "p_a").alias("p")).filter(
                pl.col("p").is_not_null() & pl.col("human").is_in(["a", "b"]) & (pl.col("status") == "ok"))
            units = calibration_units if rank.metric == "squared_calibration_error" else brier_units
            return units(rows["pair_id"].to_list(), rows["p"].to_list(), (rows["human"] == "a").to_list())
        labelled = rows.filter(pl.col("pick").is_not_null() & (pl.col("human") != "tie"))
        if rank.name == "length_control.lc_accuracy":
            labelled = labelled.filter(pl.col("pick") != "tie")
            x = control_features(labelled, options.style_control and all(f"{k}_a" in labelled.columns for k in STYLE))
            cols = {f"x{i}": [r[i] for r in x] for i in range(len(x[0]))} if x else {"x0": []}
            return Units.of(labelled["pair_id"].to_list(), {**cols, "y": (labelled["pick"] == labelled["human"]).to_numpy()},
                            lc_accuracy_of, rule=lc_rule)
        return Units.rate(labelled["pair_id"].to_list(), labelled.select(tie_credit("pick").alias("v"))["v"].to_list(),
                          labelled["order"].to_list(), need=None if rank.where().get("order") in ORDERS
                          else orders_needed(set(labelled["order"]) <= {"reward"}))

    def load(self, ctx: Context) -> list[Pair]:
        return ctx.load("pairs")

    def prompt(self, opts: PairwiseOptions, mode: str, pair: Pair, first: str, second: str) -> str:
        head = (DEFAULT_TEMPLATE if opts.template == "default"
                else paper_prompt("pairwise_litbench", "templates", opts.template))
        tie = " (or 'Preferred: tie' if they are equally good)" if opts.tie else ""   # not "A or B only. Answer tie"
        ask = (f"Write a brief comparison, then end with a last line 'Preferred: A' or 'Preferred: B'{tie}."
               if mode == "analyze" else
               "Answer with A, B or tie only (tie if they are equally good)." if opts.tie else "Answer with A or B only.")
        return f"{head}\n\nWriting prompt:\n{pair.prompt}\n\nResponse A:\n{first}\n\nResponse B:\n{second}\n\n{ask}"

    def units(self, ctx: Context) -> Iterator[Pair]:
        """The pairs, read as the plan consumes them (a million pairs stream)."""
        return iter(self.load(ctx))

    def asks(self, ctx: Context, pair: Pair) -> Iterator[Ask]:
        """Both orders of the pair, adjacent (so they plan together); a reward model instead scores
        each text on its own, the conversation (prompt, text) as is: no order to swap, and a text
        shared by several pairs is one key, scored once."""
        opts: PairwiseOptions = ctx.options
        features = text_features(pair, opts.style_control)
        if ctx.config.mode == "reward":
            for side, text in (("a", pair.text_a), ("b", pair.text_b)):
                yield Ask(f"{pair.pair_id}/{side}", (Message("user", pair.prompt), Message("assistant", text)),
                          grammars.RewardScore(), (("pair_id", pair.pair_id), ("order", "reward"), ("side", side),
                                                   ("human", pair.label), ("group", pair.group), *features))
            return
        verdict = grammars.preference("A", "B", "tie" if opts.tie else None)
        own = template_of(ctx.config)
        labels = " or ".join(verdict.labels())
        for order in ORDERS:
            first, second = (pair.text_a, pair.text_b) if order == "ab" else (pair.text_b, pair.text_a)
            asked = own.render({"prompt": pair.prompt, "text_a": first, "text_b": second, "labels": labels}) if own \
                else self.prompt(opts, ctx.config.mode, pair, first, second)
            yield Ask(f"{pair.pair_id}/{order}", asked, verdict, (
                ("pair_id", pair.pair_id), ("order", order), ("human", pair.label), ("group", pair.group),
                *features), marker="Preferred:")

    def reward_decisions(self, table: pl.DataFrame, policy: MissingPolicy) -> pl.DataFrame:
        """Per pair: the two texts' rewards -> the pick (higher wins) and P(a) = sigmoid(r_a - r_b)."""
        if policy.kind == "label":
            raise ConfigError("a reward model gives no labels: use missing = \"drop\" or \"wrong\"", parameter="missing")
        scores = table.with_columns(pl.when(pl.col("status") == "ok").then(pl.col("value").cast(pl.Float64)).alias("r"))
        index = ["judge", "pair_id", "human", *[c for c in FEATURE_COLUMNS if c in table.columns]]
        wide = scores.pivot(on="side", index=index, values=["r", "status"], aggregate_function="first")
        diff = pl.col("r_a") - pl.col("r_b")
        answer = pl.when(pl.col("r_a").is_null() | pl.col("r_b").is_null()).then(None) \
            .when(diff > 0).then(pl.lit("a")).when(diff < 0).then(pl.lit("b")).otherwise(pl.lit("tie"))
        # unparsed where a score could not be read; a side never scored was never asked (a hostile pass
        # read 0 unreadable of 19 scores as an unparsed rate of 0.55)
        status = pl.when(answer.is_not_null()).then(pl.lit("ok")).when(pl.any_horizontal(
            pl.col("status_a", "status_b") == "unparsed")).then(pl.lit("unparsed")).otherwise(pl.lit("missing"))
        wide = wide.with_columns(answer.alias("answer"), (1 / (1 + (-diff).exp())).alias("p_a"),
                                 LONGER.alias("longer"), pl.lit("reward").alias("order"), pl.lit(0).alias("repeat"),
                                 status.alias("status"), pl.lit(None, dtype=pl.Utf8).alias("label"),
                                 pl.lit(None, dtype=pl.Boolean).alias("first_won"))
        return wide.drop("status_a", "status_b").with_columns(_imputed(policy).alias("pick"))

    # -- aggregation --------------------------------------------------------------------------
    def decisions(self, table: pl.DataFrame, policy: MissingPolicy) -> pl.DataFrame:
        """One row per verdict: the text it picked (`answer`: a / b / tie from the judge's real answer,
        None when it gave none), the pick agreement is scored on (`pick`: the answer, or what the
        missing-answer policy puts in its place), P(text a) when known, and whether the text shown
        first won (real answers that prefer a side)."""
        t = table.with_columns(*(pl.when(pl.col("order") == "ab").then(probability(table, "A", column))
                                 .otherwise(probability(table, "B", column)).cast(pl.Float64).alias(name)
                                 for name, column in (("p_a", "distribution"),
                                                      ("p_a" + AFTER_ANALYSIS, "analysis_distribution"))))
        answer = pl.when(pl.col("status") == "ok").then(text_picked(pl.col("label")))
        t = t.with_columns(answer.alias("answer"), LONGER.alias("longer"),
                           pl.when(answer.is_in(["a", "b"])).then(pl.col("label") == "A").alias("first_won"))
        return t.with_columns(_imputed(policy).alias("pick"))

    def text_answers(self, verdicts: pl.DataFrame) -> pl.DataFrame:
        """Each real answer as the text it picked (`pair_id`, `judge`, `answer`: a, b or tie): a
        verdict's stored label and value name a position, a reward model's two scores a text."""
        drop = MissingPolicy.parse("drop")
        d = self.reward_decisions(verdicts, drop) if "side" in verdicts.columns else self.decisions(verdicts, drop)
        return d.filter(pl.col("answer").is_not_null()).select("pair_id", "judge", "answer")

    def human_view(self, verdicts: pl.DataFrame, tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
        """The text each verdict picked (a, b or tie, in whichever order it was shown) beside the
        humans' pick; a reward model's score has no pick of its own (the default view)."""
        if "side" in verdicts.columns:
            return super().human_view(verdicts, tables)
        d = self.decisions(verdicts, MissingPolicy.parse("drop"))
        return d.with_columns(pl.col("human").cast(pl.Utf8).alias("truth"),
                              pl.when(pl.col("answer").is_not_null() & pl.col("human").is_not_null())
                              .then(pl.col("answer") == pl.col("human")).alias("agrees"))

    def aggregate(self, table: pl.DataFrame, ctx: Context) -> dict[str, pl.DataFrame]:
        """Agreement is computed per judgement unit: a pair at one repeat (its two orders); every
        interval has pairs as its clusters, every judge's at once (`tables.rate_rows`). Bias tables
        read the judge's real answers only."""
        opts: PairwiseOptions = ctx.options
        policy = ctx.config.missing_policy
        reward = "side" in table.columns
        first = next(iter(self.load(ctx)), None)
        if first is not None and first.pair_id == "line1" and "id" in first.extra:      # no pair_id: named by line
            ctx.warn("the pairs are named by their line (line1, ...), not by your column 'id': name it the pairs' id "
                     "with columns={'pair_id': 'id'} ([dataset.columns] pair_id = \"id\")")
        d = self.reward_decisions(table, policy) if reward else self.decisions(table, policy)
        judges = d.select("judge").unique(maintain_order=True)
        units = combine(d, opts.tie_rule)
        published = ("p_a" + AFTER_ANALYSIS, *FEATURE_COLUMNS)
        tables = {"bias": _bias(d, units, judges, reward), "pairs": units.select(pl.exclude("judge"), "judge"),
                  "per_verdict": d.select(["judge", "pair_id", "order", "repeat", "human", "status", "label", "answer",
                                           "pick", "p_a", *[c for c in published if c in d.columns]]),
                  "label_distribution": label_distribution(d.filter(pl.col("order") != "reward"), "pair_id")
                  if not reward else pl.DataFrame()}
        if not _labelled(d, ctx):
            return tables
        answered = d.filter(pl.col("status") == "ok").with_columns((pl.col("human") == "a").alias("human_a"))
        tables |= {"accuracy": _accuracy(d, units, judges, reward, opts.tie_rule),
                   **calibration_tables(answered.filter(pl.col("human") != "tie"), "p_a", "human_a",
                                        resamples=opts.resamples, cluster="pair_id",
                                        given="reward model" if reward else "distribution")}
        if not reward:
            labelled = d.filter(pl.col("pick").is_not_null() & (pl.col("human") != "tie"))
            # a judge answered in one order only: its fit would read that order's picks, position bias included
            one_order = answered_in_fewer(labelled, len(ORDERS))
            tables["length_control"] = pl.DataFrame(
                [{"judge": judge, **length_controlled(j, opts.style_control),
                  **(ONE_ORDER_ROW if judge in one_order else {})}
                 for (judge,), j in split(labelled, "judge").items()], infer_schema_length=None)
        return tables


def _labelled(d: pl.DataFrame, ctx: Context) -> bool:
    """Whether any pair has a human label (agreement's tables need one); pairs without one, or tied, are said."""
    pairs = d.select("pair_id", "human").unique("pair_id")
    unlabelled = pairs["human"].null_count()
    if unlabelled == pairs.height:
        ctx.no_labels(f"no pair has a human label (a, b or tie in the label column): the bias tables read all "
                      f"{pairs.height} pairs; no accuracy, length-control or calibration table")
        return False
    ties = int((pairs["human"] == "tie").sum())
    if unlabelled:
        tied = f" ({ties} of them tied by the humans, which agreement leaves out)" if ties else ""
        ctx.warn(f"{unlabelled} of {pairs.height} pairs have no human label: accuracy, length control and calibration "
                 f"read the {pairs.height - unlabelled} labelled ones{tied}, the bias tables all {pairs.height}")
    elif ties:          # said alone too (a new user's 7 of 24 pairs tied: accuracy's n 17, unsaid)
        ctx.warn(f"{ties} of {pairs.height} pairs were tied by the humans, which agreement leaves out: accuracy, length "
                 f"control and calibration read the {pairs.height - ties} others, the bias tables all {pairs.height}")
    return True


def _accuracy(d: pl.DataFrame, units: pl.DataFrame, judges: pl.DataFrame, reward: bool, rule: str) -> pl.DataFrame:
    """Per judge: accuracy in each order, the mean of the two orders' accuracies (its interval of
    that same statistic), and the pair-level combined verdict's; a tie half credit in each."""
    labelled = d.filter(pl.col("pick").is_not_null() & (pl.col("human") != "tie")).with_columns(
        tie_credit("pick").alias("accuracy"))
    orders = judges.join(pl.DataFrame({"order": ["reward"] if reward else list(ORDERS)}), how="cross")
    combined = units.filter(pl.col("combined").is_not_null() & (pl.col("human") != "tie")).with_columns(
        tie_credit("combined").alias("accuracy"))
    untied = d.filter(pl.col("human").is_not_null() & (pl.col("human") != "tie")).height
    empty = "no answer on a pair the humans did not tie" if untied else "the humans tied every labelled pair"
    parts = [rate_rows(labelled, ["judge", "order"], "pair_id", "accuracy", groups=orders, empty=empty),
             rate_rows(labelled, ["judge"], "pair_id", "accuracy", stratum="order", groups=judges,
                       need=orders_needed(reward), empty=empty)
             .with_columns(pl.lit("mean of both").alias("order")),
             _one_order_blank(rate_rows(combined, ["judge"], "pair_id", "accuracy", groups=judges, empty=empty),
                              answered_in_fewer(labelled, orders_needed(reward)))
             .with_columns(pl.lit(f"combined ({rule}; tie = 0.5)").alias("order"))]
    return _per_judge(judges, parts, ["judge", "order", "accuracy", "n", "ci_low", "ci_high", "ci_note"])


def orders_needed(reward: bool) -> int:
    """The orders a mean over a pair's orders needs: both (a reward model sees no order: its one)."""
    return 1 if reward else len(ORDERS)


def answered_in_fewer(answered: pl.DataFrame, need: int) -> set[str]:
    """The judges whose answers (`answered`: one row per answer) name fewer than `need` orders."""
    orders = answered.group_by("judge").agg(pl.col("order").n_unique())
    return set(orders.filter(pl.col("order") < need)["judge"].to_list())


ONE_ORDER_ROW = {"accuracy": None, "lc_accuracy": None, "ci_low": None, "ci_high": None, "ci_note": ONE_ORDER}


def _one_order_blank(rows: pl.DataFrame, short: set[str]) -> pl.DataFrame:
    """The combined verdict's rows without a value for the judges in `short` (answered in one order
    only): a pair's combined verdict is then its one order's answer, every pair's, which is that
    order's accuracy, position bias included (as the mean of both: `ONE_ORDER`)."""
    blank = pl.col("judge").is_in(list(short)) & pl.col("accuracy").is_not_null()
    values = {c: pl.when(blank).then(None).otherwise(pl.col(c)) for c in ("accuracy", "ci_low", "ci_high")}
    return rows.with_columns(**values, ci_note=pl.when(blank).then(pl.lit(ONE_ORDER)).otherwise(pl.col("ci_note")))


def _per_judge(judges: pl.DataFrame, parts: list[pl.DataFrame], columns: list[str]) -> pl.DataFrame:
    """The parts' rows, each judge's together in the parts' order, judges in first-seen order."""
    rows = pl.concat([p.with_columns(pl.lit(k).alias("_part")) for k, p in enumerate(parts)], how="diagonal_relaxed")
    return rows.join(judges.with_row_index("_j"), on="judge").sort("_j", "_part", maintain_order=True).select(columns)


def _bias(d: pl.DataFrame, units: pl.DataFrame, judges: pl.DataFrame, reward: bool) -> pl.DataFrame:
    """Per judge: swap-flip, first-position win, longer-text win and tie rates of its real answers,
    and text a's win rate (a tie half: no human label needed; the mean of the orders' rates), each
    with a 95% interval over pairs and a note where there is nothing to measure, and the share of
    verdicts asked that could not be read (no swap or position for a reward model: it sees no order)."""
    real = d.filter(pl.col("answer").is_not_null()).with_columns(pl.lit("a").alias("_a"))
    asked = d.filter(pl.col("status") != "missing") if "status" in d.columns else d    # never answered: not unparsed
    none = "no answer"
    metrics = {"swap_flip_rate": (units.filter(pl.col("answers") == 2), pl.col("inconsistent"),
                                  "no pair has both orders answered"),
               # the one definition (metrics.position): of the verdicts that prefer a side, the first shown
               "first_position_win_rate": (real, pl.col("first_won"), "no answer prefers a side"),
               # (the mean of the orders' rates: `by_order`; the longer text is more often text a)
               "longer_text_win_rate": (real.filter(pl.col("longer").is_not_null() & (pl.col("answer") != "tie")),
                                        pl.col("longer") == pl.col("answer"),
                                        "no answer prefers one of two texts of different lengths"),
               "tie_rate": (real, pl.col("answer") == "tie", none),
               # which text the judge prefers, whatever the order (two systems' texts as a and b: which
               # wins): the mean of the two orders' rates (`by_order`), so that an order answered less
               # often (more unparsed) does not weigh its position bias in
               "text_a_win_rate": (real, tie_credit("answer", "_a"), none),
               "unparsed_rate": (asked, pl.col("answer").is_null(), "no verdict was asked")}
    by_order = {"text_a_win_rate", "longer_text_win_rate"}   # a mean of the orders' rates, as accuracy's mean of both
    parts = [rate_rows(frame.with_columns(values.cast(pl.Float64).alias("value")), ["judge"], "pair_id", "value",
                       groups=judges, empty=empty, stratum="order" if name in by_order else None,
                       need=orders_needed(reward) if name in by_order else None)
             .with_columns(pl.lit(name).alias("metric"))
             for name, (frame, values, empty) in metrics.items() if not (reward and name in REWARD_BLIND)]
    return _per_judge(judges, parts, ["judge", "metric", "value", "n", "ci_low", "ci_high", "ci_note"])


REWARD_BLIND = ("swap_flip_rate", "first_position_win_rate")


def _imputed(policy: MissingPolicy) -> pl.Expr:
    """The pick agreement is scored on: the real answer, else what the missing-answer policy says
    (a label names a position, A or B, which this verdict's order maps to a text)."""
    return imputed(policy, pl.col("answer"), label=lambda lab: text_picked(pl.lit(lab)),
                   wrong=pl.when(pl.col("human") == "a").then(pl.lit("b"))
                   .when(pl.col("human").is_null()).then(None).otherwise(pl.lit("a")))   # unlabelled: no wrong text


def combine(d: pl.DataFrame, rule: str) -> pl.DataFrame:
    """One row per judge and judgement unit (pair, repeat): its orders' picks combined by the tie
    rule (`probability`: P(text a) averaged over the orders; else orders that disagree make a
    tie). `answers` counts the real answers (2: both orders answered, the swap-flip test applies)."""
    g = d.group_by(["judge", "pair_id", "repeat"], maintain_order=True).agg(
        pl.col("human").first(), pl.col("order").first(), pl.col("pick").count().alias("picks"),
        pl.col("answer").count().alias("answers"), (pl.col("answer").drop_nulls().n_unique() > 1).alias("inconsistent"),
        pl.col("p_a").mean().alias("p_a"), pl.col("pick").drop_nulls().n_unique().alias("_kinds"),
        pl.col("pick").drop_nulls().first().alias("_first"))
    p_a = pl.col("p_a")
    by_picks = (pl.when(pl.col("picks") == 0).then(None).when(pl.col("_kinds") == 1).then(pl.col("_first"))
                .otherwise(pl.lit("tie")))
    combined = (pl.when(p_a.is_not_null()).then(pl.when(p_a > 0.5).then(pl.lit("a")).when(p_a < 0.5).then(pl.lit("b"))
                                                .otherwise(pl.lit("tie"))).otherwise(by_picks)
                if rule == "probability" else by_picks)
    return g.with_columns(combined.alias("combined")).select(
        pl.col("pair_id").cast(pl.Utf8), pl.col("repeat").cast(pl.Int64), pl.col("order").cast(pl.Utf8),
        pl.col("human").cast(pl.Utf8), pl.col("picks").cast(pl.Int64), pl.col("answers").cast(pl.Int64),
        "inconsistent", p_a.cast(pl.Float64), pl.col("combined").cast(pl.Utf8), pl.col("judge").cast(pl.Utf8))
