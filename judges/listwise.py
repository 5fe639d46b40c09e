"""In-context listwise scoring and ranking (Sawicki et al. 2025 on poems; Al Rabeyah et al. 2024 on
alternative uses).

Method:
1. Items of a group (an AUT object, a story set) are shown N at a time (N from 12 to 90), each under
   an opaque id; the judge scores each 1..5 for a criterion and lists them from highest to lowest.
   The verdict language fixes the format; vLLM decodes it slot by slot, so every id appears once.
2. Designs: `comprehensive` (the group's pool in one prompt, shuffled), `segmented` (the pool split
   into `segments` lists, each (source, category) cell spread evenly over them: 60 AUT uses of 4
   generators x 3 categories make 5 lists of 12, one use per cell), `subsets` (`subsets` random
   subsets of `subset_size` items with equal numbers per category, shuffled, seeded).
   The pool is the whole group, or `per_category` items drawn per ground-truth category.
3. Two scorings of one output: the 1..5 score, and the position score (the papers' first listed = N,
   last = 1, as a share of the list: first 1, last 0, so that lists of different sizes pool).
4. Per item: mean over every list that contains it. Then per (source, category) means; Spearman
   of item means against the ground truth (category rank, and human score when present); one-way
   ANOVA across categories (its p by shuffling categories within each item group); ICC1/2/3 and
   ICC1k/2k/3k across repeats of the same list; the parse success rate per N; an inter-judge
   Spearman matrix; self-preference where a judge's own family wrote some items (`self_sources`):
   own minus others' mean, with a bootstrap CI resampling item groups. Item groups are the
   independent units of every interval and p-value (a score is relative to its list)."""
from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal, get_args

import polars as pl

import litjudge.grammars as grammars
from litjudge.engine.core.errors import ConfigError, did_you_mean
from litjudge.engine.core.paths import paper_prompt
from litjudge.engine.core.schema import check_choices
from litjudge.engine.data.items import ItemSet, RatedItem, sample_per_category, select_groups
from litjudge.grammars.listwise import position_scores

from .base import Ask, Context, Declaration, MetricTable, Protocol, RankBy, Table
from .frames import split
from .metrics import ICC_KINDS, icc, one_way_anova, spearman
from .metrics.bootstrap import difference_of_means_ci, interval_note, or_none
from .metrics.estimates import Units, spearman_of
from .metrics.reliability import within_strata_permutation_p
from .permutation import permutation_tables
from .templates import TemplateFields, template_of

Design = Literal["comprehensive", "segmented", "subsets"]
DESIGNS = get_args(Design)
SCORES = {"judge": pl.Utf8, "group": pl.Utf8, "list": pl.Int64, "order": pl.Int64, "repeat": pl.Int64,
          "n_items": pl.Int64, "item_id": pl.Utf8, "score": pl.Float64, "position": pl.Float64, "shown_at": pl.Int64}
RANKABLE = ("spearman_category", "spearman_human")
POETRY_CRITERIA = ("creativity", "quality", "innovativeness", "similarity", "poeticness")
FORMAT = ("\n\nList every id exactly once, one per line, from the highest score to the lowest, in this "
          "format:\n\n[position on the list]. [id] : [score]\n\nFor example:\n\n1. kqzv : 5\n2. mxtb : 4\n\n")


