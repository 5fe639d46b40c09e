"""SIGTERM (a scheduler's stop, `timeout`, `kill`) ends a command the way Ctrl-C does: raised where
the program is, as an interrupt, so a run flushes what it finished, writes its history line with the
judge it was at, and unlocks its folder, instead of vanishing with no record. A second SIGTERM while
that is done ends the process at once (the default)."""
from __future__ import annotations

import signal
import threading
from types import FrameType


class Terminated(KeyboardInterrupt):
    """The SIGTERM a console command received (a KeyboardInterrupt: every interrupt path applies)."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise Terminated(signal.Signals(signum).name)


def stop_on_sigterm() -> None:
    """From here on, SIGTERM is raised in the main thread as `Terminated` (the console only: a library
    call leaves the host program's signal handling alone). Python lets only the main thread set a
    handler: the console called from another thread keeps the default."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_terminated)
