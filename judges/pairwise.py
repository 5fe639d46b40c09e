"""Pairwise preference (LitBench, 2025): which of two texts answering the same prompt is better?

Method:
1. Every pair is judged in both orders (text a shown first, then text b first); verdict A or B
   (optionally a tie label) about the positions shown, mapped back to the texts.
2. Templates: the project's default, or one of LitBench's printed templates (from the paper
   prompts). Modes: label only (the GenRM setting: one constrained token; `distribution` reads
   P(A) at the decision point), or analysis then `Preferred: A|B`.
   Reward-model judges (`reward:MODEL`, mode "reward"): each text scored alone by a Bradley-Terry
   reward model; the higher wins, P(a) = sigmoid(r_a - r_b); no order, so no swap or position bias.
3. Accuracy against the human label, per order and averaged over the two orders; swap-flip rate
   (the two orders disagree), first-position win rate, longer-text win rate and tie rate, each with
   a 95% bootstrap CI over pairs. A pair's combined verdict follows the tie rule: `inconsistent`
   (orders that disagree make a tie) or `probability` (average P(text a) over the orders).
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import polars as pl

import litjudge.grammars as grammars
from litjudge.engine.core.config import MissingPolicy
from litjudge.engine.core.errors import ConfigError
from litjudge.engine.core.paths import paper_prompt
from litjudge.engine.core.requests import Message
from litjudge.engine.core.verdicts import probability
from litjudge.engine.data.pairs import Pair

from .base import Ask, Context, Declaration, MetricTable, Protocol, RankBy, imputed, units_where
from .metrics import MetricResult, first_position_win_rate
from .metrics.base import scipy_stats
from .metrics.bootstrap import MIN_CLUSTERS, mean_of_means_with_ci, mean_with_ci, too_few
from .metrics.calibration import brier_of, calibration_error_of
from .metrics.estimates import Units, mean_of_stratum_means
from .metrics.logistic import cluster_robust_cov, fit_logistic, separated, sigmoid
from .tables import calibration_tables, label_distribution
from .templates import TemplateFields, template_of

ORDERS = ("ab", "ba")
STYLE = {"headers": re.compile(r"^\s{0,3}#{1,6}\s", re.M), "lists": re.compile(r"^\s*(?:[-*+]|\d+[.)])\s", re.M),
         "bold": re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__")}
FEATURE_COLUMNS = ("words_a", "words_b", *(f"{k}_{side}" for k in STYLE for side in "ab"))
# which text is longer in words (None when equal): the longer-text bias is measured against it
LONGER = (pl.when(pl.col("words_a") > pl.col("words_b")).then(pl.lit("a"))
          .when(pl.col("words_b") > pl.col("words_a")).then(pl.lit("b")).otherwise(None))
LITBENCH = ("writerly_criteria", "minimal", "reddit_minimal", "reddit_verbose", "reddit_verbose_permuted")
DEFAULT_TEMPLATE = ("You are comparing two creative writing responses (A and B) to the same writing prompt. "
                    "Decide which one is the better piece of writing: more original, engaging, vivid and "
                    "well crafted.")


@dataclass(frozen=True)
class PairwiseOptions:
    template: str = "default"            # "default" or a LitBench template name
    tie: bool = False                    # allow a "tie" verdict
    tie_rule: str = "inconsistent"       # combined verdict: "inconsistent" or "probability" (distribution mode)
    analysis_tokens: int = 256
    resamples: int = 1000                # bootstrap resamples for the CIs
    style_control: bool = False          # length control also holds markdown headers, lists and bold equal

    def __post_init__(self) -> None:
        if self.template not in ("default", *LITBENCH):
            raise ValueError(f"options.template must be 'default' or one of {list(LITBENCH)}, got {self.template!r}")
        if self.tie_rule not in ("inconsistent", "probability"):
            raise ValueError(f"options.tie_rule must be 'inconsistent' or 'probability', got {self.tie_rule!r}")


class Pairwise(Protocol):
    # Ranked pooled over both orders: a judge that always answers "A" is right on every pair whose
    # better text is shown first, so one order's accuracy ranks position bias, not judgement.
    declared = Declaration(
        name="pairwise", version="1", reads="pairs", options=PairwiseOptions, limit_counts="pairs",
        modes=("label", "analyze", "distribution", "reward"), missing=("drop", "label", "wrong"),
        summary=("accuracy", "bias"), post_options=("tie_rule",),
        tables={"accuracy": MetricTable(by=("order",), pooled="order=mean of both", higher=("accuracy",),
                                        rank=("accuracy",)),
                "bias": MetricTable(by=("metric",)),
                "length_control": MetricTable(higher=("accuracy", "lc_accuracy"), rank=("lc_accuracy",)),
                "calibration_summary": MetricTable(lower=("ece", "calibration_error", "brier"),
                                                   rank=("calibration_error", "brier"))},
        rank_by="accuracy.accuracy",
        fields={"pair_id": str, "order": str, "side": str, "human": str, "group": str,
                **dict.fromkeys(FEATURE_COLUMNS, int)})

    def missing_labels(self, options: PairwiseOptions) -> tuple[str, ...]:
        return ("A", "B", "tie") if options.tie else ("A", "B")

    def template_fields(self, options: PairwiseOptions) -> TemplateFields:
        """{text_a} is the text shown first (as A), {text_b} the one shown second: they swap in order ba."""
        return TemplateFields(("prompt", "text_a", "text_b", "labels"), ("text_a", "text_b"))

    def rank_units(self, tables: dict[str, pl.DataFrame], judge: str, rank: RankBy, options: PairwiseOptions):
        """Pairs are the clusters of every rankable estimate (a pair's orders and repeats move together)."""
        verdicts = tables.get("per_verdict")
        if verdicts is None:
            return None
        rows = units_where(verdicts.filter(pl.col("judge") == judge), rank)
        if rows is None:
            return None
        if rank.table == "calibration_summary":
            rows = rows.filter(pl.col("p_a").is_not_null() & pl.col("human").is_in(["a", "b"]) & (pl.col("status") == "ok"))
            cols = {"p": rows["p_a"].to_numpy(), "y": (rows["human"] == "a").to_numpy()}
            stat = calibration_error_of if rank.metric == "calibration_error" else brier_of
            return Units.of(rows["pair_id"].to_list(), cols, stat)
        labelled = rows.filter(pl.col("pick").is_not_null() & (pl.col("human") != "tie"))
        if rank.name == "length_control.lc_accuracy":
            labelled = labelled.filter(pl.col("pick") != "tie")
            x = _control_features(labelled, options.style_control and all(f"{k}_a" in labelled.columns for k in STYLE))
            cols = {f"x{i}": [r[i] for r in x] for i in range(len(x[0]))} if x else {"x0": []}
            return Units.of(labelled["pair_id"].to_list(), {**cols, "y": (labelled["pick"] == labelled["human"]).to_numpy()},
                            lc_accuracy_of)
        return Units.of(labelled["pair_id"].to_list(), {"v": (labelled["pick"] == labelled["human"]).cast(pl.Float64)
                                                        .to_numpy(), "order": labelled["order"].to_numpy()},
                        mean_of_stratum_means("v", "order"), bounds=(0.0, 1.0))

    def load(self, ctx: Context) -> list[Pair]:
        return ctx.load("pairs")

    def prompt(self, opts: PairwiseOptions, mode: str, pair: Pair, first: str, second: str) -> str:
        head = (DEFAULT_TEMPLATE if opts.template == "default"
                else paper_prompt("pairwise_litbench", "templates", opts.template))
        ask = ("Write a brief comparison, then end with a last line 'Preferred: A' or 'Preferred: B'."
               if mode == "analyze" else
               "Answer with A or B only." + (" Answer tie if they are equally good." if opts.tie else ""))
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
            raise ConfigError("a reward model gives no labels: use missing = \"drop\" or \"wrong\"", key="missing")
        scores = table.with_columns(pl.when(pl.col("status") == "ok").then(pl.col("value").cast(pl.Float64)).alias("r"))
        index = ["judge", "pair_id", "human", *[c for c in FEATURE_COLUMNS if c in table.columns]]
        wide = (scores.pivot(on="side", index=index, values="r", aggregate_function="first")
                .rename({"a": "r_a", "b": "r_b"}))
        diff = pl.col("r_a") - pl.col("r_b")
        answer = pl.when(pl.col("r_a").is_null() | pl.col("r_b").is_null()).then(None) \
            .when(diff > 0).then(pl.lit("a")).when(diff < 0).then(pl.lit("b")).otherwise(pl.lit("tie"))
        wide = wide.with_columns(answer.alias("answer"), (1 / (1 + (-diff).exp())).alias("p_a"),
                                 LONGER.alias("longer"), pl.lit("reward").alias("order"), pl.lit(0).alias("repeat"),
                                 pl.when(answer.is_null()).then(pl.lit("unparsed")).otherwise(pl.lit("ok")).alias("status"),
                                 pl.lit(None, dtype=pl.Utf8).alias("label"),
                                 pl.lit(None, dtype=pl.Boolean).alias("first_won"))
        return wide.with_columns(_imputed(policy).alias("pick"))

    # -- aggregation --------------------------------------------------------------------------
    def decisions(self, table: pl.DataFrame, policy: MissingPolicy) -> pl.DataFrame:
        """One row per verdict: the text it picked (`answer`: a / b / tie from the judge's real answer,
        None when it gave none), the pick agreement is scored on (`pick`: the answer, or what the
        missing-answer policy puts in its place), P(text a) when known, and whether the text shown
        first won (real answers that prefer a side)."""
        t = table.with_columns(pl.when(pl.col("order") == "ab").then(probability(table, "A"))
                               .otherwise(probability(table, "B")).cast(pl.Float64).alias("p_a"))
        answer = (pl.when(pl.col("status") != "ok").then(None)
                  .when(pl.col("label") == "tie").then(pl.lit("tie"))
                  .when((pl.col("label") == "A") == (pl.col("order") == "ab")).then(pl.lit("a"))
                  .otherwise(pl.lit("b")))
        t = t.with_columns(answer.alias("answer"), LONGER.alias("longer"),
                           pl.when(answer.is_in(["a", "b"])).then(pl.col("label") == "A").alias("first_won"))
        return t.with_columns(_imputed(policy).alias("pick"))

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
        """Agreement is computed per judgement unit: a pair at one repeat (its two orders); CIs
        resample whole pairs. Bias tables read the judge's real answers only."""
        opts: PairwiseOptions = ctx.options
        policy = ctx.config.missing_policy
        reward = "side" in table.columns
        d = self.reward_decisions(table, policy) if reward else self.decisions(table, policy)
        acc_rows, bias_rows, combined, lc_rows = [], [], [], []
        for (judge,), j in d.group_by(["judge"], maintain_order=True):
            labelled = j.filter(pl.col("pick").is_not_null() & (pl.col("human") != "tie"))
            for order in (("reward",) if reward else ORDERS):
                acc_rows.append({"judge": judge, "order": order,
                                 **_rate(labelled.filter(pl.col("order") == order), AGREES, opts.resamples)})
            # the mean of the per-order accuracies, and the CI of that same statistic (pairs resampled)
            v = labelled.select("pair_id", "order", AGREES.cast(pl.Float64).alias("v")).drop_nulls("v")
            both = mean_of_means_with_ci(v["pair_id"].to_list(), v["order"].to_list(), v["v"].to_list(),
                                         resamples=opts.resamples, bounds=(0.0, 1.0))
            acc_rows.append({"judge": judge, "order": "mean of both", **both.row("accuracy")})
            units = combine(j, opts.tie_rule)
            comb_lab = units.filter(pl.col("combined").is_not_null() & (pl.col("human") != "tie"))
            acc_rows.append({"judge": judge, "order": f"combined ({opts.tie_rule}; tie = 0.5)",
                             **_rate(comb_lab, HALF_CREDIT, opts.resamples)})
            combined.append(units.with_columns(pl.lit(judge).alias("judge")))
            bias_rows += self._bias(judge, j, units, opts.resamples)
            if not reward:
                lc_rows.append({"judge": judge, **length_controlled(labelled, opts.style_control)})
        bias = pl.DataFrame(bias_rows).rename({"accuracy": "value"}) if bias_rows else pl.DataFrame()
        answered = d.filter(pl.col("status") == "ok").with_columns((pl.col("human") == "a").alias("human_a"))
        tables = {"accuracy": pl.DataFrame(acc_rows), "bias": bias,
                  "pairs": pl.concat(combined, how="diagonal_relaxed") if combined else pl.DataFrame(),
                  "per_verdict": d.select(["judge", "pair_id", "order", "repeat", "human", "status", "label", "answer",
                                           "pick", "p_a", *[c for c in FEATURE_COLUMNS if c in d.columns]]),
                  "label_distribution": label_distribution(d.filter(pl.col("order") != "reward"), "pair_id")
                  if not reward else pl.DataFrame(),
                  **calibration_tables(answered.filter(pl.col("human") != "tie"), "p_a", "human_a", cluster="pair_id")}
        if lc_rows:
            tables["length_control"] = pl.DataFrame(lc_rows)
        return tables

    @staticmethod
    def _bias(judge: str, j: pl.DataFrame, units: pl.DataFrame, resamples: int) -> list[dict]:
        """Swap-flip, first-position win, longer-text win and tie rates of the judge's real answers,
        each with a 95% bootstrap CI over pairs, and the count of non-answers."""
        real = j.filter(pl.col("answer").is_not_null())
        flips = units.filter(pl.col("answers") == 2)
        longer = real.filter(pl.col("longer").is_not_null() & (pl.col("answer") != "tie"))
        rows = [{"judge": judge, "metric": "swap_flip_rate", **_rate(flips, pl.col("inconsistent"), resamples)},
                {"judge": judge, "metric": "first_position_win_rate",
                 **_rate(real, pl.col("first_won"), resamples, first_position_win_rate)},
                {"judge": judge, "metric": "longer_text_win_rate",
                 **_rate(longer, pl.col("longer") == pl.col("answer"), resamples)},
                {"judge": judge, "metric": "tie_rate", **_rate(real, pl.col("answer") == "tie", resamples)},
                {"judge": judge, "metric": "unparsed", "accuracy": float(j.height - real.height), "n": j.height,
                 "ci_low": None, "ci_high": None}]
        if units["order"].to_list()[:1] == ["reward"]:
            rows = [r for r in rows if r["metric"] not in ("swap_flip_rate", "first_position_win_rate")]
        return rows


def _imputed(policy: MissingPolicy) -> pl.Expr:
    """The pick agreement is scored on: the real answer, else what the missing-answer policy says
    (a label names a position, A or B, which this verdict's order maps to a text)."""
    return imputed(policy, pl.col("answer"),
                   label=lambda lab: pl.lit("tie") if lab == "tie" else
                   pl.when((pl.lit(lab) == "A") == (pl.col("order") == "ab")).then(pl.lit("a")).otherwise(pl.lit("b")),
                   wrong=pl.when(pl.col("human") == "a").then(pl.lit("b")).otherwise(pl.lit("a")))


def combine(j: pl.DataFrame, rule: str) -> pl.DataFrame:
    """One row per judgement unit (pair, repeat): its orders' picks combined by the tie rule.
    `answers` counts the real answers (2: both orders answered, the swap-flip test applies)."""
    g = j.group_by(["pair_id", "repeat"], maintain_order=True).agg(
        pl.col("human").first(), pl.col("order").first(), pl.col("pick").drop_nulls().alias("picks"),
        pl.col("answer").drop_nulls().alias("answer_list"), pl.col("p_a").mean().alias("p_a"))
    rows = []
    for r in g.iter_rows(named=True):
        picks, answers = r["picks"], r["answer_list"]
        if rule == "probability" and r["p_a"] is not None:
            combined = "a" if r["p_a"] > 0.5 else "b" if r["p_a"] < 0.5 else "tie"
        elif not picks:
            combined = None
        else:
            combined = picks[0] if len(set(picks)) == 1 else "tie"
        rows.append({"pair_id": r["pair_id"], "repeat": r["repeat"], "order": r["order"], "human": r["human"],
                     "picks": len(picks), "answers": len(answers), "inconsistent": len(set(answers)) > 1,
                     "p_a": r["p_a"], "combined": combined})
    return pl.DataFrame(rows, schema={"pair_id": pl.Utf8, "repeat": pl.Int64, "order": pl.Utf8, "human": pl.Utf8,
                                      "picks": pl.Int64, "answers": pl.Int64, "inconsistent": pl.Boolean,
                                      "p_a": pl.Float64, "combined": pl.Utf8})


# Per-row values whose mean is a published rate (nulls left out): agreement with the human pick,
# and the half credit of a combined verdict (a tie earns 0.5).
AGREES = pl.col("human") == pl.col("pick")
HALF_CREDIT = (pl.when(pl.col("combined") == pl.col("human")).then(1.0)
               .when(pl.col("combined") == "tie").then(0.5).otherwise(0.0))


def _values(df: pl.DataFrame, values: pl.Expr) -> pl.DataFrame:
    return df.select(pl.col("pair_id"), values.cast(pl.Float64).alias("v")).drop_nulls("v")


def _rate(df: pl.DataFrame, values: pl.Expr, resamples: int,
          metric: Callable[[list], MetricResult] | None = None) -> dict:
    """The mean of per-row `values` (or `metric` of them, where a metric module defines the rate),
    its n, and its pair-bootstrap CI."""
    v = _values(df, values)
    rate = mean_with_ci(v["pair_id"].to_list(), v["v"].to_list(), resamples=resamples, bounds=(0.0, 1.0))
    if metric and rate.n:
        rate = replace(rate, value=metric(v["v"].to_list()).value)
    return rate.row("accuracy")


def text_features(pair: Pair, style: bool = True) -> tuple[tuple[str, int], ...]:
    """Words (and, for style control, markdown style counts) of both texts: request metadata, not
    part of any key."""
    out = [("words_a", len(pair.text_a.split())), ("words_b", len(pair.text_b.split()))]
    for name, pattern in STYLE.items() if style else ():
        out += [(f"{name}_a", len(pattern.findall(pair.text_a))), (f"{name}_b", len(pattern.findall(pair.text_b)))]
    return tuple(out)


def _control_features(rows: pl.DataFrame, style: bool) -> list[list[float]]:
    """Per verdict: log length ratio of the human-preferred text to the other, and (style) each
    style count's normalised difference (pref - other) / (pref + other + 1)."""
    out = []
    for r in rows.iter_rows(named=True):
        pref, other = ("a", "b") if r["human"] == "a" else ("b", "a")
        x = [math.log((r[f"words_{pref}"] + 1) / (r[f"words_{other}"] + 1))]
        if style:
            x += [(r[f"{k}_{pref}"] - r[f"{k}_{other}"]) / (r[f"{k}_{pref}"] + r[f"{k}_{other}"] + 1) for k in STYLE]
        out.append(x)
    return out


def length_controlled(labelled: pl.DataFrame, style: bool) -> dict:
    """Agreement with humans at equal length (and style): logistic regression of "the judge picked
    the human-preferred text" on the log length ratio of that text to the other (and the style
    differences), read at zero difference, sigmoid(intercept); 95% CI from the intercept's
    cluster-robust standard error (pairs as clusters). Verdicts that picked a tie are left out.
    No interval with fewer than MIN_CLUSTERS pairs (else a t(G - 1) quantile); under perfect
    separation (the judge always right, or right exactly on one side of a length ratio) the fit is
    set by its ridge penalty, not the data: `separated` flags it and the interval is left out."""
    style = style and all(f"{k}_a" in labelled.columns for k in STYLE)
    rows = labelled.filter(pl.col("pick") != "tie")
    names = ["length"] + (list(STYLE) if style else [])
    if not rows.height:
        return {"features": "+".join(names), "n": 0, "accuracy": None, "lc_accuracy": None, "ci_low": None,
                "ci_high": None, "separated": None, "ci_note": None, **{f"coef_{n}": None for n in names}}
    x = _control_features(rows, style)
    y = [float(p == h) for p, h in zip(rows["pick"].to_list(), rows["human"].to_list())]
    beta = fit_logistic(x, y)
    pairs = rows["pair_id"].n_unique()
    split = separated(x, y)
    lo = hi = None
    note = too_few(pairs) if pairs < MIN_CLUSTERS else SEPARATED if split else None
    if note is None:
        se = math.sqrt(max(cluster_robust_cov(x, y, beta, rows["pair_id"].to_list())[0, 0], 0.0))
        z = float(scipy_stats().t.ppf(0.975, pairs - 1))      # G - 1 degrees of freedom: few clusters
        lo, hi = sigmoid(beta[0] - z * se), sigmoid(beta[0] + z * se)
    return {"features": "+".join(names), "n": len(y), "accuracy": sum(y) / len(y), "lc_accuracy": sigmoid(beta[0]),
            "ci_low": lo, "ci_high": hi, "separated": split, "ci_note": note,
            **{f"coef_{n}": float(b) for n, b in zip(names, beta[1:])}}


def lc_accuracy_of(c) -> float:
    """Length- (and style-) controlled agreement of rows with features x0.. and outcome y."""
    x = [c[k] for k in sorted(k for k in c if k.startswith("x"))]
    if not len(c["y"]):
        return math.nan
    return sigmoid(float(fit_logistic(list(zip(*x)), c["y"].astype(float).tolist())[0]))


SEPARATED = "perfect separation: the fit is set by its ridge penalty, not the data; no interval"
