"""Reference-based Likert (Li et al. 2025, "Automated Creativity Evaluation for Large Language
Models: A Reference-Based Approach").

Method:
1. For every candidate story and every TTCW test, the judge compares the candidate with the
   group's reference story on a symmetric Likert scale (5 points by default), twice:
   - order `ref_first`: reference = Story A, candidate = Story B;
   - order `cand_first`: candidate = Story A, reference = Story B.
2. Sign convention (written once, here). The verdict language's value is always "how much better
   Story A is" (`[[A>>B]]` = +2 ... `[[B>>A]]` = -2). Then
       L+ = -value(ref_first)    how much the CANDIDATE is better   ([[B>>A]] -> +2)
       L- = -value(cand_first)   how much the REFERENCE is better   ([[B>>A]] -> +2)
   and the test passes when L+ - L- >= cutoff (range -4..4 on 5 points; the paper's best is -2,
   "on average at most slightly worse than the reference"). Story score = tests passed (0..14);
   candidates are ranked by the share of their judged tests passed (the same order when every test
   is judged; a dropped answer neither passes nor fails).
3. Within each group, candidates are ranked by score and compared with the human ranking:
   Spearman, Kendall's tau and pairwise accuracy, per group and averaged, for every cutoff of the
   sweep (no model call per cutoff: all from stored verdicts).
4. Position bias: swap-flip rate (the two orders disagree on which story is better, a tie in one
   order against a preference in the other included) and the first-position win rate.
Ablation `reference = false`: the binary TTCW test on the candidate alone (Yes = pass).
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import polars as pl

import litjudge.grammars as grammars
from litjudge.engine.core.paths import paper_prompt
from litjudge.engine.core.schema import check_choices, check_field
from litjudge.engine.data.reference import GroupStory, StoryGroup
from litjudge.engine.data.ttcw import check_tests
from litjudge.grammars import VerdictLanguage
from litjudge.grammars.analysis import marker_problem

from .base import Ask, Context, Declaration, MetricTable, Protocol, RankBy, Table, imputed
from .frames import split
from .metrics import first_position_win_rate, kendall, pairwise_accuracy, spearman
from .metrics.estimates import Units, mean_of
from .metrics.proportion import bounded_mean_with_ci
from .templates import TemplateFields, template_of
from .ttcw import FIELDS as TTCW_FIELDS
from .ttcw import fields as ttcw_fields
from .ttcw import prompt as ttcw_prompt

ORDERS = ("ref_first", "cand_first")
DEFAULT_CUTOFFS = (-4, -3, -2, -1, 0, 1, 2, 3, 4)
RANKABLE = ("spearman", "kendall", "pairwise_accuracy")
# the groups behind each mean: those where the metric is defined (see `_rank`)
GROUPS_BEHIND = (("spearman", "groups_defined"), ("kendall", "groups_defined"), ("pairwise_accuracy", "pairwise_groups"))
_STRENGTH = {3: {1: "better"}, 5: {1: "slightly better", 2: "significantly better"},
             7: {1: "slightly better", 2: "clearly better", 3: "significantly better"}}


@dataclass(frozen=True)
class ReferenceLikertOptions:
    points: Literal[3, 5, 7] = 5                      # the Likert scale's points
    cutoff: int = -2                                  # the reported pass rule
    cutoffs: tuple[int, ...] = DEFAULT_CUTOFFS       # the sweep, from stored verdicts (default: every reachable)
    tests: tuple[int, ...] = ()                       # TTCW test ids; empty = all 14
    reference: bool = True                            # False: no-reference ablation (binary test)
    analysis_tokens: int = 256                        # analyze mode: bound on the free analysis
    marker: str = "Therefore:"                        # analyze mode, as in the paper's example output

    def __post_init__(self) -> None:
        check_choices(self)
        check_tests(self.tests)
        check_field((wrong := marker_problem(self.marker)) is None, "marker", wrong or "")
        # L+ - L- of a p-point scale is in [-(p-1), p-1]: a cutoff beyond passes every test or none,
        # and its ranking (every story tied) printed a pairwise accuracy of 0.5 with an interval
        reach = self.points - 1
        check_field(-reach <= self.cutoff <= reach, "cutoff",
                    f"must be in [{-reach}, {reach}] on a {self.points}-point scale (L+ - L-), got {self.cutoff}")
        if self.cutoffs == DEFAULT_CUTOFFS:          # the sweep: every cutoff the scale reaches
            object.__setattr__(self, "cutoffs", tuple(range(-reach, reach + 1)))
        beyond = [c for c in self.cutoffs if not -reach <= c <= reach]
        check_field(not beyond, "cutoffs", f"{beyond} beyond [{-reach}, {reach}], the {self.points}-point scale's "
                                           "L+ - L-")


def paper_template(points: int) -> str:
    """The paper's prompt (Appendix A.1); for 3 or 7 points its list of choices is regenerated."""
    template = paper_prompt("reference_likert_5pt", "template")
    if points == 5:
        return template
    labels = grammars.likert(points).labels()
    lines = []
    for i, label in enumerate(labels, start=1):
        n = label.count(">")
        who = "Tie, relatively the same" if "=" in label else \
            f"Story {'A' if label.startswith('[[A') else 'B'} is {_STRENGTH[points][n]}"
        lines.append(f"{i}. {who}: {label}")
    head, rest = template.split("1. Story A", 1)
    tail = rest.split("\n\n", 1)[1]
    tail = tail.replace("[[A>>B]], [[A>B]], [[A=B]], [[B>A]], [[B>>A]]", ", ".join(labels))
    return head + "\n".join(lines) + "\n\n" + tail


