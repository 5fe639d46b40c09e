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

import json
from dataclasses import dataclass

import polars as pl

import grammars
from engine.cards import load_card
from engine.data.pairs import Pair, load_pairs
from engine.paths import paper_prompt
from engine.requests import JudgeRequest, Message, RequestMeta

from .base import Build, Context, Protocol
from .metrics import accuracy, cluster_bootstrap

ORDERS = ("ab", "ba")
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

    def __post_init__(self) -> None:
        if self.template not in ("default", *LITBENCH):
            raise ValueError(f"options.template must be 'default' or one of {list(LITBENCH)}, got {self.template!r}")
        if self.tie_rule not in ("inconsistent", "probability"):
            raise ValueError(f"options.tie_rule must be 'inconsistent' or 'probability', got {self.tie_rule!r}")


class Pairwise(Protocol):
    name = "pairwise"
    version = "1"
    Options = PairwiseOptions
    summary = ("accuracy", "bias")
    post_options = ("tie_rule",)
    metric_tables = {"accuracy": ("order",), "bias": ("metric",)}
    default_rank_by = "accuracy.accuracy"

    def load(self, ctx: Context) -> list[Pair]:
        return load_pairs(load_card(ctx.config.dataset).loader, ctx.dataset_path)

    def language(self, ctx: Context):
        opts: PairwiseOptions = ctx.options
        lang = grammars.preference("A", "B", "tie" if opts.tie else None)
        return grammars.Analyzed(lang, "Preferred:", opts.analysis_tokens) if ctx.config.mode == "analyze" else lang

    def prompt(self, opts: PairwiseOptions, mode: str, pair: Pair, first: str, second: str) -> str:
        head = DEFAULT_TEMPLATE if opts.template == "default" else paper_prompt("pairwise_litbench")["templates"][opts.template]
        ask = ("Write a brief comparison, then end with a last line 'Preferred: A' or 'Preferred: B'."
               if mode == "analyze" else "Answer with A or B only." + (" Answer tie if they are equally good." if opts.tie else ""))
        return f"{head}\n\nWriting prompt:\n{pair.prompt}\n\nResponse A:\n{first}\n\nResponse B:\n{second}\n\n{ask}"

    def build(self, ctx: Context) -> Build:
        opts: PairwiseOptions = ctx.options
        pairs = self.load(ctx)
        if ctx.config.limit:
            pairs = pairs[:ctx.config.limit]
        if ctx.config.mode == "reward":
            return self._build_reward(ctx, pairs)
        lang, out = self.language(ctx), Build([])
        for pair in pairs:
            words_a, words_b = len(pair.text_a.split()), len(pair.text_b.split())
            for order in ORDERS:
                first, second = (pair.text_a, pair.text_b) if order == "ab" else (pair.text_b, pair.text_a)
                prompt = self.prompt(opts, ctx.config.mode, pair, first, second)
                for repeat in range(ctx.config.sampling.repeats):
                    meta = RequestMeta(self.name, f"{pair.pair_id}/{order}", (
                        ("pair_id", pair.pair_id), ("order", order), ("human", pair.label), ("group", pair.group),
                        ("words_a", words_a), ("words_b", words_b), ("repeat", repeat)))
                    out.requests.append(JudgeRequest((Message("user", prompt),), lang, ctx.config.mode,
                                                     ctx.sampling(repeat), meta))
        return out

    def _build_reward(self, ctx: Context, pairs: list[Pair]) -> Build:
        """Reward models: one request per text, the conversation (prompt, text) scored as is; no
        order to swap. A text shared by several pairs is one key, scored once."""
        out = Build([])
        for pair in pairs:
            for side, text in (("a", pair.text_a), ("b", pair.text_b)):
                meta = RequestMeta(self.name, f"{pair.pair_id}/{side}", (
                    ("pair_id", pair.pair_id), ("order", "reward"), ("side", side), ("human", pair.label),
                    ("group", pair.group), ("words_a", len(pair.text_a.split())),
                    ("words_b", len(pair.text_b.split())), ("repeat", 0)))
                out.requests.append(JudgeRequest((Message("user", pair.prompt), Message("assistant", text)),
                                                 grammars.RewardScore(), "reward", ctx.sampling(0), meta))
        return out

    def reward_decisions(self, table: pl.DataFrame) -> pl.DataFrame:
        """Per pair: the two texts' rewards -> the pick (higher wins) and P(a) = sigmoid(r_a - r_b)."""
        scores = table.with_columns(pl.when(pl.col("status") == "ok").then(pl.col("value").cast(pl.Float64)).alias("r"))
        wide = (scores.pivot(on="side", index=["judge", "pair_id", "human", "words_a", "words_b"], values="r",
                             aggregate_function="first")
                .rename({"a": "r_a", "b": "r_b"}))
        diff = pl.col("r_a") - pl.col("r_b")
        pick = pl.when(pl.col("r_a").is_null() | pl.col("r_b").is_null()).then(None) \
            .when(diff > 0).then(pl.lit("a")).when(diff < 0).then(pl.lit("b")).otherwise(pl.lit("tie"))
        return wide.with_columns(pick.alias("pick"), (1 / (1 + (-diff).exp())).alias("p_a"), LONGER.alias("longer"),
                                 pl.lit("reward").alias("order"), pl.lit(0).alias("repeat"),
                                 pl.when(pick.is_null()).then(pl.lit("unparsed")).otherwise(pl.lit("ok")).alias("status"),
                                 pl.lit(None, dtype=pl.Utf8).alias("label"), pl.lit(None, dtype=pl.Boolean).alias("first_won"))

    # -- aggregation --------------------------------------------------------------------------
    def decisions(self, table: pl.DataFrame) -> pl.DataFrame:
        """One row per verdict: which text it picked (a / b / tie), and P(text a) when known."""
        def p_text_a(dist: str | None, order: str) -> float | None:
            if not dist:
                return None
            d = json.loads(dist)
            return d.get("A") if order == "ab" else d.get("B")

        t = table.with_columns(
            pl.struct(["distribution", "order"]).map_elements(lambda r: p_text_a(r["distribution"], r["order"]),
                                                              return_dtype=pl.Float64).alias("p_a"))
        pick = (pl.when(pl.col("status") != "ok").then(None)
                .when(pl.col("label") == "tie").then(pl.lit("tie"))
                .when((pl.col("label") == "A") == (pl.col("order") == "ab")).then(pl.lit("a"))
                .otherwise(pl.lit("b")))
        return t.with_columns(pick.alias("pick"), LONGER.alias("longer"),
                              (pl.col("label") == "A").alias("first_won"))

    def aggregate(self, table: pl.DataFrame, ctx: Context) -> dict[str, pl.DataFrame]:
        opts: PairwiseOptions = ctx.options
        reward = "side" in table.columns
        d = self.reward_decisions(table) if reward else self.decisions(table)
        acc_rows, bias_rows, combined = [], [], []
        for (judge,), j in d.group_by(["judge"], maintain_order=True):
            ok = j.filter(pl.col("pick").is_not_null())
            labelled = ok.filter(pl.col("human") != "tie")
            per_order = {}
            for order in (("reward",) if reward else ORDERS):
                o = labelled.filter(pl.col("order") == order)
                per_order[order] = self._rate(o, "human", "pick", opts.resamples)
                acc_rows.append({"judge": judge, "order": order, **per_order[order]})
            both = [per_order[o]["accuracy"] for o in per_order if per_order[o]["n"]]
            acc_rows.append({"judge": judge, "order": "mean of both", "accuracy": sum(both) / len(both) if both else None,
                             "n": labelled.height, **self._ci(labelled, "human", "pick", opts.resamples)})
            pairs = self._combine(j, opts.tie_rule)
            comb_lab = pairs.filter(pl.col("human") != "tie")
            credit = comb_lab.select(pl.when(pl.col("combined") == pl.col("human")).then(1.0)
                                     .when(pl.col("combined") == "tie").then(0.5).otherwise(0.0)).to_series()
            acc_rows.append({"judge": judge, "order": f"combined ({opts.tie_rule}; tie = 0.5)",
                             "accuracy": float(credit.mean()) if len(credit) else None, "n": comb_lab.height,
                             "ci_low": None, "ci_high": None})
            combined.append(pairs.with_columns(pl.lit(judge).alias("judge")))
            both_orders = pairs.filter(pl.col("picks") == 2)
            flips = both_orders.with_columns(pl.lit(True).alias("t"), pl.col("inconsistent").alias("f"))
            bias_rows.append({"judge": judge, "metric": "swap_flip_rate", **self._rate(flips, "t", "f", opts.resamples)})
            firsts = ok.filter((pl.col("label") != "tie") & pl.col("first_won").is_not_null()).with_columns(
                pl.lit(True).alias("t"))
            bias_rows.append({"judge": judge, "metric": "first_position_win_rate",
                              **self._rate(firsts, "t", "first_won", opts.resamples)})
            longer = ok.filter(pl.col("longer").is_not_null() & (pl.col("pick") != "tie"))
            bias_rows.append({"judge": judge, "metric": "longer_text_win_rate",
                              **self._rate(longer, "longer", "pick", opts.resamples)})
            ties = ok.with_columns(pl.lit(True).alias("t"), (pl.col("pick") == "tie").alias("is_tie"))
            bias_rows.append({"judge": judge, "metric": "tie_rate", **self._rate(ties, "t", "is_tie", opts.resamples)})
            bias_rows.append({"judge": judge, "metric": "unparsed", "accuracy": float(j.height - ok.height),
                              "n": j.height, "ci_low": None, "ci_high": None})
        bias = pl.DataFrame(bias_rows).rename({"accuracy": "value"}) if bias_rows else pl.DataFrame()
        return {"accuracy": pl.DataFrame(acc_rows), "bias": bias,
                "pairs": pl.concat(combined, how="diagonal_relaxed") if combined else pl.DataFrame(),
                "per_verdict": d.select(["judge", "pair_id", "order", "repeat", "human", "status", "label", "pick",
                                         "p_a", "words_a", "words_b"])}

    @staticmethod
    def _combine(j: pl.DataFrame, rule: str) -> pl.DataFrame:
        """One row per pair: the verdicts of its two orders combined by the tie rule."""
        g = j.group_by("pair_id", maintain_order=True).agg(
            pl.col("human").first(), pl.col("pick").drop_nulls().alias("picks_list"), pl.col("p_a").mean().alias("p_a"))
        rows = []
        for r in g.iter_rows(named=True):
            picks = r["picks_list"]
            if rule == "probability" and r["p_a"] is not None:
                combined = "a" if r["p_a"] > 0.5 else "b" if r["p_a"] < 0.5 else "tie"
            elif not picks:
                combined = None
            else:
                combined = picks[0] if len(set(picks)) == 1 else "tie"
            rows.append({"pair_id": r["pair_id"], "human": r["human"], "picks": len(picks),
                         "inconsistent": len(set(picks)) > 1, "p_a": r["p_a"], "combined": combined})
        return pl.DataFrame(rows, schema={"pair_id": pl.Utf8, "human": pl.Utf8, "picks": pl.Int64,
                                          "inconsistent": pl.Boolean, "p_a": pl.Float64, "combined": pl.Utf8})

    @staticmethod
    def _ci(df: pl.DataFrame, truth: str, pred: str, resamples: int) -> dict:
        if not df.height:
            return {"ci_low": None, "ci_high": None}
        lo, hi = cluster_bootstrap(df["pair_id"].to_list(), df[truth].to_list(), df[pred].to_list(), accuracy,
                                   resamples=resamples)
        return {"ci_low": lo, "ci_high": hi}

    def _rate(self, df: pl.DataFrame, truth: str, pred: str, resamples: int) -> dict:
        """Share of rows where pred == truth, with its pair-bootstrap CI."""
        if not df.height:
            return {"accuracy": None, "n": 0, "ci_low": None, "ci_high": None}
        return {"accuracy": accuracy(df[truth].to_list(), df[pred].to_list()).value, "n": df.height,
                **self._ci(df, truth, pred, resamples)}
