"""End-to-end runs through the runner and the CLI: demo with real vLLM, resume, determinism,
reparse, replay of the recorded TTCW judges, and the errors a user can hit."""
import json
import sqlite3

import polars as pl
import pytest

from litjudge.engine.app.manifest import VerdictCounts
from litjudge.engine.app.reparse import reparse
from litjudge.engine.app.run import run
from litjudge.engine.core.config import load_config
from litjudge.engine.core.errors import ConfigError
from litjudge.engine.data.cards import load_card
from litjudge.engine.data.loaders import load_dataset
from tests.conftest import PROJECT_ROOT, litjudge, needs_data, write_config

DEMO = PROJECT_ROOT / "runs" / "demo.toml"


def test_demo_run_resumes_and_is_deterministic(smollm, runs_dir):
    config = load_config(DEMO)
    first = run(config, progress=False, backends={"smollm2-135m": smollm})
    assert first.manifest.verdicts == VerdictCounts(rows=12, unparsed=0, missing=0)
    assert set(first.verdicts["label"]) <= {"Yes", "No"}
    assert first.judges[0].generated == 12
    again = run(config, progress=False, backends={"smollm2-135m": smollm})
    assert again.judges[0].generated == 0                       # every key already stored
    assert again.verdicts.sort("item_id").equals(first.verdicts.sort("item_id"))
    fresh = run(config, progress=False, backends={"smollm2-135m": smollm}, run_dir=runs_dir / "fresh")
    cols = ["item_id", "label"]
    assert fresh.verdicts.select(cols).sort("item_id").equals(first.verdicts.select(cols).sort("item_id"))
    # outputs a user reads
    out = first.run_dir
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["judges"][0]["structured_output_backend"] in ("auto", "xgrammar")
    assert manifest["judges"][0]["plan"]["distinct_requests"] == 12
    # the dtype that ran and why (dtype = "auto": by the CPU's bf16 instructions), and oneDNN's word on it
    assert manifest["judges"][0]["dtype"] in ("bfloat16", "float32")
    assert manifest["judges"][0]["dtype_reason"].startswith("auto: ")
    assert "cpu_flags" in manifest["judges"][0] and "onednn_fallback" in manifest["judges"][0]
    assert pl.read_parquet(out / "tables" / "verdict_grid.parquet").height == 3
    assert sum(1 for _ in (out / "log.jsonl").open()) == 12


def test_reparse_reapplies_the_parser_without_a_model(smollm, runs_dir):
    config = load_config(DEMO)
    outcome = run(config, progress=False, backends={"smollm2-135m": smollm})
    db = sqlite3.connect(outcome.run_dir / "store.sqlite")
    key = db.execute("SELECT key FROM results LIMIT 1").fetchone()[0]
    db.execute("UPDATE results SET raw='Maybe' WHERE key=?", (key,))
    db.commit()
    db.close()
    assert reparse(outcome.run_dir) == {"results": 12, "changed": 1}
    db = sqlite3.connect(outcome.run_dir / "store.sqlite")
    status, reason = db.execute("SELECT status, reason FROM results WHERE key=?", (key,)).fetchone()
    assert status == "unparsed" and "not one of" in reason


def test_a_data_folder_is_hashed_and_reparse_says_when_it_changed(smollm, runs_dir, tmp_path, caplog):
    """A folder dataset (TTCW's layout) was named, not hashed: its experts' labels edited, reparse
    rebuilt the tables from them with "0 changed" and not a word (kappa 0.052 -> 0.355 in a hostile
    pass). Its sha256 is over its files (paths and contents, hidden ones left out) now."""
    import dataclasses
    import logging
    import shutil

    from litjudge.engine.app.reparse import data_changed_warning
    from litjudge.engine.app.runs import load_run
    from litjudge.engine.core.manifest import data_identity
    from litjudge.judges.ttcw import TTCW

    outcome = run(load_config(DEMO), progress=False, backends={"smollm2-135m": smollm})
    manifest = load_run(outcome.run_dir).manifest
    demo = PROJECT_ROOT / "datasets" / "demo" / "ttcw-demo"
    assert manifest.data == data_identity(demo) and manifest.data["files"] == 2 and len(manifest.data["sha256"]) == 64
    copy = tmp_path / "ttcw-demo"
    shutil.copytree(demo, copy)
    (copy / ".hidden").write_text("an editor's file")                  # not the data: the same sha256
    assert data_identity(copy)["sha256"] == manifest.data["sha256"]
    moved = dataclasses.replace(manifest, data=data_identity(copy))
    with caplog.at_level(logging.WARNING, logger="litjudge"):
        data_changed_warning(outcome.run_dir, moved, TTCW())
        assert not [r for r in caplog.records if r.name.startswith("litjudge")]
        stories = copy / "stories.json"
        stories.write_text(stories.read_text().replace("a", "b", 1))
        data_changed_warning(outcome.run_dir, moved, TTCW())
    assert f"the data folder {copy} changed since the run" in caplog.text


