"""The planner process (engine.core.plan_process) under faults, in a real `litjudge run`: killed, the
run ends in one line saying what happened (no internal error, no crash log) and a re-run resumes;
stopped (SIGSTOP), the run says the planner has not answered and names how to resume it, instead of
hanging with no output, and finishes once it is continued."""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import PROJECT_ROOT
from tests.warm_cli import console_env, run_python

PAIRS = 5000          # a plan of about 0.5 s on a quiet EPYC Zen 5 (several seconds beside the suite)
KILL_AFTER_S = 0.05   # into the plan: at 0.3 s a quiet machine had finished planning and the run exited 0


def big_run(folder: Path) -> Path:
    """A replayed pairwise run over PAIRS pairs (both orders)."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "pairs.jsonl").open("w") as f:
        for i in range(PAIRS):
            f.write(json.dumps({"pair_id": f"p{i}", "prompt": "Write.", "text_a": f"a {i}", "text_b": f"b {i}",
                                "label": "a"}) + "\n")
    with (folder / "answers.jsonl").open("w") as f:
        for i in range(PAIRS):
            f.write("".join(json.dumps({"id": f"p{i}/{o}", "response": "A"}) + "\n" for o in ("ab", "ba")))
    cfg = folder / "big.toml"
    cfg.write_text(f'name = "big"\nprotocol = "pairwise"\njudge = "replay:{folder / "answers.jsonl"}"\n'
                   '[dataset]\nloader = "pairs_jsonl"\npath = "pairs.jsonl"\n')
    return cfg


def start(cfg: Path, tmp_path: Path, **env: str) -> subprocess.Popen:
    full = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "LITJUDGE_RUNS_DIR": str(tmp_path / "out"),
            "LITJUDGE_CACHE": str(tmp_path / "cache"), "LITJUDGE_PLAN_PROCESS": "1", **env}
    return subprocess.Popen([sys.executable, "-m", "litjudge", "run", str(cfg), "--quiet"], cwd=tmp_path, env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def planner_of(proc: subprocess.Popen, seconds: float = 120) -> int:
    """The pid of the run's planner process (its only child while it plans)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        except OSError:
            children = []
        if children:
            return int(children[0])
        time.sleep(0.01)
    raise AssertionError(f"no planner process appeared (exit {proc.poll()})")


def stopped_says(proc: subprocess.Popen, planner: int, words: str, seconds: float) -> str:
    """Stop the planner (SIGSTOP) and read the run's stderr until a line holding `words`, at most
    `seconds`; the planner is continued (SIGCONT) whatever happens. Returns that line."""
    os.kill(planner, signal.SIGSTOP)
    try:
        seen, deadline = "", time.monotonic() + seconds
        while words not in seen:
            ready, _, _ = select.select([proc.stderr], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"{seconds:g} s with no word from the run while its planner is stopped"
            seen = proc.stderr.readline()
            assert seen, "the run ended or closed stderr without naming the stopped planner"
    finally:
        os.kill(planner, signal.SIGCONT)
        if proc.poll() is None and words not in seen:
            proc.kill()
    return seen


def assert_finishes(proc: subprocess.Popen) -> None:
    """The run ends with exit 0 and every verdict of the PAIRS pairs in both orders."""
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0 and f"{2 * PAIRS} verdicts" in out, (out[-1000:], err[-2000:])


def test_a_killed_planner_is_one_line_and_a_rerun_resumes(tmp_path):
    cfg = big_run(tmp_path)
    proc = start(cfg, tmp_path)
    planner = planner_of(proc)
    time.sleep(KILL_AFTER_S)
    os.kill(planner, signal.SIGKILL)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, (out[-1000:], err[-2000:])
    lines = [ln for ln in err.splitlines() if ln.startswith("litjudge: error:")]
    assert lines == [f"litjudge: error: the planner process (pid {planner}) was killed (SIGKILL) before the plan was "
                     "finished; finished verdicts are stored: run again to resume"], err[-2000:]
    assert "internal error" not in err and not (tmp_path / "cache" / "crash").exists()
    assert_finishes(start(cfg, tmp_path))


def test_a_stopped_planner_is_named_and_the_run_finishes_once_continued(tmp_path):
    cfg = big_run(tmp_path)
    proc = start(cfg, tmp_path, LITJUDGE_PLAN_WATCHDOG_S="1")
    planner = planner_of(proc)
    seen = stopped_says(proc, planner, "has not answered", 60)
    assert seen.startswith(f"litjudge: the planner process (pid {planner}) has not answered for "), seen
    assert f"(it is stopped: `kill -CONT {planner}` resumes it)" in seen, seen
    assert_finishes(proc)


def test_the_planner_child_plans_after_this_process_tokenized_in_parallel(tmp_path):
    """The tokenizer's Rust pool started here, then TOKENIZERS_PARALLELISM=false set (as the console
    does): the forked planner waited forever for the pool's threads, which a fork does not copy."""
    script = (
        "import os\n"
        "os.environ.pop('TOKENIZERS_PARALLELISM', None)\n"
        "from litjudge.engine import backends\n"
        "from litjudge.engine.core.planner import StreamPlanner\n"
        "from litjudge.engine.core.plan_process import planned_apart\n"
        "from tests.test_special_tokens import forge_requests, tokenizer\n"
        "tokenizer('smollm2-135m')(['some text to tokenize ' * 50] * 2000)\n"
        "os.environ['TOKENIZERS_PARALLELISM'] = 'false'\n"
        "spec = backends.model_spec('smollm2-135m')\n"
        "chunks = planned_apart(StreamPlanner(backends.planner(spec), chunk=4), [('r', r) for r in forge_requests() * 3])\n"
        "print('chunks', len(list(chunks)))\n")
    done = run_python(["-c", script], PROJECT_ROOT, console_env(dict(os.environ)), 300)
    assert done.returncode == 0 and "chunks 3" in done.stdout, done.stderr[-2000:]


def test_a_stopped_planner_is_named_within_seconds_not_after_the_watchdog(tmp_path):
    """A planner the system reports stopped (SIGSTOP, Ctrl-Z) cannot be slow planning: the run says
    it waits for it, and for what, within seconds (it said nothing until the 60 s watchdog)."""
    cfg = big_run(tmp_path)
    proc = start(cfg, tmp_path)                     # the default watchdog (60 s)
    planner = planner_of(proc)
    seen = stopped_says(proc, planner, "is stopped", 20)
    assert seen.startswith(f"litjudge: the run waits for its planner process (pid {planner}), which is stopped"), seen
    assert f"`kill -CONT {planner}` resumes it" in seen, seen
    assert_finishes(proc)
