"""Messages that pointed at the wrong thing, each now one line naming the thing to fix: a damaged
verdicts.parquet (reparse the run, not its parent folder), a folder held by another run of this very
process (not "another process" with our own pid), `--cancel-batches` of a run killed before its
manifest (the run's own `[api] key_env`, not OPENAI_API_KEY), `plan` where the run went elsewhere
(say where it looked), and a sweep's corrupt store (`--rebuild-store` sets it aside)."""
from __future__ import annotations

import json
import os
import sqlite3
import threading

import pytest

from litjudge.engine.core.errors import ConfigError
from litjudge.engine.core.run_lock import RunLock
from tests.fake_api import free_port
from tests.fake_batch_api import FakeBatchAPI
from tests.test_api import SECRET
from tests.test_cli_probe import cli, one_line, pairs_run


def test_a_damaged_verdicts_file_names_the_run_to_reparse(tmp_path):
    cfg = pairs_run(tmp_path)
    assert cli("run", str(cfg), "--quiet", cwd=tmp_path).returncode == 0
    run = tmp_path / "runs" / "out" / "p"
    with (run / "verdicts.parquet").open("r+b") as f:
        f.truncate(100)
    one_line(cli("report", str(run), cwd=tmp_path), f"`litjudge reparse {run}` rebuilds the tables and verdicts.parquet")
    assert cli("reparse", str(run), cwd=tmp_path).returncode == 0
    assert cli("report", str(run), cwd=tmp_path).returncode == 0


def test_a_folder_held_by_a_thread_of_this_process_says_so(tmp_path):
    held = RunLock(tmp_path / "busy")
    caught: list[BaseException] = []
    try:
        worker = threading.Thread(target=lambda: caught.append(pytest.raises(ConfigError, RunLock, tmp_path / "busy").value))
        worker.start()
        worker.join()
    finally:
        held.release()
    message = str(caught[0])
    assert "in use by another run in this process (another thread)" in message and f"pid {os.getpid()}" not in message


SWEEP = """name = "keyed"
protocol = "ttcw"
dataset = "ttcw-demo"
mode = "label"
[matrix]
judge = ["openai:judge-a"]
[api]
base_url = "{url}/v1"
batch = true
batch_poll_s = 0.05
key_env = "MY_JUDGE_KEY"
"""


def test_cancel_batches_uses_the_runs_key_env_after_a_kill(tmp_path):
    """A batch run killed after submitting (no manifest yet): --cancel-batches asked for OPENAI_API_KEY
    although the run's key is in its `[api] key_env`."""
    env = {"MY_JUDGE_KEY": SECRET, "OPENAI_API_KEY": ""}
    with FakeBatchAPI(polls_to_finish=10**6, port=free_port()) as server:
        (tmp_path / "keyed.toml").write_text(SWEEP.format(url=server.url))
        r = cli("run", str(tmp_path / "keyed.toml"), "--quiet", cwd=tmp_path,
                env={**env, "LITJUDGE_FAULT_KILL_AFTER_SUBMIT": "1"})
        run = tmp_path / "runs" / "out" / "keyed"
        assert r.returncode == -9 and not (run / "manifest.json").exists(), r.stderr[-2000:]
        cancel = cli("status", str(run), "--cancel-batches", cwd=tmp_path, env=env)
        assert cancel.returncode == 0 and "cancelled 1 open provider batch" in cancel.stdout, cancel.stderr[-2000:]
        assert server.batches[server.created[0]]["cancelled"]
    db = sqlite3.connect(run / "store.sqlite")
    assert SECRET not in repr(db.execute("SELECT * FROM meta").fetchall())        # the variable's name, never the key
    db.close()


def test_plan_says_where_it_looked_for_stored_verdicts(tmp_path):
    """`plan` after `run --out DIR` said "0 of 8 ... stored" as if nothing had run: it now says there
    is no run folder where it looked and to give it the same --out; with it, all 8 are counted."""
    cfg = pairs_run(tmp_path)
    assert cli("run", str(cfg), "--quiet", "--out", str(tmp_path / "elsewhere"), cwd=tmp_path).returncode == 0
    lost = cli("plan", str(cfg), cwd=tmp_path)
    assert lost.returncode == 0 and "0 of 8 distinct requests are stored already" in lost.stdout
    assert f"no run folder at {tmp_path / 'runs' / 'out' / 'p'}: a run written with --out DIR is counted by plan --out DIR" \
        in lost.stdout
    found = cli("plan", str(cfg), "--out", str(tmp_path / "elsewhere"), cwd=tmp_path)
    assert f"8 of 8 distinct requests are stored already (in {tmp_path / 'elsewhere' / 'p'}" in found.stdout


def test_rebuild_store_sets_a_sweeps_corrupt_store_aside(tmp_path):
    """A sweep whose store is damaged advised `--rebuild-store`, which then repeated the same error
    (the flag reached single runs only): the store is now set aside, kept, and the sweep runs."""
    cfg = pairs_run(tmp_path, name="s", top='[matrix]\njudge = ["replay:{}"]\n'.format(tmp_path / "answers.jsonl"))
    cfg.write_text(cfg.read_text().replace(f'judge = "replay:{tmp_path / "answers.jsonl"}"\n', "", 1))
    assert cli("run", str(cfg), "--quiet", cwd=tmp_path).returncode == 0
    store = tmp_path / "runs" / "out" / "s" / "store.sqlite"
    store.write_bytes(b"this is not a database" * 100)
    for extra in store.parent.glob("store.sqlite-*"):
        extra.unlink()
    one_line(cli("run", str(cfg), "--quiet", cwd=tmp_path), "corrupt", "--rebuild-store")
    r = cli("run", str(cfg), "--quiet", "--rebuild-store", cwd=tmp_path)
    assert r.returncode == 0 and "the old store is kept as" in r.stderr, r.stderr[-2000:]
    kept = list(store.parent.glob("store.sqlite.corrupt-*"))
    assert len(kept) == 1 and kept[0].read_bytes().startswith(b"this is not a database")
    db = sqlite3.connect(store)
    assert db.execute("SELECT count(*) FROM results").fetchone()[0] == 8
    db.close()


def test_a_sweep_names_a_constant_judge_as_a_run_does(tmp_path):
    """A new user's sweep ranked a judge answering one label to every item (its agreement is
    defined: kappa 0, no better than chance) without the warning a run of it prints: the sweep's
    warnings now name it, cell by cell."""
    pairs = [{"pair_id": f"p{i}", "prompt": "Write.", "text_a": f"one {i}", "text_b": f"two {i} words",
              "label": "ab"[i % 2]} for i in range(6)]
    cfg = pairs_run(tmp_path, name="s", pairs=pairs)
    varied = tmp_path / "varied.jsonl"
    varied.write_text("".join(json.dumps({"id": f"p{i}/{o}", "response": "AB"[(i + (o == "ba")) % 2]}) + "\n"
                              for i in range(6) for o in ("ab", "ba")))
    cfg.write_text(cfg.read_text().replace(f'judge = "replay:{tmp_path / "answers.jsonl"}"\n',
                                           f'[matrix]\njudge = ["replay:{tmp_path / "answers.jsonl"}", "replay:{varied}"]\n'))
    r = cli("run", str(cfg), "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    said = [line for line in r.stderr.splitlines() if "a constant judge" in line]
    assert len(said) == 1 and "answers.jsonl" in said[0] and "varied" not in said[0], r.stderr[-2000:]
    manifest = json.loads((tmp_path / "runs" / "out" / "s" / "manifest.json").read_text())
    assert any("a constant judge" in w for w in manifest["warnings"]), manifest["warnings"]
