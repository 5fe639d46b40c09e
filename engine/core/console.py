"""A quiet console: what litjudge says (its messages and progress bars, through `terminal()`) goes
to the terminal; everything else written to stderr (vLLM's, torch's and transformers' log lines,
warnings, C++ notices, their load bars) goes to a log file. Done by moving file descriptor 2, so
output from C++ and from libraries that hold their own handle to stderr is caught as well.
`--verbose` leaves everything on the terminal."""
from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

_terminal: TextIO | None = None
_log: Path | None = None


def captured_log() -> Path | None:
    """The file third-party messages go to during this command (None with --verbose)."""
    return _log


def terminal() -> TextIO:
    """Where litjudge's own messages and progress bars go (the real stderr)."""
    return _terminal or sys.stderr


_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F)}


def printable(text: str) -> str:
    """A message as the terminal shows it: control characters a path, an id or a judged text carried
    in (a NUL, an escape that would start a terminal sequence) written as escapes (\\x1b); newlines
    and tabs stay."""
    return text.translate(_CONTROL)


# What litjudge says (notes, warnings) goes through this logger, never `print`, so a Python caller
# decides what is shown (logging's configuration, or `judge(progress=...)`); the console shows it
# all on the terminal (`shown`). Outside `shown`, logging's own rules hold: a warning reaches stderr
# through Python's last-resort handler, a note (INFO) stays quiet.
LOG = logging.getLogger("litjudge")


def say(message: str, level: int = logging.INFO) -> None:
    """A line of litjudge's: a note (INFO: preparing a judge, waiting for a lock) or a warning."""
    LOG.log(level, message)


