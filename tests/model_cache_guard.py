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

from pathlib import Path

from litjudge.engine.backends.local.models import ALIASES, CONVERSION, conversion_of

WATCHED = ("models", "wheels")
PREPARE = ".venv/bin/litjudge judges --prepare"


def unprepared(model_cache: Path) -> list[str]:
    """The registry judges not prepared by the current conversion in `model_cache`."""
    return [name for name in ALIASES if conversion_of(model_cache / "models" / name) != CONVERSION]


def refusal(model_cache: Path) -> str | None:
    """The one line a session that would have to prepare judges stops with (None: all there)."""
    missing = unprepared(model_cache)
    if not missing:
        return None
    return (f"the test suite runs the registry judges from the model cache {model_cache}, and "
            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not prepared there: `make test` "
            f"prepares them first, or run `{PREPARE}` (the tests never write into that cache)")


def snapshot(model_cache: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under the cache's models/ and wheels/: its size and modification time."""
    seen: dict[str, tuple[int, int]] = {}
    for top in WATCHED:
        root = model_cache / top
        for path in [root, *root.rglob("*")] if root.exists() else []:
            st = path.lstat()
            seen[str(path.relative_to(model_cache))] = (st.st_size, st.st_mtime_ns)
    return seen


def changes(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    """What differs, a line each: added, removed or changed (a folder changes when its entries do)."""
    return ([f"added {p}" for p in sorted(after.keys() - before.keys())]
            + [f"removed {p}" for p in sorted(before.keys() - after.keys())]
            + [f"changed {p}" for p in sorted(before.keys() & after.keys()) if before[p] != after[p]])