@dataclass(frozen=True)
class ListwiseOptions:
    criterion: str = "creativity"      # a paper criterion, "aut" (the AUT scoring prompt), or your own text
    item_kind: str = "items"           # what the prompt calls the items ("poems", "alternative uses", ...)
    item_one: str = ""                 # one of them ("poem", "story"); "": from item_kind (stories -> story)
    design: Design = "comprehensive"   # how the pool is cut into lists
    groups: tuple[str, ...] = ()       # which groups (objects, story sets), in this order; empty: all
    per_category: int = 0              # pool: this many items per category per group (0: the whole group)
    segments: int = 5                  # segmented: each (source, category) cell spread over this many lists
    subset_size: int = 15              # subsets: items per list
    subsets: int = 10                  # subsets: lists per group
    seed: int = 0                      # the seeded draws, subsets and shuffles
    max_items: int = 90                # the most items one list may hold
    self_sources: dict[str, str] = field(default_factory=dict)   # judge -> the item source it belongs to
    # Permutation self-consistency (Tang et al. 2023): each list also shown in `orders` - 1 shuffled
    # orders (seeded per list and order, so raising it later generates only the new orders), then
    # aggregated to the central (Kemeny) ranking; see judges/permutation.py.
    orders: int = 1

    def __post_init__(self) -> None:
        check_choices(self)
        if not 2 <= self.subset_size <= self.max_items:
            raise ValueError(f"options.subset_size must be in [2, {self.max_items}], got {self.subset_size}")
        if self.subsets < 1 or self.per_category < 0:
            raise ValueError("options.subsets must be >= 1 and options.per_category >= 0")
        if self.orders < 1:
            raise ValueError(f"options.orders must be >= 1 (1: the list as drawn), got {self.orders}")
        if not self.criterion.strip():
            raise ValueError("options.criterion is empty: name a paper criterion "
                             f"({', '.join(POETRY_CRITERIA)}), \"aut\", or write your own instruction")
        if len(self.criterion.split()) == 1 and self.criterion not in (known := (*POETRY_CRITERIA, "aut")):  # a typo
            raise ValueError(f"options.criterion {self.criterion!r} is none of the papers' criteria ({', '.join(known)})"
                             f"{did_you_mean(self.criterion.lower(), known)}; an instruction of your own is a sentence")
        if not self.item_kind.strip():
            raise ValueError("options.item_kind is empty: say what the items are (\"poems\", \"stories\", ...)")
        if self.segments < 1:
            raise ValueError(f"options.segments must be >= 1, got {self.segments}")


