"""TTCW: 14 binary Yes/No tests of creative writing per story (Chakrabarty et al., CHI 2024).

Method, as in the paper and its dataset:
1. For every story with text and every test, ask the judge one Yes/No question (one request per
   (story, test)). The story comes first in every prompt, so a story's 14 requests share a prefix.
2. Prompt variants: `upstream` (the dataset's answer-first template with the expanded background),
   `analyze` (the paper's test-specific step-by-step instruction, then `Verdict: Yes|No`), and
   `default` (this project's short layout).
3. The pass decision is the label (label/analyze mode) or P(Yes) >= threshold (distribution mode).
4. Agreement with the expert majority (2 of 3): Cohen's kappa and balanced accuracy per test and
   overall; pass rate per story source per test; per-story pass counts correlated with the
   experts' counts; and the experts' own Fleiss' kappa per test, a property of the data.
Recorded proprietary judges are replayed through the same metrics with the upstream parsing rule.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Literal, get_args

import polars as pl

import litjudge.grammars as grammars
from litjudge.engine.core.config import MissingPolicy
from litjudge.engine.core.errors import ConfigError
from litjudge.engine.core.schema import check_choices
from litjudge.engine.core.settings import PPIConfig
from litjudge.engine.core.verdicts import probability
from litjudge.engine.data.ttcw import TTCWData, check_tests, item_id
from litjudge.grammars.upstream import UpstreamYesNo

from .base import Ask, Context, Declaration, MetricTable, Protocol, RankBy, Skip, Table, group_columns, imputed, units_where
from .frames import split
from .metrics import balanced_accuracy, cohen_kappa, fleiss_kappa, pearson, spearman
from .metrics.calibration import brier_units, calibration_units
from .metrics.estimates import Units, balanced_accuracy_of, kappa_of, pearson_of, spearman_of
from .ppi_annotated import Annotated
from .ppi_tables import ppi_tables
from .tables import AFTER_ANALYSIS, calibration_tables, corrected_pass_rates, label_distribution, stated_probability
from .templates import TemplateFields, template_of
from .ttcw_agreement import agreements, with_intervals

Variant = Literal["default", "upstream", "analyze"]
VARIANTS = get_args(Variant)
VIEWS = ("all", "judgeable")         # every story, and those with text (the others are URLs)
AGREEMENT = ("kappa", "balanced_accuracy")
CORRELATION = ("pearson", "spearman")
CALIBRATION = ("ece", "squared_calibration_error", "brier")

DEFAULT_INTRO = ("You are an expert reader judging a short story on one test of creative writing "
                 "from the Torrance Test of Creative Writing. Read the story, then the background on "
                 "the test, then answer the question with Yes or No.")


# Your own template (`template = ...`) may name these; it must name the story and the question.
FIELDS = TemplateFields(("story", "question", "background", "instruction", "dimension", "category", "labels"),
                        ("story", "question"))


def fields(story: str, test) -> dict[str, str]:
    """One (story, test) question's fields for your own template."""
    return {"story": story, "question": test.question, "background": test.background,
            "instruction": test.instruction or "Explain your reasoning step by step, then answer Yes or No.",
            "dimension": test.dimension, "category": test.category, "labels": "Yes or No"}


def prompt(story: str, test, variant: str, template: str | None) -> str:
    """One (story, test) question in a prompt variant: the story first, so a story's questions
    share a prefix (reference-based Likert's no-reference ablation asks the same way)."""
    if variant == "upstream" and template is not None:
        return (template.replace("[STORY]", story).replace("[BACKGROUND]", test.background)
                .replace("[QUESTION]", test.question))
    if variant == "analyze":
        steps = test.instruction or "Explain your reasoning step by step, then answer Yes or No."
        return (f"{DEFAULT_INTRO}\n\nStory:\n{story}\n\nBackground:\n{test.background}\n\n{steps}\n\n"
                f"Q) {test.question}\n\nEnd with a last line that says 'Verdict: Yes' or 'Verdict: No'.")
    return (f"{DEFAULT_INTRO}\n\nStory:\n{story}\n\nBackground:\n{test.background}\n\n"
            f"Question: {test.question}\nAnswer Yes or No.")


