"""A judge folder's checksum (its weights and tokenizer: the fingerprint in every request key),
hashed once and then remembered.

Hashing every weight file at every resolution cost each run, plan and report of a judge its size
read from disk: 0.2 s for the default 135M judge, 3.7 s for Qwen2.5-Coder 1.5B (EPYC Zen 3), so
about 10 s for a 7B one. The checksum is kept in litjudge's cache folder against each file's size,
inode, modification and change times. A write moves the change time, which no tool can set back
(`touch -d` and `os.utime` move it too), so a remembered checksum stands only while every file is
as it was hashed. Files changed less than RACY_S before the hashing are not remembered: a second
write within the file system's clock tick would leave their times as they were (git's "racy" index
entries, handled the same way). The limit, git's too: a write through a shared memory map moves
the times only at its page's first write since the page was last written back, so a file mapped
for writing and written while it was hashed can change again unseen (found by a hostile test:
nothing in litjudge, vLLM or safetensors maps weights for writing)."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from ...core.paths import cache_dir, file_identity, sha256_file

MARKER = "litjudge-model.json"
HASHED = (".safetensors", ".json", ".jinja", ".model")
RACY_S = 2.0


def _hashed_files(folder: Path) -> list[Path]:
    """The regular files (a link's target) the checksum covers: a folder named `x.json` or a link to
    nothing is not one (they raised deep in the hashing)."""
    return sorted(p for p in folder.iterdir() if p.suffix in HASHED and p.name != MARKER and p.is_file())


def _identities(paths: list[Path]) -> list[list[Any]]:
    """[name, size, inode, device, mtime, ctime] of each file (a list each: as JSON reads it back)."""
    return [[p.name, *file_identity(p)] for p in paths]


def _memo_path(folder: Path) -> Path:
    name = hashlib.sha256(str(folder).encode()).hexdigest()[:32]
    return cache_dir() / "checksums" / f"{name}.json"


def _remembered(memo: Path, folder: Path, files: list[list[Any]]) -> str | None:
    try:
        known = json.loads(memo.read_text())
        if known["folder"] == str(folder) and known["files"] == files:
            return str(known["checksum"])
    except (OSError, ValueError, KeyError, TypeError):
        pass                                           # none, unreadable or damaged: hash again
    return None


def _remember(memo: Path, folder: Path, files: list[list[Any]], checksum: str) -> None:
    """Written whole (a temporary file renamed over it); a cache folder that cannot be written
    only means hashing again next time."""
    with contextlib.suppress(OSError):
        memo.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=memo.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump({"folder": str(folder), "files": files, "checksum": checksum}, fh)
            os.replace(tmp, memo)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def folder_checksum(folder: Path) -> str:
    """sha256 over the weight files and the tokenizer/config, in name order."""
    folder = folder.resolve()
    paths = _hashed_files(folder)
    files = _identities(paths)
    memo = _memo_path(folder)
    known = _remembered(memo, folder, files)
    if known is not None:
        return known
    started = time.time_ns()
    digest = hashlib.sha256()
    for p in paths:
        digest.update(os.fsencode(p.name))             # a name that is not UTF-8 too, as the file system has it
        sha256_file(p, digest)
    checksum = digest.hexdigest()
    settled = started - int(RACY_S * 1e9)
    if _identities(paths) == files and all(mtime < settled and ctime < settled for *_, mtime, ctime in files):
        _remember(memo, folder, files, checksum)
    return checksum
