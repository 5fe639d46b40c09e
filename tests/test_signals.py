"""A `litjudge run` stopped by a signal keeps its invocation in the run folder's history
(history.jsonl) with the judge it was at: SIGTERM (a scheduler's stop, `timeout`, `kill`) left no
line at all, and Ctrl-C (SIGINT) a line with no judges. Real signals to a real run (replayed judge),
sent while its judge is planning."""
from __future__ import annotations

import json
import os
import signal
import time

import pytest

from tests.test_planner_faults import PAIRS, big_run, planner_of, start


@pytest.mark.parametrize("sig, code, said", [(signal.SIGINT, 130, "litjudge: interrupted"),
                                             (signal.SIGTERM, 143, "litjudge: stopped (SIGTERM)")])
def test_a_stopped_run_keeps_its_invocation_and_judge_in_the_history(tmp_path, sig, code, said):
    cfg = big_run(tmp_path)
    proc = start(cfg, tmp_path)
    planner_of(proc)                                     # the judge is at work (its plan is being made)
    time.sleep(0.5)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == code, (out[-1000:], err[-2000:])
    assert said in err and "finished verdicts are stored and a re-run resumes" in err, err[-2000:]
    assert "Traceback" not in err and "internal error" not in err, err[-2000:]
    lines = (tmp_path / "out" / "big" / "history.jsonl").read_text().splitlines()
    assert len(lines) == 1, lines
    record = json.loads(lines[0])
    assert record["interrupted"] is True and [j["judge"] for j in record["judges"]] == [
        f"replay:{tmp_path / 'answers.jsonl'}"], record
    again = start(cfg, tmp_path)                         # a re-run resumes and adds its own line
    out, err = again.communicate(timeout=600)
    assert again.returncode == 0 and f"{2 * PAIRS} verdicts" in out, (out[-1000:], err[-2000:])
    history = [json.loads(ln) for ln in (tmp_path / "out" / "big" / "history.jsonl").read_text().splitlines()]
    assert len(history) == 2 and "interrupted" not in history[1]
    assert not list((tmp_path / "out" / "big").glob(".lock-*")) and os.path.exists(tmp_path / "out" / "big" / "store.sqlite")
