"""Verdicts at several reasoning budgets from one analysis trace (`litjudge budgets`): the full
budget reproduces the run's own verdicts, each budget's agreement is recomputed from the stored
budget verdicts, a re-run generates nothing. Runs go through the CLI in their own processes."""
from __future__ import annotations

import json
import sqlite3

import polars as pl
import pytest

from litjudge.engine.app.annotate.queue import build_queue
from litjudge.engine.app.budgets import FULL, parse_budgets
from litjudge.engine.core.errors import ConfigError
from litjudge.judges.metrics import cohen_kappa
from tests.conftest import needs_data, write_config
from tests.short_data import ttcw_cut_short

CONFIG = ('name = "analyzed"\nprotocol = "ttcw"\ndataset = "ttcw"\njudge = "{judge}"\nmode = "analyze"\nlimit = 1\n'
          '[options]\nvariant = "analyze"\nanalysis_tokens = 36\ntests = [1, 2, 3]\n'
          '[engine]\nmax_model_len = 4096\nkv_cache_gib = 0.0625\ndtype = "float32"\n')
# The session's tiny random judge (`tiny`: what it says is not the point, the budgets' bookkeeping
# is) runs it in its engine's settings, on the TTCW data cut short
# (tests/short_data.py: the stories to two paragraphs, the tests' backgrounds to one; every label
# kept): prompts of a few hundred tokens, where the first story's longest question was 1,997.


def test_budgets_are_parsed_at_the_edge():
    assert parse_budgets("64, 0,full,16") == [0, 16, 64, FULL]
    with pytest.raises(ConfigError, match="999999999999999999999 tokens is more than any analysis holds"):
        parse_budgets("999999999999999999999")        # a 64-bit store's overflow, its plan half cleared
    with pytest.raises(ConfigError, match="--budgets takes token counts and 'full'"):
        parse_budgets("10,all")


def results(run_dir) -> int:
    with sqlite3.connect(run_dir / "store.sqlite") as db:
        return db.execute("SELECT COUNT(*) FROM results").fetchone()[0]


