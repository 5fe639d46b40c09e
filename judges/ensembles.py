"""Several judges on the same binary items, computed from their stored verdicts (no model call):

- a cascade with an agreement guarantee (`[cascade]`): cheap judges first, each answering only
  above a threshold certified on a calibration split (`metrics.selective`), the rest escalating,
  the remainder abstained; reported on the held-out split with CIs;
- a jury (`[jury]`): the judges' probabilities pooled by majority vote, plain average and logistic
  stacking fitted on the calibration split; each judge and each pooling scored on the held-out
  split, with the jury's calibration.

The input is a decision frame, one row per (judge, item): item, cluster (what moves together in
resampling and splitting, e.g. the story), truth and pred (bools; None where the judge gave no
decision: unread, or a pair's tie), p (P(positive), None for a judge without probabilities:
one-hot; 0.5 for its tie), tokens and cost (per verdict, for the cascade's shares).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import polars as pl

from . import PROTOCOLS
from .metrics.agreement import binary_agreement_with_ties, tie_credit
from .metrics.bootstrap import MIN_CLUSTERS, RESAMPLES
from .metrics.jury import average, fit_stacking, majority, stacked
from .metrics.proportion import cluster_mean_with_ci, rate_with_ci
from .metrics.selective import Level, cascade
from .tables import calibration_tables, stated_probability


@dataclass(frozen=True)
class CascadeOptions:
    judges: list[str] = field(default_factory=list)   # cheapest first; each must be a judge of the run
    target: float = 0.8                                # agreement with humans on the answered items, in (0, 1)
    delta: float = 0.1                                 # the guarantee fails with probability at most delta, in (0, 1)
    calibration_fraction: float = 0.5                  # clusters (stories) used to set the thresholds, in (0, 1)
    seed: int = 0                                      # the seeded split into calibration and held-out clusters

    def __post_init__(self) -> None:
        if not 0 < self.target < 1 or not 0 < self.delta < 1 or not 0 < self.calibration_fraction < 1:
            raise ValueError("cascade target, delta and calibration_fraction must each be in (0, 1)")
        if len(self.judges) < 1 or len(set(self.judges)) != len(self.judges):
            raise ValueError("cascade judges must name at least one judge, each once")


@dataclass(frozen=True)
class JuryOptions:
    judges: list[str] = field(default_factory=list)   # empty: every judge of the run
    calibration_fraction: float = 0.5                  # clusters used to fit the stacking, in (0, 1)
    seed: int = 0                                      # the seeded split into calibration and held-out clusters

    def __post_init__(self) -> None:
        if not 0 < self.calibration_fraction < 1:
            raise ValueError("jury calibration_fraction must be in (0, 1)")
        if len(set(self.judges)) != len(self.judges):       # one judge twice was two votes, two weights
            raise ValueError("jury judges must name each judge once")


def split(clusters: list[str], fraction: float, seed: int) -> set[str]:
    """The calibration clusters: a seeded random share of them."""
    unique = sorted(set(clusters))
    rng = random.Random(seed)
    rng.shuffle(unique)
    return set(unique[: max(1, round(fraction * len(unique)))])


def labelled_clusters(frame: pl.DataFrame) -> list[str]:
    """Every cluster of the runs' human-labelled items, whichever judge answered them: what the
    calibration split is drawn over, the same for a cascade and a jury of one ensemble."""
    return frame.filter(pl.col("truth").is_not_null())["cluster"].unique().to_list()


def _wide(frame: pl.DataFrame, judges: list[str]) -> pl.DataFrame:
    """One row per item holding every named judge's (pred, p, tokens, cost); items a judge lacks
    are kept (its columns null)."""
    base = frame.select("item", "cluster", "truth").unique("item", keep="first").sort("item")
    for j in judges:
        part = frame.filter(pl.col("judge") == j).unique("item", keep="first").select(
            "item", pl.col("pred").alias(f"pred|{j}"), pl.col("p").alias(f"p|{j}"),
            pl.col("tokens").alias(f"tokens|{j}"), pl.col("cost").alias(f"cost|{j}"), pl.lit(True).alias(f"asked|{j}"))
        base = base.join(part, on="item", how="left")
    return base.filter(pl.col("truth").is_not_null())


def _prob(pred: bool | None, p: float | None) -> float | None:
    """P(positive): the judge's own, else one-hot from its label."""
    if p is not None:
        return p
    return None if pred is None else float(pred)


