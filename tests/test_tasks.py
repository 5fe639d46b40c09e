"""One run, several tasks: each judge's engine starts once for all of them (one plan streams over
every task), and each task's tables equal those of the task run on its own."""
import json

import polars as pl
import pytest

from litjudge.engine.app.run import run
from litjudge.engine.core.config import load_config
from litjudge.engine.core.errors import ConfigError
from tests.conftest import OWN_KV_CACHE, litjudge, run_on, write_config

# The judge: the session's tiny random one (`tiny`, float32: numbers that do not depend on batch
# composition), its folder named in the configs; what the tasks share is the point, not what it
# says. The two-task run goes through the CLI (its engine starts once there); each task on its
# own runs on the session's engine.
# A quarter GiB of KV cache, as the session's engines keep (the session's 1 GiB set aside for the command)
ENGINE = '[engine]\nmax_model_len = 2048\nkv_cache_gib = 0.25\ndtype = "float32"\n'
TTCW = 'protocol = "ttcw"\ndataset = "ttcw-demo"\n'
PAIRS = 'protocol = "pairwise"\ndataset = "pairs-generic"\n'
TASKS = ('[[tasks]]\nname = "ttcw"\n' + TTCW + '[tasks.options]\nvariant = "default"\n'
         '[[tasks]]\nname = "pairs"\n' + PAIRS + '[tasks.options]\nresamples = 100\n')


def tables(folder) -> dict[str, pl.DataFrame]:
    return {p.stem: pl.read_parquet(p) for p in (folder / "tables").glob("*.parquet")}


@pytest.mark.slow
def test_two_tasks_start_the_engine_once_and_equal_separate_runs(tmp_path, tiny):
    env = {"LITJUDGE_RUNS_DIR": str(tmp_path), **OWN_KV_CACHE}
    judge = f'judge = "{tiny.spec.name}"\n'
    both = write_config(tmp_path / "both.toml", 'name = "both"\n' + judge + ENGINE + TASKS)
    r = litjudge("run", str(both), "--quiet", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    shared = json.loads((tmp_path / "both" / "manifest.json").read_text())
    assert shared["kind"] == "tasks" and [t["task"] for t in shared["tasks"]] == ["ttcw", "pairs"]
    assert [j["engine_starts"] for j in shared["judges"]] == [1]
    assert shared["judges"][0]["plan"]["requests"] == 12 + 6
    for name, task, options in (("ttcw", TTCW, '[options]\nvariant = "default"\n'),
                                ("pairs", PAIRS, "[options]\nresamples = 100\n")):
        alone = write_config(tmp_path / f"{name}.toml", f'name = "{name}"\n' + judge + task + options + ENGINE)
        run_on(tiny, alone, tmp_path / name)                  # on its own: the session's engine
        separate, combined = tables(tmp_path / name), tables(tmp_path / "both" / name)
        assert set(separate) == set(combined)
        for table, frame in separate.items():
            assert combined[table].equals(frame), (name, table)
    # `reparse` rebuilds every task's tables from the shared store, the same tables again
    before = {name: tables(tmp_path / "both" / name) for name in ("ttcw", "pairs")}
    r = litjudge("reparse", str(tmp_path / "both"), env=env)
    assert r.returncode == 0 and " 0 changed" in r.stdout, r.stderr[-3000:]
    for name, old in before.items():
        new = tables(tmp_path / "both" / name)
        assert set(new) == set(old) and all(new[t].equals(old[t]) for t in old), name


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


def test_every_task_is_counted_and_tasks_of_two_protocols_finish(tmp_path, smollm, litjudge_shared):
    """A hostile pass: the console counted the first task alone ("9 verdicts (1 unparsed)", exit 0,
    "Results: RUN/t1") where a second task had none of its answers read; and tasks of two
    protocols (a listwise ranking's list beside a label's text) crashed writing the run's manifest,
    every time, leaving a folder no command would finish."""
    (tmp_path / "rec.jsonl").write_text("".join(f'{{"id": "p{k}", "response": "Good"}}\n' for k in range(1, 7)))
    tasks = ('[[tasks]]\nname = "t1"\nprotocol = "classification"\ndataset = "rated-items-generic"\n'
             '[[tasks]]\nname = "t2"\nprotocol = "classification"\ndataset = "rated-items-generic"\n'
             '[tasks.options]\nlabels = ["Top", "Mid", "Low"]\ncategory_map = {Good = "Top", Medium = "Mid", Bad = "Low"}\n')
    cfg = write_config(tmp_path / "two.toml", f'name = "two"\njudge = "replay:{tmp_path / "rec.jsonl"}"\n' + tasks)
    r = litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(tmp_path / "runs")})
    assert r.returncode == 4, (r.returncode, r.stderr[-2000:])
    assert "t1: 6 verdicts (0 unparsed)" in r.stdout and "t2: 6 verdicts (6 unparsed)" in r.stdout, r.stdout[-2000:]
    assert f"Results: {tmp_path / 'runs' / 'two'}\n" in r.stdout and "warning: t2: replay:" in r.stderr
    mixed = write_config(tmp_path / "mixed.toml", 'name = "mixed"\njudge = "smollm2-135m"\n'
                         '[[tasks]]\nname = "lists"\nprotocol = "listwise"\ndataset = "rated-items-generic"\n'
                         '[[tasks]]\nname = "labels"\nprotocol = "classification"\ndataset = "rated-items-generic"\n')
    r = litjudge_shared({"smollm2-135m": smollm}, "run", str(mixed), "--quiet",
                        env={"LITJUDGE_RUNS_DIR": str(tmp_path / "runs")})
    assert r.returncode == 0, r.stderr[-3000:]
    shared = json.loads((tmp_path / "runs" / "mixed" / "manifest.json").read_text())
    assert shared["verdicts"]["rows"] == 1 + 6 and [t["protocol"] for t in shared["tasks"]] == ["listwise",
                                                                                                  "classification"]