@needs_data
@pytest.mark.slow
def test_budgets_from_one_trace(tmp_path, tiny, litjudge_shared):
    """The run, the budgets (twice) and the report, each command run in this process on the
    session's tiny engine (the commands' work is the point, not their processes or the judge)."""
    data = ttcw_cut_short(tmp_path / "data" / "ttcw", short_backgrounds=True).parent
    env = {"LITJUDGE_RUNS_DIR": str(tmp_path), "LITJUDGE_DATA_ROOT": str(data)}
    cfg = write_config(tmp_path / "analyzed.toml", CONFIG.replace("{judge}", tiny.spec.name))
    engines = {tiny.spec.name: tiny}
    r = litjudge_shared(engines, "run", str(cfg), "--quiet", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    run_dir = tmp_path / "analyzed"
    b = litjudge_shared(engines, "budgets", str(run_dir), "--budgets", "0,8,full", "--quiet", env=env)
    assert b.returncode == 0, b.stderr[-3000:]
    table = pl.read_parquet(run_dir / "budgets" / "tables" / "budgets.parquet")
    assert table["budget"].to_list() == ["0", "8", "full"] and set(table["verdicts"]) == {3}
    assert table.filter(pl.col("budget") == "8")["thinking_tokens"].max() <= 8
    assert table.filter(pl.col("budget") == "0")["thinking_tokens"].max() == 0
    # the stored budget verdicts, by budget: P(Yes) at the decision point after each cut
    with sqlite3.connect(run_dir / "store.sqlite") as db:
        rows = db.execute("SELECT p.meta, r.distribution FROM plan p JOIN results r ON p.key = r.key "
                          "WHERE p.run = ?", (f"analyzed/budgets/{tiny.spec.name}",)).fetchall()
    by_budget: dict[int, dict[str, bool]] = {}
    for meta, dist in rows:
        m, d = json.loads(meta), json.loads(dist)
        by_budget.setdefault(m["budget"], {})[m["item_id"]] = d["Yes"] >= d["No"]
    verdicts = pl.read_parquet(run_dir / "verdicts.parquet")
    original = dict(zip(verdicts["item_id"].to_list(), (verdicts["label"] == "Yes").to_list(), strict=True))
    assert by_budget[FULL] == original                                  # the full trace: the run's own verdicts
    # and its P(Yes) the one the run kept after the analysis (what the annotation queue draws by)
    full = {json.loads(meta)["item_id"]: json.loads(dist)["Yes"] for meta, dist in rows
            if json.loads(meta)["budget"] == FULL}
    kept = dict(zip(verdicts["item_id"].to_list(), verdicts["analysis_distribution"].struct.field("Yes").to_list(),
                    strict=True))
    assert kept == pytest.approx(full, abs=1e-4)
    queue = build_queue(run_dir, 1)
    assert queue.uncertainty.all() and queue.uncertainty_source == "the judges' P(Yes) read after their analysis"
    expert = pl.read_parquet(run_dir / "tables" / "per_item.parquet")
    truth = dict(zip(expert["item_id"].to_list(), expert["expert_pass"].to_list(), strict=True))
    for budget, name in ((0, "0"), (8, "8"), (FULL, "full")):
        items = sorted(by_budget[budget])
        kappa = cohen_kappa([truth[i] for i in items], [by_budget[budget][i] for i in items]).value
        got = table.filter(pl.col("budget") == name)["value"][0]
        assert (got is None and kappa != kappa) or got == pytest.approx(kappa, abs=1e-12), name
    before = results(run_dir)
    again = litjudge_shared(engines, "budgets", str(run_dir), "--budgets", "0,8,full", "--quiet", env=env)
    assert again.returncode == 0 and results(run_dir) == before          # nothing generated again
    rep = litjudge_shared(engines, "report", str(run_dir), env=env)
    assert rep.returncode == 0 and "## Agreement against thinking tokens" in (run_dir / "report" / "report.md").read_text()
    wrong = litjudge_shared(engines, "budgets", str(tmp_path / "nope"), env=env)
    assert wrong.returncode == 2


@pytest.mark.slow
def test_budgets_without_a_value_to_show_are_one_line(tmp_path, tiny, litjudge_shared):
    """The demo rubric has no human answers: every budget's agreement is undefined, and budgets
    printed an empty table (exit 0)."""
    from litjudge.engine.core.paths import PROJECT_ROOT

    env = {"LITJUDGE_RUNS_DIR": str(tmp_path)}
    text = (PROJECT_ROOT / "runs" / "rubric-demo.toml").read_text().replace('mode = "label"', 'mode = "analyze"')
    text = text.replace('judge = "smollm2-135m"', f'judge = "{tiny.spec.name}"').replace(
        "[[options.questions]]", "[options]\nanalysis_tokens = 8\n\n[[options.questions]]", 1)
    text = text.replace("max_model_len = 2048\nkv_cache_gib = 2", 'max_model_len = 4096\nkv_cache_gib = 0.0625\ndtype = "float32"')
    cfg = write_config(tmp_path / "rubric-demo.toml", text)
    engines = {tiny.spec.name: tiny}
    r = litjudge_shared(engines, "run", str(cfg), "--quiet", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    b = litjudge_shared(engines, "budgets", str(tmp_path / "rubric-demo"), "--budgets", "0,full", "--quiet", env=env)
    assert b.returncode == 2 and "no budget has a value of agreement" in b.stderr and "┌" not in b.stdout, b.stderr
    assert len(b.stderr.strip().splitlines()) == 1


@needs_data
@pytest.mark.slow
def test_budgets_of_a_protocol_without_probabilities_name_the_protocol(tmp_path, tiny, litjudge_shared):
    """Reference-based Likert aggregates label and analyze verdicts: budgets, which read label
    probabilities, were refused as if the run's config named the wrong mode."""
    env = {"LITJUDGE_RUNS_DIR": str(tmp_path)}
    cfg = write_config(tmp_path / "ref.toml", f'name = "ref"\nprotocol = "reference_likert"\ndataset = "confederacy"\n'
                       f'judge = "{tiny.spec.name}"\nmode = "analyze"\nlimit = 1\n[options]\ntests = [1]\n'
                       'analysis_tokens = 8\n[engine]\nmax_model_len = 4096\nkv_cache_gib = 0.0625\ndtype = "float32"\n')
    engines = {tiny.spec.name: tiny}
    r = litjudge_shared(engines, "run", str(cfg), "--quiet", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    b = litjudge_shared(engines, "budgets", str(tmp_path / "ref"), "--quiet", env=env)
    assert b.returncode == 2 and len(b.stderr.strip().splitlines()) == 1, b.stderr
    assert "protocol 'reference_likert' aggregates label and analyze verdicts only" in b.stderr