class _TerminalHandler(logging.Handler):
    """litjudge's lines on the terminal as they are (no level or logger name prefixed: each line
    says "litjudge: ..." itself), past any capture of stderr (`quiet`)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = terminal()
            stream.write(record.getMessage() + "\n")
            stream.flush()
        except Exception:  # noqa: BLE001  (logging's contract: a handler reports its own failure)
            self.handleError(record)


_shown_lock = threading.Lock()
_shown_levels: list[int] = []           # the level of each `shown` block open now
_handler = _TerminalHandler()


@contextmanager
def shown(level: int = logging.INFO) -> Iterator[None]:
    """Inside the block, litjudge's lines at `level` and above go to the terminal, once (blocks
    nest and may be open in several threads: the lowest level asked for holds)."""
    with _shown_lock:
        if not _shown_levels:
            LOG.addHandler(_handler)
            LOG.propagate = False
        _shown_levels.append(level)
        _handler.setLevel(min(_shown_levels))
        LOG.setLevel(min(_shown_levels))
    try:
        yield
    finally:
        with _shown_lock:
            _shown_levels.remove(level)
            if _shown_levels:
                _handler.setLevel(min(_shown_levels))
                LOG.setLevel(min(_shown_levels))
            else:
                LOG.removeHandler(_handler)
                LOG.propagate = True
                LOG.setLevel(logging.NOTSET)


def log_to(path: Path) -> None:
    """From now on, third-party messages go to `path` (a run folder's engine.log, appended, live),
    with what was captured so far moved there; nothing changes with --verbose or outside `quiet`.
    Calls that overlap in several threads share one fd 2, so one log: it stays where the first
    call put it (their messages cannot be told apart, and no call's log is taken from its folder)."""
    global _log
    with _lock:
        if _log is None or _terminal is None or Path(path) == _log or len(_holders) > 1:
            return
        with _writing:
            sys.stderr.flush()
            path = Path(path)
            with open(path, "ab") as new:
                if _log.exists():
                    new.write(_log.read_bytes())
                os.dup2(new.fileno(), 2)
            capture = sys.stderr
            if isinstance(capture, _Capture) and capture.log is not None:     # a notebook's Python-level messages too
                before, capture.log = capture.log, open(path, "a", buffering=1, encoding="utf-8", errors="replace")
                before.close()
            old, _log = _log, path
        old.unlink(missing_ok=True)


def prepare_environment(verbose: bool, environ: MutableMapping[str, str] = os.environ) -> None:
    """Before vLLM is imported, third-party libraries' own settings, which they read only from the
    environment (set once, and never over a value the user set): vLLM's log level (INFO only with
    --verbose) and stream (stderr, so stdout carries only litjudge's tables), its in-process
    engine (quick start, and no spawned workers that need a __main__ guard), transformers' log
    level, and the tokenizers' thread pool off (so a forked planner may start its own). litjudge's
    own settings are never passed through the environment (engine.core.session). `environ`: this
    process's by default (the tests' warm interpreter prepares the one it starts with)."""
    environ.setdefault("VLLM_LOGGING_LEVEL", "INFO" if verbose else "WARNING")
    environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")   # vLLM logs to stdout by default
    environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    environ.setdefault("TRANSFORMERS_VERBOSITY", "info" if verbose else "error")
    environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class _Capture:
    """The stand-in for sys.stderr while a notebook's output is kept quiet: Python-level messages
    (logging handlers, warnings) go to the log; a handler that kept this object after the block
    (vLLM binds its stream when imported) writes into the log of the block open then, else to the
    stream it replaced."""

    def __init__(self, log: TextIO, replaced: TextIO):
        self.log: TextIO | None = log
        self.replaced = replaced

    def _target(self) -> TextIO:
        """This block's log; after it, the log of the block now open (a handler that kept this
        object, as vLLM's does, writes into the next call's log), else the stream it replaced."""
        now = _active[0] if _active else None
        return self.log or (now.log if now is not None and now.log is not None else None) or self.replaced

    def write(self, text: str) -> int:
        with _writing:
            return self._target().write(text)

    def flush(self) -> None:
        with _writing:
            self._target().flush()

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str):                 # encoding, errors, ...: as the stream it replaced
        return getattr(self.replaced, name)


_lock = threading.Lock()
_writing = threading.RLock()    # held while the stand-in writes to a log, and while a log is replaced
_holders: dict[int, int] = {}   # the threads with a block inside `quiet` now, and how many each (nested)
_undo: list = []            # how to put back what the first block changed
_active: list[_Capture] = []    # the stand-in of the block open now (none, or one)


@contextmanager
def quiet(log_path: Path, enabled: bool = True, stream: TextIO | None = None) -> Iterator[Path | None]:
    """Inside the block, stderr (fd 2) is `log_path` (appended) and `terminal()` the real stderr.
    `stream`: a notebook's stderr (a stream that is not fd 2): litjudge's messages and progress go
    to it, and Python-level third-party messages (logging, warnings) join the log through a
    stand-in sys.stderr, beside what C code writes to fd 2. Nested blocks, and blocks of calls in
    several threads, share the first block's capture, which ends when the last block ends."""
    if not enabled:
        yield None
        return
    me = threading.get_ident()
    with _lock:
        if not _holders:
            _begin(log_path, stream)
        _holders[me] = _holders.get(me, 0) + 1
    try:
        yield _log
    finally:
        with _lock:
            _holders[me] -= 1
            if not _holders[me]:
                del _holders[me]
            if not _holders:
                _end()


def _begin(log_path: Path, stream: TextIO | None) -> None:
    global _terminal, _log
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    if stream is None:
        _terminal = os.fdopen(os.dup(saved), "w", buffering=1, encoding="utf-8", errors="replace")
        _undo.append(_terminal.close)
    else:
        _terminal = stream
        capture = _Capture(open(log_path, "a", buffering=1, encoding="utf-8", errors="replace"), sys.stderr)
        sys.stderr = capture
        _active[:] = [capture]

        def put_back() -> None:
            sys.stderr = capture.replaced
            _active.clear()
            with _writing:
                log, capture.log = capture.log, None
                if log is not None:
                    log.close()
        _undo.append(put_back)
    with open(log_path, "ab") as log:
        os.dup2(log.fileno(), 2)
    _log = log_path

    def restore_fd2() -> None:
        os.dup2(saved, 2)
        os.close(saved)
    _undo.append(restore_fd2)


def _end() -> None:
    global _terminal, _log
    sys.stderr.flush()
    while _undo:
        _undo.pop()()
    try:                                # an empty log is not kept (one was left for every command run)
        if _log is not None and _log.stat().st_size == 0:
            _log.unlink()
    except OSError:
        pass
    _terminal = _log = None
