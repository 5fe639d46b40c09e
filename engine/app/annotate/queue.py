"""The annotation queue of a finished run: its clusters (the unit a person reads and is paid for: a
TTCW story with all of its tests, a pair), what each shows, the judges' total per cluster (the
control variate of the estimate) and the draw design from the judges' uncertainty
(`judges.metrics.active.design`: Hansen-Hurwitz draws fixed before any label)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from litjudge.judges import PROTOCOLS
from litjudge.judges.base import Context
from litjudge.judges.metrics import active

from ...core.errors import ConfigError
from ...data.cards import dataset_card
from ..manifest import recorded_config
from ..outputs import read_manifest

PROTOCOLS_SERVED = ("ttcw", "pairwise")


@dataclass(frozen=True)
class Question:
    """One thing a person answers inside a cluster: a TTCW test of the story, or the pair's preference."""

    item: str                       # the run's item id (a TTCW (story, test); a pair's id)
    text: str                       # the question as shown


@dataclass(frozen=True)
class Cluster:
    cluster: str
    title: str
    texts: tuple[tuple[str, str], ...]      # (heading, judged text) in the stored order (pairwise: a, b)
    questions: tuple[Question, ...]


@dataclass(frozen=True)
class Queue:
    run: Path
    protocol: str
    quantity: str                            # the headline quantity the estimates are of
    labels: tuple[str, ...]                  # the answers a person may give
    positive: str                            # the answer counted 1 (the rest count 0)
    clusters: tuple[Cluster, ...]
    judge_total: np.ndarray                  # (N,) the judges' total per cluster on the quantity's scale
    size: np.ndarray                         # (N,) questions per cluster
    uncertainty: np.ndarray                  # (N,) the design's input
    uncertainty_source: str
    design: active.Design
    decision: dict[str, str]                 # pairwise: the judges' majority decision per pair (empty for TTCW)

    def score(self, cluster: str, label: str) -> float:
        """A person's answer on the quantity's 0/1 scale: TTCW counts Yes (a pass); pairwise counts
        agreement with the judges' decision (their accuracy)."""
        if self.decision:
            return float(label == self.decision[cluster])
        return float(label == self.positive)

    def index(self, cluster: str) -> int:
        return self._index()[cluster]

    def _index(self) -> dict[str, int]:
        cached = self.__dict__.get("_by_id")
        if cached is None:
            cached = {c.cluster: i for i, c in enumerate(self.clusters)}
            object.__setattr__(self, "_by_id", cached)
        return cached

    def cluster_of_item(self) -> dict[str, str]:
        return {q.item: c.cluster for c in self.clusters for q in c.questions}


def build_queue(run: Path, budget: int, *, floor: float = 0.2, seed: int = 0) -> Queue:
    """The queue of `run` (a finished run folder); refuses protocols the app does not serve yet."""
    run = Path(run)
    if not (run / "manifest.json").is_file() or not (run / "verdicts.parquet").is_file():
        raise ConfigError("not a finished run folder (no manifest.json and verdicts.parquet): give the folder "
                          "`litjudge run` wrote, e.g. runs/out/NAME", where=str(run))
    if budget < 1:
        raise ConfigError(f"--budget must be >= 1, got {budget}")
    if not 0.0 < floor <= 1.0:
        raise ConfigError(f"--floor must be in (0, 1], got {floor}")
    manifest = read_manifest(run)
    config = recorded_config(run, manifest)
    if config.protocol not in PROTOCOLS_SERVED:
        raise ConfigError(f"protocol {config.protocol!r} has no annotation page yet (served: "
                          f"{', '.join(PROTOCOLS_SERVED)})", where=str(run))
    protocol = PROTOCOLS.get(config.protocol)()
    options = protocol.options(config)
    ctx = Context(config, options, dataset_card(config.dataset, config.source, config.protocol), replay=True)
    verdicts = pl.read_parquet(run / "verdicts.parquet")
    if config.protocol == "ttcw":
        parts = _ttcw(ctx, verdicts)
    else:
        parts = _pairwise(ctx, verdicts)
    clusters, judge_total, uncertainty, source, quantity, labels, positive, decision = parts
    if not clusters:
        raise ConfigError("the run has no verdict on an item with text to show: nothing to annotate", where=str(run))
    size = np.asarray([len(c.questions) for c in clusters], dtype=float)
    design = active.design([c.cluster for c in clusters], uncertainty, budget, floor=floor, seed=seed)
    return Queue(run, config.protocol, quantity, labels, positive, tuple(clusters), judge_total, size, uncertainty,
                 source, design, decision)


