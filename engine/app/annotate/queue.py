"""The annotation queue of a finished run: its clusters (the unit a person reads and is paid for: a
TTCW story with all of its tests, a pair, a rubric text or pair with all of its questions, a
listwise item), what each shows, the judges' total per cluster (the control variate of the
estimate) and the draw design from the judges' uncertainty (`judges.metrics.active.design`:
Hansen-Hurwitz draws fixed before any label). Rubric and listwise clusters: queue_rubric.py."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl

from litjudge.judges import PROTOCOLS
from litjudge.judges.base import Context
from litjudge.judges.metrics import active, draws_needed, uncertainty
from litjudge.judges.pairwise import Pairwise

from ...core.config import RunConfig
from ...core.errors import ConfigError
from ...core.paths import run_folder_hint
from ...core.verdicts import has_probabilities, judged_probability, not_a_probability
from ...data.cards import dataset_card
from ..manifest import recorded_config
from ..outputs import read_manifest, read_table
from .clusters import Answer, Built, Cluster, Question, spread, texts_ab, yes_no
from .labels import verdicts_fingerprint
from .queue_rubric import AFTER, listwise, rubric, votes_by, with_probabilities

PROTOCOLS_SERVED = ("ttcw", "pairwise", "rubric", "listwise")
__all__ = ["PROTOCOLS_SERVED", "Answer", "Cluster", "Question", "Queue", "build_queue"]
YES_NO = yes_no()
UNITS = {"ttcw": ("story", "stories"), "pairwise": ("pair", "pairs")}


@dataclass(frozen=True)
class Queue:
    run: Path
    protocol: str
    quantity: str                            # the headline quantity the estimates are of
    labels: tuple[str, ...]                  # every answer a person may give (each question takes its own)
    positive: str                            # TTCW: the answer counted 1 (the simulation's boolean columns)
    clusters: tuple[Cluster, ...]
    judge_total: np.ndarray                  # (N,) the judges' total per cluster on the quantity's scale
    size: np.ndarray                         # (N,) the cluster's items in the quantity
    uncertainty: np.ndarray                  # (N,) the design's input
    uncertainty_source: str
    design: active.Design
    decision: dict[str, str]                 # pairwise: the judges' majority decision per pair (else empty)
    instructions: str = ""
    bounds: tuple[float, float] = (0.0, 1.0)  # the quantity's range (a rubric's points mean: 1..N)
    outside: str = ""                        # what the run judged that the queue never draws, and why
    judged: str = ""                         # `labels.verdicts_fingerprint` of the verdicts it was built from
    min_draws: int = active.MIN              # labelled draws before the active interval (`draws_needed.min_draws`)

    @property
    def unit(self) -> tuple[str, str]:
        """What the page calls a cluster, one and many (a pairwise page said "1 story is open")."""
        return UNITS.get(self.protocol, ("text", "texts"))

    def score(self, cluster: str, label: str, item: str | None = None) -> float:
        """A person's answer on the quantity's scale: pairwise counts agreement with the judges'
        decision (their accuracy; a tie on either side half: `tie_credit`); every other protocol
        the answer's own score (TTCW Yes 1, a point its number, a category its rank)."""
        if self.decision:
            return tie_credit(label, self.decision[cluster])
        c = self.clusters[self.index(cluster)]
        question = self.question(item) if item is not None else c.questions[0]
        return question.answer(label).score

    def question(self, item: str) -> Question:
        cached = self.__dict__.get("_questions")
        if cached is None:
            cached = {q.item: q for c in self.clusters for q in c.questions}
            object.__setattr__(self, "_questions", cached)
        return cached[item]

    def allows(self, item: str, label: object) -> bool:
        """Whether `label` is an answer of the question stored under `item`."""
        return self.question(item).allows(label)

    def canonical(self, item: str, label: object) -> str | None:
        """The stored answer `label` means for the question under `item` (`Question.canonical`)."""
        return self.question(item).canonical(label)

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


def tie_credit(label: str, decision: str) -> float:
    """Agreement of a person's pick with the judges' decision: 1 the same, 0 the other text, 0.5
    when either is a tie and they differ (the pairwise tables' half credit for a tie)."""
    if label == decision:
        return 1.0
    return 0.5 if "tie" in (label, decision) else 0.0