class ReferenceLikert(Protocol):
    # Ranked at the run's declared cutoff (options.cutoff, -2 by default as in the paper), never the
    # sweep's first row: at cutoff -4 every test passes and the Spearman is undefined. Every cutoff
    # is in the sweep table. Distribution over multi-token Likert labels is not aggregated.
    declared = Declaration(
        name="reference_likert", version="1", reads="groups", options=ReferenceLikertOptions,
        limit_counts="story groups", modes=("label", "analyze"), missing=("drop", "label"),
        summary=("story_scores", "ranking", "cutoff_sweep", "bias"),
        # with a reference (options.reference): the cutoff sweep, every cutoff's scores and the
        # position bias; without (the ablation): the mean ranking
        tables={"cutoff_sweep": MetricTable(by=("cutoff",), pooled="", higher=RANKABLE, rank=RANKABLE, when="sometimes",
                                            counts=GROUPS_BEHIND),
                "ranking_mean": MetricTable(higher=RANKABLE, rank=RANKABLE, when="sometimes", counts=GROUPS_BEHIND),
                "bias": MetricTable(when="sometimes"),
                "story_scores_all": Table(when="sometimes"),
                **dict.fromkeys(("per_item", "story_scores", "ranking"), Table())},
        rank_by="cutoff_sweep.spearman",
        fields={"group": str, "candidate": str, "source": str, "human_score": float, "test": int, "order": str},
        report="litjudge.engine.app.report.panels:reference_likert_panels")

    def rank_by_for(self, options: ReferenceLikertOptions) -> str:
        """With a reference, the Spearman at the run's cutoff; the ablation without one has no cutoff: its
        mean ranking's Spearman (its results named no value, blaming the human labels)."""
        return self.declared.rank_by if options.reference else "ranking_mean.spearman"

    def rank_group(self, rank: RankBy, options: ReferenceLikertOptions) -> str:
        return rank.group or ("all" if rank.table == "ranking_mean" else f"cutoff={options.cutoff}")

    def rank_units(self, tables: dict[str, pl.DataFrame], judge: str, rank: RankBy, options: ReferenceLikertOptions):
        """The story groups are the clusters: the estimate is the mean over groups of each group's
        rank agreement (groups where it is undefined left out, as in the table)."""
        per_group = tables.get("ranking")
        cutoff = rank.where().get("cutoff", str(options.cutoff))
        ablation = rank.table == "ranking_mean"                  # no reference, no cutoff
        if per_group is None or ("cutoff" in per_group.columns) == ablation or set(rank.where()) - {"cutoff"}:
            return None
        rows = per_group.filter((pl.col("judge") == judge) & (ablation or pl.col("cutoff").cast(pl.Utf8) == cutoff))
        rows = rows.filter(pl.col(rank.metric).is_not_null() & pl.col(rank.metric).is_not_nan())
        return Units.of(rows["group"].to_list(), {"v": rows[rank.metric].to_numpy()}, mean_of("v"),
                        bounds=BOUNDS[rank.metric], rule=_group_mean_rule)

    def missing_labels(self, options: ReferenceLikertOptions) -> tuple[str, ...]:
        return self._language(options).labels()

    def template_fields(self, options: ReferenceLikertOptions) -> TemplateFields:
        """Story A and B as shown (they swap between the orders); the ablation asks the TTCW test."""
        if not options.reference:
            return TTCW_FIELDS
        return TemplateFields(("story_a", "story_b", "background", "question", "labels"),
                              ("story_a", "story_b", "question"))

    @staticmethod
    def _language(options: ReferenceLikertOptions):
        return grammars.likert(options.points) if options.reference else grammars.binary()

    def groups(self, ctx: Context) -> list[StoryGroup]:
        return ctx.load("groups")

    def units(self, ctx: Context) -> list[tuple[StoryGroup, list]]:
        """The story groups (a reference and its candidates), each with the 14 TTCW tests that
        judge every candidate."""
        opts: ReferenceLikertOptions = ctx.options
        groups = self.groups(ctx)                 # the user's own file first: its mistakes before missing TTCW data
        tests_data = ctx.load_from("ttcw", "ttcw")
        tests = [tests_data.test(i) for i in opts.tests] if opts.tests else tests_data.tests
        return [(g, tests) for g in groups]

    def asks(self, ctx: Context, unit: tuple[StoryGroup, list]) -> Iterator[Ask]:
        """With a reference: each candidate beside the reference in both orders (reference-first
        requests of a group share the longest prefix), on each test, answered on the Likert scale.
        Without (the ablation): each candidate alone, on each test, Yes or No."""
        opts: ReferenceLikertOptions = ctx.options
        g, tests = unit
        mode = ctx.config.mode
        own = template_of(ctx.config)
        if not opts.reference:
            for cand in g.candidates:
                for t in tests:
                    prompt = own.render(ttcw_fields(cand.text, t)) if own else \
                        ttcw_prompt(cand.text, t, "analyze" if mode == "analyze" else "default", None)
                    yield Ask(*self._item(g, cand, t.idx, "alone", prompt, grammars.binary()))
            return
        template = paper_template(opts.points)
        verdict = grammars.likert(opts.points)
        for order in ORDERS:
            for cand in g.candidates:
                a, b = (g.reference, cand) if order == "ref_first" else (cand, g.reference)
                for t in tests:
                    body = (f"Story A:\n{a.text}\n\nStory B:\n{b.text}\n\nBackground:\n{t.background}\n\n"
                            f"Question: {t.question}")
                    if mode == "label":
                        body += "\n\nAnswer with the label only."
                    asked = own.render({"story_a": a.text, "story_b": b.text, "background": t.background,
                                        "question": t.question, "labels": ", ".join(verdict.labels())}) if own \
                        else template.replace("{stories_and_question}", body)
                    yield Ask(*self._item(g, cand, t.idx, order, asked, verdict), marker=opts.marker)

    def _item(self, g: StoryGroup, cand: GroupStory, test: int, order: str, prompt: str, verdict: VerdictLanguage
              ) -> tuple[str, str, VerdictLanguage, tuple[tuple[str, Any], ...]]:
        """A candidate's question on one test in one order: its item id, prompt, verdict language,
        and what its verdict carries."""
        return f"{g.group}/{cand.item_id}/test{test}/{order}", prompt, verdict, (
            ("group", g.group), ("candidate", cand.item_id), ("source", cand.source),
            ("human_score", cand.human_score), ("test", test), ("order", order))

    # -- aggregation --------------------------------------------------------------------------
    def aggregate(self, table: pl.DataFrame, ctx: Context) -> dict[str, pl.DataFrame]:
        opts: ReferenceLikertOptions = ctx.options
        answer = pl.when(pl.col("status") == "ok").then(pl.col("value").cast(pl.Float64))
        t = table.with_columns(imputed(ctx.config.missing_policy, answer, dtype=pl.Float64,
                                       label=lambda lab: pl.lit(float(self._language(opts).value_of(lab)))).alias("v"),
                               answer.alias("answer"))
        keys = ["judge", "group", "candidate", "source", "human_score", "test", "repeat"]
        if not opts.reference:
            per = t.select(keys + [pl.col("v").alias("pass_value")])
            scores, ranking, mean = self._rank(per.with_columns((pl.col("pass_value") >= 1).alias("pass")), [])
            return {"per_item": per, "story_scores": scores, "ranking": ranking, "ranking_mean": mean}
        wide = self._orders(t, keys, "v")
        swept = pl.concat([wide.with_columns(pl.lit(c).alias("cutoff"), (pl.col("diff") >= c).alias("pass"))
                           for c in sorted(set(opts.cutoffs) | {opts.cutoff})])
        scores, ranking, sweep = self._rank(swept, ["cutoff"])
        return {"per_item": wide.sort(["judge", "group", "candidate", "test", "repeat"]),
                "story_scores": scores.filter(pl.col("cutoff") == opts.cutoff), "story_scores_all": scores,
                "ranking": ranking, "cutoff_sweep": sweep, "bias": self._bias(t, self._orders(t, keys, "answer"))}

    @staticmethod
    def _orders(t: pl.DataFrame, keys: list[str], column: str) -> pl.DataFrame:
        """One row per (candidate, test, repeat): the two orders' values as L+ and L-, and L+ - L-."""
        return (t.pivot(on="order", index=keys, values=column, aggregate_function="first")
                .with_columns((-pl.col("ref_first")).alias("L_plus"), (-pl.col("cand_first")).alias("L_minus"))
                .with_columns((pl.col("L_plus") - pl.col("L_minus")).alias("diff")))

    @staticmethod
    def _rank(per: pl.DataFrame, extra: list[str]) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
        """Per-test passes -> story scores, per-group rank agreement with humans, and its mean
        over groups; `extra` adds a grouping column (the cutoff of a sweep)."""
        # candidates are ranked by the share of their judged tests they pass: the count itself (the
        # paper's score, every test judged) ranked by missing answers where some were dropped (a
        # constant judge ranked 0.999 with the humans when lower-rated stories lost more answers)
        scores = (per.filter(pl.col("pass").is_not_null())
                  .group_by(["judge", "group", "candidate", "source", "human_score"] + extra)
                  .agg(pl.col("pass").cast(pl.Int64).sum().alias("score"), pl.len().alias("tests_judged"))
                  .with_columns((pl.col("score") / pl.col("tests_judged")).alias("pass_rate"))
                  .sort(["judge", "group", "candidate"] + extra))
        by = ["judge", "group"] + extra
        rows = []
        for key, g in split(scores, by).items():
            human, judge = g["human_score"].to_list(), g["pass_rate"].to_list()
            rows.append({**dict(zip(by, key)), "stories": g.height, "spearman": spearman(human, judge).value,
                         "kendall": kendall(human, judge).value,
                         "pairwise_accuracy": pairwise_accuracy(human, judge).value})
        ranking = pl.DataFrame(rows)
        if not ranking.height:
            return scores, ranking, ranking
        # A group whose metric is undefined (all candidates scored alike: no ranking to correlate)
        # is left out of that metric's mean, not allowed to turn it into NaN; `groups` counts all,
        # `groups_defined` the groups behind the Spearman and Kendall means, `pairwise_groups` those
        # behind pairwise accuracy's (a group the judge scored alike is in it, at 0.5).
        metrics = ("spearman", "kendall", "pairwise_accuracy")
        mean = (ranking.with_columns([pl.col(m).fill_nan(None) for m in metrics])
                .group_by(["judge"] + extra)
                .agg(*[pl.col(m).mean() for m in metrics], pl.len().alias("groups"),
                     pl.col("spearman").is_not_null().sum().alias("groups_defined"),
                     pl.col("pairwise_accuracy").is_not_null().sum().alias("pairwise_groups"))
                .sort(["judge"] + extra))
        return scores, ranking, mean.join(_group_intervals(ranking, ["judge"] + extra, metrics), on=["judge"] + extra,
                                          how="left", nulls_equal=True)

    @staticmethod
    def _bias(t: pl.DataFrame, wide: pl.DataFrame) -> pl.DataFrame:
        """Position bias of the judge's real answers (the missing-answer policy does not apply)."""
        rows, own = [], split(t, "judge")
        for (judge,), w in split(wide, "judge").items():
            both = w.filter(pl.col("L_plus").is_not_null() & pl.col("L_minus").is_not_null())
            flips = both.filter(pl.col("L_plus").sign() != (-pl.col("L_minus")).sign()).height
            mine = own[(judge,)]
            v = mine.filter(pl.col("answer").is_not_null())["answer"].to_list()
            first = first_position_win_rate([None if x == 0 else x > 0 for x in v])
            rows.append({"judge": judge, "pairs_both_orders": both.height,
                         "swap_flip_rate": flips / both.height if both.height else None,
                         "first_position_win_rate": first.value if first.n else None,
                         "tie_rate": sum(x == 0 for x in v) / len(v) if v else None,
                         "verdicts": len(v), "unparsed": mine.filter(pl.col("status") != "ok").height})
        return pl.DataFrame(rows)


