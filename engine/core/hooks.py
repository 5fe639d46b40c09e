"""Patch points: the places of a real run where a test steps in, to kill the process at a known
point instead of racing it (after the N-th stored verdict; between a provider batch's acceptance and
its record). The run calls them; by default they do nothing. Tests install their own `Hooks` in
the process they start: tests/faults/sitecustomize.py does, where the tests put it on PYTHONPATH,
reading the fault the test asks for from its own variables. Nothing here reads the environment.
(A Ray replica's death is a test's subclass of `Replica`, engine.backends.cluster.)"""
from __future__ import annotations


class Hooks:
    """What a run tells whoever listens, and the one question it asks (`commit_now`)."""

    def commit_now(self, rows: int) -> bool:
        """Whether to commit now, `rows` verdicts into this process's run (committed and buffered):
        True makes the writer commit this row on its own, so a hook that kills after it knows the
        row is stored (rows arriving in one burst would otherwise be committed together, past it)."""
        return False

    def rows_committed(self, rows: int) -> None:
        """`rows` verdicts of this process's run are committed to the store."""

    def batch_submitted(self, recorded: bool) -> None:
        """A provider accepted a batch; `recorded`: the run's ledger holds its id (False: not yet)."""


_installed = Hooks()


def hooks() -> Hooks:
    return _installed


def install(new: Hooks) -> Hooks:
    """Put `new` in place (a test's); returns the one it replaces."""
    global _installed
    old, _installed = _installed, new
    return old
