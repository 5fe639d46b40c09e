"""The annotation store: RUN/annotations.sqlite (stdlib sqlite3, WAL, every write committed before
the answer leaves the server, so a kill -9 loses no saved label). It keeps the draw design (every
draw and its probability, fixed when the queue starts), each submission under its idempotency key
(a retried or doubled submit is stored once), skips, undos and the locks that keep two annotators
off one cluster."""
from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ...core.errors import ConfigError, StoreError

FILE = "annotations.sqlite"
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS draws (draw INTEGER PRIMARY KEY, cluster TEXT NOT NULL, probability REAL NOT NULL);
CREATE TABLE IF NOT EXISTS submissions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE, annotator TEXT NOT NULL, cluster TEXT NOT NULL,
    kind TEXT NOT NULL, time TEXT NOT NULL, source TEXT NOT NULL, shown TEXT NOT NULL DEFAULT '',
    undone INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS labels (key TEXT NOT NULL, item TEXT NOT NULL, label TEXT NOT NULL, PRIMARY KEY (key, item));
CREATE TABLE IF NOT EXISTS locks (cluster TEXT NOT NULL, annotator TEXT NOT NULL, expires REAL NOT NULL,
    PRIMARY KEY (cluster, annotator));
"""


@dataclass(frozen=True)
class Row:
    """One exported label: who answered what, when, and the draw that asked for it."""

    annotator: str
    time: str
    cluster: str
    item: str
    label: str
    draw: int                 # the cluster's first draw index (-1: a cluster the design never drew)
    probability: float        # its draw probability
    times_drawn: int
    key: str
    source: str
    shown: str                # pairwise: the order the texts were shown in ("ab" or "ba")
    standing: bool = True     # the annotator's latest answer to the item (False: a later one replaced it)


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


class Locked(Exception):
    """A submit for a cluster another annotator holds (its lock not timed out): one line, status 409."""


class KeyReused(Exception):
    """A submission key stored before with other content (annotator, cluster, kind or answers): a
    retry must repeat its submission, and an edited one needs a new key. One line, status 409."""


class Labels:
    """The store of one run's queue. Thread-safe (one connection behind a lock: the server's
    worker threads share it)."""

    def __init__(self, path: Path, clusters: Sequence[str], probability: np.ndarray, draws: np.ndarray,
                 design: dict):
        self.path = Path(path)
        try:
            self.db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=10)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.executescript(SCHEMA)
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path}: not a readable annotation store ({e}); move it aside to start a new "
                             "queue") from e
        self.lock = threading.Lock()
        self.clusters = tuple(clusters)
        with self.lock, self.db:
            stored = self.db.execute("SELECT value FROM meta WHERE key = 'design'").fetchone()
            if stored is None:
                self.db.execute("BEGIN IMMEDIATE")
                self.db.execute("INSERT INTO meta VALUES ('design', ?)", (json.dumps(design, sort_keys=True),))
                self.db.executemany("INSERT INTO draws VALUES (?, ?, ?)",
                                    [(k, self.clusters[int(c)], float(probability[int(c)]))
                                     for k, c in enumerate(draws)])
                self.db.execute("COMMIT")
            elif json.loads(stored[0]) != design:
                was = json.loads(stored[0])
                diff = ", ".join(f"{k} {was.get(k)} (now {design.get(k)})" for k in sorted(design)
                                 if was.get(k) != design.get(k))
                raise ConfigError(f"this queue was started with {diff}: start it with the same settings, or move "
                                  f"{FILE} aside for a new queue", where=str(self.path))
        rows = self.db.execute("SELECT draw, cluster, probability FROM draws ORDER BY draw").fetchall()
        self.draw_clusters = [r[1] for r in rows]
        self.first_draw: dict[str, int] = {}
        for k, c in enumerate(self.draw_clusters):
            self.first_draw.setdefault(c, k)
        self.times_drawn = {c: self.draw_clusters.count(c) for c in self.first_draw}
        self.probability = {r[1]: r[2] for r in rows}
        self.order = list(self.first_draw)            # the clusters to read, in the order of their first draw

    def close(self) -> None:
        self.db.close()

    def meta(self, key: str) -> str | None:
        """A value the store keeps beside its design (None where it has none)."""
        with self.lock:
            row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self.lock:
            self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    # -- what is labelled -------------------------------------------------------------------------
    def latest(self) -> dict[tuple[str, str], tuple[str, str]]:
        """(annotator, item) -> (label, cluster): each annotator's latest standing answer per item."""
        with self.lock:
            rows = self.db.execute(
                "SELECT s.annotator, l.item, l.label, s.cluster FROM submissions s JOIN labels l ON l.key = s.key "
                "WHERE s.kind = 'label' AND s.undone = 0 ORDER BY s.seq").fetchall()
        return {(a, item): (label, cluster) for a, item, label, cluster in rows}

    def answered(self) -> dict[tuple[str, str], set[str]]:
        """(annotator, cluster) -> the items of it they have a standing answer to."""
        out: dict[tuple[str, str], set[str]] = {}
        for (a, item), (_, cluster) in self.latest().items():
            out.setdefault((a, cluster), set()).add(item)
        return out

    def done_by(self, items_of: dict[str, tuple[str, ...]], partly: bool = False) -> dict[str, set[str]]:
        """cluster -> the annotators who answered every one of its items (`partly`: any of them, as
        an import may: they hold one of its `per_item` places all the same)."""
        out: dict[str, set[str]] = {}
        for (a, cluster), items in self.answered().items():
            if partly or set(items_of.get(cluster, ())) <= items:
                out.setdefault(cluster, set()).add(a)
        return out

    def skipped_by(self, annotator: str) -> set[str]:
        with self.lock:
            rows = self.db.execute("SELECT cluster FROM submissions WHERE annotator = ? AND kind = 'skip' AND undone = 0",
                                   (annotator,)).fetchall()
        return {r[0] for r in rows}

    # -- assignment -------------------------------------------------------------------------------
    def next_cluster(self, annotator: str, items_of: dict[str, tuple[str, ...]], per_item: int,
                     lock_seconds: float) -> str | None:
        """The first cluster, in draw order, this annotator has not answered whole nor skipped, that
        fewer than `per_item` annotators have answered (wholly or in part: an import of some of a
        story's tests took a place, and the story went to another annotator too) or hold; it is
        locked for them for `lock_seconds`."""
        done, placed = self.done_by(items_of), self.done_by(items_of, partly=True)
        skipped = self.skipped_by(annotator)
        with self.lock:
            t = time.time()
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self.db.execute("DELETE FROM locks WHERE expires < ?", (t,))
                held: dict[str, set[str]] = {}
                for c, a in self.db.execute("SELECT cluster, annotator FROM locks").fetchall():
                    held.setdefault(c, set()).add(a)
                chosen = next((c for c in self.order if c not in skipped
                                and _open_to(annotator, c, done, placed, held, per_item)), None)
                # one story at a time: the one they held before (an undo shows another) is free for others
                self.db.execute("DELETE FROM locks WHERE annotator = ? AND cluster != ?", (annotator, chosen or ""))
                if chosen is not None:
                    self.db.execute("INSERT OR REPLACE INTO locks VALUES (?, ?, ?)", (chosen, annotator, t + lock_seconds))
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        return chosen

    def reading(self) -> dict[str, set[str]]:
        """cluster -> the annotators holding a live lock on it (reading it on the page now)."""
        with self.lock:
            rows = self.db.execute("SELECT cluster, annotator FROM locks WHERE expires >= ?", (time.time(),)).fetchall()
        out: dict[str, set[str]] = {}
        for cluster, annotator in rows:
            out.setdefault(cluster, set()).add(annotator)
        return out

    def holds(self, annotator: str, cluster: str) -> bool:
        with self.lock:
            row = self.db.execute("SELECT expires FROM locks WHERE cluster = ? AND annotator = ?",
                                  (cluster, annotator)).fetchone()
        return row is not None and row[0] >= time.time()

    # -- writes -----------------------------------------------------------------------------------
    def submit(self, key: str, annotator: str, cluster: str, labels: dict[str, str], *, kind: str = "label",
               source: str = "web", shown: str = "", at: str | None = None, per_item: int | None = None) -> bool:
        """Store one submission; False when its key was stored before (a retry: counted once). With
        `per_item` (a submit from the page) it raises `Locked` when the cluster is held by others
        (`_refuse_if_held`), checked in the same transaction as the write."""
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                if per_item is not None:
                    self._refuse_if_held(key, annotator, cluster, per_item)
                cur = self.db.execute("INSERT OR IGNORE INTO submissions (key, annotator, cluster, kind, time, source, "
                                      "shown) VALUES (?, ?, ?, ?, ?, ?, ?)",
                                      (key, annotator, cluster, kind, at or now(), source, shown))
                fresh = cur.rowcount == 1
                if not fresh:
                    self._refuse_if_changed(key, annotator, cluster, kind, labels)
                if fresh:
                    self.db.executemany("INSERT INTO labels VALUES (?, ?, ?)", [(key, i, v) for i, v in labels.items()])
                    self.db.execute("DELETE FROM locks WHERE cluster = ? AND annotator = ?", (cluster, annotator))
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        return fresh

    def _refuse_if_changed(self, key: str, annotator: str, cluster: str, kind: str, labels: dict[str, str]) -> None:
        stored = self.db.execute("SELECT annotator, cluster, kind FROM submissions WHERE key = ?", (key,)).fetchone()
        answers = dict(self.db.execute("SELECT item, label FROM labels WHERE key = ?", (key,)).fetchall())
        if tuple(stored) != (annotator, cluster, kind) or answers != labels:
            raise KeyReused(f"submission key {key[:40]!r} was stored before with other content (annotator, story or "
                            "answers): a changed submission needs a new key")

    def _refuse_if_held(self, key: str, annotator: str, cluster: str, per_item: int) -> None:
        """Locked when the submitter holds no live lock on `cluster` and has not answered it, while
        the others holding or having answered it fill its `per_item` places (the queue's own rule
        for handing it out: a story with its K answers took a K+1th before); a timed-out lock holds
        nothing; a retry of a stored key passes."""
        if self.db.execute("SELECT 1 FROM submissions WHERE key = ?", (key,)).fetchone():
            return
        others = dict(self.db.execute("SELECT annotator, expires FROM locks WHERE cluster = ? AND expires >= ?",
                                      (cluster, time.time())).fetchall())
        if annotator in others or self.db.execute("SELECT 1 FROM submissions WHERE cluster = ? AND annotator = ? AND "
                                                  "kind = 'label' AND undone = 0", (cluster, annotator)).fetchone() \
                or self._places_taken(cluster, annotator) < per_item:
            return
        if others:
            until = time.strftime("%H:%M:%S", time.localtime(max(others.values())))
            raise Locked(f"cluster {cluster!r} is being read by another annotator (locked until {until}): ask for "
                         "the next one (/api/next)")
        raise Locked(f"cluster {cluster!r} has been answered by its {per_item} annotator{'s' * (per_item != 1)} (the "
                     "queue's annotators per item): ask for the next one (/api/next)")

    def undo(self, annotator: str, lock_seconds: float, per_item: int) -> tuple[str | None, str | None, dict[str, str]]:
        """Take back this annotator's latest answer or skip on the page: its cluster (None: nothing
        to undo), which answer of theirs to it still stands, so it is not shown again: "earlier"
        (two tabs answered it twice), "later" (an import after it: the undo changed no answer), or
        None; and the answers taken back (item -> label; none for a skip), which the page shows
        again to be changed (it cleared them: a new user who undid to fix one answer gave all again).
        A cluster shown again is locked for them at once (another's /api/next was handed it before
        their page asked) unless others fill its `per_item` places (a skipped one answered since)."""
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                row = self.db.execute("SELECT seq, cluster, key FROM submissions WHERE annotator = ? AND undone = 0 "
                                      "AND source = 'web' ORDER BY seq DESC LIMIT 1", (annotator,)).fetchone()
                if row is None:
                    self.db.execute("COMMIT")
                    return None, None, {}
                self.db.execute("UPDATE submissions SET undone = 1 WHERE seq = ?", (row[0],))
                taken = dict(self.db.execute("SELECT item, label FROM labels WHERE key = ?", (row[2],)).fetchall())
                standing = self.db.execute("SELECT s.seq, l.item FROM submissions s JOIN labels l ON l.key = s.key "
                                           "WHERE s.annotator = ? AND s.cluster = ? AND s.kind = 'label' AND "
                                           "s.undone = 0", (annotator, row[1])).fetchall()   # theirs that stand
                other, kept = max((seq for seq, _ in standing), default=None), {item for _, item in standing}
                # an answer of theirs that stands (an import of part of the story) is not offered as the one taken
                # back: the page preselected the undone Yes over a standing imported No, and said "no answer changed"
                left = {i: v for i, v in taken.items() if i not in kept}
                stands = None if other is None or left else "later" if other > row[0] else "earlier"
                if stands is None and self._places_taken(row[1], annotator) < per_item:
                    self.db.execute("DELETE FROM locks WHERE annotator = ?", (annotator,))
                    self.db.execute("INSERT INTO locks VALUES (?, ?, ?)", (row[1], annotator, time.time() + lock_seconds))
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        return row[1], stands, left

    def _places_taken(self, cluster: str, annotator: str) -> int:
        """How many others hold `cluster` (a live lock) or have an answer to it standing (in part too)."""
        return len({r[0] for r in self.db.execute(
            "SELECT annotator FROM locks WHERE cluster = ? AND expires >= ? AND annotator != ? UNION SELECT annotator "
            "FROM submissions WHERE cluster = ? AND kind = 'label' AND undone = 0 AND annotator != ?",
            (cluster, time.time(), annotator, cluster, annotator))})

    def skipped_open(self, annotator: str, items_of: dict[str, tuple[str, ...]], per_item: int) -> list[str]:
        """The clusters this annotator skipped that the queue would give them but for the skip, in
        draw order: not one they answered since (another tab), nor one whose `per_item` places
        others have filled."""
        done, placed, held = self.done_by(items_of), self.done_by(items_of, partly=True), self.reading()
        skipped = self.skipped_by(annotator)
        return [c for c in self.order if c in skipped and _open_to(annotator, c, done, placed, held, per_item)]

    def held_for(self, annotator: str, items_of: dict[str, tuple[str, ...]], per_item: int) -> int:
        """How many stories others hold open that come back to this annotator when those locks run
        out unanswered (a closed tab): not one they answered or skipped, nor one kept for others
        (answered in part by an import's annotator, or its `per_item` places filled)."""
        done, placed, held = self.done_by(items_of), self.done_by(items_of, partly=True), self.reading()
        skipped = self.skipped_by(annotator)
        return sum(1 for c, who in held.items() if annotator not in who and c not in skipped
                   and _open_to(annotator, c, done, placed, {}, per_item))

    def unskip(self, annotator: str, items_of: dict[str, tuple[str, ...]], per_item: int) -> list[str]:
        """Bring back the stories this annotator skipped that are open to them (`skipped_open`; they
        are offered again, in draw order): alone on a queue, the estimates wait at their first skip,
        and undo reached it only by taking back every later answer. The clusters brought back; none
        a second time."""
        back = self.skipped_open(annotator, items_of, per_item)
        with self.lock:
            self.db.executemany("UPDATE submissions SET undone = 1 WHERE annotator = ? AND cluster = ? AND "
                                "kind = 'skip' AND undone = 0", [(annotator, c) for c in back])
        return back

    # -- reads for the estimate and the export ------------------------------------------------------
    def rows(self) -> list[Row]:
        """Every label submitted and not undone (skips left out), oldest first, each marked
        `standing` where it is its annotator's latest answer to the item (the one every estimate
        reads): an answer replaced later (a second tab, an edited import) is kept, as history, and
        is not standing. Their `time`s may be equal (an import keeps the file's): the order is the
        store's."""
        with self.lock:
            got = self.db.execute(
                "SELECT s.annotator, s.time, s.cluster, l.item, l.label, s.key, s.source, s.shown FROM submissions s "
                "JOIN labels l ON l.key = s.key WHERE s.kind = 'label' AND s.undone = 0 ORDER BY s.seq, l.item").fetchall()
        last = {(a, item): n for n, (a, _, _, item, *_) in enumerate(got)}
        return [Row(a, t, c, item, label, self.first_draw.get(c, -1), self.probability.get(c, float("nan")),
                    self.times_drawn.get(c, 0), key, source, shown, last[(a, item)] == n)
                for n, (a, t, c, item, label, key, source, shown) in enumerate(got)]

    def annotators(self) -> list[str]:
        with self.lock:
            return [r[0] for r in self.db.execute("SELECT DISTINCT annotator FROM submissions ORDER BY annotator")]


