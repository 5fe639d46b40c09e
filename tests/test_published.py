"""The seed papers' published numbers beside a run's: the data as the papers print them, every
reproduction config valid, and `litjudge compare RUN --published NAME` on the TTCW replay run,
whose CIs are recomputed here from the stored per-item verdicts."""
from __future__ import annotations

import polars as pl
import pytest

from litjudge.engine.app.runs import load_run
from litjudge.engine.core.config import load_config
from litjudge.engine.core.errors import ConfigError
from litjudge.judges.metrics import balanced_accuracy, cluster_bootstrap
from litjudge.judges.metrics.bootstrap import clusters_per_class
from litjudge.judges.published import baselines, beside, headline, published
from tests.conftest import PROJECT_ROOT, litjudge, needs_data


def test_the_published_numbers_as_the_papers_print_them():
    got = {(b.name, r.judge, m): v for b in baselines().values() for r in b.rows for m, v in r.values.items()}
    assert got[("litbench", "gemma-3-12b-it", "accuracy")] == 0.657
    assert got[("litbench", "claude-3-7-sonnet", "accuracy")] == 0.731
    assert got[("li2025", "qwen2-72b-chat (baseline)", "kendall")] == -0.11
    assert got[("li2025", "claude35 (method)", "pairwise_accuracy")] == 0.75
    assert got[("ttcw-notebook", "claude3-opus", "balanced_accuracy")] == 0.58
    assert all(b.source and b.paper for b in baselines().values())


def test_every_reproduction_config_is_valid_and_names_its_row():
    for b in baselines().values():
        for path in {row.config for row in b.rows if row.config}:
            config = load_config(PROJECT_ROOT / path)
            assert config.protocol == b.protocol, path
            assert set(config.judges) <= {j for row in b.rows if row.config == path for j in row.run_judges}, path


def test_unknown_baseline_and_wrong_protocol_are_one_line():
    with pytest.raises(ConfigError, match="no published baseline 'x' \\(known: ttcw-notebook"):
        published("x")
    with pytest.raises(ConfigError, match="the run's protocol is 'ttcw'; baseline 'litbench' is for 'pairwise'"):
        beside(published("litbench"), "ttcw", {})


def test_the_count_of_numbers_inside_leaves_out_rows_over_other_items_than_the_papers():
    """The notebook's numbers are over all 672 verdicts; a run over the 504 judgeable items is over
    other items, whose interval need not hold the paper's number: said apart, not counted."""
    baseline = published("ttcw-notebook")
    assert baseline.n == 672

    def table(*rows):
        return pl.DataFrame([{"run_n": n, "inside": inside} for n, inside in rows],
                            schema={"run_n": pl.Int64, "inside": pl.Boolean})

    assert headline(baseline, table((672, True), (672, False), (672, None))) == (
        "1 of 2 published numbers inside the run's 95% CI")
    assert headline(baseline, table((672, True), (504, False), (504, True), (None, False))) == (
        "1 of 1 published numbers inside the run's 95% CI (over the paper's 672 verdicts); 3 more not counted: "
        "the run's are over 504 verdicts, other items than the paper's")
    assert headline(published("litbench"), table((4960, True), (100, False))) == (
        "1 of 2 published numbers inside the run's 95% CI")                      # no paper count: all counted


@needs_data
def test_compare_puts_the_notebook_beside_the_replay_run(tmp_path):
    made = litjudge("run", "ttcw-replay", "--quiet", "--out", str(tmp_path / "elsewhere"))
    assert made.returncode == 0, made.stderr
    run_dir = tmp_path / "elsewhere" / "ttcw-replay"             # --out: outputs under OUT/NAME
    r = litjudge("compare", str(run_dir), "--published", "ttcw-notebook")
    assert r.returncode == 0, r.stderr
    assert "paper" in r.stdout and "7 of 7 published numbers inside the run's 95% CI" in r.stdout
    # each CI, recomputed from the stored per-item verdicts (stories resampled)
    table = beside(published("ttcw-notebook"), "ttcw", load_run(run_dir).tables)
    per_item = pl.read_parquet(run_dir / "tables" / "per_item.parquet")
    for row in table.iter_rows(named=True):
        j = per_item.filter((pl.col("judge") == row["run_judge"]) & pl.col("judge_pass").is_not_null())
        truth, pred = j["expert_pass"].to_list(), j["judge_pass"].to_list()
        assert row["run"] == pytest.approx(balanced_accuracy(truth, pred).value, abs=1e-12)
        stories = j["story_id"].to_list()            # expanded for the rarer answer's stories
        fewest = min(clusters_per_class(stories, truth), clusters_per_class(stories, pred))
        low, high = cluster_bootstrap(stories, truth, pred, balanced_accuracy, expand_for=fewest)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high), abs=1e-12)
        assert round(row["run"], 2) == row["paper"]
        assert row["run_n"] == j.height               # the items behind it: the paper's are all 672
