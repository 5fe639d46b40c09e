"""What a store's meta table says beyond its layout: what the file is (its role: one run folder's
store, or the verdict cache shared by every run), and what a run notes there for later commands.

Roles: each store is marked when first opened to write, and a path given as one is refused as the
other: `--cache RUN/store.sqlite` would write every other run's verdicts into that run's store.
Notes: the name of the variable holding the API key (`[api] key_env`), written when the run starts,
so `litjudge status RUN --cancel-batches` finds it for a run killed before its manifest was written
(the usual case for open provider batches). Never the key itself."""
from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from .errors import ConfigError

if TYPE_CHECKING:
    from .store import Store

ROLES = {"run": "a run folder's store", "cache": "a verdict cache"}


def marked_role(db: sqlite3.Connection, mark: str | None) -> str | None:
    """The file's role marker. A store written before the markers is a run's when it holds a plan (a
    cache never does); any other unmarked one is marked `mark` here (None: read only, nothing written)."""
    row = db.execute("SELECT v FROM meta WHERE k='role'").fetchone()
    if row is not None:
        return row[0]
    if db.execute("SELECT 1 FROM plan LIMIT 1").fetchone() is not None:
        return "run"
    if mark is not None:
        with db:
            db.execute("INSERT INTO meta VALUES ('role', ?)", (mark,))
    return mark


def check_role(store: Store, wanted: str, mark: str | None) -> None:
    """One line when a file of one role is opened as the other (the store is closed again)."""
    if wanted not in ROLES:
        raise ValueError(f"a store's role is one of {sorted(ROLES)}, not {wanted!r}")
    try:
        found = store._write(lambda: marked_role(store.db, mark))
    except BaseException:
        store.db.close()
        raise
    if found is not None and found != wanted:
        store.db.close()
        fix = ("give --cache (or LITJUDGE_VERDICT_CACHE) a new file, or a folder to hold verdicts.sqlite"
               if wanted == "cache" else "give the run an output folder of its own (--out)")
        raise ConfigError(f"{store.path} is {ROLES.get(found, found)}, not {ROLES[wanted]}: {fix}")


KEY_ENV = "api_key_env"


def note_key_env(store: Store, key_env: str) -> None:
    """The run's `[api] key_env` (the variable's name; "" for the provider's usual one)."""
    def write() -> None:
        with store.db:
            store.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (KEY_ENV, key_env))
    store._write(write)


def noted_key_env(store: Store) -> str | None:
    """What `note_key_env` wrote, or None for a store written before it was noted."""
    row = store._write(lambda: store.db.execute("SELECT v FROM meta WHERE k=?", (KEY_ENV,)).fetchone())
    return None if row is None else row[0]
