"""The plan made in a process of its own (engine.core.plan_process): the very chunks the planner
makes in the runner's process (entries, new keys in prefix order, prompts, token ids, budgets,
too-long prompts left out), its errors raised at their chunk, and no planner left behind when the
runner stops early, is killed, or fails; a real run plans this way and the manifest says so."""
from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import time
from array import array

import pytest

from litjudge.engine.backends.local.steps import Prompt
from litjudge.engine.core.errors import PreflightError
from litjudge.engine.core.plan_process import planned_apart
from litjudge.engine.core.planner import StreamPlanner
from tests.conftest import needs_data
from tests.test_architecture import AlwaysFirst
from tests.test_planned_ahead import toy_request


class Short(AlwaysFirst):
    """The toy backend with a small context window, so some prompts do not fit."""

    def context_window(self) -> int:
        return 40


def spec():
    from litjudge.engine.core.backend import JudgeSpec

    return JudgeSpec("toy", "toy", "x", "toy:x", "toy")


def stream_of(n: int, long_every: int = 0):
    """`n` requests, each asked twice (a shared key), every `long_every`-th one too long to fit."""
    for i in range(n):
        r = toy_request(i)
        if long_every and i % long_every == long_every - 1:
            from dataclasses import replace

            from litjudge.engine.core.requests import Message
            r = replace(r, messages=(Message("user", "word " * 60 + str(i)),))
        yield "run", r
        yield "other", r


def flat(chunks):
    return [([(e.key, e.run, e.request) for e in c.entries],
             [(p.key, p.request, p.prompt, tuple(p.token_ids), p.max_tokens) for p in c.unique]) for c in chunks]


@pytest.mark.parametrize("truncation", ["skip", "error"])
def test_the_same_chunks_as_planning_in_the_runners_process(truncation):
    long_every = 7 if truncation == "skip" else 0
    here = StreamPlanner(Short(spec()), truncation, chunk=16)
    expected = flat(here.chunks(stream_of(100, long_every)))
    apart = StreamPlanner(Short(spec()), truncation, chunk=16)
    chunks = list(planned_apart(apart, stream_of(100, long_every)))
    got = flat(chunks)
    assert got == expected and len(got) == 13
    packed = chunks[0].unique[0].token_ids              # the ids stay packed until an engine's step reads them
    assert isinstance(packed, array) and Prompt(packed, "").tokens == tuple(packed)
    counts = [{k: v for k, v in s.summary().items() if k != "seconds"} for s in (apart.stats, here.stats)]
    assert counts[0] == counts[1]
    assert len(apart.stats.too_long) == (14 if long_every else 0)


def test_a_prompt_too_long_is_raised_at_its_chunk():
    stream = StreamPlanner(Short(spec()), "error", chunk=16)
    got = []
    with pytest.raises(PreflightError, match="do not fit the context window"):
        for c in planned_apart(stream, stream_of(100, long_every=37)):
            got.append(c)
    assert len(got) == 4                     # request 36 is in chunk 5 (2 entries per request, 16 per chunk)


PARENT = """
import os, sys, time
sys.path.insert(0, {root!r})
from litjudge.engine.core.plan_process import planned_apart
from litjudge.engine.core.planner import StreamPlanner
from tests.test_plan_process import Short, spec, stream_of
chunks = planned_apart(StreamPlanner(Short(spec()), "error", chunk=16), stream_of(10**7))
next(chunks)
import multiprocessing
print(multiprocessing.active_children()[0].pid, flush=True)
{then}
"""


def child_gone(pid: int, seconds: float = 10) -> bool:
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split()[2] == "Z":       # ended, not yet reaped
                    return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("then", ["chunks.close()\nprint('closed', flush=True)\ntime.sleep(60)",
                                  "time.sleep(60)"])
