"""One parse path: the runner and `reparse` read a generation through the same `parse_result`,
so reparsing a stored run reproduces every row bit for bit, backend failures (a recorded judge
with no answer for an item) and parser failures included; and values reach protocols decoded."""
from __future__ import annotations

import sqlite3

from tests.test_cli_probe import PAIRS, cli, pairs_run

COLUMNS = "key, status, label, value, reason, raw, failure, cut"


def rows(run_dir) -> list[tuple]:
    db = sqlite3.connect(run_dir / "store.sqlite")
    try:
        return db.execute(f"SELECT {COLUMNS} FROM results ORDER BY key").fetchall()
    finally:
        db.close()


def test_reparse_reproduces_every_stored_row(tmp_path):
    answers = {"p0/ab": "A", "p0/ba": "B", "p1/ab": "maybe", "p1/ba": " B ", "p2/ab": "A"}   # p2/ba, p3: none
    cfg = pairs_run(tmp_path, answers=answers)
    assert cli("run", str(cfg), "--quiet", cwd=tmp_path).returncode == 0
    run = tmp_path / "runs" / "out" / "p"
    before = rows(run)
    assert len(before) == 2 * len(PAIRS) and any(r[4] is None for r in before)          # answers
    assert any(r[6] == "the recording has no response for this id" for r in before)   # a backend failure, stored as one
    assert any(r[1] == "unparsed" and r[6] is None for r in before)            # a parser failure
    r = cli("reparse", str(run), cwd=tmp_path)
    assert r.returncode == 0 and "0 changed" in r.stdout, r.stdout + r.stderr
    assert rows(run) == before


def test_values_reach_protocols_decoded(tmp_path):
    import polars as pl

    from litjudge.engine.core.store import Store
    from litjudge.engine.core.verdicts import probability, verdict_frame

    cfg = pairs_run(tmp_path)
    assert cli("run", str(cfg), "--quiet", cwd=tmp_path).returncode == 0
    store = Store.open(tmp_path / "runs" / "out" / "p" / "store.sqlite", create=False)
    try:
        run_id = sqlite3.connect(tmp_path / "runs" / "out" / "p" / "store.sqlite").execute(
            "SELECT run FROM plan LIMIT 1").fetchone()[0]
        frame = verdict_frame(store, run_id, "j")
    finally:
        store.close()
    assert frame["value"].dtype == pl.Utf8 and set(frame["value"].drop_nulls()) <= {"a", "b"}   # "a", not '"a"'
    assert frame.select(probability(frame, "A")).to_series().is_null().all()                  # label mode: none