# How a queue's floor is drawn: by cluster size, or uniform (queues stored before 2026-11-29).
FloorBy = Literal["size", "uniform"]
# What a pairwise queue's uncertainty reads: the verdicts' P(text) where stored, as the spread of a
# person's agreement with the judges' decision ("agreement"), or of the answer's score (queues stored
# before 2026-12-05, "probability": a pair decided a tie was drawn as the most uncertain, though a
# person's a or b agrees with a tie by half either way), or their picks alone (before 2026-12-01).
PairsBy = Literal["agreement", "probability", "picks"]


def finished_run(run: Path, by_name: bool = False) -> Path:
    """`run` where it is a finished run folder; else the one-line refusal, before anything else is
    said of it (an --export of a folder that does not exist said its queue was not started);
    `by_name`: the caller took a run's name too (the console, `runs.run_folder`)."""
    if not (run / "manifest.json").is_file() or not (run / "verdicts.parquet").is_file():
        raise ConfigError("not a finished run folder (no manifest.json and verdicts.parquet): "
                          f"{run_folder_hint(by_name)}", where=str(run))
    return run


def build_queue(run: Path, budget: int, *, floor: float = 0.2, seed: int = 0, floor_by: FloorBy = "size",
                pairs_by: PairsBy = "agreement") -> Queue:
    """The queue of `run` (a finished run folder); refuses protocols the app does not serve yet.
    `floor_by` and `pairs_by`: as the queue was drawn (FloorBy, PairsBy), so that a queue stored
    before either rule changed reopens as it was."""
    run = finished_run(Path(run))
    manifest = read_manifest(run)
    config = recorded_config(run, manifest)
    if config.protocol not in PROTOCOLS_SERVED:
        raise ConfigError(f"protocol {config.protocol!r} has no annotation page yet (served: "
                          f"{', '.join(PROTOCOLS_SERVED)})", where=str(run))
    protocol = PROTOCOLS.get(config.protocol)()
    options = protocol.options(config)
    ctx = Context(config, options, dataset_card(config.dataset, config.source, config.protocol), replay=True)
    verdicts = read_table(run / "verdicts.parquet")
    if (bad := not_a_probability(verdicts)) is not None:
        raise ConfigError(f"verdicts.parquet: {bad} (a damaged or edited file: judge the run again)", where=str(run))
    if config.protocol == "pairwise":
        built = _pairwise(ctx, verdicts, pairs_by)
    else:
        built = {"ttcw": _ttcw, "rubric": rubric, "listwise": listwise}[config.protocol](ctx, verdicts)
    clusters = built.clusters
    if not clusters:
        read = int((verdicts["status"] == "ok").sum()) if "status" in verdicts.columns else verdicts.height
        why = (f"none of the run's {verdicts.height} verdicts could be read (its warnings say why)" if verdicts.height
               and not read else "the run has no verdict on an item with text to show")
        raise ConfigError(f"{why}: nothing to annotate", where=str(run))
    size = np.asarray([sum(q.counted for q in c.questions) for c in clusters], dtype=float)
    design = active.design([c.cluster for c in clusters], built.uncertainty, budget, floor=floor, seed=seed,
                           size=size if floor_by == "size" else None)
    answers = tuple(dict.fromkeys(a.value for c in clusters for q in c.questions for a in q.answers))
    positive = next((a.value for c in clusters for q in c.questions for a in q.answers if a.score == 1.0), answers[0])
    source = built.source
    if not np.any(built.uncertainty):              # nothing to choose by (one judge's 0/1 votes, say)
        source += f" - 0 for every cluster ({_nothing_differs(config, built.read_p)}), so the draws follow cluster " \
                  "size alone, as uniform PPI++'s would: " + _what_gives_uncertainty(config, built.read_p, built.lacks)
    return Queue(run, config.protocol, built.quantity, answers, positive, tuple(clusters), built.judge_total, size,
                 built.uncertainty, source, design, built.decision, built.instructions, built.bounds, built.outside,
                 verdicts_fingerprint(verdicts),
                 draws_needed.min_draws(design.probability, built.judge_total, size, built.totals, seed=seed))


def _sampled(config: RunConfig) -> bool:
    return config.sampling.repeats > 1 and not config.sampling.greedy


def _nothing_differs(config: RunConfig, read_p: bool) -> str:
    """Why a queue's uncertainty is 0 everywhere, as far as the run's config and verdicts say."""
    if config.protocol == "pairwise":     # a random judge's orders differ in half the pairs: not "nothing differs"
        return ("every pair is decided a tie, which earns half credit whatever a person answers, or its "
                "judges are sure of it" if read_p else "every pair's picks agree, or split evenly and decide a "
                "tie, which earns half credit whatever a person answers")
    if read_p:       # their mean is 0 or 1 (helper-112: judges sure of opposite answers are uncertain)
        return "every judge's stored probability is 0 or 1 for every answer, and the judges agree"
    if _sampled(config):
        return "no item's answers differ across the run's judges and sampled repeats"
    return "no item's answers differ, as one judge's without repeats do"


