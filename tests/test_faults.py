"""No silent wrong result, no traceback: each bad input and system fault of the user audit, as a
real condition (a second process holding the store's lock, bytes overwritten in the store, a
file-size limit, folders a non-root user may not write), ends in one line and exit 2, and
nothing stored is lost. Replayed judges: no model is needed to show any of this."""
import json
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import polars as pl
import pytest

from tests.conftest import DATA, PROJECT_ROOT, litjudge, needs_data, write_config

REPLAY = """name = "r"
protocol = "ttcw"
dataset = "ttcw"
judge = "replay:gpt4"
limit = 2
"""


def one_error_line(r: subprocess.CompletedProcess, *expected: str) -> str:
    assert r.returncode == 2, (r.returncode, r.stderr[-3000:])
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.startswith("litjudge: error:")]
    assert len(lines) == 1, r.stderr[-3000:]
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def replay_cfg(tmp_path):
    return write_config(tmp_path / "r.toml", REPLAY), {"LITJUDGE_RUNS_DIR": str(tmp_path / "runs")}


# -- silent wrong results --------------------------------------------------------------------------
@needs_data
def test_stale_tables_never_survive_and_missing_labels_warn(tmp_path, replay_cfg):
    cfg, env = replay_cfg
    assert litjudge("run", str(cfg), "--quiet", env=env).returncode == 0
    tables = tmp_path / "runs" / "r" / "tables"
    assert (tables / "overall.parquet").exists()
    unlabelled = tmp_path / "data"
    shutil.copytree(DATA / "ttcw", unlabelled / "ttcw")
    (unlabelled / "ttcw" / "expert_majority.json").unlink()
    r = litjudge("run", str(cfg), "--quiet", "--data-root", str(unlabelled), env=env)
    assert r.returncode == 0 and "warning: no expert label in" in r.stderr
    assert not (tables / "overall.parquet").exists() and not (tables / "story_counts.parquet").exists()
    manifest = json.loads((tmp_path / "runs" / "r" / "manifest.json").read_text())
    assert any("no expert label in" in w for w in manifest["warnings"])


@pytest.mark.parametrize("body, message", [
    ('judge = ["replay:gpt4", "replay:gpt4"]', "lists ['replay:gpt4'] more than once"),
    ("judge = []", "judge: names no judge"),
    ('mode = "distribution"', "serves mode label, not 'distribution' (recorded responses are text"),
    ("limit = 0", "limit: must be >= 1 (leave it out to judge every item)"),
    ("[sampling]\ntop_p = 5.0", "sampling.top_p: must be in (0, 1], got 5.0"),
    ("[sampling]\nmax_tokens = -1", "sampling.max_tokens: must be >= 1"),
    ("[sampling]\nrepeats = 0", "sampling.repeats: must be >= 1, got 0"),
    ("[sampling]\nrepeats = 3", "sampling.repeats: 3 repeats at temperature 0 are one greedy verdict 3 times; set "
                                 "temperature > 0 to sample them, or repeats = 1"),
    ("[sampling]\nrepeats = 3\ntemperature = 1.0", "sampling.repeats: judge 'replay:gpt4' is recorded: it holds one "
                                                   "answer per item, which all 3 repeats would share"),
    # a hostile pass: three identical readings counted as three verdicts moved CE^2 from -0.017 to 0.122
    ('mode = "distribution"\n[sampling]\nrepeats = 3\ntemperature = 0.7',
     "sampling.repeats: 3 repeats in distribution mode are one reading 3 times (it reads probabilities, it samples "
     "nothing)"),
    ("[engine]\nmax_model_len = -5", "engine.max_model_len: must be >= 32 tokens, got -5"),
    ("[engine]\nkv_cache_gib = -1.0", "engine.kv_cache_gib: must be > 0"),
    ("[engine]\nmax_num_seqs = -3", "engine.max_num_seqs: must be >= 1"),
    ("[engine]\nblock_size = 7", "engine.block_size: must be a positive multiple of 16"),
    ("[engine]\ndata_parallel_size = 2", "set [cluster] replicas = N instead"),
    ('[cluster]\naddress = "somewhere"', "cluster.address: must be"),
    ('[cluster]\naddress = "head:\u00b9"', "cluster.address: must be"),     # a superscript port
])
def test_bad_settings_are_one_line_before_anything_runs(tmp_path, body, message):
    base = REPLAY
    for key in ("judge", "limit"):
        if body.startswith(key):
            base = "\n".join(ln for ln in base.splitlines() if not ln.startswith(key)) + "\n"
    cfg = write_config(tmp_path / "bad.toml", base + body + "\n")
    one_error_line(litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(tmp_path / "runs")}), message)
    assert not (tmp_path / "runs").exists()                  # a refused run leaves nothing behind


