"""Sweeps: matrix configs validated at the edge, `litjudge plan` without an engine, shared
requests generated once, post settings from stored verdicts, resume after a kill, memory released
between judges."""
import json
import signal
import sqlite3
import subprocess
import sys

import polars as pl
import pytest

from litjudge.engine.app.sweep import _slug, load_sweep
from litjudge.engine.core.errors import ConfigError
from tests.conftest import OWN_KV_CACHE, PROJECT_ROOT, litjudge, needs_data, with_kv_cache, write_config
from tests.short_data import first_story_cut_short

COMMITTED = PROJECT_ROOT / "runs" / "sweep-ttcw.toml"

HEAD = 'name = "s"\nprotocol = "ttcw"\ndataset = "ttcw"\nmode = "distribution"\n'


@pytest.mark.parametrize("body, message", [
    ('[matrix]\ntemperature = [0.0, 1.0]\n', "matrix.temperature: not a matrix axis"),
    ('[matrix]\n"options.variant" = []\n', "matrix.options.variant: expected a non-empty list"),
    ('[matrix]\n"options.variant" = ["upstream", "cot"]\n', "options.variant: must be one of"),
    ('[sweep.post]\n"options.variant" = ["upstream"]\n', "sweep.post.options.variant: not an aggregate-only option"),
    ('[matrix]\n"options.threshold" = [0.2]\n[sweep.post]\n"options.threshold" = [0.5]\n',
     "matrix.options.threshold: needs no inference"),
    ('[sweep.post]\n"options.threshold" = [0.5, 1.5]\n', "options.threshold must be in [0, 1]"),
    ('[sweep.post]\n"options.story_cutoff" = [0.5, 0.25, 0.5]\n', "sweep.post.options.story_cutoff: 0.5 is listed twice"),
    ('[matrix]\n"options.tests" = [[1], [99]]\n',
     "bad.toml (cell {'options.tests': [99]}): options: options.tests names TTCW tests 1 to 14, each once, got [99]"),
    ('[sweep]\nrankby = "overall.kappa"\n', "sweep.rankby: unknown key"),
    ('[sweep]\nbootstrp = 200\n', "sweep.bootstrp: unknown key (did you mean 'sweep.bootstrap'?)"),
    ('[matrix]\njudge = ["smollm2-135m", "smollm2-135m"]\n', "matrix.judge: 'smollm2-135m' is listed twice"),
    ('[sweep]\nbootstrap = 0\n', "sweep.bootstrap: must be 1 to 20,000, got 0"),
    ('[sweep]\nbootstrap = 100000000\n', "sweep.bootstrap: must be 1 to 20,000, got 100,000,000"),   # 38 GB of draws
    ('[sweep]\nbootstrap = "many"\n', "sweep.bootstrap: expected int"),
    ('[sweep]\nrank_by = "overall.judge_pass_rate"\n', "sweep.rank_by: protocol 'ttcw' cannot rank by"),
    ('[sweep]\nrank_by = "bias.value"\n', "sweep.rank_by: protocol 'ttcw' cannot rank by"),
])
def test_bad_sweeps_fail_before_any_inference(tmp_path, body, message):
    cfg = write_config(tmp_path / "bad.toml", HEAD + body)
    with pytest.raises(ConfigError, match="bad.toml"):
        load_sweep(cfg)
    r = litjudge("plan", str(cfg), "--no-calibrate", timeout=120)
    assert r.returncode == 2 and message in r.stderr, r.stderr[-2000:]
    assert "Traceback" not in r.stderr


