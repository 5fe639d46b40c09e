"""What a piece of code touches under a folder, from Python's audit events (sys.addaudithook): the
way tests show that something was not read or not listed, in this process, without replacing it."""
from __future__ import annotations

import sys
from pathlib import Path


class Watched:
    """The audit `events` whose first argument lies under `prefix`, recorded inside `with`. A hook
    stays for the process (it cannot be removed), so it records only while its block runs."""

    def __init__(self, prefix: Path | str, events: tuple[str, ...]):
        self.prefix, self.events, self.seen, self._on = str(prefix), events, [], False
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: tuple) -> None:
        if self._on and event in self.events and args and str(args[0]).startswith(self.prefix):
            self.seen.append(str(args[0]))

    def __enter__(self) -> Watched:
        self._on = True
        return self

    def __exit__(self, *exc: object) -> None:
        self._on = False