def _confidence(pred: bool | None, p: float | None) -> float:
    """The judge's confidence in the answer it gave: P(that answer), 1 for a label alone, 0 without one."""
    if pred is None:
        return 0.0
    q = p if p is not None else float(pred)
    return q if pred else 1.0 - q


def shared_items(w: pl.DataFrame, judges: list[str], what: str, answered: bool = True) -> pl.DataFrame:
    """The items every judge answered, the only ones a jury pools (`answered=False`: every judge
    was asked, the ones a cascade routes: an answer its level could not read escalates, as a level
    unsure of it does; they were left out, and a cheap judge's unparsed quarter raised its coverage
    from 0.6 to 1.0). Refused in one line when they cannot make both a calibration and a held-out
    split (fewer than 2 clusters: the held-out split would be empty and every figure NaN), saying
    how many there are."""
    have = w.filter(pl.all_horizontal([pl.col(f"pred|{j}").is_not_null() | pl.col(f"p|{j}").is_not_null()
                                       if answered else pl.col(f"asked|{j}").is_not_null() for j in judges]))
    clusters = have["cluster"].n_unique()
    if clusters < 2:
        counts = ", ".join(f"{j}: {w[f'pred|{j}'].is_not_null().sum()}" for j in judges)
        raise ValueError(f"the {what}'s judges share {have.height} human-labelled item(s) in {clusters} cluster(s) "
                         f"(stories or pairs; items per judge: {counts}): a calibration and a held-out split need "
                         f"at least 2 clusters, and {2 * MIN_CLUSTERS} for an interval on each: run the judges on "
                         "the same, larger data")
    return have


def clusters_to_certify(target: float, delta: float) -> int:
    """The fewest clusters with which an error-free level can be certified: (1 - risk)^k <= delta."""
    return math.ceil(math.log(delta) / math.log(target))


def _interval(clusters: list[str], hits: list[float]) -> dict:
    """Agreement (hits in [0, 1], a tie half) with its interval, clusters as the units."""
    return rate_with_ci(clusters, hits).row("agreement")


@dataclass(frozen=True)
class Split:
    """Shared items of an ensemble: their clusters and truth, and which are calibration items
    (indices) and which held out."""

    clusters: list[str]
    truth: list
    calibration: list[int]
    test: list[int]
    calibration_clusters: int

    @classmethod
    def of(cls, clusters: list[str], truth: list, fraction: float, seed: int, among: list[str] | None = None) -> Split:
        """The split, drawn over `among` (every labelled cluster of the ensemble's runs) and kept to
        `clusters`, so a cascade and a jury reading different shared items split alike (each drew
        over its own: a jury member short of 2 stories moved 7 of 30 to the other side). Refused in
        one line where it leaves no held-out cluster (every figure was NaN) or no calibration one."""
        own = set(clusters)
        chosen = split(among if among is not None else clusters, fraction, seed) & own
        if len(chosen) == len(own):
            raise ValueError(f"calibration_fraction {fraction} puts all {len(chosen)} clusters in the calibration "
                             "split, none held out to report on: lower it")
        if not chosen:
            raise ValueError(f"calibration_fraction {fraction} puts none of the {len(own)} clusters the judges share "
                             "in the calibration split (it is drawn over every labelled cluster of the runs): raise "
                             "it, or run the judges on the same data")
        return cls(clusters, truth, [i for i, c in enumerate(clusters) if c in chosen],
                   [i for i, c in enumerate(clusters) if c not in chosen], len(chosen))


def _levels(w: pl.DataFrame, judges: list[str]) -> list[Level]:
    """Each judge as a cascade level: its answers and its confidence in the answer it gave (p for
    a Yes, 1 - p for a No; 1 one-hot; 0 without an answer). Not max(p, 1 - p): a judge deciding
    by a threshold of 0.66 answered No with confidence 0.651 at P(Yes) 0.651."""
    levels = []
    for j in judges:
        preds, probs = w[f"pred|{j}"].to_list(), w[f"p|{j}"].to_list()
        levels.append(Level(j, preds, [_confidence(a, b) for a, b in zip(preds, probs)]))
    return levels