def _group_intervals(ranking: pl.DataFrame, by: list[str], metrics: tuple[str, ...]) -> pl.DataFrame:
    """95% CI of each metric's mean over groups, resampling groups (the unit the mean is over; a
    group where the metric is undefined left out), and why one is missing or how it was made
    (`{metric}_ci_note`). Where every group gives the same value, the exact bound within the
    metric's range (`bootstrap.constant_interval`): Spearman and Kendall in [-1, 1], pairwise
    accuracy in [0, 1]."""
    rows = []
    for key, g in split(ranking, by).items():
        row = dict(zip(by, key))
        for m in metrics:
            values = g[m].to_list()
            mean = bounded_mean_with_ci(values, BOUNDS[m])
            row |= {f"{m}_low": mean.ci_low, f"{m}_high": mean.ci_high, f"{m}_ci_note": mean.note}
        rows.append(row)
    return pl.DataFrame(rows, infer_schema_length=None)


BOUNDS = {"spearman": (-1.0, 1.0), "kendall": (-1.0, 1.0), "pairwise_accuracy": (0.0, 1.0)}


def _group_mean_rule(u: Units, resamples: int, seed: int) -> tuple[float, float, str | None]:
    """A sweep's interval of a mean over groups: the table's (`bounded_mean_with_ci`)."""
    assert u.bounds is not None, "a mean over groups has its metric's bounds (Units.of(..., BOUNDS[m]))"
    mean = bounded_mean_with_ci(u.columns["v"].tolist(), u.bounds, resamples, seed)
    return (math.nan if mean.ci_low is None else mean.ci_low), (math.nan if mean.ci_high is None else mean.ci_high), \
        mean.note
