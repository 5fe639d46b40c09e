"""How the `litjudge` command's process ends once its command has returned.

Python's own exit tears down every module object by object; with torch, transformers and vLLM
loaded, the demo run's process took 4.0-4.2 s to end after printing its last line, 0.2 s ending as
below (Intel Xeon, 2 cores, two runs each, alternated). What a command relies
on at exit is kept, in Python's order: the threading module's exit hooks run and other non-daemon
threads joined (threading._shutdown, as the interpreter calls it), exit handlers run (logging's
flush, multiprocessing's children, Ray's shutdown), the standard streams flushed. Only the process
of the command line ends this way; `main(argv)` called from Python returns its code as before.

Left out as well, being teardown too: torch's finalizers that take each operator library out of its
dispatcher again (one per library vLLM and torch registered), and torch dynamo's exit reports, which
build their tables even where their INFO messages go nowhere; the two took some 60 ms of every
command's end (py-spy over the suite, EPYC Zen 3).
"""
from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import weakref
from typing import NoReturn


def leave(code: int) -> NoReturn:
    """End this process with `code` as Python would, without its module-by-module teardown."""
    # Python's own first step: the threading module's exit hooks (concurrent.futures' wakes the idle
    # workers of every thread pool still open, which then end), then every other non-daemon thread
    # joined. Joining the threads without those hooks waited forever on an idle pool's worker (a sweep
    # whose run had printed its results hung).
    threading._shutdown()  # type: ignore[attr-defined]
    _skip_torch_teardown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):          # a closed pipe or stream: nothing left to say there
            pass
    os._exit(code & 0xFF)


def _skip_torch_teardown() -> None:
    """Disarm the exit handlers of torch's that only undo or report what the process leaves anyway."""
    library = sys.modules.get("torch.library")
    if library is not None:
        undo = getattr(library, "_del_library", None)
        registry = getattr(weakref.finalize, "_registry", {})    # the live finalizers (CPython); none known: all run
        for finalizer, info in list(registry.items()):
            if getattr(info, "func", None) is undo:
                finalizer.atexit = False
    for name, report in (("torch._dynamo.utils", "dump_compile_times"), ("torch._dynamo.eval_frame", "_log_traced_frames")):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, report) and not logging.getLogger(name).isEnabledFor(logging.INFO):
            atexit.unregister(getattr(module, report))