def _work(w: pl.DataFrame, judges: list[str], items: list[int]) -> tuple[float, float | None]:
    """Total tokens and cost (None when no judge reports one) of every judge on `items`."""
    known_cost = any(w[f"cost|{j}"].is_not_null().any() for j in judges)
    tokens = sum(sum(w[f"tokens|{j}"][i] or 0 for j in judges) for i in items)
    cost = sum(sum(w[f"cost|{j}"][i] or 0.0 for j in judges) for i in items)
    return tokens, cost if known_cost else None


def _level_rows(w: pl.DataFrame, levels: list[Level], thresholds: list[float | None], answered_by: list[int | None],
                s: Split) -> tuple[list[dict], list[float], list[str]]:
    """Per level on the held-out split: what reached it, what it answered and its agreement with
    its interval, its share of the tokens and cost (None, not 0, where the decisions carry none);
    and every answered item's hit and cluster."""
    judges = [lv.judge for lv in levels]
    known_tokens = any(w[f"tokens|{j}"].is_not_null().any() for j in judges)
    reaching = [[i for i in s.test if (by := answered_by[i]) is None or by >= k] for k in range(len(levels))]
    spent = [_work(w, [lv.judge], reached) for lv, reached in zip(levels, reaching)]   # every item reaching it was asked
    # the shares are of what the cascade spent (they sum to 1), not of every judge asked every item
    total_tokens, total_cost = sum(t for t, _ in spent), sum(c or 0.0 for _, c in spent)
    rows, hits_all, clusters_all = [], [], []
    for k, (lv, t) in enumerate(zip(levels, thresholds)):
        mine = [i for i in s.test if answered_by[i] == k]
        reached, (tokens, cost) = reaching[k], spent[k]
        hits = [float(lv.answers[i] == s.truth[i]) for i in mine]
        hits_all += hits
        clusters_all += [s.clusters[i] for i in mine]
        rows.append({"level": k + 1, "judge": lv.judge, "threshold": t, "reached": len(reached), "answered": len(mine),
                     "coverage": len(mine) / len(s.test) if s.test else None,
                     **_interval([s.clusters[i] for i in mine], hits),
                     "token_share": tokens / total_tokens if known_tokens and total_tokens else None,
                     "cost_usd": cost, "cost_share": cost / total_cost if cost is not None and total_cost else None})
    return rows, hits_all, clusters_all


def _cascade_summary(opts: CascadeOptions, levels: int, thresholds: list[float | None], s: Split, hits: list[float],
                     clusters: list[str]) -> dict:
    """The held-out split's answered share and agreement, and the certified estimand: each
    cluster's agreement among its answered items, averaged over clusters (every story weighs the
    same); item-level agreement can differ (80 clusters of one right verdict + 20 of ten half-wrong
    ones: 0.99 per cluster, 0.64 per item)."""
    overall = _interval(clusters, hits)
    certified = cluster_mean_with_ci(clusters, hits)
    need = clusters_to_certify(opts.target, opts.delta / levels)
    answered = overall["n"]
    return {"target": opts.target, "delta": opts.delta, "calibration_items": len(s.calibration),
            "calibration_clusters": s.calibration_clusters, "test_items": len(s.test), "answered": answered,
            "coverage": answered / len(s.test) if s.test else None, "abstained": len(s.test) - answered,
            "cluster_agreement": certified.value, "cluster_ci_low": certified.ci_low,
            "cluster_ci_high": certified.ci_high, "cluster_ci_note": certified.note,
            "agreement": overall["agreement"], "ci_low": overall["ci_low"], "ci_high": overall["ci_high"],
            "ci_note": overall["ci_note"],
            # a point estimate on the held-out split of the certified estimand, not the guarantee
            # (that is a property of the threshold rule over calibration draws, at 1 - delta)
            "held_out_agreement_reaches_target": None if certified.value is None
            else certified.value >= opts.target,
            "note": None if any(t is not None for t in thresholds) else
            (f"no threshold certified: the judges erred too often on the {s.calibration_clusters} calibration "
             f"clusters to certify agreement {opts.target} at delta {opts.delta} over {levels} levels (even an "
             f"error-free level needs {need} clusters)" if s.calibration_clusters >= need else
             f"no threshold certified: {s.calibration_clusters} calibration clusters, and even an error-free level "
             f"needs {need} at target {opts.target} and delta {opts.delta} over {levels} levels")}