@needs_data
def test_replay_recomputes_the_recorded_judges_agreement(runs_dir):
    r = litjudge("run", "runs/ttcw-replay.toml", "--quiet", env={"LITJUDGE_RUNS_DIR": str(runs_dir)})
    assert r.returncode == 0, r.stderr
    overall = pl.read_parquet(runs_dir / "ttcw-replay" / "tables" / "overall.parquet")
    assert overall.filter(pl.col("view") == "all").height == 7
    gpt4 = overall.filter((pl.col("judge") == "replay:gpt4") & (pl.col("view") == "all")).row(0, named=True)
    assert gpt4["n"] == 672 and gpt4["unparsed"] == 0
    assert 0.5 < gpt4["balanced_accuracy"] < 0.6
    gem = overall.filter((pl.col("judge") == "replay:gemini-pro") & (pl.col("view") == "all")).row(0, named=True)
    assert gem["n"] == 672 and gem["unparsed"] == 14         # 14 items have no recorded response: "No" (notebook)
    judgeable = overall.filter(pl.col("view") == "judgeable")
    assert set(judgeable["n"]) == {504}


@pytest.mark.parametrize("body, message", [
    ('name = "x"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\nmdoe = "label"\n', "mdoe: unknown key (did you mean 'mode'?)"),
    ('name = "x"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\nlimit = "3"\n', "limit: expected int, got str '3'"),
    ('name = "x"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\n[sampling]\ntemprature = 1\n', "sampling.temprature: unknown key"),
    ('name = "x"\nprotocol = "ttcw"\n', "dataset: missing required key"),
    ('name = "x"\nprotocol = "ttcww"\ndataset = "ttcw-demo"\n', "unknown protocol 'ttcww' (did you mean 'ttcw'?)"),
    ('name = "x"\nprotocol = "ttcw"\ndataset = "nope"\n', "unknown dataset 'nope'"),
    ('name = "x"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\nmode = "vote"\n', "mode: must be one of"),
    ('name = "x"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\n[options]\nvariant = "cot"\n', "options.variant: must be one of"),
    ('name = "x"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\n[options]\ntests = [99]\n', "options.tests names TTCW tests 1 to 14, each once, got [99]"),
    ('name = "x"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\njudge = "no-such-judge"\n', "unknown judge 'no-such-judge'"),
    ('name = "x"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\njudge = "/nonexistent/model/dir"\n', "unknown judge"),
    pytest.param('name = "x"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\njudge = "replay:nobody"\n',
                 "no recorded judge 'nobody'", marks=needs_data),       # the recorded judges are TTCW's data
    ('name = "x" protocol = "ttcw"\n', "not valid TOML"),
    ('name = "x"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\n[engine]\ndtype = "fp8"\n', "engine.dtype: must be one of"),
    ('name = "x"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\n[engine.judges.smollm2-135m]\ntensor_paralel_size = 2\n',
     "engine.judges.smollm2-135m.tensor_paralel_size: unknown key (did you mean 'engine.judges.smollm2-135m.tensor_parallel_size'?)"),
    ('name = "x"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\n[api]\nstructured = "xml"\n', "api.structured: must be"),
    ('name = "x"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\njudge = "openai-compatible:localhost:m"\n', "expected openai-compatible:URL:MODEL"),
])
def test_bad_configs_fail_with_one_clear_line(tmp_path, body, message):
    cfg = write_config(tmp_path / "bad.toml", body)
    r = litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(tmp_path / "runs")}, timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.startswith("litjudge: error:")]
    assert len(lines) == 1 and message in lines[0], r.stderr[-2000:]
    assert "Traceback" not in r.stderr


def test_a_yaml_or_json_config_is_said_to_be_one(tmp_path):
    """A config written as YAML or JSON was "not valid TOML: Expected '=' after a key" alone."""
    from litjudge.engine.core.config import read_toml
    from litjudge.engine.core.errors import ConfigError

    for name, body in (("c.yaml", "name: x\nprotocol: ttcw\n"), ("c.json", '{"name": "x", "protocol": "ttcw"}')):
        (tmp_path / name).write_text(body)
        with pytest.raises(ConfigError, match=r"not valid TOML \(a (YAML|JSON) file: a run config is TOML, `key = "
                                              r"value` lines; runs/demo.toml is one\): "):
            read_toml(tmp_path / name)


