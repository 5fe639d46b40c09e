"""One run, several tasks: each judge's engine starts once for all of them (one plan streams over
every task), and each task's tables equal those of the task run on its own."""
import json

import polars as pl
import pytest

from engine.app.run import run
from engine.core.config import EngineConfig, RunConfig, load_config
from engine.core.errors import ConfigError
from tests.conftest import write_config

ENGINE = EngineConfig(max_model_len=2048, kv_cache_gib=1, dtype="float32")     # float32: batch-independent numbers
TASKS = [{"name": "ttcw", "protocol": "ttcw", "dataset": "ttcw-demo", "options": {"variant": "default"}},
         {"name": "pairs", "protocol": "pairwise", "dataset": "pairs-generic", "options": {"resamples": 100}}]


@pytest.mark.slow
def test_two_tasks_start_the_engine_once_and_equal_separate_runs(tmp_path):
    combined = run(RunConfig(name="both", judge="smollm2-135m", engine=ENGINE, tasks=TASKS), progress=False,
                   run_dir=tmp_path / "both")
    shared = json.loads((tmp_path / "both" / "manifest.json").read_text())
    assert shared["kind"] == "tasks" and [t["task"] for t in shared["tasks"]] == ["ttcw", "pairs"]
    assert [j["engine_starts"] for j in shared["judges"]] == [1]
    assert shared["judges"][0]["plan"]["requests"] == 12 + 6
    for task, outcome in zip(TASKS, combined.tasks):
        alone = run(RunConfig(name=task["name"], protocol=task["protocol"], dataset=task["dataset"], judge="smollm2-135m",
                              engine=ENGINE, options=task["options"]), progress=False, run_dir=tmp_path / task["name"])
        assert outcome.run_dir == tmp_path / "both" / task["name"]
        assert set(outcome.tables) == set(alone.tables)
        for name, table in alone.tables.items():
            assert outcome.tables[name].equals(table), (task["name"], name)
        assert pl.read_parquet(outcome.run_dir / "verdicts.parquet").height == alone.verdicts.height


def test_task_errors_name_the_task(tmp_path):
    cfg = write_config(tmp_path / "t.toml", 'name = "x"\n[[tasks]]\nname = "a"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\n'
                                            '[[tasks]]\nname = "b"\nprotocol = "pairwise"\ndataset = "pairs-generic"\n'
                                            '[tasks.options]\ntemplat = "minimal"\n')
    with pytest.raises(ConfigError, match=r"\(task b\): options.templat: unknown key"):
        run(load_config(cfg), progress=False, run_dir=tmp_path / "r")          # before any engine starts
    bad = write_config(tmp_path / "u.toml", 'name = "x"\n[[tasks]]\nname = "a"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\n'
                                            'judge = "gemma3-270m"\n')
    with pytest.raises(ConfigError, match="tasks.a.judge.*shared by every task"):
        load_config(bad)
    none = write_config(tmp_path / "v.toml", 'name = "x"\n')
    with pytest.raises(ConfigError, match="protocol: missing required key"):
        load_config(none)
