"""Paths made fit to publish: what a run records of the user's disk (the data file's absolute path,
a local model's folder, a replay file) never reaches a dataset card or results.json as an absolute
path. A path under the run config's folder is named relative to it (as the user wrote it); any other
absolute path keeps only its last name, `<local path>/NAME`. URLs and relative paths stay as they are."""
from __future__ import annotations

import re
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

# An absolute path inside a string: "/a/b" (not a URL's "//", not "1/2" or "a/b"), or "C:\a\b".
ABSOLUTE = re.compile(r"(?<![\w/.~<-])/(?!/)[^\s\"'`<>|,;()\[\]{}]+|(?<![\w])[A-Za-z]:\\[^\s\"'`<>|,;()\[\]{}]*")
REDACTED = "<local path>"


def public_path(path: str, base: Path | None = None) -> str:
    """One absolute path as it may be published: relative to `base` when under it, else `<local path>/NAME`."""
    pure = PureWindowsPath(path) if re.match(r"[A-Za-z]:\\", path) else PurePosixPath(path)
    if base is not None and isinstance(pure, PurePosixPath):
        try:
            return PurePosixPath(*Path(pure).resolve().relative_to(base.resolve()).parts).as_posix() or "."
        except (ValueError, OSError):
            pass
    return f"{REDACTED}/{pure.name}" if pure.name else REDACTED


def redact(value: Any, base: Path | None = None) -> Any:
    """`value` (text, or a JSON-like record of them) with every absolute path in it made public."""
    if isinstance(value, str):
        return ABSOLUTE.sub(lambda m: public_path(m.group(0), base), value)
    if isinstance(value, dict):
        return {k: redact(v, base) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v, base) for v in value]
    return value


def config_folder(config: Any) -> Path | None:
    """The folder of the config file a run was read from (the `source` its config records; a task's
    names its file first), where data files are named from; None for a run without a file
    (`litjudge.judge`). Resolved against the working folder, the run's own while it runs."""
    source = str((config or {}).get("source") or "") if isinstance(config, dict) else ""
    if not source:
        return None
    try:
        return Path(source.split(" (task ")[0]).expanduser().resolve().parent
    except (OSError, RuntimeError):
        return None
