"""A quiet console: what litjudge says (its messages and progress bars, through `terminal()`) goes
to the terminal; everything else written to stderr (vLLM's, torch's and transformers' log lines,
warnings, C++ notices, their load bars) goes to a log file. Done by moving file descriptor 2, so
output from C++ and from libraries that hold their own handle to stderr is caught as well.
`--verbose` leaves everything on the terminal."""
from __future__ import annotations

import os
import sys
from collections.abc import Iterator
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


def say(message: str) -> None:
    print(message, file=terminal(), flush=True)


def log_to(path: Path) -> None:
    """From now on, third-party messages go to `path` (a run folder's engine.log, appended, live),
    with what was captured so far moved there; nothing changes with --verbose or outside `quiet`."""
    global _log
    if _log is None or _terminal is None or Path(path) == _log:
        return
    sys.stderr.flush()
    path = Path(path)
    with open(path, "ab") as new:
        if _log.exists():
            new.write(_log.read_bytes())
        os.dup2(new.fileno(), 2)
    old, _log = _log, path
    old.unlink(missing_ok=True)


def prepare_environment(verbose: bool) -> None:
    """Before vLLM is imported: its log level (INFO only with --verbose) and stream (stderr, so stdout
    carries only litjudge's tables)."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "INFO" if verbose else "WARNING")
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")   # vLLM logs to stdout by default
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "info" if verbose else "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@contextmanager
def quiet(log_path: Path, enabled: bool = True) -> Iterator[Path | None]:
    """Inside the block, stderr (fd 2) is `log_path` (appended) and `terminal()` the real stderr."""
    global _terminal, _log
    if not enabled or _terminal is not None:
        yield None
        return
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    _terminal = os.fdopen(os.dup(saved), "w", buffering=1, encoding="utf-8", errors="replace")
    with open(log_path, "ab") as log:
        os.dup2(log.fileno(), 2)
    _log = log_path
    try:
        yield log_path
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        _terminal.close()
        _terminal = _log = None