def test_duplicate_pairs_in_a_litbench_csv_are_refused(tmp_path):
    from litjudge.engine.core.errors import DataError
    from litjudge.engine.data.pairs import load_litbench_csv

    f = tmp_path / "t.csv"
    f.write_text("prompt,chosen_story,rejected_story,chosen_comment_id,rejected_comment_id\n"
                 "p,good,bad,c1,r1\np,good2,bad2,c1,r1\n")
    with pytest.raises(DataError, match="t.csv:3: duplicate pair"):
        load_litbench_csv(f)


def test_excel_bom_and_non_utf8_rows(tmp_path):
    from litjudge.engine.core.errors import DataError
    from litjudge.engine.data.pairs import load_litbench_csv, load_pairs_jsonl

    f = tmp_path / "bom.csv"
    f.write_bytes("\ufeffprompt,chosen_story,rejected_story\np,a story,another\n".encode())
    assert load_litbench_csv(f)[0].prompt == "p"                # Excel's byte-order mark is not a column name
    j = tmp_path / "bad.jsonl"
    j.write_bytes(b'{"prompt": "p", "text_a": "x", "text_b": "y", "label": "a"}\n{"prompt": "caf\xe9"}\n')
    with pytest.raises(DataError, match=r"bad.jsonl:2: not UTF-8 text"):
        load_pairs_jsonl(j)


@needs_data
def test_plan_lists_too_long_prompts_apart_from_sharing(tmp_path):
    cfg = write_config(tmp_path / "p.toml", 'name = "p"\nprotocol = "pairwise"\ndataset = "ttcw"\njudge = "smollm2-135m"\n'
                                            'truncation = "skip"\nlimit = 6\n[engine]\nmax_model_len = 2048\n')
    r = litjudge("plan", str(cfg), "--no-calibrate")
    assert r.returncode == 0, r.stderr[-2000:]
    line = next(ln for ln in r.stdout.splitlines() if "sharing saves" in ln)
    assert "sharing saves 0 model calls" in line                 # nothing is shared; skipped prompts are not "saved"
    assert "request(s) are left out: their prompts do not fit" in r.stdout


@needs_data
def test_every_prompt_too_long_is_one_line(tmp_path):
    cfg = write_config(tmp_path / "p.toml", 'name = "p"\nprotocol = "pairwise"\ndataset = "ttcw"\njudge = "smollm2-135m"\n'
                                            'truncation = "skip"\nlimit = 2\n[engine]\nmax_model_len = 64\n')
    one_error_line(litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(tmp_path / "runs")}),
                   "prompts are longer than the context window")


@needs_data
def test_an_emptied_store_says_so_before_recomputing(tmp_path, replay_cfg):
    cfg, env = replay_cfg
    assert litjudge("run", str(cfg), "--quiet", env=env).returncode == 0
    store = tmp_path / "runs" / "r" / "store.sqlite"
    for suffix in ("-wal", "-shm"):
        if os.path.exists(str(store) + suffix):
            os.unlink(str(store) + suffix)
    store.write_bytes(b"")
    r = litjudge("run", str(cfg), "--quiet", env=env)
    assert r.returncode == 0 and "is empty although manifest.json lists 28 finished verdicts" in r.stderr


