"""The `litjudge` command ends its process without Python's module-by-module teardown
(engine/app/console/leave.py), keeping what a command relies on at exit: its exit code, the other
threads' work, exit handlers, and output still in the streams' buffers. Real processes, no mocks."""
from __future__ import annotations

import subprocess
import sys

from litjudge.engine.core.paths import PROJECT_ROOT

PROBE = r"""
import atexit, sys, threading, time
from pathlib import Path
from litjudge.engine.app.console.cli import main

out = Path(sys.argv[1])
atexit.register(lambda: (out / "atexit").write_text("ran"))
def late():
    time.sleep(0.5)
    (out / "thread").write_text("joined")
threading.Thread(target=late).start()                # not a daemon: Python joins it before exit
sys.stdout.write("buffered, no newline")              # a pipe: block-buffered, still in the buffer
sys.argv = ["litjudge", *sys.argv[2:]]
main()                                                # the command line: the process ends in here
(out / "returned").write_text("main returned")       # never reached
"""


def probe(tmp_path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PROBE, str(tmp_path), *argv], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=120)


def test_the_command_line_ends_with_its_code_after_threads_exit_handlers_and_buffered_output(tmp_path):
    r = probe(tmp_path, "protocols")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("buffered, no newline") and "ttcw" in r.stdout
    assert (tmp_path / "atexit").read_text() == "ran" and (tmp_path / "thread").read_text() == "joined"
    assert not (tmp_path / "returned").exists()


def test_a_failing_command_keeps_its_exit_code(tmp_path):
    r = probe(tmp_path, "plan", str(tmp_path / "missing.toml"))   # (not `run`: it re-executes under tcmalloc)
    assert r.returncode == 2 and "litjudge: error:" in r.stderr, (r.returncode, r.stderr[-2000:])
    assert (tmp_path / "atexit").exists() and (tmp_path / "thread").exists()


def test_a_closed_pipe_is_still_a_quiet_end(tmp_path):
    """`litjudge protocols | head -1`: the reader goes away; no traceback, SIGPIPE's status."""
    r = subprocess.run(f"{sys.executable} -m litjudge protocols | head -1; echo \"rc=${{PIPESTATUS[0]}}\"",
                       shell=True, executable="/bin/bash", cwd=PROJECT_ROOT, capture_output=True, text=True,
                       timeout=120)
    assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr, r.stderr[-2000:]
    assert r.stdout.splitlines()[-1] in ("rc=0", "rc=141"), r.stdout


def test_main_called_from_python_returns_its_code(capsys):
    from litjudge.engine.app.console.cli import main

    assert main(["protocols"]) == 0 and "ttcw" in capsys.readouterr().out


def test_an_idle_thread_pool_does_not_hold_the_end_back(tmp_path):
    """A thread pool left open (a library's, never shut down) keeps an idle, non-daemon worker:
    Python's exit wakes it through the threading module's exit hooks, and so does the command's
    (joining the threads alone waited forever: a sweep that had printed its results hung)."""
    code = ("from concurrent.futures import ThreadPoolExecutor\n"
            "from litjudge.engine.app.console.leave import leave\n"
            "pool = ThreadPoolExecutor(1)\n"
            "assert pool.submit(int, '7').result() == 7\n"        # its worker now idles, waiting for more
            "leave(3)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 3, r.stderr[-2000:]


def test_torch_s_library_teardown_is_left_out_and_other_finalizers_still_run(tmp_path):
    """A torch operator library's finalizer (it takes the library's operators out of the dispatcher
    again: teardown) does not run as the command ends; a finalizer of anything else still does."""
    code = ("import sys, weakref\n"
            "from pathlib import Path\n"
            "import torch.library\n"
            "from litjudge.engine.app.console.leave import leave\n"
            "out = Path(sys.argv[1])\n"
            "torch.library._del_library = lambda *a: (out / 'torch').write_text('ran')\n"
            "lib = torch.library.Library('litjudge_leave_probe', 'DEF')\n"
            "class Held: pass\n"
            "held = Held()\n"
            "weakref.finalize(held, (out / 'own').write_text, 'ran')\n"
            "leave(0)\n")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=PROJECT_ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "own").read_text() == "ran" and not (tmp_path / "torch").exists()