def test_no_planner_outlives_its_runner(then):
    """The runner stops reading (the plan closed early) or is killed with -9 mid-plan: its planner
    process ends too, instead of planning on for nobody."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(PARENT.format(root=root, then=then))],
                            stdout=subprocess.PIPE, text=True, cwd=root)
    try:
        planner = int(proc.stdout.readline())
        if "close" in then:
            assert proc.stdout.readline().strip() == "closed"
        else:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        assert child_gone(planner), "the planner process is still running"
    finally:
        proc.kill()
        proc.wait()


FORKED_UNDER_A_STOP = """
import multiprocessing, os, signal, sys
sys.path.insert(0, {root!r})
from litjudge.engine.app.console.signals import stop_on_sigterm
from litjudge.engine.core.plan_process import planned_apart
from litjudge.engine.core.planner import StreamPlanner
from tests.test_plan_process import Short, spec, stream_of
stop_on_sigterm()                                  # as the console does
sent = []
def stop_while_forking():                          # the signal arrives during the planner's fork
    if not sent:
        sent.append(os.kill(os.getpid(), signal.{sig}))
os.register_at_fork(before=stop_while_forking)
chunks = planned_apart(StreamPlanner(Short(spec()), "error", chunk=16), stream_of(10**7))
try:
    next(chunks)
    print("went on", flush=True)
except KeyboardInterrupt as stop:
    print("stopped:", type(stop).__name__, flush=True)
print("planners left:", len(multiprocessing.active_children()), flush=True)
"""


@pytest.mark.parametrize("sig, raised", [("SIGINT", "KeyboardInterrupt"), ("SIGTERM", "Terminated")])
def test_a_stop_that_arrives_while_the_planner_forks_stops_the_run(sig, raised):
    """Ctrl-C or SIGTERM as the planner process is forked (a sweep handing over to its next judge)
    was raised inside an at-fork callback, where Python drops it: the sweep went on and exited 0.
    Now it is raised right after the fork, and the planner just started ends with the runner."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(FORKED_UNDER_A_STOP.format(root=root, sig=sig))],
                       capture_output=True, text=True, cwd=root, timeout=120)
    assert r.stdout.splitlines() == [f"stopped: {raised}", "planners left: 0"], (r.stdout, r.stderr[-2000:])
    assert "Exception ignored" not in r.stderr, r.stderr[-2000:]


@needs_data
def test_a_run_plans_apart_and_says_so(tmp_path, monkeypatch):
    """A replayed TTCW run end to end: its plan made in a process of its own (the manifest says
    which), the same verdicts as planned in a thread."""
    from litjudge.engine.app.run import run
    from litjudge.engine.core.config import load_config
    from litjudge.engine.core.paths import PROJECT_ROOT

    config = PROJECT_ROOT / "runs" / "ttcw-replay.toml"
    results = {}
    for switch in ("1", "0"):
        monkeypatch.setenv("LITJUDGE_PLAN_PROCESS", switch)
        monkeypatch.setenv("LITJUDGE_RUNS_DIR", str(tmp_path / switch))
        out = run(dataclasses.replace(load_config(config), limit=2), progress=False)
        results[switch] = out.verdicts.sort("key", "judge").select("key", "judge", "label")
        assert {j["planned_ahead"] for j in out.manifest.judges} == {"process" if switch == "1" else "thread"}
    assert results["1"].equals(results["0"]) and results["1"].height > 0


def test_a_planner_killed_in_the_middle_of_a_message_is_the_same_one_line():
    """A planner killed while it writes a chunk leaves half a message in the pipe: the runner read
    that as a broken file ("a file: got end of file during message; check the path", seen once in
    tests/test_planner_faults.py's kill -9), not as the planner's death."""
    import multiprocessing
    import struct

    from litjudge.engine.core.errors import SystemFault
    from litjudge.engine.core.plan_process import _receive

    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=lambda: (os.write(send.fileno(), struct.pack("!i", 1000) + b"half"),
                                            os.kill(os.getpid(), signal.SIGKILL)))
    child.start()
    send.close()
    with pytest.raises(SystemFault) as caught:
        _receive(receive, child)
    assert str(caught.value) == (f"the planner process (pid {child.pid}) was killed (SIGKILL) before the plan was "
                                 "finished; finished verdicts are stored: run again to resume")