def test_a_flag_that_would_replace_a_matrix_axis_is_refused(tmp_path):
    """`--judge X` on a sweep of four judges ran only X's cells and `--limit 1` replaced a limit
    axis, both saying nothing (exit 0); a flag where the axis has one value, or none, applies."""
    cfg = write_config(tmp_path / "axes.toml", HEAD.replace('mode = "distribution"\n', "")
                       + '[matrix]\njudge = ["replay:gpt4", "replay:claude3-opus"]\nlimit = [2, 3]\n')
    for flag, value, words in (("judge", "replay:cgpt", "--judge would replace the sweep's judge axis (2 values)"),
                               ("limit", 1, "--limit would replace the sweep's limit axis (2 values)")):
        with pytest.raises(ConfigError, match="matrix." + flag) as exc:
            load_sweep(cfg, **{flag: value})
        assert words in str(exc.value) and "\n" not in str(exc.value)
    r = litjudge("plan", str(cfg), "--judge", "replay:cgpt", "--no-calibrate", timeout=120)
    assert r.returncode == 2 and "--judge would replace" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    one = write_config(tmp_path / "one.toml", HEAD + '[matrix]\njudge = ["replay:gpt4"]\n"options.tests" = [[1], [2]]\n')
    assert {c.config.judge for c in load_sweep(one, judge="replay:cgpt").cells} == {"replay:cgpt"}
    assert {c.config.limit for c in load_sweep(one, limit=2).cells} == {2}


def test_committed_sweep_expands_to_validated_cells():
    sweep = load_sweep(COMMITTED)
    assert len(sweep.cells) == 8 and len(sweep.post_settings()) == 19 * 3
    assert {c.config.judge for c in sweep.cells} == {"smollm2-135m", "gemma3-270m"}
    assert len({c.id for c in sweep.cells}) == 8
    assert sweep.rank_by == "overall.kappa"


def test_judges_by_path_name_their_cells_by_folder_and_never_by_a_dot_name(tmp_path, tiny_folder):
    # two checkpoints of one name in two places, and a judge by name: three cells, told apart
    for place in ("a", "b"):
        (tmp_path / place).mkdir()
        (tmp_path / place / "ckpt").symlink_to(tiny_folder)
    cfg = write_config(tmp_path / "s.toml", HEAD + f'[matrix]\njudge = ["{tmp_path}/a/ckpt", "{tmp_path}/b/ckpt", '
                                                   '"smollm2-135m"]\n')
    ids = [c.id for c in load_sweep(cfg).cells]
    assert len(set(ids)) == 3 and ids[2] == "smollm2-135m", ids
    assert all(i.startswith("ckpt-") and len(i) == len("ckpt-") + 8 for i in ids[:2]), ids
    # a cell's id is read as a name: no value makes it "." or ".." (or a path)
    assert [_slug(v) for v in ("..", "a/..", ".", "x/y/", "../../etc")] == ["x", "x", "x", "y", "etc"]