class ListwiseRanking(Protocol):
    # One Spearman over the judge's items, pooled over lists (score = the 1-5 score). ICC is per
    # list and F has no interval: neither is rankable (ranking by "the first list" ranked list 1).
    # Label mode only: a ranking is many tokens (no distribution), and no analyze layout is written.
    declared = Declaration(
        name="listwise", version="1", reads="items", options=ListwiseOptions, limit_counts="groups",
        labels_when_aggregating=True,
        summary=("agreement", "anova", "category_means", "icc", "success"),
        tables={"agreement": MetricTable(by=("score",), pooled="score=score", higher=RANKABLE, rank=RANKABLE),
                "anova": MetricTable(by=("score",), higher=("F",)),
                "icc": MetricTable(by=("score", "list"), higher=ICC_KINDS),
                "success": MetricTable(by=("n_items",), higher=("success_rate",)),
                **dict.fromkeys(("item_scores", "category_means", "inter_judge", "self_preference"), Table()),
                # options.orders > 1
                **dict.fromkeys(("psc_rankings", "psc_agreement", "psc_position_bias"), Table(when="sometimes"))},
        rank_by="agreement.spearman_category",
        fields={"group": str, "list": int, "n_items": int, "codes": str, "order": int, "shown": str},
        self_preference="self_sources", report="litjudge.engine.app.report.panels:listwise_panels")

    def rank_units(self, tables: dict[str, pl.DataFrame], judge: str, rank: RankBy, options: ListwiseOptions):
        """The item groups (a prompt's lists and items) are the clusters: an item's score is
        relative to the items it was listed with, so items of one group are not independent."""
        items = tables.get("item_scores")
        column = "mean_" + rank.where().get("score", "score")
        if items is None or column not in items.columns:
            return None
        rows = items.filter(pl.col("judge") == judge)
        truth = "category_rank" if rank.metric == "spearman_category" else "human_score"
        rows = rows.filter(pl.col(truth).is_not_null() & pl.col(truth).is_not_nan() & pl.col(column).is_not_null())
        return Units.of(rows["group"].to_list(), {"x": rows[truth].to_numpy(), "y": rows[column].to_numpy()}, spearman_of)

    def load(self, ctx: Context) -> ItemSet:
        return ctx.load("items")

    # -- prompts ------------------------------------------------------------------------------
    def instruction(self, opts: ListwiseOptions, group: str, n: int) -> str:
        if opts.criterion == "aut":
            return paper_prompt("aut_scoring", "template").replace("[an object]", group)
        if opts.criterion in POETRY_CRITERIA:
            text = paper_prompt("poetry_incontext", "criteria", opts.criterion).replace("{n}", str(n))
            text = text.replace("poems", opts.item_kind).replace("poem", opts.item_one or singular(opts.item_kind))
            return text.split(" Print out the filenames")[0]
        return opts.criterion.replace("{n}", str(n))

    def template_fields(self, options: ListwiseOptions) -> TemplateFields:
        """{items}: the listed items, each under its id; {format}: the answer format the verdict follows."""
        return TemplateFields(("instruction", "format", "items", "n", "group", "kind"), ("items",))

    def prompt(self, opts: ListwiseOptions, group: str, listed: list[tuple[str, RatedItem]], own=None) -> str:
        body = "\n\n".join(f"[{code}]\n{item.text.strip()}" for code, item in listed)
        if own is not None:
            return own.render({"instruction": self.instruction(opts, group, len(listed)), "format": FORMAT.strip(),
                               "items": body, "n": len(listed), "group": group, "kind": opts.item_kind})
        return (self.instruction(opts, group, len(listed)) + FORMAT + f"{opts.item_kind.upper()}:\n\n{body}")

    # -- designs ------------------------------------------------------------------------------
    def pool(self, items: list[RatedItem], opts: ListwiseOptions, rng: random.Random) -> list[RatedItem]:
        return sample_per_category(items, opts.per_category, rng)

    def lists(self, pool: list[RatedItem], opts: ListwiseOptions, rng: random.Random) -> list[list[RatedItem]]:
        if opts.design == "comprehensive":
            chosen = rng.sample(pool, len(pool))
            return [chosen]
        cells: dict[tuple[str, str | None], list[RatedItem]] = {}
        for item in rng.sample(pool, len(pool)):
            cells.setdefault((item.source, item.category), []).append(item)
        if opts.design == "segmented":
            segments = [[x for v in cells.values() for x in v[k::opts.segments]] for k in range(opts.segments)]
            if not all(segments):        # fewer lists than asked, said nothing
                largest = max(len(v) for v in cells.values())
                raise ConfigError(f"options.segments = {opts.segments}, and group {pool[0].group!r}'s largest "
                                  f"(source, category) cell holds {largest} item(s): {largest} list(s) at most; "
                                  "give fewer segments", parameter="options.segments")
            return [rng.sample(s, len(s)) for s in segments]
        by_cat: dict[str | None, list[RatedItem]] = {}
        for item in pool:
            by_cat.setdefault(item.category, []).append(item)
        if None in by_cat and len(by_cat) > 1:     # equal numbers per category: one without is in none
            raise ConfigError(f"the subsets design draws equal numbers per category, and {len(by_cat[None])} item(s) "
                              f"of group {pool[0].group!r} have none (first: {by_cat[None][0].item_id!r}): give them one, "
                              "or use design = \"comprehensive\" or \"segmented\"", parameter="options.design")
        if opts.subset_size % len(by_cat):
            # equal numbers per category: a subset_size of 4 over 3 categories gave lists of 3, saying nothing
            raise ConfigError(f"options.subset_size = {opts.subset_size} cannot hold equal numbers of the pool's "
                              f"{len(by_cat)} categories: give a multiple of {len(by_cat)}", parameter="options.subset_size")
        per = opts.subset_size // len(by_cat)
        short = sorted((str(c), len(v)) for c, v in by_cat.items() if len(v) < per)
        if short:                        # a shorter list, unequal per category, said nothing
            raise ConfigError(f"options.subset_size = {opts.subset_size} over {len(by_cat)} categories takes {per} "
                              f"of each, and group {pool[0].group!r} has {short[0][1]} of {short[0][0]!r}: "
                              "give a smaller subset_size", parameter="options.subset_size")
        out = []
        for _ in range(opts.subsets):
            subset = [x for cat in sorted(by_cat, key=str) for x in rng.sample(by_cat[cat], min(per, len(by_cat[cat])))]
            out.append(rng.sample(subset, len(subset)))
        return out

    def units(self, ctx: Context) -> list[tuple[str, list[RatedItem]]]:
        """The groups (objects, story sets): the named ones, else all in the data's order."""
        return select_groups(self.load(ctx), list(ctx.options.groups))

    def asks(self, ctx: Context, unit: tuple[str, list[RatedItem]]) -> Iterator[Ask]:
        """The group's lists by the design, each under fresh codes, in each of its shown orders."""
        opts: ListwiseOptions = ctx.options
        group, items = unit
        rng = random.Random(f"{opts.seed}/{group}")
        for k, listed in enumerate(self.lists(self.pool(items, opts, rng), opts, rng)):
            if len(listed) < 2:
                raise ConfigError(f"group {group!r} of {ctx.dataset_path}: list {k + 1} holds {len(listed)} item(s), "
                                  "and a ranking needs at least 2 (the group has too few items for this design: "
                                  "more per_category, fewer segments, a larger subset_size, or another group)",
                                  parameter="options.design")
            if len(listed) > opts.max_items:
                raise ConfigError(f"group {group!r}: a list of {len(listed)} items exceeds options.max_items "
                                  f"({opts.max_items}); use per_category or another design", parameter="options.design")
            if opts.orders > math.factorial(len(listed)):
                raise ConfigError(f"options.orders = {opts.orders}, and list {k + 1} of group {group!r} holds "
                                  f"{len(listed)} items: {math.factorial(len(listed))} orders at most",
                                  parameter="options.orders")
            codes = _codes(len(listed), rng)
            verdict = grammars.Listwise(tuple(codes))
            ids = json.dumps(dict(zip(codes, (i.item_id for i in listed))))
            for order, shown in enumerate(shown_orders(list(zip(codes, listed)), opts, f"{group}/{k}")):
                yield Ask(f"{group}/list{k}", self.prompt(opts, group, shown, template_of(ctx.config)), verdict, (
                    ("group", group), ("list", k), ("n_items", len(listed)), ("codes", ids), ("order", order),
                    ("shown", json.dumps([c for c, _ in shown]))))

    # -- aggregation --------------------------------------------------------------------------
    def scores(self, table: pl.DataFrame) -> pl.DataFrame:
        """One row per (judge, list, repeat, item): its 1..5 score and position score."""
        rows = []
        for r in table.filter(pl.col("status") == "ok").iter_rows(named=True):
            ranking = tuple((str(i), int(s)) for i, s in r["value"])
            codes = json.loads(r["codes"])
            pos = position_scores(ranking)
            shown = {c: n + 1 for n, c in enumerate(json.loads(r.get("shown") or "[]"))}
            for code, score in ranking:
                rows.append({"judge": r["judge"], "group": r["group"], "list": r["list"], "order": r.get("order") or 0,
                             "repeat": r["repeat"], "n_items": r["n_items"], "item_id": codes[code],
                             "score": float(score), "position": float(pos[code]), "shown_at": shown.get(code)})
        return pl.DataFrame(rows, schema=SCORES)

    def aggregate(self, table: pl.DataFrame, ctx: Context) -> dict[str, pl.DataFrame]:
        opts: ListwiseOptions = ctx.options
        data = self.load(ctx)
        info = pl.DataFrame([{"item_id": i.item_id, "category": i.category, "human_score": i.human_score,
                              "source": i.source, "category_rank": data.category_rank(i.category)} for i in data.items],
                            schema={"item_id": pl.Utf8, "category": pl.Utf8, "human_score": pl.Float64,
                                    "source": pl.Utf8, "category_rank": pl.Float64})
        if data.by_name:                  # an order by name ("high" < "low" < "mid") is no ground truth
            ctx.warn(f"the categories were given no order, so they rank by name ({' < '.join(data.categories)}), "
                     "which spearman_category and category_rank take as worst to best: give the order, worst first, "
                     "as [dataset] category_order (litjudge.judge(category_order=[...]))")
        s = self.scores(table)
        items = (s.group_by(["judge", "group", "item_id"]).agg(pl.col("score").mean().alias("mean_score"),
                                                                pl.col("position").mean().alias("mean_position"),
                                                                pl.len().alias("lists"))
                 .join(info, on="item_id", how="left").sort(["judge", "group", "item_id"]))
        agreement, anova, cells, iccs = [], [], [], []
        for (judge,), j in split(items, "judge").items():
            for col in ("mean_score", "mean_position"):
                name = col.removeprefix("mean_")
                cat = spearman(j["category_rank"].to_list(), j[col].to_list())
                hum = spearman(j["human_score"].fill_null(float("nan")).to_list(), j[col].to_list())
                why = ("the judge gave every item the same value: no ranking to correlate"
                       if j[col].drop_nulls().n_unique() <= 1 else
                       "the items have one category" if j["category_rank"].drop_nans().n_unique() <= 1 else None)
                # no p-value: the items' scores are relative within their lists, not independent
                # draws, so a test counting items overstates the evidence (rank_units resamples groups)
                # the items each Spearman reads: those with a category (a human score) and a value
                valued = j.filter(pl.col(col).is_not_null())
                agreement.append({"judge": judge, "score": name,
                                  "items": valued.filter(pl.col("category_rank").fill_nan(None).is_not_null()).height,
                                  "items_human": valued.filter(pl.col("human_score").fill_nan(None).is_not_null()).height,
                                  "spearman_category": cat.value, "spearman_human": hum.value,
                                  "note": why if cat.value != cat.value else None})
                anova.append({"judge": judge, "score": name, **anova_row(j, col)})
            cells += (j.group_by(["source", "category"]).agg(pl.col("mean_score").mean(), pl.col("mean_position").mean(),
                                                            pl.len().alias("items"), pl.col("category_rank").first())
                      .with_columns(pl.lit(judge).alias("judge")).to_dicts())
        for (judge, group, lst, order), g in split(s, ["judge", "group", "list", "order"]).items():
            for col in ("score", "position"):
                wide = g.pivot(on="repeat", index="item_id", values=col, aggregate_function="first").drop("item_id")
                if wide.width >= 2:
                    name = f"{group}/list{lst}" + (f"/order{order}" if order else "")
                    iccs.append({"judge": judge, "group": group, "list": name, "score": col, **icc_row(wide)})
        success = (table.group_by(["judge", "n_items"]).agg(pl.len().alias("lists"),
                                                            (pl.col("status") == "ok").sum().alias("parsed"))
                   .with_columns((pl.col("parsed") / pl.col("lists")).alias("success_rate")).sort(["judge", "n_items"]))
        return {"item_scores": items, "agreement": pl.DataFrame(agreement), "anova": pl.DataFrame(anova),
                "category_means": pl.DataFrame(cells).sort(["judge", "source", "category_rank", "category"],
                                                           nulls_last=True) if cells else pl.DataFrame(),
                "icc": pl.DataFrame(iccs, schema={"judge": pl.Utf8, "group": pl.Utf8, "list": pl.Utf8, "score": pl.Utf8,
                                                  "items": pl.Int64, "repeats": pl.Int64,
                                                  **{k: pl.Float64 for k in ICC_KINDS}, "note": pl.Utf8}),
                "success": success, "inter_judge": self._inter_judge(items),
                "self_preference": self._self_preference(items, opts),
                **(permutation_tables(s, info, opts.orders) if opts.orders > 1 else {})}

    @staticmethod
    def _inter_judge(items: pl.DataFrame) -> pl.DataFrame:
        judges = items["judge"].unique(maintain_order=True).to_list()
        wide = items.pivot(on="judge", index="item_id", values="mean_score", aggregate_function="first")
        rows = []
        for a in judges:
            row = {"judge": a}
            for b in judges:
                both = wide.select([a, b]).drop_nulls() if a != b else wide.select([a]).drop_nulls()
                row[b] = 1.0 if a == b else spearman(both[a].to_list(), both[b].to_list()).value
            rows.append(row)
        return pl.DataFrame(rows)

    @staticmethod
    def _self_preference(items: pl.DataFrame, opts: ListwiseOptions) -> pl.DataFrame:
        """Does a judge favour its own family's items? Its mean item score for them minus for the
        others', with a 95% bootstrap interval resampling the item groups (the independent units:
        a score is relative to the items listed with it); for the 1..5 score and for the rank
        position."""
        rows = []
        for judge, source in opts.self_sources.items():
            j = items.filter(pl.col("judge") == judge)
            own, other = j.filter(pl.col("source") == source), j.filter(pl.col("source") != source)
            mine = (j["source"] == source).fill_null(False).to_list()
            for col in ("mean_score", "mean_position"):
                diff, low, high = difference_of_means_ci(j["group"].to_list(), j[col].to_list(), mine)
                rows.append({"judge": judge, "own_source": source, "score": col.removeprefix("mean_"),
                             "own_items": own.height, "other_items": other.height, "groups": j["group"].n_unique(),
                             "own_mean": own[col].mean(), "other_mean": other[col].mean(),
                             "difference": diff, "ci_low": or_none(low), "ci_high": or_none(high),
                             "ci_note": interval_note(j["group"].n_unique(), low) if own.height and other.height
                             else None})
        return pl.DataFrame(rows, schema={"judge": pl.Utf8, "own_source": pl.Utf8, "score": pl.Utf8,
                                          "own_items": pl.Int64, "other_items": pl.Int64, "groups": pl.Int64,
                                          "own_mean": pl.Float64, "other_mean": pl.Float64, "difference": pl.Float64,
                                          "ci_low": pl.Float64, "ci_high": pl.Float64, "ci_note": pl.Utf8})


