"""The shared verdict cache is a file of its own: a run folder's store is refused as one (it would
take other runs' verdicts), a folder given as the cache holds verdicts.sqlite, and every message about
the cache names the cache (never the runs folder, never --rebuild-store, which does not touch it)."""
from __future__ import annotations

import sqlite3
import subprocess

import pytest

from litjudge.engine.core.cache import claim_role
from litjudge.engine.core.errors import ConfigError
from litjudge.engine.core.store import Store
from tests.fake_api import FakeAPI
from tests.test_cli_probe import cli, one_line
from tests.test_faults import read_only
from tests.test_newcomer import DEMO_API


def rows(path, table: str = "results") -> int:
    db = sqlite3.connect(path)
    try:
        return db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        db.close()


@pytest.fixture
def api(tmp_path):
    with FakeAPI() as server:
        cfg = tmp_path / "api.toml"
        cfg.write_text(DEMO_API.format(name="api", url=server.url))
        yield cfg, server


def test_a_run_store_is_refused_as_a_cache(api, tmp_path):
    """`--cache OTHER_RUN/store.sqlite` wrote 6 rows into that run's store: now one line, before any
    folder is made or any judge asked; a store written before the role markers (its plan tells) too."""
    cfg, server = api
    assert cli("run", str(cfg), "--quiet", "--no-cache", "--limit", "1", cwd=tmp_path).returncode == 0
    store = tmp_path / "runs" / "out" / "api" / "store.sqlite"
    before, asked = rows(store), len(server.received)
    line = one_line(cli("run", str(cfg), "--quiet", "--out", str(tmp_path / "other"), "--cache", str(store), cwd=tmp_path),
                    f"{store} is a run folder's store, not a verdict cache", "--cache")
    assert rows(store) == before and len(server.received) == asked and not (tmp_path / "other").exists(), line
    one_line(cli("plan", str(cfg), "--cache", str(store), cwd=tmp_path), "is a run folder's store, not a verdict cache")
    db = sqlite3.connect(store)
    with db:
        db.execute("DELETE FROM meta WHERE k = 'role'")          # as an older litjudge wrote it
    db.close()
    one_line(cli("run", str(cfg), "--quiet", "--out", str(tmp_path / "other"), "--cache", str(store), cwd=tmp_path),
             "is a run folder's store, not a verdict cache")
    assert rows(store) == before


def test_a_cache_is_marked_and_never_opened_as_a_run_store(tmp_path):
    claim_role(Store.open(tmp_path / "verdicts.sqlite"), "cache").close()
    with pytest.raises(ConfigError, match="is a verdict cache, not a run folder's store"):
        claim_role(Store.open(tmp_path / "verdicts.sqlite"), "run")
    old = tmp_path / "old.sqlite"                       # an unmarked cache of an older litjudge: no plan rows
    Store.open(old).close()
    claim_role(Store.open(old, readonly=True), "run", mark=False).close()    # read only: nothing decided, nothing written
    claim_role(Store.open(old), "cache").close()             # taken as a cache, and marked as one
    with pytest.raises(ConfigError, match="is a verdict cache"):
        claim_role(Store.open(old), "run")


def test_a_folder_given_as_the_cache_holds_its_file(api, tmp_path):
    """`--cache NEWDIR/` made a file named NEWDIR: a trailing slash (or a folder that exists) is a
    folder, and the cache is verdicts.sqlite inside it."""
    cfg, server = api
    r = cli("run", str(cfg), "--quiet", "--limit", "1", "--out", str(tmp_path / "a"), "--cache", str(tmp_path / "new") + "/",
            cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "new").is_dir() and rows(tmp_path / "new" / "verdicts.sqlite") == len(server.received) > 0
    (tmp_path / "there").mkdir()
    r = cli("run", str(cfg), "--quiet", "--limit", "1", "--out", str(tmp_path / "b"), "--cache", str(tmp_path / "there"),
            cwd=tmp_path, env={"LITJUDGE_VERDICT_CACHE": "off"})
    assert r.returncode == 0 and rows(tmp_path / "there" / "verdicts.sqlite") > 0, r.stderr[-2000:]
    r = cli("run", str(cfg), "--quiet", "--limit", "1", "--out", str(tmp_path / "c"), cwd=tmp_path,
            env={"LITJUDGE_VERDICT_CACHE": str(tmp_path / "env") + "/"})
    assert r.returncode == 0 and rows(tmp_path / "env" / "verdicts.sqlite") > 0, r.stderr[-2000:]