def _what_gives_uncertainty(config: RunConfig, read_p: bool, lacks: str = "") -> str:
    """What would give a queue whose uncertainty is 0 everywhere one to draw by, of what the run has not tried
    (a local judge's probabilities, to a run that stores them, are not; `lacks`: what its stored ones lacked)."""
    if config.mode == "analyze" and not read_p and not lacks:
        return ("this analyze run's verdicts hold no label probabilities (an API judge's, or stored before litjudge "
                "kept them: `litjudge run CONFIG --rebuild-store --no-cache` reads them again with a local judge)")
    first = [f"{lacks} stored beside the judges' other probabilities (they hold none, so their picks were read; a "
             "local judge in distribution mode stores every answer's)"] if lacks else \
        [] if read_p else ["a local judge in distribution or analyze mode"]
    ways = first + ["more judges"] + ([] if _sampled(config) else ["sampled repeats"])
    said = ways[0] if len(ways) == 1 else ", ".join(ways[:-1]) + " or " + ways[-1]
    return said + " give the queue an uncertainty to draw by"


def _ttcw(ctx: Context, verdicts: pl.DataFrame) -> Built:
    """Stories with text and a verdict; per (story, test) the judges' P(Yes) averaged where stored
    (distribution mode's, or analyze mode's after the analysis), else the share of the run's judges
    saying Yes (the vote share)."""
    data = ctx.load("ttcw")
    ok = verdicts.filter((pl.col("status") == "ok") & pl.col("label").is_not_null())
    kind = has_probabilities(ok)
    ok = ok.with_columns(pl.coalesce(judged_probability(ok, "Yes"), (pl.col("label") == "Yes").cast(pl.Float64))
                         .alias("p"))
    per_item = ok.group_by("story_id", "test").agg(pl.col("p").mean()).sort("story_id", "test")
    share = {(s, t): p for s, t, p in per_item.iter_rows()}
    stories = {s.story_id: s for s in data.stories if s.text is not None}
    tests = {t.idx: t for t in data.tests}
    by_story: dict[str, list[int]] = {}              # a story's tests, found once (a scan per story: 10,000
    for s, t in share:                                # stories took 4 s, 100,000 some 400)
        if s in stories and t in tests:
            by_story.setdefault(s, []).append(t)
    clusters, totals, p_items, index = [], [], [], []
    for story_id in sorted({s for s, _ in share if s in stories}):
        story = stories[story_id]
        asked = sorted(by_story.get(story_id, []))
        questions = tuple(Question(f"story_{story_id}_test{t}", f"{t}. {tests[t].question}", YES_NO) for t in asked)
        clusters.append(Cluster(story_id, story.name or story_id, (("Story", story.text or ""),), questions))
        totals.append(sum(share[(story_id, t)] for t in asked))
        p_items += [share[(story_id, t)] for t in asked]
        index += [len(clusters) - 1] * len(asked)
    p_arr, i_arr = np.asarray(p_items, dtype=float), np.asarray(index, dtype=np.int64)
    # p_arr: each item's P(Yes), or its vote share (the mean of the judges' 0/1 answers), read as one
    u = uncertainty.binary_uncertainty(p_arr, i_arr, len(clusters))
    source = "the judges' P(Yes)" + AFTER[kind] if kind is not None else "the vote share across the run's judges"
    no_text = len({s for s, _ in share} - set(stories))
    return Built(clusters, np.asarray(totals, dtype=float), u, source, "pass rate, all tests pooled",
                 "Read the story, then answer every test question Yes or No. One story answers all of its questions.",
                 outside=f"{no_text} judged stories without text (a URL only) are never drawn: the estimate is of the "
                         f"{len(clusters)} with text" if no_text else "",
                 totals=draws_needed.Totals.binary(p_arr, i_arr, len(clusters)), read_p=kind is not None)


