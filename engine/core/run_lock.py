"""One run per run folder at a time: two processes writing one folder left it holding the second's
outputs while its store held both runs' plans. The lock is an advisory `flock` on RUN/.lock (freed
by the kernel when its process dies, kill -9 included), with the holder's pid written inside so the
refusal can name it."""
from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import ConfigError

LOCK_NAME = ".lock"
# The locks this process holds: a thread refused by one of them is told so even before the holder
# has written its pid into the file (it read "pid unknown" then).
_HELD: set[str] = set()
_GUARD = threading.Lock()


class RunLock:
    """Held while a run writes its folder; `release` (or process exit) frees it."""

    def __init__(self, run_dir: Path, rewrite: bool = False):
        """`rewrite`: a command rewriting a finished run (reparse, budgets), for which another
        name or folder is no way round: the refusal says to wait."""
        run_dir.mkdir(parents=True, exist_ok=True)
        self.path = run_dir / LOCK_NAME
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        with _GUARD:           # the lock and its note in _HELD at once: a thread refused between them read "pid unknown"
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(self.fd, 64).decode(errors="replace").strip() or "unknown"
                os.close(self.fd)
                ours = str(self.path.resolve()) in _HELD or holder == str(os.getpid())
                who = ("by another run in this process (another thread)" if ours else
                       f"by another litjudge process (pid {holder})")
                other = "" if rewrite else (", or give this run another name (the config's name, or name=) or "
                                            "folder (--out, or out=)")
                raise ConfigError(f"run folder {run_dir} is in use {who}: wait for it to finish{other}") from None
            _HELD.add(str(self.path.resolve()))
        os.ftruncate(self.fd, 0)
        os.write(self.fd, str(os.getpid()).encode())

    def release(self) -> None:
        if self.fd >= 0:
            _HELD.discard(str(self.path.resolve()))
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = -1


@contextmanager
def run_folder_lock(run_dir: Path) -> Iterator[None]:
    """A finished run folder's lock while a command rewrites it (reparse, budgets): one line if a run
    or another such command holds it. A folder without a manifest is left to the command's own
    message (no lock file is written into a folder that is not a run's)."""
    held = RunLock(run_dir, rewrite=True) if (run_dir / "manifest.json").is_file() else None
    try:
        yield
    finally:
        if held is not None:
            held.release()