def icc_row(wide: pl.DataFrame) -> dict:
    """One list's ICCs across its repeats (`wide`: a column per repeat, a row per item), as ANOVA
    estimates (pingouin's): with few items the k-repeat forms leave [-1, 1] (ICC2k 3.0 on a list of
    2), said in `note`."""
    values = icc(wide.drop_nulls().to_numpy())
    beyond = [k for k, v in values.items() if v == v and not -1 - 1e-9 <= v <= 1 + 1e-9]
    undefined = [k for k, v in values.items() if v != v]       # blank in the table: said why
    said = "; ".join([*([f"{', '.join(beyond)} outside [-1, 1]: too few items ({wide.height}) for a stable "
                         "estimate"] if beyond else []),
                      *([f"{', '.join(undefined)} undefined: a variance it divides by is zero"] if undefined else [])])
    note = said or None
    return {"items": wide.height, "repeats": wide.width, **values, "note": note}


def anova_row(items: pl.DataFrame, column: str) -> dict:
    """One judge's one-way ANOVA of its item scores (`column`) across categories: F, and its
    p-value by shuffling categories within each item group (`within_strata_permutation_p`: an
    item's score is relative to its list, so the groups, not the items, are independent)."""
    have = items.filter(pl.col("category").is_not_null() & pl.col(column).is_not_null())
    by_cat = [g[column].to_list() for _, g in have.group_by("category", maintain_order=True)]
    a = one_way_anova(by_cat)
    p = (within_strata_permutation_p(have[column].to_list(), have["category"].to_list(), have["group"].to_list())
         if a.defined else None)
    return {"items": a.n, "groups": have["group"].n_unique(), "categories": len(by_cat), "F": a.value, "p": p}


