"""What a process builds from a model folder's files (a parsed tokenizer) and may hand out again.

A notebook's repeated `litjudge.judge`, a sweep's cells on one judge and `litjudge plan` over
several configs build the same judge's tokenizer again and again: a quarter of a second for the
default judge's tokenizer.json, 1.2 s for Qwen2.5-Coder's and 3.7-4.3 s for Gemma 3's as
transformers loads them (EPYC Zen 3). The one built before is handed out again while the folder's
files are as they were and nothing still holds it: a tokenizer is used by one thread at a time
(engine/core/runner.py), so two holders alive at once each get their own."""
from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

from ...core.paths import path_version

T = TypeVar("T")
H = TypeVar("H")


def _taken() -> object:
    return True                           # a holder being made: never dead


class FolderReuse(Generic[T]):
    """Objects built from folders, one a folder: `take` hands out the one built before while it is
    free (its last holder gone) and the folder unchanged, else builds a new one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[str, tuple[tuple[Any, ...], T, Callable[[], object | None]]] = {}

    def take(self, folder: Path, build: Callable[[], T]) -> tuple[T, Callable[[H], H]]:
        """The object and `keep`: call `keep(holder)` once the object is in use by `holder`; it is
        free again when that holder is gone. Never kept (the caller gave up on it): never handed out again."""
        version = path_version(folder)
        with self._lock:
            known = self._known.get(str(folder))
            made: T | None = None
            if known is not None and known[0] == version and known[2]() is None:
                made = known[1]
                self._known[str(folder)] = (version, made, _taken)
        if made is None:
            made = build()

        def keep(holder: H) -> H:
            with self._lock:
                self._known[str(folder)] = (version, made, weakref.ref(holder))
            return holder
        return made, keep