def cascade_tables(frame: pl.DataFrame, opts: CascadeOptions) -> dict[str, pl.DataFrame]:
    """The cascade's thresholds certified on the calibration split (clusters as the unit: items of
    one cluster are not independent, `metrics.selective`), then every held-out item routed: per
    level and in all, with intervals."""
    missing = [j for j in opts.judges if j not in set(frame["judge"].to_list())]
    if missing:
        raise ValueError(f"cascade judges {missing} are not judges of this run")
    every = _wide(frame, opts.judges)
    w = shared_items(every, opts.judges, "cascade", answered=False)     # the items every level was asked
    s = Split.of(w["cluster"].to_list(), w["truth"].to_list(), opts.calibration_fraction, opts.seed,
                 labelled_clusters(frame))
    levels = _levels(w, opts.judges)
    result = cascade(levels, s.truth, s.calibration, opts.target, opts.delta, clusters=s.clusters)
    rows, hits, clusters = _level_rows(w, levels, result.thresholds, result.answered_by, s)
    summary = _cascade_summary(opts, len(levels), result.thresholds, s, hits, clusters)
    summary |= {"items": every.height, "shared_items": w.height}
    return {"cascade": pl.DataFrame(rows), "cascade_summary": pl.DataFrame([summary])}


@dataclass(frozen=True)
class JuryInputs:
    """The items every juror judged: per item each judge's P(positive) (one-hot where it gave only
    a label), its decision (1 positive, 0 negative, 0.5 a tie: as its run decided, by the run's
    threshold), the truth and the cluster."""

    probs: list[list[float]]
    one_hot: list[list[bool]]
    truth: list[bool]
    clusters: list[str]
    decisions: list[list[float]]


def _jury_inputs(w: pl.DataFrame, judges: list[str]) -> JuryInputs:
    probs_cols, hot_cols, said_cols = [], [], []
    for j in judges:
        preds, ps = w[f"pred|{j}"].to_list(), w[f"p|{j}"].to_list()
        probs_cols.append([_prob(a, b) for a, b in zip(preds, ps)])
        hot_cols.append([b is None for b in ps])
        said_cols.append([0.5 if a is None else float(a) for a in preds])
    probs, keep = [], []
    for i in range(w.height):
        known = [p for col in probs_cols if (p := col[i]) is not None]
        if len(known) == len(probs_cols):             # every judge gave a probability of this item
            probs.append(known)
            keep.append(i)
    return JuryInputs(probs, [[col[i] for col in hot_cols] for i in keep],
                      [w["truth"][i] for i in keep], [w["cluster"][i] for i in keep],
                      [[col[i] for col in said_cols] for i in keep])


def _member_row(name: str, p: list[float], x: JuryInputs, test: list[int]) -> dict:
    """One judge or pooling on the held-out items: agreement with ties as half credit (interval
    over clusters), kappa and balanced accuracy of the same credits, and the ties."""
    said = [tie_credit(p[k]) for k in test]
    t = [x.truth[k] for k in test]
    credit = [q if truth_k else 1.0 - q for q, truth_k in zip(said, t)]
    scores = binary_agreement_with_ties(t, said)
    return {"member": name, **_interval([x.clusters[k] for k in test], credit),
            "ties": sum(q == 0.5 for q in said), "kappa": scores["kappa"].value,
            "balanced_accuracy": scores["balanced_accuracy"].value}


