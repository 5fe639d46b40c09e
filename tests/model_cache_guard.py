"""The test session reads the user's model cache and writes nothing there.

The suite runs every registry judge from the model cache (session_settings keeps it: converting Qwen
1.5B takes minutes and 8 GB). On an empty cache the tests used to download and convert the judges
into it themselves: measured on a fresh EPYC Zen 3, 6.8 GB under ~/.cache/litjudge (5.1 GB of
converted judges, 1.7 GB of their wheels) written by `make test`, about four minutes of its 21 spent
there, inside the tests that first asked. `make test` now prepares them before the session
(`litjudge judges --prepare`, as `make run` does the default judge); the session refuses to start,
in one line, when one is missing, and fails when anything under the cache's models/ or wheels/
changed by its end."""
from __future__ import annotations

import os
from pathlib import Path

from litjudge.engine.backends.local.models import ALIASES, CONVERSION, conversion_of
from litjudge.engine.core.paths import FileIdentity, file_identity

WATCHED = ("models", "wheels")
PREPARE = ".venv/bin/litjudge judges --prepare"


def unprepared(model_cache: Path) -> list[str]:
    """The registry judges a session would prepare in `model_cache` (none, or by an older conversion:
    `resolve_judge`'s own test; a newer litjudge's folder counts as prepared, as it does there)."""
    stamps = {name: conversion_of(model_cache / "models" / name) for name in ALIASES}
    return [name for name, stamp in stamps.items() if stamp is None or stamp < CONVERSION]


def refusal(model_cache: Path) -> str | None:
    """The one line a session that would have to prepare judges stops with (None: all there)."""
    missing = unprepared(model_cache)
    if not missing:
        return None
    return (f"the test suite runs the registry judges from the model cache {model_cache}, and "
            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not prepared there: `make test` "
            f"prepares them first, or run `{PREPARE}` (the tests never write into that cache)")


def snapshot(model_cache: Path) -> dict[str, FileIdentity]:
    """Every file and folder under the cache's models/ and wheels/, linked folders followed: its
    `file_identity` (a write shows, whatever size and time are put back). A file gone while it is
    listed (another process preparing a judge) is left out, not an error."""
    seen: dict[str, FileIdentity] = {}
    for top in WATCHED:
        for folder, dirs, files in os.walk(model_cache / top, followlinks=True):
            for name in ["", *dirs, *files]:
                path = Path(folder, name)
                try:
                    seen[str(path.relative_to(model_cache))] = file_identity(path)
                except OSError:
                    continue
    return seen


def changes(before: dict[str, FileIdentity], after: dict[str, FileIdentity]) -> list[str]:
    """What differs, a line each: added, removed or changed (a folder changes when its entries do)."""
    return ([f"added {p}" for p in sorted(after.keys() - before.keys())]
            + [f"removed {p}" for p in sorted(before.keys() - after.keys())]
            + [f"changed {p}" for p in sorted(before.keys() & after.keys()) if before[p] != after[p]])
