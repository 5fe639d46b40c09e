"""kill -9 the run process at several points; resume; the final verdict table equals an
uninterrupted run's, with no missing and no duplicated keys."""
import os
import signal
import sqlite3
import subprocess
import sys
import time

import polars as pl
import pytest

from tests.conftest import PROJECT_ROOT, litjudge, needs_data, write_config

CONFIG = """
name = "crash"
protocol = "ttcw"
dataset = "ttcw"
judge = "smollm2-135m"
mode = "label"
limit = 2

[options]
variant = "upstream"

[engine]
max_model_len = 4096
kv_cache_gib = 2
# At most 4 requests in flight: results arrive in small waves, so both kills land mid-run (with the
# whole batch in flight, the last 19 results could all be stored between two polls).
max_num_seqs = 4
"""


def stored(db_path) -> int:
    if not db_path.exists():
        return 0
    try:
        con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=1)
        n = con.execute("SELECT count(*) FROM results").fetchone()[0]
        con.close()
        return n
    except sqlite3.OperationalError:
        return 0


def run_and_kill_after(config, runs, at_least: int, timeout: float = 300) -> int:
    env = {**os.environ, "LITJUDGE_RUNS_DIR": str(runs)}
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "run", str(config), "--quiet"], cwd=PROJECT_ROOT,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    db = runs / "crash" / "store.sqlite"
    deadline = time.time() + timeout
    try:
        while time.time() < deadline and proc.poll() is None:
            if stored(db) >= at_least:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                return stored(db)
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
    pytest.fail(f"run ended or timed out before {at_least} results were stored (rc={proc.returncode})")


@needs_data
@pytest.mark.slow
def test_kill_9_then_resume_equals_an_uninterrupted_run(tmp_path):
    config = write_config(tmp_path / "crash.toml", CONFIG)
    crashed, clean = tmp_path / "crashed", tmp_path / "clean"
    counts = [run_and_kill_after(config, crashed, n) for n in (1, 12)]
    assert 1 <= counts[0] <= counts[1] < 28, counts        # killed mid-run, work kept each time
    r = litjudge("run", str(config), "--quiet", env={"LITJUDGE_RUNS_DIR": str(crashed)})
    assert r.returncode == 0, r.stderr[-3000:]
    assert "28 verdicts (0 unparsed)" in r.stdout
    r = litjudge("run", str(config), "--quiet", env={"LITJUDGE_RUNS_DIR": str(clean)})
    assert r.returncode == 0, r.stderr[-3000:]
    a = pl.read_parquet(crashed / "crash" / "verdicts.parquet").select(["item_id", "key", "label"]).sort("item_id")
    b = pl.read_parquet(clean / "crash" / "verdicts.parquet").select(["item_id", "key", "label"]).sort("item_id")
    assert a.height == 28 and a["key"].n_unique() == 28
    assert a.equals(b)
    con = sqlite3.connect(crashed / "crash" / "store.sqlite")
    assert con.execute("SELECT count(*), count(DISTINCT key) FROM results").fetchone() == (28, 28)