def jury_tables(frame: pl.DataFrame, opts: JuryOptions, resamples: int = RESAMPLES) -> dict[str, pl.DataFrame]:
    """Each judge and each pooling on the held-out split. Tie rule: a pooled probability of exactly
    0.5 (two judges split, or an average of 0.5) is a fair coin: half credit in agreement, half of
    each label in kappa and balanced accuracy; `n` counts every held-out item, `ties` the ties.
    `resamples`: the jury's calibration interval."""
    judges = opts.judges or sorted(set(frame["judge"].to_list()), key=frame["judge"].to_list().index)
    w = _wide(frame, judges)
    shared = shared_items(w, judges, "jury")
    x = _jury_inputs(shared, judges)
    s = Split.of(x.clusters, x.truth, opts.calibration_fraction, opts.seed, labelled_clusters(frame))
    weights = fit_stacking([x.probs[k] for k in s.calibration], [x.truth[k] for k in s.calibration],
                           one_hot=[x.one_hot[k] for k in s.calibration])
    # each judge, and the majority vote, by the judges' decisions (a run deciding at P(Yes) >= 0.66 was
    # scored at 0.5 here); the average and the stacking pool their probabilities
    pooled = {"majority vote": majority(x.decisions), "average": average(x.probs),
              "stacked": stacked(weights, x.probs, x.one_hot)}
    members = {f"judge: {j}": [row[n] for row in x.decisions] for n, j in enumerate(judges)}
    rows = [_member_row(name, p, x, s.test) for name, p in {**members, **pooled}.items()]
    weight_rows = [{"member": "intercept", "weight": weights[0]}] + [{"member": j, "weight": wt}
                                                                      for j, wt in zip(judges, weights[1:])]
    # what each member answered of the labelled items: the jury reads those every member answered (a
    # member answered in one order of a pair only took the other order from every member's score)
    answered = {f"judge: {j}": int((w[f"pred|{j}"].is_not_null() | w[f"p|{j}"].is_not_null()).sum()) for j in judges}
    jury = pl.DataFrame(rows).with_columns(
        pl.col("member").replace_strict(answered, default=shared.height, return_dtype=pl.Int64).alias("answered"),
        pl.lit(w.height, pl.Int64).alias("items"), pl.lit(shared.height, pl.Int64).alias("shared_items"))
    out = {"jury": jury, "jury_weights": pl.DataFrame(weight_rows)}
    cal_rows = [{"judge": f"jury ({name})", "p": pooled[name][k], "truth": x.truth[k], "cluster": x.clusters[k]}
                for name in ("stacked", "average") for k in s.test]
    if cal_rows:
        calib = calibration_tables(pl.DataFrame(cal_rows), "p", "truth", resamples=resamples, cluster="cluster",
                                   given="jury")
        out.update({f"jury_{name}": table for name, table in calib.items()})
    return out


POOLED = ("ttcw", "pairwise")         # the protocols whose binary decisions `decision_frame` reads


def decision_item(protocol: str) -> pl.Expr:
    """The `item` of one binary decision, from the verdict columns its protocol names
    (`Declaration.decision_key`); a protocol that names none is not pooled by ensembles."""
    key = PROTOCOLS.get(protocol).declared.decision_key if protocol in PROTOCOLS else ()
    if not key:
        raise ValueError(f"juries and cascades take binary decisions of a protocol that declares a decision_key "
                         f"(ttcw, pairwise), not {protocol!r}")
    return pl.concat_str([pl.col(c).cast(pl.Utf8) for c in key], separator="#").alias("item")


def decision_frame(protocol: str, tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """A run's binary decisions as the ensembles' input, from its stored tables: TTCW items (story
    resampled; truth = the expert majority) or pairwise verdicts (pair resampled; truth = the human
    pick of text a). p: the judge's stated probability (`tables.stated_probability`: distribution
    mode's, else analyze mode's after its analysis); judges without one have p = None (one-hot)."""
    if protocol == "ttcw" and "per_item" in tables:
        t = tables["per_item"].filter(pl.col("expert_pass").is_not_null())
        frame = t.select("judge", decision_item(protocol),
                         pl.col("story_id").alias("cluster"), pl.col("expert_pass").alias("truth"),
                         pl.col("judge_pass").alias("pred"), stated_probability(t, "p_yes").alias("p"))
    elif protocol == "pairwise" and "per_verdict" in tables:
        t = tables["per_verdict"].filter(pl.col("human").is_in(["a", "b"]))
        tie = pl.col("pick") == "tie"          # no decision (the cascade escalates it); half a vote in the jury
        frame = t.select("judge", decision_item(protocol), pl.col("pair_id").cast(pl.Utf8).alias("cluster"),
                         (pl.col("human") == "a").alias("truth"),
                         pl.when(pl.col("pick").is_null() | tie).then(None).otherwise(pl.col("pick") == "a").alias("pred"),
                         pl.coalesce(stated_probability(t, "p_a"), pl.when(tie).then(pl.lit(0.5))).alias("p"))
    else:
        raise ValueError(f"juries and cascades take binary decisions of a {' or '.join(POOLED)} run, not {protocol!r}")
    return frame.with_columns(pl.lit(None, dtype=pl.Int64).alias("tokens"), pl.lit(None, dtype=pl.Float64).alias("cost"))
