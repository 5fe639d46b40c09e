"""`litjudge data fetch NAME`: a dataset from its public source, once, verified.

A card's `[upstream]` table names the repository and the pinned commit, and every file: where it
lives upstream and its sha256. Files are downloaded from GitHub's raw-file address (or from
LITJUDGE_DATA_BASE_URL, a mirror with the same layout: BASE/OWNER/REPO/COMMIT/PATH), written
beside their final name, checked, then moved into place: a file whose checksum differs is refused
with one line and never lands. Files the dataset derives from an upstream one (Confederacy's
ratings table, from the raters' spreadsheet) are made by a registered converter and checked the
same way. Nothing is fetched twice: files already in place with the right checksum are kept.
"""
from __future__ import annotations

import errno
import hashlib
import io
import os
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..core import envs
from ..core.errors import DataError
from .cards import DatasetCard
from .reference import RUBRIC

RAW = "https://raw.githubusercontent.com"
TIMEOUT_S = 60


@dataclass(frozen=True)
class Fetched:
    path: Path
    action: str          # "kept" (already there, checksum right), "downloaded", "derived"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def base_url() -> str:
    return (envs.LITJUDGE_DATA_BASE_URL or RAW).rstrip("/")


def download(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            return response.read()
    except urllib.error.HTTPError as exc:
        raise DataError(f"{url}: HTTP {exc.code} ({exc.reason})") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DataError(f"{url}: not reachable ({reason}); fetch where the network reaches GitHub, or set "
                        "LITJUDGE_DATA_BASE_URL to a mirror") from None


def place(target: Path, data: bytes, expected: str, origin: str) -> None:
    """Write `data` as `target` only if its checksum is the card's (temp file, then rename)."""
    got = sha256(data)
    if got != expected:
        raise DataError(f"{origin}: checksum mismatch for {target.name} (sha256 {got[:16]}..., the card pins "
                        f"{expected[:16]}...): refused, nothing written")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    mask = os.umask(0)
    os.umask(mask)
    os.fchmod(fd, 0o666 & ~mask)                # the user's umask, not the temporary file's 0600
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except BaseException:                       # disk full, a signal: no partial file is left behind
        Path(tmp).unlink(missing_ok=True)
        raise


def confederacy_ratings(sheet: bytes) -> bytes:
    """The raters' spreadsheet ("Rater's Sheet Unsorted": per story its code, system and group, then
    each of the group's two raters' 10 rubric scores) as `;`-separated rows, one per story and
    rater: the first rater of group g is user(2g-1), the second user(2g)."""
    import openpyxl  # the `data` dependency: read only here

    ws = openpyxl.load_workbook(io.BytesIO(sheet), data_only=True, read_only=True)["Rater's Sheet Unsorted"]
    groups: dict[int, list[tuple]] = {}
    for row in ws.iter_rows(min_row=10, values_only=True):
        if row[0] is None or row[2] is None:
            continue
        groups.setdefault(int(row[2]), []).append(row)
    lines = [";".join(("story_id", "story_id_original", *RUBRIC, "user"))]
    for g, rows in sorted(groups.items()):
        for rater, first in ((2 * g - 1, 4), (2 * g, 18)):
            for row in rows:
                scores = [str(int(v)) for v in row[first:first + len(RUBRIC)]]
                lines.append(";".join((str(row[0]), str(row[1]), *scores, f"user{rater}")))
    return ("\n".join(lines) + "\n").encode()


CONVERTERS: dict[str, Callable[[bytes], bytes]] = {"confederacy_ratings": confederacy_ratings}


def fetch(card: DatasetCard, data_root: Path) -> list[Fetched]:
    """Every file of the card under `data_root/card.path`, verified; one line on any failure."""
    up = card.upstream
    if not up:
        raise DataError(f"dataset {card.name!r} names no public source to fetch from (its card has no [upstream])")
    folder = data_root / card.path
    url = f"{base_url()}/{up['repository']}/{up['commit']}"
    done: list[Fetched] = []
    try:
        for local, entry in up.get("files", {}).items():
            target = folder / local
            if target.exists() and sha256(target.read_bytes()) == entry["sha256"]:
                done.append(Fetched(target, "kept"))
                continue
            place(target, download(f"{url}/{entry['upstream']}"), entry["sha256"], f"{url}/{entry['upstream']}")
            done.append(Fetched(target, "downloaded"))
        for local, entry in up.get("derived", {}).items():
            target = folder / local
            if target.exists() and sha256(target.read_bytes()) == entry["sha256"]:
                done.append(Fetched(target, "kept"))
                continue
            source = folder / entry["from"]
            place(target, CONVERTERS[entry["converter"]](source.read_bytes()), entry["sha256"], str(source))
            done.append(Fetched(target, "derived"))
    except OSError as exc:
        what = ("the disk is full (or a file-size limit was hit)" if exc.errno in (errno.ENOSPC, errno.EFBIG)
                else "not writable" if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS) else exc.strerror)
        total = len(up.get("files", {})) + len(up.get("derived", {}))
        raise DataError(f"{exc.filename or folder}: {what}; {len(done)} of {total} "
                        f"files are in place and verified, nothing partial was left: fix that and run `litjudge data "
                        f"fetch {card.name}` again (it fetches only the rest)") from None
    return done


def presence(card: DatasetCard, data_root: Path) -> str:
    """What `data list` says of a card's data: present, missing, or partial (k of n files) when the
    card lists its files and only some are there (an interrupted fetch)."""
    folder = card.folder(str(data_root))
    files = [*card.upstream.get("files", {}), *card.upstream.get("derived", {})] if card.upstream else []
    if not files:
        return "present" if folder.exists() else "missing"
    there = sum((folder / f).is_file() for f in files)
    return "present" if there == len(files) else "missing" if not there else f"partial ({there} of {len(files)} files)"


def missing_hint(card: DatasetCard) -> str:
    """What the error says when a run needs this dataset and it is not there."""
    return f"; run `litjudge data fetch {card.name}`" if card.upstream else ""
