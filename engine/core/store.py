"""The result store: one SQLite file (WAL) per run directory, keyed by content key.

Results stream in as each request finishes and are committed in small batches, so a crash loses
at most the batch in flight. A key is written once (INSERT OR IGNORE): re-runs skip finished keys
and a verdict is never computed twice. The `plan` table maps (run, item, order, repeat...) to keys.
"""
from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from logging import WARNING as WARN
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson

from .console import say
from .errors import REBUILD_STORE, StoreError, lock_wait, store_failure
from .paths import writable
from .store_rows import RESULT_COLUMNS, ResultRow, decode_row, encode_row

LAYOUT_VERSION = "2"      # 2: the plan table without its wide primary key (layout 1 stores are upgraded)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY, judge TEXT NOT NULL, backend TEXT NOT NULL, mode TEXT NOT NULL,
    language TEXT NOT NULL,          -- the verdict language spec (JSON), for reparse
    status TEXT NOT NULL CHECK (status IN ('ok', 'unparsed')),
    label TEXT,
    value TEXT,                      -- JSON
    reason TEXT,                     -- why unparsed
    raw TEXT NOT NULL,               -- the verdict text exactly as generated
    analysis TEXT,                   -- analyze mode: the free analysis before the marker
    distribution TEXT,               -- distribution mode: {label: probability}, JSON
    label_mass REAL,                 -- distribution (or analyze) mode: total probability on the labels
    prompt_tokens INTEGER, cached_tokens INTEGER, output_tokens INTEGER,
    created REAL NOT NULL,
    failure TEXT,                    -- the backend's error where it gave no answer (never parsed)
    cut INTEGER,                     -- 1: the output was cut at max_tokens
    analysis_distribution TEXT       -- analyze mode: {label: probability} after the analysis, JSON
);
CREATE TABLE IF NOT EXISTS plan (  -- derived: every run writes its own plan rows again
    run TEXT NOT NULL, key TEXT NOT NULL, item_id TEXT NOT NULL,
    meta TEXT NOT NULL               -- JSON of RequestMeta.as_dict()
);
CREATE INDEX IF NOT EXISTS plan_run ON plan(run);
CREATE TABLE IF NOT EXISTS batches (  -- provider batches: recorded before submission, so a restart polls, never resubmits
    local_id TEXT PRIMARY KEY,
    batch_id TEXT,                   -- the provider's id, once it accepted the batch
    fingerprint TEXT NOT NULL,       -- the judge (API model and endpoint) whose requests it holds
    provider TEXT NOT NULL,
    status TEXT NOT NULL,            -- submitting | open | collected | cancelled
    created REAL NOT NULL,
    keys TEXT NOT NULL               -- JSON list of the content keys (the requests' custom_id)
);
"""

# A run's plan rows joined with their results: the first three columns the plan's, the rest the results'.
PLAN_RESULT_COLUMNS = ("key", "item_id", "meta", "status", "label", "value", "reason", "distribution", "label_mass",
                       "analysis", "raw", "analysis_distribution", "cut")

# Columns added since layout 2: added in place (read as NULL from an old store opened read-only).
ADDED_COLUMNS = {"failure": "TEXT", "cut": "INTEGER", "analysis_distribution": "TEXT"}


@dataclass(frozen=True)
class BatchRecord:
    """A provider batch of one judge's requests, as the store's ledger holds it."""

    local_id: str
    batch_id: str | None
    fingerprint: str
    provider: str
    status: str
    created: float
    keys: tuple[str, ...]


KEYS_PER_QUERY = 5000    # parameters of one `key IN (...)` query (SQLite allows 32,766)


class Store:
    """Every operation translates SQLite's failures into one line: locked (after waiting, with a
    message), corrupt (with the recovery), disk full or not writable (nothing stored is lost)."""

    def __init__(self, path: Path, create: bool = True, readonly: bool = False):
        self.path = Path(path)
        self.left_aside = False      # a shared cache that failed once: the invocation's later judges skip it
        if not create and not self.path.exists():
            raise StoreError(f"{self.path.parent}: not a litjudge run (no store.sqlite)")
        if self.path.is_dir():
            raise StoreError(f"{self.path}: is a folder, where the store's file belongs: move it aside")
        self._missing: frozenset[str] = frozenset()    # added columns an old store opened read-only lacks (read as NULL)
        if readonly:
            self._open_readonly()
            return
        with self._guard():
            if create:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(self.path, timeout=1.0)

        def setup():
            # another program's database (tables, none of them litjudge's meta): had its tables altered,
            # ours added and its journal made WAL, without a word, when given as --cache
            tables = {row[0] for row in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "meta" not in tables and (tables or not create):
                raise self._not_a_store()
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("PRAGMA cache_size=-262144")          # 256 MiB of pages: a million keys insert fast
            self.db.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
            found = self.db.execute("SELECT v FROM meta WHERE k='layout'").fetchone()
            if found is not None and found[0] == "1":               # the plan is derived: rebuild its table
                with self.db:
                    self.db.execute("DROP TABLE IF EXISTS plan")
                    self.db.execute("UPDATE meta SET v=? WHERE k='layout'", (LAYOUT_VERSION,))
                found = (LAYOUT_VERSION,)
            self.db.executescript(_SCHEMA)
            have = {row[1] for row in self.db.execute("PRAGMA table_info(results)")}
            for name, kind in ADDED_COLUMNS.items():           # a store written before these columns
                if name not in have:
                    self.db.execute(f"ALTER TABLE results ADD COLUMN {name} {kind}")
            if found is None:
                self.db.execute("INSERT INTO meta VALUES ('layout', ?)", (LAYOUT_VERSION,))
                self.db.commit()
            return found
        try:
            row = self._write(setup)
        except StoreError:
            self.db.close()
            raise
        if row is not None and row[0] != LAYOUT_VERSION:
            raise StoreError(f"{self.path}: store layout {row[0]}, this litjudge reads {LAYOUT_VERSION}")

    def _open_readonly(self) -> None:
        """Read, writing nothing (status, plan): WAL wants its -shm file even to read, so a folder
        that cannot be written is read immutable (no writer is expected on a read-only disk)."""
        uri = f"file:{quote(str(self.path.resolve()))}?mode=ro" + ("" if writable(self.path.parent) else "&immutable=1")
        with self._guard():
            self.db = sqlite3.connect(uri, uri=True, timeout=1.0)
            if self.db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone() is None:
                self.db.close()
                raise self._not_a_store()
            found = self.db.execute("SELECT v FROM meta WHERE k='layout'").fetchone()
            have = {row[1] for row in self.db.execute("PRAGMA table_info(results)")}
        self._missing = frozenset(ADDED_COLUMNS) - have
        if found is None or found[0] != LAYOUT_VERSION:
            raise StoreError(f"{self.path}: store layout {found[0] if found else 'unknown'}, this litjudge reads "
                             f"{LAYOUT_VERSION} (a run of this version upgrades it; it cannot be read in place)")

    def _not_a_store(self) -> StoreError:
        """An existing file that holds no store: opening it to read had made it an empty one."""
        return StoreError([f"{self.path}: holds no litjudge store (empty, or another program's database); ",
                           REBUILD_STORE, " moves it aside (kept, renamed) and recomputes every verdict"])

    @classmethod
    def open(cls, path: Path, create: bool = True, readonly: bool = False) -> Store:
        return cls(path, create, readonly)

    @contextmanager
    def _guard(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.OperationalError as exc:
            raise store_failure(exc, self.path) from None
        except sqlite3.DatabaseError as exc:
            raise StoreError([f"{self.path}: corrupt ({exc}); ", REBUILD_STORE, " moves it aside (kept, renamed) and "
                              "recomputes every verdict"]) from None
        except OSError as exc:
            raise store_failure(exc, self.path) from None

    def _write(self, fn):
        """Run a write, waiting for another process's lock (saying so once) up to LOCK_WAIT_S."""
        deadline, told = time.monotonic() + lock_wait(), False
        while True:
            try:
                with self._guard():
                    return fn()
            except StoreError as exc:
                if "locked by another" not in str(exc) or time.monotonic() >= deadline:
                    raise
                if not told:
                    say(f"litjudge: {self.path} is locked by another process; waiting up to {lock_wait():.0f} s", WARN)
                    told = True
                time.sleep(0.5)

    def close(self) -> None:
        self.db.close()

    def has_results(self, table: str = "results") -> bool:
        """Whether any verdict is stored (a run refused before its first one leaves no folder); `plan`: any plan row."""
        with self._guard():
            return bool(self.db.execute(f"SELECT 1 FROM {'plan' if table == 'plan' else 'results'} LIMIT 1").fetchone())

    def meta(self, key: str, value: str | None = None) -> str | None:
        """A note in the meta table (what the file is, engine.core.cache; the run's key_env): read, or written first."""
        def note() -> str | None:
            with self.db:
                if value is not None:
                    self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))
                return (self.db.execute("SELECT v FROM meta WHERE k=?", (key,)).fetchone() or (None,))[0]
        return self._write(note)

    def finished_keys(self, keys: Iterable[str] | None = None) -> set[str]:
        with self._guard():
            return self._finished_keys(keys)

    def _finished_keys(self, keys: Iterable[str] | None) -> set[str]:
        if keys is None:
            return {k for (k,) in self.db.execute("SELECT key FROM results")}
        wanted = orjson.dumps(list(keys)).decode()          # one row back: the GIL released once (see _insert)
        found = self.db.execute("SELECT json_group_array(key) FROM results WHERE key IN "
                                "(SELECT value FROM json_each(?))", (wanted,)).fetchone()[0]
        return set(orjson.loads(found))

    def put_results(self, rows: Iterable[ResultRow]) -> int:
        """Insert finished results in one transaction; keys already stored are left untouched."""
        values = [encode_row(r) for r in rows]

        def insert() -> int:
            with self.db:
                return self._insert(f"INSERT OR IGNORE INTO results ({','.join(RESULT_COLUMNS)})", values)
        return self._write(insert)

    def _insert(self, head: str, rows: list[tuple]) -> int:
        """`head` + the rows, in one statement over one JSON array (json_each): SQLite steps once, so
        the GIL is released once. executemany steps per row and, while the planner thread computes,
        waits up to Python's switch interval (5 ms) for the GIL after every row: 200,000 plan rows
        took 272 s that way beside a busy thread and 0.96 s this way. Rows JSON cannot carry exactly go
        through executemany."""
        payload = _json_rows(rows)
        if payload is None:
            return self.db.executemany(f"{head} VALUES ({','.join('?' * len(rows[0]))})", rows).rowcount if rows else 0
        picks = ", ".join(f"json_extract(value, '$[{i}]')" for i in range(len(rows[0])))
        return self.db.execute(f"{head} SELECT {picks} FROM json_each(?) ORDER BY key", (payload,)).rowcount

    def replace_parse(self, key: str, status: str, label: str | None, value: Any, reason: str | None) -> None:
        """Used by `reparse`: update the parsed fields of a stored raw output, nothing else."""
        with self._guard():
            self.db.execute("UPDATE results SET status=?, label=?, value=?, reason=? WHERE key=?",
                            (status, label, json.dumps(value), reason, key))

    def clear_plan(self, run: str) -> None:
        """Forget a run's plan rows (a re-run plans again; results stay)."""
        def clear() -> None:
            with self.db:
                self.db.execute("DELETE FROM plan WHERE run=?", (run,))
        self._write(clear)

    def add_plan(self, entries: Iterable[tuple[str, str, str, dict[str, Any]]]) -> None:
        """(run, key, item id, meta) rows, one transaction."""
        rows = [(run, key, item, meta_json(meta)) for run, key, item, meta in entries]

        def insert() -> None:
            with self.db:
                self._insert("INSERT INTO plan", rows)
        self._write(insert)

    def move_plan(self, moves: Iterable[tuple[str, str, dict[str, Any], str]]) -> None:
        """Point plan rows (run, item id, meta) at a new key (a re-asked request)."""
        rows = [(key, run, item, meta_json(meta)) for run, item, meta, key in moves]

        def update() -> None:
            with self.db:
                self.db.executemany("UPDATE plan SET key=? WHERE run=? AND item_id=? AND meta=?", rows)
        self._write(update)

    # -- the provider-batch ledger -------------------------------------------------------------
    def record_batch(self, local_id: str, fingerprint: str, provider: str, keys: Iterable[str]) -> None:
        """Before a batch is submitted: its keys, under an id of ours (status submitting)."""
        row = (local_id, fingerprint, provider, time.time(), json.dumps(list(keys)))

        def insert() -> None:
            with self.db:
                self.db.execute("INSERT INTO batches VALUES (?, NULL, ?, ?, 'submitting', ?, ?)", row)
        self._write(insert)

    def set_batch(self, local_id: str, status: str, batch_id: str | None = None) -> None:
        """A batch accepted (open, with the provider's id), collected, or cancelled."""
        def update() -> None:
            with self.db:
                self.db.execute("UPDATE batches SET status=?, batch_id=COALESCE(?, batch_id) WHERE local_id=?",
                                (status, batch_id, local_id))
        self._write(update)

    def batches(self, fingerprint: str | None = None, states: tuple[str, ...] = ("submitting", "open")
                ) -> list[BatchRecord]:
        q = f"SELECT * FROM batches WHERE status IN ({','.join('?' * len(states))})"
        args: tuple = states
        if fingerprint is not None:
            q, args = q + " AND fingerprint=?", (*states, fingerprint)
        with self._guard():
            rows = self.db.execute(q + " ORDER BY created", args).fetchall()
        return [self._batch(r) for r in rows]

    def _batch(self, r: tuple) -> BatchRecord:
        """A provider batch's ledger row; a damaged one (keys not a list of texts, a time not a
        number) is one line naming it."""
        try:
            keys = json.loads(r[6])
        except (TypeError, ValueError):
            keys = None
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys) or \
                not isinstance(r[5], int | float) or isinstance(r[5], bool):
            raise StoreError([f"{self.path}: provider batch {r[0]!r} is damaged (its keys or its time); ", REBUILD_STORE,
                              " moves the store aside (kept, renamed) and recomputes every verdict"])
        return BatchRecord(r[0], r[1], r[2], r[3], r[4], float(r[5]), tuple(keys))

    def results(self, keys: Iterable[str] | None = None) -> Iterator[ResultRow]:
        with self._guard():
            yield from self._results(keys)

    def raw_results(self, keys: Iterable[str]) -> Iterator[tuple]:
        """Stored rows as tuples in RESULT_COLUMNS order, JSON columns left as their JSON text (the
        log writes them through without decoding)."""
        with self._guard():
            yield from self._where_key_in(self._selected, keys)

    def _results(self, keys: Iterable[str] | None) -> Iterator[ResultRow]:
        if keys is None:
            cur = self.db.execute(f"SELECT {self._selected} FROM results ORDER BY key")
            yield from (decode_row(r) for r in cur)
            return
        yield from (decode_row(r) for r in self._where_key_in(self._selected, keys))

    @property
    def _selected(self) -> str:
        """The results' columns as a read selects them: NULL for one an old read-only store lacks."""
        return ",".join(f"NULL AS {c}" if c in self._missing else c for c in RESULT_COLUMNS)

    def _where_key_in(self, columns: str, keys: Iterable[str]) -> Iterator[tuple]:
        """`columns` of the stored results whose key is among `keys`, asked in chunks of KEYS_PER_QUERY
        (SQLite bounds a statement's parameters)."""
        wanted = list(keys)
        for i in range(0, len(wanted), KEYS_PER_QUERY):
            chunk = wanted[i:i + KEYS_PER_QUERY]
            yield from self.db.execute(f"SELECT {columns} FROM results WHERE key IN ({','.join('?' * len(chunk))})",
                                       chunk)

    def plan_results(self, run: str) -> Iterator[list[tuple]]:
        """One run's plan rows joined with their results (None where not stored yet), in plan order,
        in batches: (key, item_id, meta JSON, status, label, value JSON, reason, distribution JSON,
        label_mass, analysis, raw, analysis_distribution JSON, cut). The verdict frame (`engine.core.verdicts`)
        is built from these."""
        picks = ",".join(f"p.{c}" if c in ("key", "item_id", "meta") else "NULL" if c in self._missing else f"r.{c}"
                         for c in PLAN_RESULT_COLUMNS)          # an added column an old read-only store lacks: NULL
        return self._batches(f"SELECT {picks} FROM plan p LEFT JOIN results r ON p.key = r.key WHERE p.run = ? "
                             "ORDER BY p.rowid", (run,))

    def token_counts(self) -> Iterator[list[tuple]]:
        """(key, prompt tokens, output tokens) of every stored result, in batches."""
        return self._batches("SELECT key, prompt_tokens, output_tokens FROM results")

    def _batches(self, sql: str, params: tuple = (), size: int = 50_000) -> Iterator[list[tuple]]:
        """Rows of a read query, a batch at a time (the app layer joins plan and results this way)."""
        with self._guard():
            cur = self.db.execute(sql, params)
            while rows := cur.fetchmany(size):
                yield rows

    def plan(self, run: str) -> list[tuple[str, str, dict[str, Any]]]:
        with self._guard():
            cur = self.db.execute("SELECT key, item_id, meta FROM plan WHERE run=? ORDER BY rowid", (run,))
            return [(k, i, json.loads(m)) for k, i, m in cur]


def meta_json(meta: dict[str, Any]) -> str:
    """A plan row's metadata as canonical JSON (sorted keys; the plan's primary key includes it)."""
    return orjson.dumps(meta, option=orjson.OPT_SORT_KEYS).decode()


def _json_rows(rows: list[tuple]) -> str | None:
    """Rows as one JSON array for `Store._insert`; None where JSON would not carry a value exactly
    (a NUL in a string: json_extract stops there; a float that is not finite, which orjson writes as
    null: only where there are more nulls than Nones are the values looked at; an int beyond 64 bits)."""
    try:
        text = orjson.dumps(rows).decode() if rows else None
    except (TypeError, orjson.JSONEncodeError):
        return None
    if text is None or "\\u0000" in text or (text.count("null") != sum(row.count(None) for row in rows) and any(
            type(v) is float and not math.isfinite(v) for row in rows for v in row)):
        return None
    return text
