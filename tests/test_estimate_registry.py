"""Every interval and p-value column litjudge publishes has a conformance test (D10: the
conformance module named such a check and none existed). The columns are collected from what the
protocols write on a full run of each protocol (every request the protocol builds, answered as a
replayed judge would answer it, aggregated by `Protocol.tables` as the runner does, in every mode
and option that adds a table), from the ensembles' tables and from a sweep's ranking; each must be
in tests/estimate_registry.py, and each registered test must exist."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from litjudge.engine.app.annotate.estimate import estimates
from litjudge.engine.app.annotate.queue import build_queue
from litjudge.engine.app.sweep_rank import Ranked, ranking
from litjudge.engine.core.sampling import SamplingConfig
from litjudge.engine.core.settings import PPIConfig
from litjudge.judges.classification import Classification
from litjudge.judges.ensembles import CascadeOptions, JuryOptions, cascade_tables, decision_frame, jury_tables
from litjudge.judges.listwise import ListwiseRanking
from litjudge.judges.metrics.estimates import Units
from litjudge.judges.pairwise import Pairwise
from litjudge.judges.reference_likert import ReferenceLikert
from litjudge.judges.ttcw import TTCW
from tests.annotate_run import ttcw_run
from tests.conformance_data import context, ttcw_dataset
from tests.conftest import needs_prompts
from tests.estimate_registry import NOT_ESTIMATES, PUBLISHED, RANKED

ESTIMATE = re.compile(r"(^|_)(low|high|p|p_value|pvalue)$|^same_as_best$")
TESTS = Path(__file__).parent


def answered(protocol, ctx, judge: str, answer) -> pl.DataFrame:
    """The verdict frame of a full run: every request the protocol builds, each answered by
    `answer(fields)` -> (label, value, distribution), its metadata as columns (verdict_frame's)."""
    rows = []
    for k, request in enumerate(protocol.build(ctx).requests):
        fields = dict(request.meta.fields)
        label, value, dist = answer(fields, k)
        rows.append({"judge": judge, "item_id": request.meta.item_id, **fields, "status": "ok", "label": label,
                     "value": value, "distribution": dist})
    return pl.DataFrame(rows, infer_schema_length=None)


def ttcw_tables(tmp: Path) -> dict[str, pl.DataFrame]:
    rng = np.random.default_rng(0)
    names = [f"s{k}" for k in range(12)]
    card = ttcw_dataset(tmp, names, 14, {(s, t): bool(rng.random() < 0.4) for s in names for t in range(1, 15)})
    p = rng.random(12 * 14)
    frames = []
    for mode in ("label", "distribution"):
        ctx = context(TTCW(), card, mode=mode)
        frames.append(answered(TTCW(), ctx, f"j-{mode}", lambda f, k, mode=mode: (
            "Yes" if p[k] >= 0.5 else "No", 1 if p[k] >= 0.5 else 0,
            {"Yes": p[k], "No": 1 - p[k]} if mode == "distribution" else None)))
    return TTCW().tables(pl.concat(frames, how="diagonal_relaxed"), context(TTCW(), card, mode="distribution"))


def pairwise_tables() -> dict[str, pl.DataFrame]:
    ctx = context(Pairwise(), "pairs-generic", mode="distribution", options={"tie": True})
    frame = answered(Pairwise(), ctx, "j", lambda f, k: ("A", None, {"A": 0.6 + 0.01 * k, "B": 0.4 - 0.01 * k}))
    return Pairwise().tables(frame, ctx)


def listwise_tables() -> dict[str, pl.DataFrame]:
    ctx = context(ListwiseRanking(), "rated-items-generic", options={"orders": 2, "self_sources": {"j": "litjudge-authors"}},
                  sampling=SamplingConfig(temperature=0.7, repeats=2))

    def ranking_of(f, k):
        codes = list(json.loads(f["codes"]))
        return None, [[c, str(5 - min(4, n))] for n, c in enumerate(codes)], None
    return ListwiseRanking().tables(answered(ListwiseRanking(), ctx, "j", ranking_of), ctx)


def reference_likert_tables() -> dict[str, pl.DataFrame]:
    ctx = context(ReferenceLikert(), "reference-generic")
    labels = ["[[A>>B]]", "[[A>B]]", "[[A=B]]", "[[B>A]]", "[[B>>A]]"]
    return ReferenceLikert().tables(answered(ReferenceLikert(), ctx, "j", lambda f, k: (
        labels[k % 5], 2 - k % 5, None)), ctx)


def classification_tables() -> dict[str, pl.DataFrame]:
    ctx = context(Classification(), "rated-items-generic")
    return Classification().tables(answered(Classification(), ctx, "j", lambda f, k: (
        ["Good", "Medium", "Bad"][k % 3], None, None)), ctx)


def ttcw_ppi_table(tmp: Path) -> dict[str, pl.DataFrame]:
    """The `ppi` table a TTCW run with [ppi] adds (every story labelled: the registry needs its columns)."""
    ctx = context(TTCW(), ttcw_dataset(tmp / "ppi", [f"s{k}" for k in range(12)], 14,
                                       {(f"s{k}", t): (k + t) % 3 == 0 for k in range(12) for t in range(1, 15)}),
                  ppi=PPIConfig("all"))
    frame = answered(TTCW(), ctx, "j", lambda f, k: ("Yes" if k % 2 else "No", k % 2, None))
    return {"ppi": TTCW().tables(frame, ctx)["ppi"]}


def rubric_tables() -> dict[str, pl.DataFrame]:
    """A rubric of each scale with human answers (the conformance module's own frames)."""
    from tests.test_rubric_categorical import GENRE, GENRES
    from tests.test_rubric_conformance import BINARY, PAIRWISE, POINTS, rubric, verdicts

    n, frames = 24, []
    for q, labels in ((BINARY, ["Yes", "No"]), (POINTS, ["1", "2", "3", "4", "5"]), (GENRE, GENRES)):
        frames.append(verdicts(np.zeros(n, int), np.arange(n), q, [labels[i % len(labels)] for i in range(n)],
                               [labels[(7 * i) % len(labels)] for i in range(n)]).with_columns(
            pl.Series("repeat", [0] * (n // 2) + [1] * (n // 2))))
    frames.append(verdicts(np.zeros(2 * n, int), np.tile(np.arange(n), 2), PAIRWISE, ["A", "B"] * n,
                           ["a", "b", "b"] * (2 * n // 3), ["ab"] * n + ["ba"] * n))
    protocol, ctx = rubric(BINARY, POINTS, PAIRWISE, GENRE)
    return protocol.tables(pl.concat(frames, how="diagonal_relaxed"), ctx)


def ensemble_tables(ttcw: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    frame = decision_frame("ttcw", ttcw).with_columns(pl.lit(None, pl.Int64).alias("tokens"))
    return {**cascade_tables(frame, CascadeOptions(judges=["j-label", "j-distribution"])),
            **jury_tables(frame, JuryOptions())}


def sweep_table() -> dict[str, pl.DataFrame]:
    units = Units.rate([f"s{i}" for i in range(12)], [1.0, 0.0] * 6)
    return {"ranking": ranking([Ranked({"judge": "j"}, units.value(), 12, units)], True, 50)}


def annotate_estimate(tmp: Path) -> dict[str, pl.DataFrame]:
    """The estimate the annotation page reads (/api/estimate) of a replayed run's queue, its nested
    estimates flattened (active_low, human_high, ...)."""
    queue = build_queue(ttcw_run(tmp / "annotate", stories=12, tests=2), 12)
    est = estimates(queue, [], curve=False)
    flat = {f"{k}_{sub}" if isinstance(v, dict) else k: [x] for k, v in est.items() if k != "curve"
            for sub, x in (v.items() if isinstance(v, dict) else [("", v)])}
    return {"estimate": pl.DataFrame(flat, strict=False)}


def written(tmp: Path) -> set[tuple[str, str, str]]:
    """(source, table, column) of every interval and p-value column written."""
    ttcw = ttcw_tables(tmp)
    sources = {"ttcw": {**ttcw, **ttcw_ppi_table(tmp)}, "rubric": rubric_tables(), "pairwise": pairwise_tables(), "listwise": listwise_tables(),
               "reference_likert": reference_likert_tables(), "classification": classification_tables(),
               "ensemble": ensemble_tables(ttcw), "sweep": sweep_table(), "annotate": annotate_estimate(tmp)}
    return {(source, name, column) for source, tables in sources.items() for name, table in tables.items()
            for column in table.columns if ESTIMATE.search(column)}


@needs_prompts                      # the listwise and pairwise tables are built from the papers' templates
def test_every_published_estimate_has_a_conformance_test(tmp_path):
    columns = {c for c in written(tmp_path) if c[2] not in NOT_ESTIMATES}
    missing = sorted(columns - set(PUBLISHED))
    assert not missing, f"interval or p-value columns without a conformance test in tests/estimate_registry.py: {missing}"
    stale = sorted(set(PUBLISHED) - columns)
    assert not stale, f"registered columns no protocol writes any more: {stale}"


def test_every_rankable_estimate_has_a_conformance_test():
    """A sweep ranks by any `table.metric` a protocol declares rankable; each has its test."""
    from litjudge.judges import PROTOCOLS

    rankable = {(name, metric) for name in PROTOCOLS.names() for metric in PROTOCOLS.get(name).declared.rank_metrics}
    assert rankable == set(RANKED), (sorted(rankable - set(RANKED)), sorted(set(RANKED) - rankable))


def test_every_registered_conformance_test_exists():
    defined = {}
    for path in TESTS.glob("test_*.py"):
        tree = ast.parse(path.read_text())
        defined[path.name] = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}
    named = {test for tests in (*PUBLISHED.values(), *RANKED.values()) for test in tests}
    absent = sorted(t for t in named if t.split("::")[1] not in defined.get(t.split("::")[0], set()))
    assert not absent, absent


@pytest.mark.parametrize("module", ["test_conformance.py"])
def test_the_conformance_docstring_names_checks_that_exist(module):
    """D10: the conformance module's docstring names the registry test; it is defined."""
    doc = ast.get_docstring(ast.parse((TESTS / module).read_text())) or ""
    named = {n for n in re.findall(r"\b(test_[a-z_]+)\b(?!\.py|\*)", doc)}
    defined = {n.name for path in TESTS.glob("test_*.py") for n in ast.parse(path.read_text()).body
               if isinstance(n, ast.FunctionDef)}
    assert named and named <= defined, named - defined


def test_every_test_file_the_tests_docs_and_code_name_exists():
    """A docstring or page naming a test module that is not there sends a reader nowhere (the
    statistics defects' module named a conformance module that never existed)."""
    root = TESTS.parent
    named = {(path.relative_to(root).as_posix(), name) for folder in ("tests", "docs", "judges", "engine", "scripts")
             for path in (root / folder).rglob("*") if path.suffix in (".py", ".md") and path.is_file()
             for name in re.findall(r"\b(test_[a-z0-9_]+\.py)\b", path.read_text(errors="replace"))}
    absent = sorted((where, name) for where, name in named if not (TESTS / name).exists())
    assert not absent, absent
