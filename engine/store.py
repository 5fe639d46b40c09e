"""The result store: one SQLite file (WAL) per run directory, keyed by content key.

Results stream in as each request finishes and are committed in small batches, so a crash loses
at most the batch in flight. A key is written once (INSERT OR IGNORE): re-runs skip finished keys
and a verdict is never computed twice. The `plan` table maps (run, item, order, repeat...) to keys.
"""
from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from .errors import StoreError

LAYOUT_VERSION = "1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY,
    judge TEXT NOT NULL,
    backend TEXT NOT NULL,
    mode TEXT NOT NULL,
    language TEXT NOT NULL,          -- the verdict language spec (JSON), for reparse
    status TEXT NOT NULL CHECK (status IN ('ok', 'unparsed')),
    label TEXT,
    value TEXT,                      -- JSON
    reason TEXT,                     -- why unparsed
    raw TEXT NOT NULL,               -- the verdict text exactly as generated
    analysis TEXT,                   -- analyze mode: the free analysis before the marker
    distribution TEXT,               -- distribution mode: {label: probability}, JSON
    label_mass REAL,                 -- distribution mode: total probability on the labels
    prompt_tokens INTEGER,
    cached_tokens INTEGER,
    output_tokens INTEGER,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS plan (
    run TEXT NOT NULL,
    key TEXT NOT NULL,
    item_id TEXT NOT NULL,
    meta TEXT NOT NULL,              -- JSON of RequestMeta.as_dict()
    PRIMARY KEY (run, item_id, meta)
);
CREATE INDEX IF NOT EXISTS plan_key ON plan(key);
"""

RESULT_COLUMNS = ("key", "judge", "backend", "mode", "language", "status", "label", "value", "reason", "raw",
                  "analysis", "distribution", "label_mass", "prompt_tokens", "cached_tokens", "output_tokens",
                  "created")


@dataclass(frozen=True)
class ResultRow:
    key: str
    judge: str
    backend: str
    mode: str
    language: dict[str, Any]
    status: str
    label: str | None
    value: Any
    reason: str | None
    raw: str
    analysis: str | None = None
    distribution: dict[str, float] | None = None
    label_mass: float | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    output_tokens: int | None = None
    created: float = 0.0


class Store:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(self.path, timeout=30)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(_SCHEMA)
            row = self.db.execute("SELECT v FROM meta WHERE k='layout'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: not a litjudge store ({exc})") from None
        if row is None:
            self.db.execute("INSERT INTO meta VALUES ('layout', ?)", (LAYOUT_VERSION,))
            self.db.commit()
        elif row[0] != LAYOUT_VERSION:
            raise StoreError(f"{self.path}: store layout {row[0]}, this litjudge reads {LAYOUT_VERSION}")

    def close(self) -> None:
        self.db.close()

    def finished_keys(self, keys: Iterable[str] | None = None) -> set[str]:
        if keys is None:
            return {k for (k,) in self.db.execute("SELECT key FROM results")}
        wanted = list(keys)
        found: set[str] = set()
        for i in range(0, len(wanted), 500):
            chunk = wanted[i:i + 500]
            q = f"SELECT key FROM results WHERE key IN ({','.join('?' * len(chunk))})"
            found.update(k for (k,) in self.db.execute(q, chunk))
        return found

    def put_results(self, rows: Iterable[ResultRow]) -> int:
        """Insert finished results in one transaction; keys already stored are left untouched."""
        values = [_encode(r) for r in rows]
        with self.db:
            cur = self.db.executemany(
                f"INSERT OR IGNORE INTO results ({','.join(RESULT_COLUMNS)}) "
                f"VALUES ({','.join('?' * len(RESULT_COLUMNS))})", values)
        return cur.rowcount

    def replace_parse(self, key: str, status: str, label: str | None, value: Any, reason: str | None) -> None:
        """Used by `reparse`: update the parsed fields of a stored raw output, nothing else."""
        self.db.execute("UPDATE results SET status=?, label=?, value=?, reason=? WHERE key=?",
                        (status, label, json.dumps(value), reason, key))

    def put_plan(self, run: str, entries: Iterable[tuple[str, str, dict[str, Any]]]) -> None:
        with self.db:
            self.db.execute("DELETE FROM plan WHERE run=?", (run,))
            self.db.executemany("INSERT OR REPLACE INTO plan VALUES (?, ?, ?, ?)",
                                [(run, key, item, json.dumps(meta, sort_keys=True)) for key, item, meta in entries])

    def results(self, keys: Iterable[str] | None = None) -> Iterator[ResultRow]:
        if keys is None:
            cur = self.db.execute(f"SELECT {','.join(RESULT_COLUMNS)} FROM results ORDER BY key")
            yield from (_decode(r) for r in cur)
            return
        wanted = list(keys)
        for i in range(0, len(wanted), 500):
            chunk = wanted[i:i + 500]
            q = f"SELECT {','.join(RESULT_COLUMNS)} FROM results WHERE key IN ({','.join('?' * len(chunk))})"
            yield from (_decode(r) for r in self.db.execute(q, chunk))

    def plan(self, run: str) -> list[tuple[str, str, dict[str, Any]]]:
        cur = self.db.execute("SELECT key, item_id, meta FROM plan WHERE run=? ORDER BY rowid", (run,))
        return [(k, i, json.loads(m)) for k, i, m in cur]


def _encode(r: ResultRow) -> tuple:
    return (r.key, r.judge, r.backend, r.mode, json.dumps(r.language, sort_keys=True), r.status, r.label,
            json.dumps(r.value), r.reason, r.raw, r.analysis,
            json.dumps(r.distribution) if r.distribution is not None else None, r.label_mass,
            r.prompt_tokens, r.cached_tokens, r.output_tokens, r.created or time.time())


def _decode(row: tuple) -> ResultRow:
    d = dict(zip(RESULT_COLUMNS, row))
    d["language"] = json.loads(d["language"])
    d["value"] = json.loads(d["value"]) if d["value"] is not None else None
    d["distribution"] = json.loads(d["distribution"]) if d["distribution"] else None
    return ResultRow(**d)
