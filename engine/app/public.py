"""Paths made fit to publish: what a run records of the user's disk (the data file's absolute path,
a local model's folder, a replay file) never reaches a dataset card or results.json as an absolute
path. A path under the run config's folder is named relative to it (as the user wrote it); any other
absolute path keeps only its last name, `<local path>/NAME`. URLs and relative paths stay as they are."""
from __future__ import annotations

import re
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from ..core.config import source_file

# An absolute path inside a string: "/a/b" (not a URL's "//", not "1/2" or "a/b"), or "C:\a\b".
ABSOLUTE = re.compile(r"(?<![\w/.~<-])/(?!/)[^\s\"'`<>|,;()\[\]{}]+|(?<![\w])[A-Za-z]:\\[^\s\"'`<>|,;()\[\]{}]*")
REDACTED = "<local path>"
WHOLE_PATH = re.compile(r"(replay:)?(/[^\n]*[^\s/])/?")       # a value that is one absolute path, nothing else


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
    """`value` (text, or a JSON-like record of them) with every absolute path in it made public: a
    value that is one path (a `replay:` one too) whole, spaces and all (`/home/Jane Doe/...` was cut
    at the space, publishing the rest), else each path found in the text."""
    if isinstance(value, str):
        whole = WHOLE_PATH.fullmatch(value)
        if whole:
            return (whole.group(1) or "") + public_path(whole.group(2), base)
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
        file = source_file(source)
        return file.resolve().parent if file is not None else None
    except (OSError, RuntimeError):
        return None


def public_names(names: list[str], base: Path | None = None) -> dict[str, str]:
    """Judge names as they may be published, each its own: the path of a `replay:` file or a local
    model's folder made public whole (a path holding a space was cut at it, publishing the rest),
    and two that would read alike (two folders' outputs.jsonl) told apart by as many of their
    folders as it takes (they were merged: one judge's tables pooled two)."""
    def named(name: str, depth: int) -> str:
        rest = name.removeprefix("replay:")
        path = PurePosixPath(rest)
        if not path.is_absolute():
            return redact(name, base)
        public = public_path(rest, base)
        if public.startswith(REDACTED) and depth > 1:
            public = f"{REDACTED}/{PurePosixPath(*path.parts[-depth:]).as_posix()}"
        return ("replay:" if name.startswith("replay:") else "") + public
    out = {n: named(n, 1) for n in names}
    for depth in range(2, 1 + max((len(PurePosixPath(n).parts) for n in names), default=1)):
        clash = {n for n in names if sum(v == out[n] for v in out.values()) > 1}
        if not clash:
            break
        out |= {n: named(n, depth) for n in clash}
    return out
