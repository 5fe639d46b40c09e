"""Data with a known truth for the conformance tests (tests/test_conformance*.py), shaped as the
runner hands verdicts to a protocol: one verdict frame (`engine.core.verdicts.verdict_frame`'s
columns) holding many judges, each judge one simulated data set. A protocol aggregates every judge
of a frame separately, so one call of the published path (`Protocol.tables`, or the table function
it calls) gives a thousand draws at once: the draws are vectorised through the code that writes
the tables, never around it.

The hard cases every scenario runs: lopsided rates (0.05, 0.15, 0.95) with within-cluster
correlation 0.3 and 0.6 (a beta-binomial: a cluster's rate from a Beta distribution whose
intra-cluster correlation is rho) and unequal cluster sizes, at the minimum cluster count
(MIN_CLUSTERS) and at 30.

Binomial tolerance: with DRAWS = 1000, the estimated coverage of an interval whose true coverage is
0.95 has a standard error of 0.0069, so it falls below COVERAGE = 0.93 with probability 0.2%; an
estimate at or above 0.93 says the true coverage is above 0.916 (one-sided 95%). The draws are
seeded: each figure is exact and repeatable.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl

from litjudge.engine.core.config import RunConfig
from litjudge.engine.data.cards import load_card
from litjudge.judges.base import Context, Protocol
from litjudge.judges.metrics.bootstrap import MIN_CLUSTERS

DRAWS = 1000
COVERAGE = 0.93
RATES = (0.05, 0.15, 0.95)
RHOS = (0.3, 0.6)
CLUSTERS = (MIN_CLUSTERS, 30)
HARD = [(p, rho, g) for g in CLUSTERS for p in RATES for rho in RHOS]
# Where a published path costs seconds per thousand draws: every rate and correlation at the
# minimum, and the most lopsided rates at the stronger correlation at 30 (the full grid runs
# through the function every rate's table calls, tests/test_conformance.py).
HARD_PATH = [(p, rho, MIN_CLUSTERS) for p in RATES for rho in RHOS] + [(p, 0.6, 30) for p in (0.05, 0.95)]
UNEQUAL = (3, 6, 10, 14, 20, 31)          # cluster sizes, repeated: mean 14


def beta_rates(rng: np.random.Generator, shape: tuple[int, ...], p: float, rho: float) -> np.ndarray:
    """Cluster rates with mean p whose values inside a cluster correlate rho (beta-binomial)."""
    s = 1.0 / rho - 1.0
    return rng.beta(p * s, (1 - p) * s, shape)


def coverage(low, high, truth, printed: float = 0.5) -> float:
    """Share of the printed intervals that hold the truth (an interval withheld, None or NaN, is no
    claim: below MIN_CLUSTERS clusters, e.g. a pair whose every verdict of one order is unparsed);
    at least `printed` of the draws must carry one, or the coverage is reported as 0."""
    lo = np.asarray([np.nan if v is None else v for v in low], dtype=float)
    hi = np.asarray([np.nan if v is None else v for v in high], dtype=float)
    t = np.broadcast_to(np.asarray(truth, dtype=float), lo.shape)
    shown = ~np.isnan(lo) & ~np.isnan(hi)
    if shown.mean() < printed:
        return 0.0
    return float(np.mean((lo[shown] <= t[shown] + 1e-12) & (t[shown] - 1e-12 <= hi[shown])))


def judges(draws: int) -> list[str]:
    return [f"d{k:04d}" for k in range(draws)]


def context(protocol: Protocol, dataset: str, **config) -> Context:
    """The run context a protocol aggregates with: a config naming `dataset` (a card name or a card
    file) and the protocol's options from `config["options"]`."""
    cfg = RunConfig(name="conformance", protocol=protocol.name, dataset=dataset, judge="replay:sim", **config)
    return Context(cfg, protocol.options(cfg), load_card(dataset))


