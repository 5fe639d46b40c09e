"""The quiet console under threads: a log moved to a run folder (`log_to`) while other threads write
to stderr loses no line and raises nothing, and calls that overlap in two threads share the first
call's log (one fd 2), neither taking the other's log from its folder."""
from __future__ import annotations

import io
import os
import sys
import threading

from litjudge.engine.core import console


def test_a_log_moved_while_threads_write_to_stderr_keeps_every_line(tmp_path):
    written, errors, stop = [0, 0], [], threading.Event()

    def writer(i: int) -> None:
        while not stop.is_set():
            try:
                sys.stderr.write(f"line of writer {i}\n")
                sys.stderr.flush()
            except Exception as exc:  # noqa: BLE001  (reported by the test)
                errors.append(exc)
                return
            written[i] += 1

    stderr = sys.stderr
    with console.quiet(tmp_path / "first.log", stream=io.StringIO()):      # a notebook: stderr is a stand-in
        writers = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
        for t in writers:
            t.start()
        for n in range(200):
            console.log_to(tmp_path / f"run-{n}.log")
        stop.set()
        for t in writers:
            t.join()
        last = console.captured_log()
    assert not errors, errors
    assert sys.stderr is stderr and not console._holders
    assert last == tmp_path / "run-199.log" and sorted(p.name for p in tmp_path.iterdir()) == ["run-199.log"]
    lines = last.read_text().splitlines()
    assert [lines.count(f"line of writer {i}") for i in range(2)] == written and len(lines) == sum(written)


def test_overlapping_calls_share_the_first_calls_log(tmp_path):
    first_in, second_done, errors = threading.Event(), threading.Event(), []
    seen: dict[str, object] = {}

    def call(tag: str, wait_for: threading.Event | None, then: threading.Event) -> None:
        try:
            if wait_for is not None:                       # b begins once a's log is in a's folder
                assert wait_for.wait(30)
            with console.quiet(tmp_path / f"session-{tag}.log", stream=io.StringIO()):
                console.log_to(tmp_path / tag / "engine.log")
                sys.stderr.write(f"from {tag}\n")
                seen[tag] = console.captured_log()
                then.set()
                if tag == "a":
                    assert second_done.wait(30)
        except BaseException as exc:  # noqa: BLE001  (reported by the test)
            errors.append(exc)
            first_in.set()

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = threading.Thread(target=call, args=("a", None, first_in))
    b = threading.Thread(target=call, args=("b", first_in, second_done))
    a.start()
    b.start()
    a.join(60)
    b.join(60)
    assert not errors, errors
    assert seen == {"a": tmp_path / "a" / "engine.log", "b": tmp_path / "a" / "engine.log"}
    assert (tmp_path / "a" / "engine.log").read_text().splitlines() == ["from a", "from b"]
    assert not (tmp_path / "b" / "engine.log").exists() and not console._holders


def test_a_command_that_logs_nothing_leaves_no_log(tmp_path):
    """Every console command, and every Python call, made a log file under the cache folder, empty
    when nothing was logged: thousands of empty files after a sweep of scripts. A log with a line
    in it is kept."""
    with console.quiet(tmp_path / "quiet.log"):
        pass
    assert not (tmp_path / "quiet.log").exists()
    with console.quiet(tmp_path / "said.log"):
        os.write(2, b"a third-party line\n")
    assert (tmp_path / "said.log").read_text() == "a third-party line\n"