def test_missing_config_file_names_the_path(tmp_path):
    r = litjudge("run", str(tmp_path / "nope.toml"))
    assert r.returncode == 2 and "nope.toml: run config not found" in r.stderr


def test_engine_settings_apply_per_judge_overrides(tmp_path):
    cfg = load_config(write_config(tmp_path / "e.toml", 'name = "x"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\n'
                                   'judge = ["smollm2-135m", "gemma3-270m"]\n'
                                   '[engine]\nblock_size = 64\nkv_cache_gib = 2\n'
                                   '[engine.judges.gemma3-270m]\nblock_size = 32\nenforce_eager = false\n'))
    base, gemma = cfg.engine.for_judge("smollm2-135m"), cfg.engine.for_judge("gemma3-270m")
    assert (base.block_size, base.enforce_eager, base.kv_cache_gib) == (64, True, 2)
    assert (gemma.block_size, gemma.enforce_eager, gemma.kv_cache_gib) == (32, False, 2)
    assert load_config(PROJECT_ROOT / "runs" / "demo.toml").engine.block_size is None


def test_config_errors_name_the_file(tmp_path):
    cfg = write_config(tmp_path / "c.toml", 'name = "x"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\nreasks = -1\n')
    with pytest.raises(ConfigError, match="c.toml"):
        load_config(cfg)


def test_failed_run_leaves_the_store_consistent_and_report_reads_it(tiny, runs_dir, tmp_path):
    """A run (the session's tiny random judge), then a bad config over its folder: the store stays whole."""
    config = load_config(DEMO, judge=tiny.spec.name)
    outcome = run(config, progress=False, backends={tiny.spec.name: tiny})
    bad = write_config(tmp_path / "demo.toml", DEMO.read_text().replace('variant = "default"', 'variant = "nope"'))
    r = litjudge("run", str(bad), "--quiet", env={"LITJUDGE_RUNS_DIR": str(runs_dir)}, timeout=120)
    assert r.returncode == 2 and "options.variant" in r.stderr
    db = sqlite3.connect(outcome.run_dir / "store.sqlite")
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert db.execute("SELECT count(*) FROM results").fetchone() == (12,)
    rep = litjudge("report", str(outcome.run_dir), "--text")
    assert rep.returncode == 0 and "verdicts/s" in rep.stdout and "per_test" in rep.stdout
    assert (outcome.run_dir / "report" / "report.html").exists()


@needs_data
@pytest.mark.parametrize("variant, mode", [("upstream", "label"), ("analyze", "analyze"), ("default", "distribution")])
def test_ttcw_variants_and_modes(tiny, runs_dir, tmp_path, variant, mode):
    """Each TTCW prompt variant in each mode, on the session's tiny random judge (the variants' and
    modes' plumbing, the join and the skipped stories are the point)."""
    cfg = write_config(tmp_path / "v.toml", f'name = "v-{variant}"\nprotocol = "ttcw"\ndataset = "ttcw"\n'
                                            f'judge = "{tiny.spec.name}"\nmode = "{mode}"\nlimit = 1\n'
                                            f'[options]\nvariant = "{variant}"\ntests = [1, 13]\nanalysis_tokens = 24\n')
    out = run(load_config(cfg), progress=False, backends={tiny.spec.name: tiny})
    per_item = out.tables["per_item"]
    assert per_item.height == 2 and out.manifest.verdicts.unparsed == 0
    assert per_item["expert_pass"].is_not_null().all()              # joined with the expert majority
    if mode == "distribution":
        assert per_item["p_yes"].is_between(0, 1).all()
        assert per_item["judge_pass"].to_list() == (per_item["p_yes"] >= 0.5).to_list()
    # --limit counts judgeable stories: the ones without text met before it are listed as skipped
    # (each with its 2 tests), none after it
    card = load_card("ttcw")
    stories = load_dataset(card, "ttcw", card.folder()).stories
    before = next(i for i, s in enumerate(stories) if s.judgeable)
    skipped = out.tables["skipped"]
    assert skipped.height == 2 * before
    assert set(skipped["reason"].to_list()) <= {"story text not in the dataset (New Yorker URL)"}