# -- pairwise: pairs judged in both orders, `repeats` times, some verdicts unparsed -------------
def pairwise_frame(rng: np.random.Generator, said_a: np.ndarray, human_a: np.ndarray, *, repeats: int = 3,
                   unparsed: float | tuple[float, float] = 0.2, tie: np.ndarray | None = None) -> pl.DataFrame:
    """`said_a[d, g, o]`: the chance the judge of draw d says "A" (the text shown first) on pair g
    in order o (0: ab, 1: ba), each repeat drawn anew; `tie[d, g]` the chance of a tie first;
    `human_a[d, g]` whether humans preferred text a, which is then the longer text; `unparsed` the
    chance a verdict is unreadable (per order: (ab, ba))."""
    draws, pairs = human_a.shape
    shape = (draws, pairs, 2, repeats)
    label = np.where(rng.random(shape) < said_a[..., None], "A", "B").astype(object)
    if tie is not None:
        label = np.where(rng.random(shape) < tie[..., None, None], "tie", label)
    ok = (rng.random(shape) >= np.asarray(unparsed, dtype=float).reshape(-1)[None, None, :, None]).ravel()
    d, g, o, r = (a.ravel() for a in np.indices(shape))
    words_a = np.where(human_a[d, g], 300, 100)
    orders = np.asarray(["ab", "ba"])[o]
    return pl.DataFrame({
        "judge": np.asarray(judges(draws))[d], "pair_id": [f"p{x:03d}" for x in g], "order": orders,
        "repeat": r.astype(np.int64), "human": np.where(human_a[d, g], "a", "b"), "group": ["sim"] * len(d),
        "words_a": words_a.astype(np.int64), "words_b": (400 - words_a).astype(np.int64),
        "status": np.where(ok, "ok", "unparsed"),
        "label": pl.Series([str(x) if k else None for x, k in zip(label.ravel(), ok)], dtype=pl.Utf8),
        "item_id": [f"p{x:03d}/{y}" for x, y in zip(g, orders)],
        "distribution": pl.Series([None] * len(d), dtype=pl.Struct({"A": pl.Float64, "B": pl.Float64}))})


def right_in_both_orders(right: np.ndarray, human_a: np.ndarray) -> np.ndarray:
    """A judge right with chance `right[d, g]` in either order (no position bias) as the chance it
    says "A" per order: text a is shown first in ab, text b in ba."""
    return np.stack([np.where(human_a, right, 1 - right), np.where(human_a, 1 - right, right)], axis=-1)


# -- TTCW: stories x tests with expert labels, written as a dataset the protocol loads ---------
def ttcw_dataset(folder: Path, stories: list[str], tests: int, majority: dict[tuple[str, int], bool]) -> str:
    """A TTCW-layout dataset (stories.json, tests.json, expert_majority.json) and its card file;
    returns the card's path (a config's `dataset`)."""
    data = folder / "ttcw-sim"
    data.mkdir(parents=True, exist_ok=True)
    (data / "tests.json").write_text(json.dumps([
        {"ttcw_idx": t, "torrance_dimension": "Fluency", "category": "c", "question": f"Test {t}?",
         "full_prompt": f"Background {t}.\n\nAnswer Yes or No.\n\nQ) Test {t}?"} for t in range(1, tests + 1)]))
    (data / "stories.json").write_text(json.dumps([
        {"story_idx": k, "story_id": f"{s}_GPT4", "content": f"Story {s}."} for k, s in enumerate(stories)]))
    (data / "expert_majority.json").write_text(json.dumps([
        {"story_id": f"{s}_GPT4", "ttcw_idx": t, "binary_verdict": "Yes" if v else "No"}
        for (s, t), v in majority.items()]))
    card = folder / "ttcw-sim.toml"
    card.write_text('name = "ttcw-sim"\ntitle = "simulated"\nloader = "ttcw"\npath = "ttcw-sim"\nroot = "card"\n'
                    'source = "conformance"\nlicense = "-"\nprotocols = ["ttcw"]\nlabels = true\n')
    return str(card)


def ttcw_frame(draw_of_story: np.ndarray, stories: list[str], tests: int, said_yes: np.ndarray,
               p_yes: np.ndarray | None = None, unparsed: np.ndarray | None = None) -> pl.DataFrame:
    """One verdict per (story, test): `said_yes[k, t]` whether story k's test t got a Yes from its
    draw's judge (`draw_of_story[k]`), `p_yes` the judge's P(Yes) (distribution mode), `unparsed`
    which verdicts the judge did not answer."""
    k, t = (a.ravel() for a in np.indices(said_yes.shape))
    ok = np.ones(len(k), dtype=bool) if unparsed is None else ~unparsed.ravel()
    sid = np.asarray([f"{s}_GPT4" for s in stories])[k]
    dist = (pl.Series([None] * len(k), dtype=pl.Struct({"Yes": pl.Float64, "No": pl.Float64})) if p_yes is None else
            pl.DataFrame({"Yes": p_yes.ravel(), "No": 1 - p_yes.ravel()}).to_struct("distribution"))
    return pl.DataFrame({
        "judge": np.asarray(judges(int(draw_of_story.max()) + 1))[draw_of_story[k]], "story_id": sid,
        "test": (t + 1).astype(np.int64), "source": ["GPT4"] * len(k), "group": np.zeros(len(k), dtype=np.int64),
        "judgeable": [True] * len(k), "repeat": np.zeros(len(k), dtype=np.int64),
        "item_id": [f"story_{s}_test{x + 1}" for s, x in zip(sid, t)],
        "status": np.where(ok, "ok", "unparsed"),
        "label": pl.Series(np.where(ok, np.where(said_yes.ravel(), "Yes", "No"), None), dtype=pl.Utf8),
        "distribution": dist.alias("distribution")})