def _open_to(annotator: str, cluster: str, done: dict[str, set[str]], placed: dict[str, set[str]],
             held: dict[str, set[str]], per_item: int) -> bool:
    """Whether the queue may give `cluster` to `annotator`: they have not answered it whole, and it
    is theirs already (answered in part, or held) or has fewer than `per_item` annotators."""
    if annotator in done.get(cluster, set()):
        return False
    taken = placed.get(cluster, set()) | held.get(cluster, set())
    return annotator in taken or len(taken) < per_item


def open_labels(run: Path, clusters: Iterable[str], probability: np.ndarray, draws: np.ndarray, design: dict) -> Labels:
    return Labels(Path(run) / FILE, tuple(clusters), probability, draws, design)


def stored_design(run: Path) -> dict[str, Any]:
    """The design an existing store was started with ({} for a new queue)."""
    design = stored_meta(run, "design")
    return json.loads(design) if design else {}


def stored_meta(run: Path, key: str) -> str | None:
    """A value of the run's queue store's meta table, read without opening the store for writing
    (None where there is no store, no such value, or no readable store)."""
    path = Path(run) / FILE
    if not path.exists():
        return None
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        finally:
            db.close()
    except sqlite3.DatabaseError:
        return None
    return None if row is None else str(row[0])


def verdicts_fingerprint(verdicts: pl.DataFrame) -> str:
    """What the run's judges said, item by item (each verdict's content key, which names the judge
    and the request, its status and label): a run judged again into the folder differs, even where
    the queue's draws do not (a uniform draw, the same uncertainty) and only its judges' totals move."""
    verdicts = verdicts.select([c for c in ("key", "item_id", "status", "label") if c in verdicts.columns])
    text = verdicts.select(pl.all().cast(pl.Utf8)).sort(verdicts.columns).write_csv()
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def stale_queue(run: Path, verdicts: pl.DataFrame) -> str | None:
    """What a run that just wrote `verdicts` says of the folder's annotation queue drawn from other
    verdicts (None where there is none, or it was drawn from these): its page is refused from its
    next start, and a server running now goes on with the old queue."""
    drawn_from = stored_meta(run, "verdicts")
    if drawn_from is None or drawn_from == verdicts_fingerprint(verdicts):
        return None
    return (f"litjudge: warning: {run} holds an annotation queue drawn from other verdicts than this run's: its page "
            f"is refused from its next start (one running now keeps the old queue); `litjudge annotate {run} --export "
            "FILE` still writes its labels")