# -- command-line mistakes -------------------------------------------------------------------------
def test_command_line_mistakes_are_one_line(tmp_path, replay_cfg):
    cfg, env = replay_cfg
    one_error_line(litjudge("run", str(cfg), "--judge", ",", env=env), "--judge ',': an empty judge name")
    one_error_line(litjudge("run", str(cfg), "--limit", "-1", env=env), "--limit: must be >= 1")
    one_error_line(litjudge("run", str(tmp_path), env=env), "is a folder, not a run config")
    one_error_line(litjudge("reparse", str(cfg)), "not a run folder")
    empty = tmp_path / "empty"
    empty.mkdir()
    one_error_line(litjudge("reparse", str(empty)), "not a finished run (no manifest.json)")
    assert not (empty / "store.sqlite").exists()                # reparse created nothing
    one_error_line(litjudge("run", str(write_config(tmp_path / "j.toml", REPLAY.replace("replay:gpt4", "no-such"))),
                            env=env), "unknown judge 'no-such'")
    assert not (tmp_path / "runs").exists()                     # a failed start leaves no empty store behind


@needs_data
def test_an_interrupted_run_is_named_as_such(tmp_path, replay_cfg):
    cfg, env = replay_cfg
    r = litjudge("run", str(cfg), "--quiet", env={**env, "LITJUDGE_FAULT_KILL_AFTER": "1"})
    assert r.returncode == -signal.SIGKILL
    one_error_line(litjudge("report", str(tmp_path / "runs" / "r")),
                   "an interrupted run: run its config again to finish it")


# -- system faults ---------------------------------------------------------------------------------
@needs_data
def test_a_store_locked_by_another_process_waits_then_one_line(tmp_path, replay_cfg):
    cfg, env = replay_cfg
    assert litjudge("run", str(cfg), "--quiet", env=env).returncode == 0
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, sys, time\n"
        f"db = sqlite3.connect({str(tmp_path / 'runs' / 'r' / 'store.sqlite')!r}, isolation_level=None)\n"
        "db.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        t = time.time()
        r = litjudge("run", str(cfg), "--quiet", env={**env, "LITJUDGE_LOCK_WAIT_S": "3"})
        assert time.time() - t >= 3
        one_error_line(r, "locked by another litjudge process for 3 s")
        assert "waiting up to 3 s" in r.stderr
    finally:
        holder.kill()
        holder.wait()
    con = sqlite3.connect(tmp_path / "runs" / "r" / "store.sqlite")
    assert con.execute("SELECT count(*) FROM results").fetchone()[0] == 28       # nothing lost
    con.close()


@needs_data
def test_a_corrupt_store_names_the_recovery_and_rebuild_keeps_it(tmp_path, replay_cfg):
    cfg, env = replay_cfg
    assert litjudge("run", str(cfg), "--quiet", env=env).returncode == 0
    store = tmp_path / "runs" / "r" / "store.sqlite"
    data = bytearray(store.read_bytes())
    data[:100] = b"\xde\xad\xbe\xef" * 25                          # the header: no longer a database
    store.write_bytes(bytes(data))
    one_error_line(litjudge("run", str(cfg), "--quiet", env=env), "corrupt", "--rebuild-store")
    r = litjudge("run", str(cfg), "--quiet", "--rebuild-store", env=env)
    assert r.returncode == 0 and "the old store is kept as" in r.stderr
    assert list((tmp_path / "runs" / "r").glob("store.sqlite.corrupt-*"))


@needs_data
def test_a_corrupt_manifest_is_one_line(tmp_path, replay_cfg):
    cfg, env = replay_cfg
    assert litjudge("run", str(cfg), "--quiet", env=env).returncode == 0
    (tmp_path / "runs" / "r" / "manifest.json").write_text("{ not json")
    one_error_line(litjudge("report", str(tmp_path / "runs" / "r")), "manifest.json: corrupt")
    one_error_line(litjudge("reparse", str(tmp_path / "runs" / "r")), "manifest.json: corrupt")