@dataclass(frozen=True)
class TTCWOptions:
    variant: Variant = "default"          # the prompt: default, upstream (the dataset's), analyze (the paper's)
    tests: tuple[int, ...] = ()           # empty: all 14
    threshold: float = 0.5                # distribution mode: pass when P(Yes) >= threshold
    story_cutoff: float = 0.5             # a story "passes" when it passes this share of its tests
    analysis_tokens: int = 256            # analyze mode: bound on the free analysis
    include_unjudgeable: bool = False     # replay only: also the New Yorker items (no text)

    def __post_init__(self) -> None:
        check_choices(self)
        check_tests(self.tests)
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"options.threshold must be in [0, 1], got {self.threshold}")
        if not 0.0 <= self.story_cutoff <= 1.0:
            raise ValueError(f"options.story_cutoff must be in [0, 1], got {self.story_cutoff}")


class TTCW(Protocol):
    # Ranked pooled over all 14 tests (view=all); a single test's row ranks only when named
    # (per_test.kappa@view=all,test=3): ranking by "the first row" ranked test 1.
    declared = Declaration(
        name="ttcw", version="1", reads="ttcw", options=TTCWOptions, labels_when_aggregating=True,
        limit_counts="stories with text (every story with include_unjudgeable)",
        modes=("label", "analyze", "distribution"), missing=("drop", "label", "wrong"),
        summary=("verdict_grid", "per_test", "overall", "story_counts", "ppi"), post_options=("threshold", "story_cutoff"),
        tables={"overall": MetricTable(by=("view",), pooled="view=all", higher=AGREEMENT, rank=AGREEMENT,
                                       when="labelled"),
                "per_test": MetricTable(by=("view", "test"), pooled=None, higher=AGREEMENT, rank=AGREEMENT),
                "story_counts": MetricTable(by=("view",), pooled="view=all", higher=CORRELATION, rank=CORRELATION,
                                            when="labelled"),
                "story_cutoff": MetricTable(by=("view",), pooled="view=all", higher=AGREEMENT, rank=AGREEMENT,
                                            when="labelled"),
                # distribution mode, on labelled items with a probability
                "calibration_summary": MetricTable(lower=CALIBRATION, rank=("squared_calibration_error", "brier"),
                                                   when="sometimes"),
                "calibration": Table(when="sometimes"),
                "ppi": MetricTable(by=("view", "test"), pooled=None, when="sometimes"),     # with [ppi] only
                "ppi_labelled": Table(by=("story_id",), when="sometimes"),                  # its labelled stories
                "corrected_pass_rates": Table(when="labelled"),
                **dict.fromkeys(("verdict_grid", "per_item", "label_distribution", "pass_rates",
                                 "pass_rates_by_source"), Table())},
        rank_by="overall.kappa",
        fields={"story_id": str, "test": int, "source": str, "group": int, "judgeable": bool},
        decision_key=("item_id", "repeat"), report="litjudge.engine.app.report.panels:ttcw_panels")

    def missing_labels(self, options) -> tuple[str, ...]:
        return ("Yes", "No")

    def template_fields(self, options) -> TemplateFields:
        return FIELDS

    def check_rank(self, rank: RankBy, options: TTCWOptions) -> None:
        if (view := rank.where().get("view", "all")) not in VIEWS:
            raise ValueError(f"TTCW's views are {' and '.join(VIEWS)} (the stories with text), not {view!r}")

    def group_rows(self, verdicts: pl.DataFrame, group: str, table: str = "") -> pl.DataFrame:
        """A view is the verdicts' stories: all, or those with text (`judgeable`)."""
        if group_columns(group).get("view") == "judgeable" and "judgeable" in verdicts.columns:
            verdicts = verdicts.filter(pl.col("judgeable").fill_null(False))
        return super().group_rows(verdicts, group, table)

    def rank_units(self, tables: dict[str, pl.DataFrame], judge: str, rank: RankBy, options: TTCWOptions):
        """Stories are the clusters of every rankable estimate (a story's 14 verdicts move together)."""
        items = tables.get("per_item")
        view = rank.where().get("view", "all")
        if items is None or view not in VIEWS or (view == "judgeable" and "judgeable" not in items.columns):
            return None
        if view == "judgeable":
            items = items.filter(pl.col("judgeable"))
        where = RankBy(rank.name, ",".join(f"{k}={v}" for k, v in rank.where().items() if k != "view"))
        rows = units_where(items.filter((pl.col("judge") == judge) & pl.col("expert_pass").is_not_null()), where)
        if rows is None:
            return None
        if rank.table == "calibration_summary":
            rows = rows.with_columns(stated_probability(rows, "p_yes").alias("p")).filter(
                pl.col("p").is_not_null() & (pl.col("status") == "ok"))
            units = calibration_units if rank.metric == "squared_calibration_error" else brier_units
            return units(rows["story_id"].to_list(), rows["p"].to_list(), rows["expert_pass"].to_list())
        rows = rows.filter(pl.col("judge_pass").is_not_null())
        if rank.table in ("overall", "per_test"):
            return Units.agreement(rows["story_id"].to_list(), rows["expert_pass"].to_list(), rows["judge_pass"].to_list(),
                                   kappa_of if rank.metric == "kappa" else balanced_accuracy_of)
        # story-level estimates: one row per story (its share of passes), the story its own cluster
        share = (rows.group_by(["story_id", "test"]).agg(pl.col("judge_pass").cast(pl.Float64).mean(),
                                                         pl.col("expert_pass").first().cast(pl.Float64))
                 .group_by("story_id").agg(pl.col("judge_pass").sum().alias("judge"),
                                           pl.col("expert_pass").sum().alias("expert"), pl.len().alias("tests")))
        if rank.table == "story_counts":
            return Units.of(share["story_id"].to_list(), {"x": share["judge"].to_numpy(), "y": share["expert"].to_numpy()},
                            pearson_of if rank.metric == "pearson" else spearman_of)
        cut = options.story_cutoff
        tests = share["tests"].to_numpy()
        return Units.agreement(share["story_id"].to_list(), share["expert"].to_numpy() / tests >= cut,
                               share["judge"].to_numpy() / tests >= cut,
                               kappa_of if rank.metric == "kappa" else balanced_accuracy_of)

    def load(self, ctx: Context) -> TTCWData:
        return ctx.load("ttcw")

    def prompt(self, story: str, test, variant: str, template: str | None) -> str:
        return prompt(story, test, variant, template)

    def units(self, ctx: Context) -> list:
        """The stories with text, in the dataset's order; a story without (New Yorker) is skipped,
        one Skip per test, unless recorded responses are replayed with `include_unjudgeable`."""
        opts: TTCWOptions = ctx.options
        data = self.load(ctx)
        if opts.variant == "upstream" and data.upstream_template is None:
            raise ConfigError(f"variant 'upstream' needs prompt_with_background.txt in {ctx.dataset_path}",
                              parameter="options.variant")
        if opts.include_unjudgeable and not ctx.replay:
            raise ConfigError("include_unjudgeable needs recorded responses (a replay judge): "
                              "New Yorker stories have no text", parameter="options.include_unjudgeable")
        tests = [data.test(i) for i in opts.tests] if opts.tests else data.tests
        template = data.upstream_template if opts.variant == "upstream" else None
        out: list = []
        for story in data.stories:
            if story.judgeable or opts.include_unjudgeable:
                out.append((story, tests, template))
            else:
                out += [Skip(item_id(story.story_id, t.idx), "story text not in the dataset (New Yorker URL)")
                        for t in tests]
        return out

    def asks(self, ctx: Context, unit) -> Iterator[Ask]:
        """The story's questions, one per test, the story first (its questions share a prefix)."""
        story, tests, template = unit
        text = story.text or f"(text not available: {story.story_id})"
        verdict = UpstreamYesNo() if ctx.replay else grammars.binary()
        own = template_of(ctx.config)
        for t in tests:
            asked = own.render(fields(text, t)) if own else self.prompt(text, t, ctx.options.variant, template)
            yield Ask(item_id(story.story_id, t.idx), asked, verdict, (
                ("story_id", story.story_id), ("test", t.idx), ("source", story.source),
                ("group", story.group), ("judgeable", story.judgeable)))

    # -- aggregation --------------------------------------------------------------------------
    def decisions(self, table: pl.DataFrame, ctx: Context, expert: pl.DataFrame) -> pl.DataFrame:
        """One row per (judge, item, repeat): the experts' majority and the judge's pass decision.
        A verdict that is not ok (unparsed, or missing) follows the run's missing-answer policy:
        dropped (None), counted as a label (Yes passes), or counted as wrong (the opposite of the
        experts, where they have a label)."""
        thr = ctx.options.threshold

        t = (table.with_columns(probability(table, "Yes").cast(pl.Float64).alias("p_yes"),
                                probability(table, "Yes", "analysis_distribution").alias("p_yes" + AFTER_ANALYSIS))
             .join(expert, on=["story_id", "test"], how="left"))
        answer = (pl.when(pl.col("status") != "ok").then(None)
                  .when(pl.col("p_yes").is_not_null()).then(pl.col("p_yes") >= thr)
                  .otherwise(pl.col("label") == "Yes"))
        passed = imputed(ctx.config.missing_policy, answer, label=lambda lab: pl.lit(lab == "Yes"),
                         wrong=~pl.col("expert_pass"), dtype=pl.Boolean)
        at = t.filter((pl.col("status") == "ok") & (pl.col("p_yes") == thr)).group_by("judge", maintain_order=True).len()
        for judge, n in at.iter_rows():     # bf16 weights give P(Yes) in coarse steps: ties at 0.5 are common
            ctx.warn(f"{judge}: {n} verdicts have P(Yes) exactly at the threshold {thr} and pass (P(Yes) >= threshold); "
                     "the agreement tables count each as Yes: compare options.threshold just above it")
        return t.with_columns(passed.alias("judge_pass"))

    def human_view(self, verdicts: pl.DataFrame, tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
        """The experts' majority on each story and test (per_item's expert_pass) beside each verdict,
        both answers as Yes / No."""
        per_item = tables.get("per_item")
        if per_item is None or "expert_pass" not in per_item.columns:
            return super().human_view(verdicts, tables)
        on = ["judge", "item_id", "repeat"]
        expert = per_item.select([*on, "expert_pass"]).unique(on, keep="first")
        passed = pl.col("expert_pass")
        return verdicts.join(expert, on=on, how="left").with_columns(
            pl.when(passed).then(pl.lit("Yes")).when(~passed).then(pl.lit("No")).alias("truth"),
            pl.when((pl.col("status") == "ok") & passed.is_not_null())
            .then((pl.col("value").cast(pl.Int64) == 1) == passed).alias("agrees"),
            pl.when(pl.col("value").cast(pl.Int64) == 1).then(pl.lit("Yes"))
            .when(pl.col("value").cast(pl.Int64) == 0).then(pl.lit("No")).alias("answer")).drop("expert_pass")

    def aggregate(self, table: pl.DataFrame, ctx: Context) -> dict[str, pl.DataFrame]:
        data = self.load(ctx)
        expert = pl.DataFrame([{"story_id": s, "test": t, "expert_pass": v == "Yes"} for (s, t), v in data.majority.items()],
                              schema={"story_id": pl.Utf8, "test": pl.Int64, "expert_pass": pl.Boolean})
        d = self.decisions(table, ctx, expert)
        views = {"all": d}
        if d.filter(~pl.col("judgeable")).height:
            views = {"all": d, "judgeable": d.filter(pl.col("judgeable"))}
        fleiss = self._expert_fleiss(data)
        per_test, overall, by_source, stories, cutoff = [], [], [], [], []
        for view, v in views.items():
            by_source.append(self._rates(v).with_columns(pl.lit(view).alias("view")))
            of_judge, of_test = agreements(v, ["judge"]), agreements(v, ["judge", "test"])
            tests: dict[str, list[int]] = {}
            for judge, test in of_test:
                tests.setdefault(judge, []).append(test)
            for (judge,), j in split(v, "judge").items():
                of_its_tests = split(j, "test")
                for test in sorted(tests[judge]):
                    per_test.append({"judge": judge, "view": view, "test": test,
                                     **with_intervals(of_test[(judge, test)], of_its_tests[(test,)], "story_id"),
                                     "expert_fleiss_kappa": fleiss.get(test)})
                overall.append({"judge": judge, "view": view, **with_intervals(of_judge[(judge,)], j, "story_id")})
                stories.append({"judge": judge, "view": view, **self._story_correlation(j)})
                cutoff.append({"judge": judge, "view": view, "story_cutoff": ctx.options.story_cutoff,
                               **self._story_cutoff(j, ctx.options.story_cutoff)})
        per_item = d.select(["judge", "item_id", "story_id", "test", "source", "judgeable", "repeat", "status", "label",
                             "p_yes", "p_yes" + AFTER_ANALYSIS, "judge_pass", "expert_pass"]
                            ).sort(["judge", "story_id", "test", "repeat"])
        answers = per_item.with_columns(pl.when(pl.col("status") != "ok").then(pl.lit("unparsed"))
                                        .when(pl.col("judge_pass")).then(pl.lit("Yes")).otherwise(pl.lit("No")).alias("label"))
        tables = {"verdict_grid": self.verdict_grid(per_item), "per_item": per_item,
                  "per_test": pl.DataFrame(per_test, infer_schema_length=None),
                  "label_distribution": label_distribution(answers, "story_id"),
                  "pass_rates": pl.concat(by_source).select("judge", "view", "source", "test", "n", "judge_pass_rate",
                                                             "expert_pass_rate").sort(["judge", "view", "source", "test"])}
        tables["pass_rates_by_source"] = (tables["pass_rates"].group_by(["judge", "view", "source"], maintain_order=True)
                                          .agg(pl.col("judge_pass_rate").mean(), pl.col("expert_pass_rate").mean(),
                                               pl.len().alias("tests")))
        if (ppi := ctx.config.ppi).enabled and (ctx.annotations is not None or d["expert_pass"].is_not_null().any()):
            tables.update(self.prediction_powered(views, ppi, ctx.config.missing_policy, ctx.annotations, ctx.warn))
        if not d["expert_pass"].is_not_null().any():
            # No human labels (e.g. the demo sample): only what the judge said, no agreement tables.
            tables["per_test"] = tables["per_test"].select(["judge", "view", "test", "unparsed", "judge_pass_rate"])
            ctx.no_labels(f"no expert label in {ctx.dataset_path} (expert_majority.json) for a story this run judges: "
                          "agreement tables "
                          "(overall, story counts, calibration)"
                          + (" and [ppi]'s table (no label to estimate from)"
                             if ctx.config.ppi.enabled and ctx.annotations is None else "")
                          + " were not computed")
            return tables
        answered = per_item.filter((pl.col("status") == "ok") & pl.col("expert_pass").is_not_null())
        return {**tables, "overall": pl.DataFrame(overall, infer_schema_length=None), "story_counts": pl.DataFrame(stories),
                "story_cutoff": pl.DataFrame(cutoff),
                "corrected_pass_rates": corrected_pass_rates(per_item),
                **calibration_tables(answered, "p_yes", "expert_pass", cluster="story_id")}

    @staticmethod
    def prediction_powered(views: dict[str, pl.DataFrame], ppi: PPIConfig, missing: MissingPolicy = MissingPolicy(),
                           annotated: Annotated | None = None, warn: Callable[[str], None] | None = None
                           ) -> dict[str, pl.DataFrame]:
        """`[ppi]`: the experts' pass rate per test and over all tests from the labelled stories'
        labels, alone and with the judge's answers on every story (its P(Yes) where it gave one,
        else its decision), a story's tests one cluster. A test the judge did not answer reads the
        missing-answer policy's label where it names Yes or No, else 0.5: never its `wrong` stand-in,
        which is made of the experts' label (ppi_tables' docstring). With `ppi_labelled`: the stories
        whose labels it read."""
        stand_in = float(missing.label == "Yes") if missing.kind == "label" and missing.label in ("Yes", "No") else 0.5
        return ppi_tables(views, ppi, cluster="story_id", item="item_id", group="test", human="expert_pass",
                          quantity="expert pass rate" if annotated is None else "annotators' pass rate",
                          unanswered=stand_in, annotated=annotated, warn=warn,
                          judge_value=pl.when(pl.col("status") == "ok")
                          .then(pl.coalesce(pl.col("p_yes"), pl.col("judge_pass").cast(pl.Float64))))

    @staticmethod
    def _rates(v: pl.DataFrame) -> pl.DataFrame:
        """Per judge, source and test: the judge's decisions (`n`) and its and the experts' pass
        rates over the answers each gave (None where none)."""
        def rate(col: str) -> pl.Expr:
            given = pl.col(col).drop_nulls()
            return pl.when(given.len() > 0).then(given.cast(pl.Int64).sum() / given.len())
        return v.group_by(["judge", "source", "test"]).agg(pl.col("judge_pass").drop_nulls().len().cast(pl.Int64).alias("n"),
                                                           rate("judge_pass").alias("judge_pass_rate"),
                                                           rate("expert_pass").alias("expert_pass_rate"))

    @staticmethod
    def _story_correlation(j: pl.DataFrame) -> dict:
        """Per story, the judge's pass count against the experts' over the SAME tests: those with a
        judge decision (mean over repeats) and an expert label. A story with none is left out, so a
        non-answer is never counted as a fail (unless the missing-answer policy says so)."""
        counts = (j.filter(pl.col("judge_pass").is_not_null() & pl.col("expert_pass").is_not_null())
                  .group_by(["story_id", "test"]).agg(pl.col("judge_pass").cast(pl.Float64).mean(),
                                                       pl.col("expert_pass").first().cast(pl.Float64))
                  .group_by("story_id").agg(pl.col("judge_pass").sum().alias("judge"),
                                            pl.col("expert_pass").sum().alias("expert"), pl.len().alias("tests"))
                  .sort("story_id"))                  # in one order: the correlations' sums, to the last bit
        x, y = counts["judge"].to_list(), counts["expert"].to_list()
        p, s = pearson(x, y), spearman(x, y)
        return {"stories": counts.height, "pearson": p.value, "pearson_p": p.p_value,
                "spearman": s.value, "spearman_p": s.p_value}

    @staticmethod
    def _story_cutoff(j: pl.DataFrame, cutoff: float) -> dict:
        """Story-level verdict: a story passes when it passes at least `cutoff` of its judged tests,
        by the judge and by the experts; their agreement over stories."""
        share = (j.filter(pl.col("judge_pass").is_not_null() & pl.col("expert_pass").is_not_null())
                 .group_by("story_id").agg(pl.col("judge_pass").mean().alias("judge"),
                                           pl.col("expert_pass").mean().alias("expert")))
        jp, ep = (share["judge"] >= cutoff).to_list(), (share["expert"] >= cutoff).to_list()
        return {"stories": share.height, "kappa": cohen_kappa(ep, jp).value,
                "balanced_accuracy": balanced_accuracy(ep, jp).value,
                "judge_pass_rate": sum(jp) / len(jp) if jp else None,
                "expert_pass_rate": sum(ep) / len(ep) if ep else None}

    @staticmethod
    def _expert_fleiss(data: TTCWData) -> Mapping[int, float]:
        return expert_fleiss(tuple(data.annotations))

    @staticmethod
    def verdict_grid(per_item: pl.DataFrame) -> pl.DataFrame:
        """Stories x tests, each cell the judge's verdict (Yes / No / ? for unparsed), first repeat."""
        first = per_item.filter(pl.col("repeat") == 0).with_columns(
            pl.when(pl.col("judge_pass").is_null()).then(pl.lit("?"))
            .when(pl.col("judge_pass")).then(pl.lit("Yes")).otherwise(pl.lit("No")).alias("verdict"),
            pl.format("T{}", pl.col("test")).alias("test_col"))
        grid = first.pivot(on="test_col", index=["judge", "story_id"], values="verdict", aggregate_function="first")
        passes = first.group_by(["judge", "story_id"]).agg(pl.col("judge_pass").cast(pl.Int64).sum().alias("passed"))
        return grid.join(passes, on=["judge", "story_id"]).sort(["judge", "story_id"])


@lru_cache(maxsize=4)
def expert_fleiss(annotations: tuple[tuple[str, int, int, str], ...]) -> Mapping[int, float]:
    """The experts' Fleiss kappa per test over the stories all three rated (`annotations`: story,
    expert, test, verdict). Kept for the dataset: a sweep aggregates once per cell and post setting
    (456 times in the committed one), and the experts' agreement never changes between them."""
    by_item: dict[tuple[str, int], list[str]] = {}
    for story, _expert, test, verdict in annotations:
        by_item.setdefault((story, test), []).append(verdict)
    out = {}
    for test in {t for _, t in by_item}:
        rows = [v for (s, t), v in by_item.items() if t == test and len(v) == 3]
        out[test] = fleiss_kappa(rows).value
    return MappingProxyType(out)