@needs_data
def test_plan_counts_sharing_without_an_engine():
    r = litjudge("plan", str(COMMITTED), "--limit", "1", "--no-calibrate", timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    # 1 story: per judge 2 variants x (14 + 3) requests, of which the 3 originality tests are shared
    assert "68 requests, 56 distinct: sharing saves 12 model calls" in r.stdout
    assert "smollm2-135m" in r.stdout and "gemma3-270m" in r.stdout


@needs_data
@pytest.mark.slow
@pytest.mark.heavy
def test_sweep_killed_mid_judge_resumes_without_repeating_finished_cells(tmp_path, tiny_folder, tiny_qwen_folder):
    # The committed sweep, its two judges the session's two tiny random ones (what they say is not
    # the point; thresholds still order their P(Yes)), on the first story cut short (`--data`), its test subsets cut to tests
    # 1-4 and 2-3 (prefill is what costs here), at most 4 sequences in flight so results arrive in waves,
    # 5 of its thresholds x 2 of its story cutoffs (all 57 post settings of 8 cells took 9 s to aggregate).
    # Its two engines keep the quarter GiB of KV cache the config asks (the session's 1 GiB each,
    # VLLM_CPU_KVCACHE_SPACE, set aside): with both in one process this test was the suite's
    # memory peak (the command 4.6 GB). A context of 4,096 tokens (the prompts are ~600): a quarter
    # GiB holds 5,792 float32 tokens of SmolLM2, fewer than the committed 8,192 (vLLM refuses that).
    first, second = str(tiny_folder), str(tiny_qwen_folder)
    text = with_kv_cache(COMMITTED.read_text(), 0.25).replace(
        'judge = ["smollm2-135m", "gemma3-270m"]', f'judge = ["{first}", "{second}"]').replace("[engine]", "[engine]\nmax_num_seqs = 4").replace(
        "max_model_len = 8192", "max_model_len = 4096").replace(
        '"options.tests" = [[], [9, 10, 11]]', '"options.tests" = [[1, 2, 3, 4], [2, 3]]').replace(
        "bootstrap = 1000", "bootstrap = 200").replace(
        "0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95",
        "0.05, 0.3, 0.5, 0.7, 0.95").replace("[0.25, 0.5, 0.75]", "[0.25, 0.5]")
    assert all(cut in text for cut in (first, second, "[[1, 2, 3, 4], [2, 3]]", "[0.05, 0.3, 0.5, 0.7, 0.95]", "[0.25, 0.5]\n",
                                       "max_num_seqs = 4", "max_model_len = 4096"))
    cfg = write_config(tmp_path / "sweep-ttcw.toml", text)
    env = {"LITJUDGE_RUNS_DIR": str(tmp_path / "runs"), **OWN_KV_CACHE}
    data = str(first_story_cut_short(tmp_path / "ttcw"))
    # The first judge has 8 distinct requests (2 variants x 4 tests); the runner kills itself at its
    # first commit after them, i.e. while the second judge is generating.
    r = litjudge("run", str(cfg), "--limit", "1", "--data", data, "--quiet",
                 env={**env, "LITJUDGE_FAULT_KILL_AFTER": "9"})
    assert r.returncode == -signal.SIGKILL, (r.returncode, r.stderr[-2000:])
    db = tmp_path / "runs" / "sweep-ttcw" / "store.sqlite"
    con = sqlite3.connect(db)
    before = dict(con.execute("SELECT judge, count(*) FROM results GROUP BY judge").fetchall())
    con.close()
    assert before[first] == 8 and 1 <= before.get(second, 0) < 8, before

    r = litjudge("run", str(cfg), "--limit", "1", "--data", data, "--quiet", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads((tmp_path / "runs" / "sweep-ttcw" / "manifest.json").read_text())
    one, two = m["judges"]
    assert one["judge"] == first and one["generated"] == 0 and one["engine_started"] is False
    assert two["generated"] == 8 - before[second] and two["engine_started"] is True
    assert m["sharing"]["model_calls_saved_across_cells"] == 8       # tests 2-3 inside 1-4: 2 judges x 2 variants x 2
    assert m["sharing"]["model_calls_saved_by_post_settings"] == 9 * 16   # 9 more settings x 16 distinct requests
    assert "sharing across cells saved 8 model calls" in r.stdout

    metrics = pl.read_parquet(tmp_path / "runs" / "sweep-ttcw" / "sweep_metrics.parquet")
    assert metrics.select(["cell", "options.threshold", "options.story_cutoff"]).unique().height == 8 * 10
    assert {"cell", "judge", "table", "metric", "group", "value", "n"} <= set(metrics.columns)
    # thresholds change the verdicts without a model call: pass rates fall as the threshold rises
    rates = (metrics.filter((pl.col("table") == "overall") & (pl.col("metric") == "judge_pass_rate")
                            & (pl.col("cell") == "tiny-llama_upstream_1-2-3-4") & (pl.col("options.story_cutoff") == 0.5))
             .sort("options.threshold")["value"].to_list())
    assert len(rates) == 5 and all(a >= b for a, b in zip(rates, rates[1:])) and rates[0] > rates[-1]
    ranking = pl.read_parquet(tmp_path / "runs" / "sweep-ttcw" / "sweep_ranking.parquet")
    assert ranking["value"].to_list() == sorted(ranking["value"].to_list(), reverse=True)
    assert {"ci_low", "ci_high", "rank"} <= set(ranking.columns)


RSS_PROBE = """
import os
os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
os.environ.pop("VLLM_CPU_KVCACHE_SPACE", None)     # each engine's cache from its own settings
from litjudge.engine import backends
from litjudge.engine.core.runner import rss_mib
import gc, sys
scanned = []                                       # what each full collection scans (the heap not frozen)
def full(phase, info):
    if phase == "start" and info["generation"] == 2:
        scanned.append(len(gc.get_objects()))
gc.callbacks.append(full)
llama, qwen = sys.argv[1:3]
for name, kv in [(llama, 0.75), (qwen, 0.625), (llama, 0.75), (qwen, 0.625)]:
    heap, scanned[:] = len(gc.get_objects()), []
    b = backends.create(backends.model_spec(name, max_model_len=2048, kv_cache_gib=kv))
    print("KV", b.describe()["kv_cache_gib"], flush=True)
    print("SCANNED", heap, max(scanned), flush=True)
    print("OPEN", rss_mib(), flush=True)
    heap, scanned[:] = gc.get_freeze_count() + len(gc.get_objects()), []
    b.close()
    print("CLOSE SCANNED", heap, max(scanned), flush=True)
    print("THAWED", gc.get_freeze_count(), flush=True)
    print("RSS", rss_mib(), flush=True)
"""


@pytest.mark.slow
@pytest.mark.heavy
def test_engines_started_one_after_another_release_their_memory(tiny_folder, tiny_qwen_folder):
    """Two judges of two architectures (the tiny Llama and the tiny Qwen2), each started twice, one
    after another in one process, as a sweep runs its judges, each with the KV cache its settings
    ask for. What is held and freed is the engine's (its KV cache, its heap), not the model's size."""
    r = subprocess.run([sys.executable, "-c", RSS_PROBE, str(tiny_folder), str(tiny_qwen_folder)], cwd=PROJECT_ROOT,
                       capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stderr[-3000:]
    def printed(tag: str) -> list[float]:
        return [float(line.split()[1]) for line in r.stdout.splitlines() if line.startswith(tag + " ")]

    rss, held = printed("RSS"), printed("OPEN")
    assert len(rss) == 4 and len(held) == 4
    # each engine its own config's KV cache (an environment variable set by the first once fixed them all)
    assert printed("KV") == [0.75, 0.625, 0.75, 0.625]
    assert all(h - c > 512 for h, c in zip(held, rss)), (held, rss)    # the KV cache was resident, then freed
    # A later engine's start does not walk the heap that was there before it (frozen first: its
    # full collections see what the engine makes, not torch's, vLLM's and the last judge's objects);
    # the first start of each imports its libraries, whose own collections are Python's.
    scans = [[int(n) for n in line.split()[1:]] for line in r.stdout.splitlines() if line.startswith("SCANNED ")]
    assert len(scans) == 4 and all(most < heap / 10 for heap, most in scans[2:]), scans
    # Nor does its close: vLLM's shutdown collects twice, over the engine's objects (80k), not the
    # whole heap (815k: its unfreeze is left out, local/vllm_gc.py); then the close thaws it all.
    closes = [[int(n) for n in line.split()[2:]] for line in r.stdout.splitlines() if line.startswith("CLOSE SCANNED ")]
    assert len(closes) == 4 and all(most < heap / 5 for heap, most in closes), closes
    assert printed("THAWED") == [0, 0, 0, 0]
    # The first engine of each model leaves its libraries and allocator pools behind (~1-2 GiB, once);
    # a leaked engine would add its 0.625-0.75 GiB KV cache and weights every time. Allow 256 MiB of noise.
    assert rss[2] - rss[1] < 256 and rss[3] - rss[1] < 256, rss