def _ttcw(ctx: Context, verdicts: pl.DataFrame):
    """Stories with text and a verdict; per (story, test) the judges' P(Yes) averaged where stored,
    else the share of the run's judges saying Yes (the vote share)."""
    data = ctx.load("ttcw")
    ok = verdicts.filter((pl.col("status") == "ok") & pl.col("label").is_not_null())
    has_p = "distribution" in ok.columns and ok.schema["distribution"] != pl.Null
    yes = (pl.col("label") == "Yes").cast(pl.Float64)
    if has_p:
        p = pl.col("distribution").struct.field("Yes")
        ok = ok.with_columns(pl.when(p.is_not_null()).then(p).otherwise(yes).alias("p"))
    else:
        ok = ok.with_columns(yes.alias("p"))
    per_item = ok.group_by("story_id", "test").agg(pl.col("p").mean()).sort("story_id", "test")
    share = {(s, t): p for s, t, p in per_item.iter_rows()}
    stories = {s.story_id: s for s in data.stories if s.text is not None}
    tests = {t.idx: t for t in data.tests}
    clusters, totals, p_items, index = [], [], [], []
    for story_id in sorted({s for s, _ in share if s in stories}):
        story = stories[story_id]
        asked = sorted(t for s, t in share if s == story_id and t in tests)
        questions = tuple(Question(f"story_{story_id}_test{t}", f"{t}. {tests[t].question}") for t in asked)
        clusters.append(Cluster(story_id, story.name or story_id, (("Story", story.text or ""),), questions))
        totals.append(sum(share[(story_id, t)] for t in asked))
        p_items += [share[(story_id, t)] for t in asked]
        index += [len(clusters) - 1] * len(asked)
    p_arr, i_arr = np.asarray(p_items, dtype=float), np.asarray(index, dtype=np.int64)
    if has_p:
        u, source = active.binary_uncertainty(p_arr, i_arr, len(clusters)), "the judges' P(Yes)"
    else:
        u, source = active.vote_uncertainty(p_arr, i_arr, len(clusters)), "the vote share across the run's judges"
    return (clusters, np.asarray(totals, dtype=float), u, source, "pass rate, all tests pooled", ("Yes", "No"), "Yes", {})


def _pairwise(ctx: Context, verdicts: pl.DataFrame):
    """Pairs with a verdict. The quantity is the judges' accuracy against the person's preference;
    a pair's judge total is the share of its verdicts (both orders, every judge) that agree with
    its majority decision (the judge's own confidence), its uncertainty the disagreement between
    the orders (share * (1 - share))."""
    pairs = {p.pair_id: p for p in ctx.load("pairs")}
    ok = verdicts.filter((pl.col("status") == "ok") & pl.col("value").is_not_null())
    ok = ok.with_columns(pl.col("value").cast(pl.Utf8))
    clusters, totals, shares, index, decision = [], [], [], [], {}
    for (pair_id,), rows in sorted(ok.group_by("pair_id"), key=lambda g: str(g[0][0])):
        if pair_id not in pairs:
            continue
        values = rows["value"].to_list()
        share_a = values.count("a") / len(values)
        pair = pairs[pair_id]
        clusters.append(Cluster(pair_id, pair_id, (("Text A", pair.text_a), ("Text B", pair.text_b)),
                                (Question(pair_id, pair.prompt or "Which text is better?"),)))
        agree = max(share_a, 1 - share_a)
        decision[str(pair_id)] = "a" if share_a >= 0.5 else "b"
        totals.append(agree)
        shares.append(share_a)
        index.append(len(clusters) - 1)
    u = active.binary_uncertainty(np.asarray(shares, dtype=float), np.asarray(index, dtype=np.int64), len(clusters))
    return (clusters, np.asarray(totals, dtype=float), u, "the disagreement between the two orders",
            "judge accuracy", ("a", "b"), "a", decision)