def test_plan_on_a_corrupt_cache_does_not_advise_rebuilding_the_store(api, tmp_path):
    """`plan` refused with "--rebuild-store" (which never touches the cache): the cache is left aside
    with the same one warning a run gives, and the plan is printed."""
    cfg, _ = api
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    r = cli("plan", str(cfg), "--cache", str(bad), cwd=tmp_path)
    assert r.returncode == 0 and "12 requests, 12 distinct" in r.stdout, r.stderr[-2000:]
    assert "--rebuild-store" not in r.stderr
    warning = [ln for ln in r.stderr.splitlines() if "shared verdict cache is left aside" in ln]
    assert len(warning) == 1 and f"move {bad} away" in warning[0] and "--no-cache" in warning[0]


def test_a_read_only_cache_names_the_cache_not_the_runs_folder(api, tmp_path):
    """A cache file that may not be written (a read-only bind mount: root ignores permissions): the
    run goes on, with one warning that says to choose another cache, not another runs folder."""
    cfg, _ = api
    cache = tmp_path / "ro.sqlite"
    assert cli("run", str(cfg), "--quiet", "--limit", "1", "--out", str(tmp_path / "a"), "--cache", str(cache),
               cwd=tmp_path).returncode == 0
    if not read_only(cache):
        pytest.skip("this machine may not make a read-only bind mount (mount --bind)")
    try:
        r = cli("run", str(cfg), "--quiet", "--out", str(tmp_path / "b"), "--cache", str(cache), cwd=tmp_path)
    finally:
        subprocess.run(["umount", str(cache)], capture_output=True)
    assert r.returncode == 0, r.stderr[-2000:]
    warning = [ln for ln in r.stderr.splitlines() if "shared verdict cache is left aside" in ln]
    assert len(warning) == 1 and str(cache) in warning[0] and "not writable" in warning[0], r.stderr[-2000:]
    assert "--cache PATH" in warning[0] and "LITJUDGE_RUNS_DIR" not in warning[0] and "--out" not in warning[0]


def test_litjudge_cache_naming_a_file_is_one_line_naming_it(tmp_path):
    (tmp_path / "afile").write_text("x")
    one_line(cli("judges", cwd=tmp_path, env={"LITJUDGE_CACHE": str(tmp_path / "afile")}),
             f"LITJUDGE_CACHE={tmp_path / 'afile'}", "point LITJUDGE_CACHE at a folder")


def test_a_cache_damaged_past_its_first_pages_is_left_aside(api, tmp_path):
    """Damage found only when verdicts are read (the results' pages, not the schema's) escaped as
    the run store's error: every run and plan stopped (exit 2) advising --rebuild-store, which does
    nothing to a cache. It is left aside with the cache's one warning, as damage found on opening is."""
    cfg, server = api
    cache = tmp_path / "c.sqlite"
    assert cli("run", str(cfg), "--quiet", "--out", str(tmp_path / "a"), "--cache", str(cache),
               cwd=tmp_path).returncode == 0
    asked = len(server.received)
    db = sqlite3.connect(cache)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages = [r[0] for r in db.execute("SELECT rootpage FROM sqlite_master WHERE tbl_name = 'results'")]
    size = db.execute("PRAGMA page_size").fetchone()[0]
    db.close()
    with open(cache, "r+b") as fh:
        for page in pages:
            fh.seek((page - 1) * size)
            fh.write(b"\xff" * size)
    for args in (("plan", str(cfg)), ("run", str(cfg), "--quiet", "--out", str(tmp_path / "b"))):
        r = cli(*args, "--cache", str(cache), cwd=tmp_path)
        assert r.returncode == 0 and "--rebuild-store" not in r.stderr, r.stderr[-2000:]
        warning = [ln for ln in r.stderr.splitlines() if "shared verdict cache is left aside" in ln]
        assert len(warning) == 1 and "corrupt" in warning[0] and f"move {cache} away" in warning[0], r.stderr[-2000:]
    assert len(server.received) == asked + 12            # nothing read from it: every verdict asked again


def test_another_programs_database_is_left_aside_untouched(api, tmp_path):
    """`--cache` naming another program's SQLite database: its table was altered (litjudge's
    columns added), litjudge's tables and a meta note added and its journal made WAL, in silence.
    It is left aside with one warning, byte for byte as it was."""
    cfg, _ = api
    theirs = tmp_path / "theirs.sqlite"
    db = sqlite3.connect(theirs)
    with db:
        db.execute("CREATE TABLE results (id INTEGER PRIMARY KEY, score REAL)")
        db.execute("INSERT INTO results (score) VALUES (0.5), (0.7)")
    db.close()
    before = theirs.read_bytes()
    r = cli("run", str(cfg), "--quiet", "--limit", "1", "--out", str(tmp_path / "a"), "--cache", str(theirs), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    warning = [ln for ln in r.stderr.splitlines() if "shared verdict cache is left aside" in ln]
    assert len(warning) == 1 and "holds no litjudge store" in warning[0], r.stderr[-2000:]
    assert theirs.read_bytes() == before and not (tmp_path / "theirs.sqlite-wal").exists()
