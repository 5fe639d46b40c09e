"""A judge's folder prepared once on this machine, whoever asks at the same time (two runs, or a run
beside the tests): under a lock per judge, built in a private temporary folder, renamed into place whole."""
from __future__ import annotations

import fcntl
import glob
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ...core.console import say


@contextmanager
def _judge_lock(folder: Path) -> Iterator[None]:
    """One preparation of a judge at a time on this machine: an advisory `flock` on models/NAME.lock
    (freed by the kernel when its holder dies, kill -9 included); a second process waits, saying so."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder.with_name(folder.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"litjudge: judge {folder.name} is being prepared by another process; waiting for it to finish",
                logging.WARNING)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def prepared_once(folder: Path, build: Callable[[Path], None], current: Callable[[Path], bool]) -> None:
    """`folder` made by `build(tmp)` once, whoever asks at the same time: under the judge's lock, a
    folder that is `current` (another process may have finished it while this one waited) is used as
    it is; otherwise `build` fills a temporary folder of this process's own (two runs once shared
    models/NAME.tmp, and one deleted the other's files mid-conversion), which is renamed into place
    only when complete. Temporary folders left by a preparation that was killed are removed first (no
    one else prepares under the lock)."""
    with _judge_lock(folder):
        if current(folder):
            return
        for stale in folder.parent.glob(glob.escape(folder.name) + ".tmp*"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".tmp-", dir=folder.parent))
        tmp.chmod(0o755)                      # mkdtemp's is private to its user; the judge's folder is not
        try:
            build(tmp)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)