def singular(plural: str) -> str:
    """One of `plural` for the prompt: stories -> story, boxes -> box, uses -> use, poems -> poem
    (English rules for the usual item words; `item_one` says it where they fail)."""
    words = plural.rsplit(" ", 1)
    last = words[-1]
    if last.endswith("ies") and len(last) > 4:
        last = last[:-3] + "y"
    elif last.endswith(("ches", "shes", "xes", "sses")):
        last = last[:-2]
    elif last.endswith("s") and not last.endswith("ss"):
        last = last[:-1]
    return " ".join([*words[:-1], last])


def shown_orders(listed: list[tuple[str, RatedItem]], opts: ListwiseOptions, where: str
                 ) -> list[list[tuple[str, RatedItem]]]:
    """The list as drawn, then `orders - 1` shuffles of it, each seeded by its own index and
    drawn again where it repeats an earlier order (a list of 3 was shown twice in one order, and
    its two orders counted as two)."""
    out = [listed]
    for order in range(1, opts.orders):
        rng = random.Random(f"{opts.seed}/{where}/order{order}")
        shuffled = rng.sample(listed, len(listed))
        while shuffled in out:
            shuffled = rng.sample(listed, len(listed))
        out.append(shuffled)
    return out


def _codes(n: int, rng: random.Random) -> list[str]:
    """Opaque 4-letter ids, distinct, with no relation to the items or their order."""
    letters = "bcdfghjkmnpqrstvwxz"
    out: list[str] = []
    while len(out) < n:
        code = "".join(rng.choice(letters) for _ in range(4))
        if code not in out:
            out.append(code)
    return out


