"""Planning overlaps inference: the plan's next chunks are planned in a thread while the engine
judges the current one, so a large run takes about max(planning, inference). Shown without timing:
a backend that, while judging the first chunk, waits to see the planner reach the third."""
from __future__ import annotations

import threading

import pytest

from litjudge.engine.core.planner import planned_ahead
from litjudge.engine.core.runner import run_judge
from litjudge.engine.core.session import Spend
from litjudge.engine.core.store import Store
from tests.test_architecture import AlwaysFirst


def toy_request(i: int):
    import litjudge.grammars as grammars
    from litjudge.engine.core.config import Sampling
    from litjudge.engine.core.requests import JudgeRequest, Message, RequestMeta

    return JudgeRequest((Message("user", f"Which is better? pair {i}"),), grammars.preference(), "label", Sampling(),
                        RequestMeta("pairwise", f"p{i}", (("pair_id", f"p{i}"),)))


def test_the_first_verdict_is_stored_before_planning_finishes(tmp_path):
    from litjudge.engine.core.backend import JudgeSpec

    reached_third_chunk = threading.Event()
    planned = []
    overlapped = []
    stored_at = []

    def requests():
        for i in range(40):                      # 10 chunks of 4
            planned.append(i)
            if i == 8:
                reached_third_chunk.set()
            yield "run", toy_request(i)

    class Waiting(AlwaysFirst):
        calls = 0

        def generate(self, batch):
            Waiting.calls += 1
            if Waiting.calls == 1:               # judging chunk 1: does the planner go on meanwhile?
                overlapped.append(reached_third_chunk.wait(timeout=10))
            yield from AlwaysFirst.generate(self, batch)

    spec = JudgeSpec("toy", "toy", "x", "toy:x", "toy")
    store = Store.open(tmp_path / "store.sqlite")
    try:
        jr = run_judge(spec, Waiting(spec), lambda: Waiting(spec), requests(), store, spend=Spend(), progress=False,
                       chunk=4,
                       on_result=lambda row: stored_at.append(len(planned)))
    finally:
        store.close()
    assert overlapped == [True]                  # the planner reached chunk 3 while chunk 1 was judged
    assert stored_at[0] < 40                     # the first verdict was stored before planning finished
    assert jr.generated == 40 and jr.plan.requests == 40


def test_an_error_while_planning_is_raised_at_its_chunk_and_the_planner_stops():
    def chunks():
        yield 1
        yield 2
        raise ValueError("bad row")

    got = []
    with pytest.raises(ValueError, match="bad row"):
        for c in planned_ahead(chunks()):
            got.append(c)
    assert got == [1, 2]
    endless = planned_ahead(iter(range(10**9)))
    assert next(endless) == 0
    endless.close()                              # the planner thread is stopped, not left running
    assert not any(t.name == "litjudge-planner" and t.is_alive() for t in threading.enumerate())


def test_the_first_eta_does_not_count_the_engine_s_start(tmp_path, capfd):
    """The bar appeared before the engine started, so its first rate and ETA counted the start (a
    minute of vLLM's): the engine starts first, then the bar counts the verdicts alone."""
    import re
    import time

    from litjudge.engine.core.backend import JudgeSpec

    spec = JudgeSpec("toy", "toy", "x", "toy:x", "toy")

    def slow_start():
        time.sleep(2.0)                          # an engine's start
        return AlwaysFirst(spec)

    store = Store.open(tmp_path / "store.sqlite")
    try:
        jr = run_judge(spec, AlwaysFirst(spec), slow_start, [("run", toy_request(i)) for i in range(8)], store,
                       spend=Spend(), progress=True, chunk=8)
    finally:
        store.close()
    assert jr.generated == 8
    shown = re.findall(r"\[(\d\d):(\d\d)<", capfd.readouterr().err)
    assert shown, "no progress bar"
    assert all(int(m) * 60 + int(s) < 2 for m, s in shown), shown    # the 2 s start is in no elapsed time shown