def _pairwise(ctx: Context, verdicts: pl.DataFrame, pairs_by: PairsBy = "agreement") -> Built:
    """Pairs with a verdict. The quantity is the judges' accuracy against the person's preference;
    the judges' decision is the answer most of a pair's verdicts gave (both orders, every judge),
    a tie where two answers are given equally often (as the accuracy table combines a pair's
    orders that disagree: "a first" made a judge always answering "A" right on every pair whose
    better text the data names a), a pair's judge total the share of its verdicts
    agreeing with it (a tie on one side half: `tie_credit`), its uncertainty the spread of that
    agreement under the verdicts' answers (sqrt(share_a (1 - share_a)) for a pair decided a or b
    without ties, 0 for one decided a tie: `clusters.spread`), their
    P(text) in place of their picks where stored (distribution mode, or after an analysis). With the
    run's `tie` option a person may answer a tie."""
    pairs = {p.pair_id: p for p in ctx.load("pairs")}
    answers = texts_ab(bool(getattr(ctx.options, "tie", False)))
    picked = Pairwise().text_answers(verdicts)         # the texts picked, not the positions shown
    by_p = pairs_by != "picks" and "side" not in verdicts.columns           # a reward model's: no P(label)
    kind = has_probabilities(verdicts) if by_p else None
    read, lacks = {}, ""                               # pair -> its verdicts' summed P(text), where stored
    if kind is not None:
        ok = with_probabilities(verdicts.filter(pl.col("status") == "ok"), ["A", "B", "tie"])
        read = {key: d for key, (d, stored) in votes_by(ok, "pair_id", answers, pairwise=True).items() if stored}
        # none holds every answer's P (a tie run's without P(tie)): the picks, and the queue says what was lacking
        kind, lacks = (kind, "") if read else (None, "P(tie)" if len(answers) == 3 else "P(text) of both texts")
    clusters, totals, dist, decision = [], [], [], {}
    # one aggregation, not a frame per pair: iterating group_by's frames took 3.4 of 8 s at 100,000 pairs
    grouped = picked.group_by("pair_id").agg(pl.col("answer"))
    for pair_id, values in sorted(grouped.iter_rows(), key=lambda g: str(g[0])):
        if pair_id not in pairs:
            continue
        counts = [values.count(side) for side in ("a", "b", "tie")]
        top = [side for side, n in zip(("a", "b", "tie"), counts, strict=True) if n == max(counts)]
        decided = top[0] if len(top) == 1 else "tie"
        pair = pairs[pair_id]
        clusters.append(Cluster(pair_id, pair_id, (("Text A", pair.text_a), ("Text B", pair.text_b)),
                                (Question(pair_id, "Which text is better?", answers, pairwise=True),),
                                # the prompt above the texts: alone where the question goes, a new user's
                                # "Right to left" asked nothing
                                context=pair.prompt or ""))
        decision[str(pair_id)] = decided
        totals.append(sum(tie_credit(v, decided) for v in values) / len(values))
        dist.append(read.get(pair_id, counts[:len(answers)]))
    # a pair's total is a person's agreement with the decision (`tie_credit`), drawn by and simulated
    # (`min_draws`) on that scale: a pair decided a tie scores 0.5 whichever text is picked, so it has
    # no spread. Read as the answer's score's, Cochran's rule asked 10-18 draws where 78-112 were needed,
    # the interval covering 0.90 (an audit, 60 pairs, a third tied), and those pairs took a third of
    # the draws though their labels cannot move the accuracy. A queue's design draws by it too.
    agree = np.asarray([[tie_credit(a.value, decision[str(c.cluster)]) for a in answers] for c in clusters],
                       dtype=float).reshape(len(clusters), len(answers))
    d = np.asarray(dist, dtype=float).reshape(len(clusters), len(answers))
    _, u, agreement = spread(d, agree, len(clusters))
    if pairs_by != "agreement":                # a queue drawn before: by the spread of the answer's score
        u = spread(d, np.asarray([a.score for a in answers]), len(clusters))[1]
    tie = " Answer Tie (t) when neither is better." if len(answers) == 3 else ""
    judges = verdicts["judge"].n_unique() if "judge" in verdicts.columns else 1      # each judge's two orders
    source = ("the disagreement between the two orders" if judges < 2 else
              f"the disagreement among the {judges} judges' verdicts in both orders") if kind is None else \
        "the judges' P(text) over both orders" + AFTER[kind]
    return Built(clusters, np.asarray(totals, dtype=float), u, source,
                 "judge accuracy" + (" (a tie half)" if tie else ""),
                 "Read both texts, then choose the better one. The order is random; answer on the texts, not their "
                 "place." + tie, decision=decision, totals=agreement, read_p=kind is not None, lacks=lacks)