@needs_data
def test_disk_full_is_one_line_and_keeps_what_was_stored(tmp_path, replay_cfg):
    """A real file-size limit (RLIMIT_FSIZE; SIGXFSZ ignored, so writes fail with EFBIG)."""
    cfg, env = replay_cfg
    assert litjudge("run", str(cfg), "--quiet", env=env).returncode == 0

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))

    r = subprocess.run([sys.executable, "-m", "litjudge", "run", str(cfg), "--quiet", "--judge", "replay:claudev2"],
                       cwd=PROJECT_ROOT, env={**os.environ, **env}, capture_output=True, text=True, preexec_fn=limit,
                       timeout=300)
    one_error_line(r, "full")
    con = sqlite3.connect(tmp_path / "runs" / "r" / "store.sqlite")
    assert con.execute("SELECT count(*) FROM results WHERE judge = 'replay:gpt4'").fetchone()[0] == 28
    con.close()


def read_only(folder) -> bool:
    """Make `folder` a read-only bind mount of itself (root ignores file permissions, not a
    read-only mount); False where this machine may not mount."""
    bind = subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True)
    if bind.returncode:
        return False
    if subprocess.run(["mount", "-o", "remount,ro,bind", str(folder)], capture_output=True).returncode:
        subprocess.run(["umount", str(folder)], capture_output=True)
        return False
    return True


@needs_data
def test_read_only_folders_are_one_line(tmp_path):
    """A runs folder and a finished run that may not be written (read-only bind mounts): one line
    naming the path and the fix; a report written elsewhere (--out) still works."""
    cfg = write_config(tmp_path / "r.toml", REPLAY)
    runs, done = tmp_path / "runs", tmp_path / "done"
    runs.mkdir()
    assert litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(done)}).returncode == 0
    if not read_only(runs):
        pytest.skip("this machine may not make a read-only bind mount (mount --bind)")
    try:
        assert read_only(done)
        one_error_line(litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(runs)}), "not writable")
        one_error_line(litjudge("report", str(done / "r")), "not writable", "--out")
        one_error_line(litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(done)}), "not writable")
        r = litjudge("report", str(done / "r"), "--out", str(tmp_path / "rep"))
        assert r.returncode == 0, r.stderr[-2000:]
        assert pl.read_csv(tmp_path / "rep" / "tables" / "overall.csv").height > 0
    finally:
        for folder in (done, runs):
            subprocess.run(["umount", str(folder)], capture_output=True)


# root reads a file of mode 000 all the same: the command runs without the capabilities that let it
DROP_READ_OVERRIDE = ["setpriv", "--inh-caps=-dac_override,-dac_read_search",
                      "--bounding-set=-dac_override,-dac_read_search"] if os.geteuid() == 0 else []


def test_a_data_or_replay_file_that_may_not_be_read_is_said_so(tmp_path):
    """A data file or a recording of mode 000 was refused as "is not writable; give write
    permission or point --out elsewhere": litjudge only reads them (a new user's try)."""
    (tmp_path / "texts.csv").write_text("item_id,text\na,Once.\nb,Twice.\n")
    (tmp_path / "r.jsonl").write_text('{"id": "a/q", "response": "Yes"}\n{"id": "b/q", "response": "No"}\n')
    cfg = write_config(tmp_path / "t.toml", 'name = "t"\nprotocol = "rubric"\njudge = "replay:r.jsonl"\n'
                       '[dataset]\nloader = "table"\npath = "texts.csv"\n[dataset.columns]\ngroup = "=all"\n'
                       '[[options.questions]]\nid = "q"\ntext = "Natural?"\nscale = "binary"\n')
    env = {**os.environ, "LITJUDGE_RUNS_DIR": str(tmp_path / "runs")}
    for name in ("texts.csv", "r.jsonl"):
        (tmp_path / name).chmod(0)
        try:
            r = subprocess.run([*DROP_READ_OVERRIDE, sys.executable, "-m", "litjudge", "run", str(cfg), "--quiet"],
                               cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        finally:
            (tmp_path / name).chmod(0o644)
        line = one_error_line(r, f"{name}: cannot be read (permission denied); give read permission")
        assert "writ" not in line, line
    assert subprocess.run([sys.executable, "-m", "litjudge", "run", str(cfg), "--quiet"], cwd=tmp_path, env=env,
                          capture_output=True).returncode == 0
