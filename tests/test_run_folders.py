"""A run folder belongs to one config and one dataset (engine.app.run_folder): `litjudge.judge()`
without a name never sends two calls on different rows to one folder (where B's verdicts answered
for A), a named folder or a reused config name holding another run is refused in one line naming
the folder and the overwrite switch, and the same config on the same data resumes (and a longer
`--limit` grows it). Replayed judges: no model is the point."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

import litjudge
from tests.test_cli_probe import PAIRS, cli, one_line, pairs_run
from tests.test_python_api import COLUMNS, VALUES, pairs, recording


def call(tmp_path, data, **kw):
    kw = {"protocol": "pairwise", "judge": recording(tmp_path, pairs()), "columns": COLUMNS, "values": VALUES,
          "out": tmp_path / "out", "progress": False, **kw}
    return litjudge.judge(data, **kw)


def pair_ids(result) -> set[str]:
    return set(result.verdicts["pair_id"].to_list())


def test_calls_without_a_name_keep_their_own_folders(tmp_path):
    """df.iloc[:6] then df.iloc[6:]: two folders, each reopened with its own verdicts; the same
    rows again resume in the first one (nothing generated)."""
    df = pd.DataFrame(pairs())
    a, b = call(tmp_path, df.iloc[:6]), call(tmp_path, df.iloc[6:])
    assert a.run_dir != b.run_dir and a.run_dir.parent == b.run_dir.parent == (tmp_path / "out").resolve()
    assert a.run_dir.name.startswith("pairwise-python-")
    assert pair_ids(litjudge.load(a.run_dir)) == set(df["id"][:6]) == pair_ids(a)
    assert pair_ids(litjudge.load(b.run_dir)) == set(df["id"][6:])
    again = call(tmp_path, df.iloc[:6])
    assert again.run_dir == a.run_dir and again.manifest.generated_now == 0
    assert again.verdicts.equals(a.verdicts)


def test_a_named_folder_holding_another_run_is_refused(tmp_path):
    """name="other" on other rows, then another protocol's options: one line naming the folder and
    overwrite=True, the earlier run's files untouched; overwrite=True replaces its tables."""
    df = pd.DataFrame(pairs())
    first = call(tmp_path, df.iloc[:6], name="other")
    manifest = (first.run_dir / "manifest.json").read_bytes()
    rows = (first.run_dir / "input" / "data.jsonl").read_bytes()
    for kw in ({}, {"options": {"tie": True}}):          # an option that changes the requests
        data = df.iloc[6:] if not kw else df.iloc[:6]
        with pytest.raises(litjudge.ConfigError) as caught:
            call(tmp_path, data, name="other", **kw)
        message = str(caught.value)
        assert str(first.run_dir) in message and "overwrite=True" in message and "\n" not in message, message
        assert ("other data" in message) if not kw else ("another options" in message), message
        assert (first.run_dir / "manifest.json").read_bytes() == manifest
        assert (first.run_dir / "input" / "data.jsonl").read_bytes() == rows
    replaced = call(tmp_path, df.iloc[6:], name="other", overwrite=True)
    assert pair_ids(replaced) == set(df["id"][6:]) == pair_ids(litjudge.load(first.run_dir))


def test_every_call_checks_its_own_columns_whatever_the_folder_holds(tmp_path):
    """After two calls into one folder, a third mapping text_a to a column the data lacks fails
    naming the column (it returned the earlier call's verdicts)."""
    df = pd.DataFrame(pairs())
    call(tmp_path, df.iloc[:6], name="same")
    call(tmp_path, df.iloc[:6], name="same")
    with pytest.raises(litjudge.DataError, match="maps text_a to column 'nosuch'"):
        call(tmp_path, df.iloc[:6], name="same", columns={**COLUMNS, "text_a": "nosuch"})


def test_the_console_refuses_a_reused_name_and_resumes_the_same_run(tmp_path):
    """`litjudge run` with a config whose name holds a run of other data (or another protocol's
    options) exits 2 in one line naming the folder and --overwrite; the same config resumes, a
    larger --limit grows the same folder, and --overwrite replaces."""
    cfg = pairs_run(tmp_path / "a", name="shared")
    assert cli("run", str(cfg), "--quiet", "--limit", "2", cwd=tmp_path).returncode == 0
    grown = cli("run", str(cfg), "--quiet", cwd=tmp_path)                       # --limit is no other run
    assert grown.returncode == 0 and "8 verdicts" in grown.stdout, grown.stderr[-2000:]
    folder = tmp_path / "runs" / "out" / "shared"
    before = (folder / "manifest.json").read_bytes()
    other = pairs_run(tmp_path / "b", name="shared", pairs=[{**p, "text_a": p["text_a"] + "!"} for p in PAIRS])
    line = one_line(cli("run", str(other), "--quiet", cwd=tmp_path), str(folder), "--overwrite", "other data")
    assert "this one" in line and (folder / "manifest.json").read_bytes() == before
    changed = pairs_run(tmp_path / "c", name="shared", top='truncation = "skip"\n')
    one_line(cli("run", str(changed), "--quiet", cwd=tmp_path), str(folder), "truncation 'error', this one 'skip'")
    forced = cli("run", str(other), "--quiet", "--overwrite", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr[-2000:]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["dataset"]["data"]["path"] == str((tmp_path / "b" / "pairs.jsonl").resolve())


def test_command_line_overrides_get_a_folder_of_their_own(tmp_path):
    """`litjudge run CONFIG --judge OTHER` (as the README does after `litjudge run CONFIG`): the
    config's folder keeps its run, this one goes to a folder beside it, said in one line, and the
    same command again resumes there."""
    cfg = pairs_run(tmp_path, name="base")
    assert cli("run", str(cfg), "--quiet", cwd=tmp_path).returncode == 0
    folder = tmp_path / "runs" / "out" / "base"
    before = (folder / "manifest.json").read_bytes()
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps({"id": f"{p['pair_id']}/{o}", "response": "B"}) + "\n"
                             for p in PAIRS for o in ("ab", "ba")))
    r = cli("run", str(cfg), "--quiet", "--judge", f"replay:{other}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    derived = [p for p in folder.parent.iterdir() if p.name.startswith("base-")]
    assert len(derived) == 1 and f"this one (--judge) goes to {derived[0]}" in r.stderr
    assert (folder / "manifest.json").read_bytes() == before
    again = cli("run", str(cfg), "--quiet", "--judge", f"replay:{other}", cwd=tmp_path)
    assert again.returncode == 0 and f"Results: {derived[0]}" in again.stdout
    assert len([p for p in folder.parent.iterdir() if p.name.startswith("base-")]) == 1


def test_the_data_file_replaced_while_the_run_reads_it_is_an_error_not_a_wrong_manifest(tmp_path, monkeypatch):
    """The file moved away and another put in its place after the first verdicts are stored: the
    run does not write a manifest naming bytes it did not judge (it named the new file's sha256)."""
    from litjudge.engine.app.run import run
    from litjudge.engine.core.config import load_config
    from litjudge.engine.core.runner import Writer

    cfg = pairs_run(tmp_path, name="moved")
    data = tmp_path / "pairs.jsonl"
    original = data.read_bytes()
    flush = Writer.flush

    def replacing_flush(self):
        flush(self)
        if data.read_bytes() == original:
            replacement = tmp_path / "new.jsonl"
            replacement.write_text("".join(json.dumps({**p, "label": "b"}) + "\n" for p in PAIRS))
            replacement.replace(data)                          # `mv new.jsonl pairs.jsonl` mid-run
    monkeypatch.setattr(Writer, "flush", replacing_flush)
    try:
        outcome = run(load_config(cfg), progress=False, run_dir=tmp_path / "out" / "moved")
    except litjudge.DataError as exc:
        assert "changed while the run read it" in str(exc) and str(data) in str(exc)
        assert not (tmp_path / "out" / "moved" / "manifest.json").exists()
        return
    recorded = outcome.manifest.raw["dataset"]["data"]["sha256"]
    assert recorded == hashlib.sha256(original).hexdigest(), "the manifest names bytes the run did not judge"


def test_a_folder_of_the_users_is_never_taken_over(tmp_path):
    """A folder holding files of the user's and no run (results.json, tables/) is refused in one line
    listing them, by judge() (overwrite=True too: it replaces a run's tables, not the user's files),
    by `litjudge run` and by a sweep, and nothing is written into it (not even the run's lock)."""
    folder = tmp_path / "out" / "mine"
    (folder / "tables").mkdir(parents=True)
    (folder / "results.json").write_text("{}")
    (folder / "tables" / "accuracy.csv").write_text("mine\n")
    before = sorted(p.relative_to(folder) for p in folder.rglob("*"))
    for overwrite in (False, True):
        with pytest.raises(litjudge.ConfigError, match=r"mine: is a folder of yours, not a litjudge run's \(it holds "
                                                       r"results.json, tables/\).*give this call another name="):
            call(tmp_path, pd.DataFrame(pairs()), name="mine", overwrite=overwrite)
    cfg = pairs_run(tmp_path / "a", name="mine")
    one_line(cli("run", str(cfg), "--quiet", "--out", str(tmp_path / "out"), cwd=tmp_path), "is a folder of yours",
             "give the config another `name`")
    sweep = tmp_path / "a" / "sweep.toml"
    sweep.write_text(cfg.read_text() + "\n[matrix]\nlimit = [1, 2]\n")
    one_line(cli("run", str(sweep), "--quiet", "--out", str(tmp_path / "out"), cwd=tmp_path), "is a folder of yours")
    assert sorted(p.relative_to(folder) for p in folder.rglob("*")) == before
    assert (folder / "results.json").read_text() == "{}"


def test_a_limit_past_the_data_is_the_same_run(tmp_path):
    """A full run of 12 pairs, then limit=100: the same 12 pairs (nothing generated, the folder's
    tables kept), not 'would rewrite its tables to the first 100'; limit=5 below them is refused."""
    df = pd.DataFrame(pairs())
    full = call(tmp_path, df, name="n")
    assert json.loads((full.run_dir / "manifest.json").read_text())["units"] == len(df)
    again = call(tmp_path, df, name="n", limit=100)
    assert again.manifest.generated_now == 0 and pair_ids(again) == pair_ids(full)
    with pytest.raises(litjudge.ConfigError, match="limit 5 would rewrite its tables to the first 5"):
        call(tmp_path, df, name="n", limit=5)


@pytest.mark.parametrize("kw, message", [
    ({"overwrite": "no"}, "overwrite: expected True or False, got str 'no'"),
    ({"overwrite": 0.0001}, "overwrite: expected True or False, got float 0.0001"),
    ({"cache": 123}, "cache: expected True, False or a verdict cache's path (str or Path), got int 123"),
    ({"progress": "no"}, "progress: expected True or False"),
    ({"name": ""}, "name: expected a folder name of letters, digits, '-' and '_', got str ''"),
    ({"out": 123}, "out: expected a folder's path (str or Path), got int 123"),
])
def test_the_calls_arguments_are_checked_before_anything_is_written(tmp_path, kw, message):
    """overwrite='no' is truthy (it replaced a finished run), cache=123 became a file './123',
    out=123 was pathlib's TypeError: each is one line naming the argument, and nothing is written."""
    df = pd.DataFrame(pairs())
    first = call(tmp_path, df, name="kept")
    manifest = (first.run_dir / "manifest.json").read_bytes()
    with pytest.raises(litjudge.ConfigError, match=f"litjudge.judge\\(\\): {message}".replace("(str or Path)", r"\(str or Path\)")):
        call(tmp_path, df.iloc[:3], name=kw.pop("name", "kept"), **kw)
    assert (first.run_dir / "manifest.json").read_bytes() == manifest and not (tmp_path / "123").exists()


def test_paths_from_python_are_checked_where_they_are_taken(tmp_path):
    """run(None), run(5), load(None), load(5), run(..., out=123) and Result.report(123): one line
    naming the argument, not pathlib's 'expected str, bytes or os.PathLike object'."""
    result = call(tmp_path, pd.DataFrame(pairs()), name="r")
    for attempt, message in [(lambda: litjudge.run(None), "config: expected a config file's path"),
                             (lambda: litjudge.run(5), "config: expected a config file's path"),
                             (lambda: litjudge.load(None), "run_dir: expected a run folder's path"),
                             (lambda: litjudge.load(5), "run_dir: expected a run folder's path"),
                             (lambda: litjudge.run("demo", out=123), "out: expected a folder's path"),
                             (lambda: result.report(123), "out: expected a folder's path")]:
        with pytest.raises(litjudge.ConfigError, match=message):
            attempt()


def test_a_corrupt_store_is_rebuilt_from_python_as_its_message_says(tmp_path):
    """A judge() user told `litjudge run CONFIG --rebuild-store` had no CONFIG and no keyword: the
    message names rebuild_store=True, which moves the store aside (kept) and runs again."""
    df = pd.DataFrame(pairs())
    first = call(tmp_path, df, name="c")
    (first.run_dir / "store.sqlite").write_bytes(b"not a database" * 100)
    for suffix in ("-wal", "-shm"):
        (first.run_dir / f"store.sqlite{suffix}").unlink(missing_ok=True)
    with pytest.raises(litjudge.LitjudgeError, match=r"corrupt .*; rebuild_store=True \(litjudge.judge or litjudge.run\) "
                                                     "moves it aside"):
        call(tmp_path, df, name="c")
    again = call(tmp_path, df, name="c", rebuild_store=True)
    assert pair_ids(again) == pair_ids(first) and list(first.run_dir.glob("store.sqlite.corrupt-*"))


def test_two_threads_on_one_folder_are_told_it_is_this_process(tmp_path):
    """The second of two threads taking one folder's lock read 'another litjudge process (pid
    unknown)' when it came before the holder wrote its pid: the lock knows its own process's."""
    from litjudge.engine.core.run_lock import RunLock, run_folder_lock

    held = RunLock(tmp_path / "run")
    (tmp_path / "run" / ".lock").write_text("")             # as between the holder's flock and its pid
    try:
        with pytest.raises(litjudge.ConfigError, match="in use by another run in this process"):
            RunLock(tmp_path / "run")
        # reparse, export and budgets rewrite the run itself: another name or folder is no way round
        (tmp_path / "run" / "manifest.json").write_text("{}")
        with pytest.raises(litjudge.ConfigError) as refused, run_folder_lock(tmp_path / "run"):
            pass
        assert str(refused.value).endswith("(another thread): wait for it to finish"), refused.value
    finally:
        held.release()
    RunLock(tmp_path / "run").release()


def test_rebuild_store_moves_the_runs_own_store_under_its_lock(tmp_path):
    """--rebuild-store moved a store before the folder was known to be the run's: the config's
    folder's store where --judge made the run another folder's, a running run's store (no lock), and
    an interrupted run's folder, its store gone, was then refused as the user's. Now the store moved
    is the one of the folder the run writes, under its lock; two rebuilds in one second keep both."""
    from litjudge.engine.app.outputs import rebuild_store
    from litjudge.engine.core.run_lock import RunLock

    cfg = pairs_run(tmp_path / "a", name="rb")
    out = tmp_path / "runs" / "out"
    other = tmp_path / "a" / "other.jsonl"
    other.write_text((tmp_path / "a" / "answers.jsonl").read_text().replace('"A"', '"B"'))
    assert cli("run", str(cfg), "--quiet", cwd=tmp_path).returncode == 0
    assert cli("run", str(cfg), "--quiet", "--judge", f"replay:{other}", cwd=tmp_path).returncode == 0
    derived = next(p for p in out.iterdir() if p.name.startswith("rb-"))
    r = cli("run", str(cfg), "--quiet", "--judge", f"replay:{other}", "--rebuild-store", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert list(derived.glob("store.sqlite.corrupt-*")) and not list((out / "rb").glob("store.sqlite.corrupt-*"))
    held = RunLock(out / "rb")                                       # a run in progress
    try:
        one_line(cli("run", str(cfg), "--quiet", "--rebuild-store", cwd=tmp_path), "is in use")
    finally:
        held.release()
    assert not list((out / "rb").glob("store.sqlite.corrupt-*"))    # nothing moved under a running run
    (out / "rb" / "manifest.json").unlink()                          # interrupted, then its store damaged
    (out / "rb" / "store.sqlite").write_bytes(b"not a database" * 100)
    for suffix in ("-wal", "-shm"):
        (out / "rb" / f"store.sqlite{suffix}").unlink(missing_ok=True)
    r = cli("run", str(cfg), "--quiet", "--rebuild-store", cwd=tmp_path)
    assert r.returncode == 0 and "8 verdicts" in r.stdout, r.stderr[-2000:]
    again = cli("run", str(cfg), "--quiet", cwd=tmp_path)           # and the folder is the run's for good
    assert again.returncode == 0, again.stderr[-2000:]
    twice = tmp_path / "twice"
    twice.mkdir()
    kept = []
    for text in ("first", "second"):
        (twice / "store.sqlite").write_text(text)
        kept.append(rebuild_store(twice))
    assert kept[0] != kept[1] and [p.read_text() for p in kept] == ["first", "second"]


def test_an_ensemble_never_takes_a_folder_of_the_users_or_a_runs(tmp_path):
    """`litjudge ensemble ... --name NAME` overwrote a folder of the user's results.json and turned a
    run's manifest into an ensemble's: both are refused in one line; an earlier ensemble is replaced."""
    for folder, name, answer in ((tmp_path / "a", "base", "A"), (tmp_path / "b", "base2", "B")):
        cfg = pairs_run(folder, name=name, answers={f"{p['pair_id']}/{o}": answer for p in PAIRS for o in ("ab", "ba")})
        assert cli("run", str(cfg), "--quiet", cwd=tmp_path).returncode == 0
    base = tmp_path / "runs" / "out" / "base"
    mine = tmp_path / "runs" / "out" / "mine"
    mine.mkdir()
    (mine / "results.json").write_text("{}")
    ens = ("ensemble", str(base), str(tmp_path / "runs" / "out" / "base2"), "--jury")
    one_line(cli(*ens, "--name", "mine", cwd=tmp_path), "is a folder of yours")
    one_line(cli(*ens, "--name", "base", cwd=tmp_path), "holds a run's results, not an ensemble's")
    assert (mine / "results.json").read_text() == "{}" and json.loads((base / "manifest.json").read_text()).get("kind", "run") == "run"


def test_tasks_and_sweeps_keep_their_tables_from_a_shorter_limit(tmp_path):
    """A sweep's limit was not protected (--limit 2 rewrote its ranking to 2 pairs), and a run of
    [[tasks]] refused a limit past its data (its shared manifest had no units): both as a run now."""
    cfg = pairs_run(tmp_path / "a", name="s", extra='[matrix]\njudge = ["replay:answers.jsonl"]\n')
    assert cli("run", str(cfg), "--quiet", cwd=tmp_path).returncode == 0
    one_line(cli("run", str(cfg), "--quiet", "--limit", "2", cwd=tmp_path), "limit 2 would rewrite its tables")
    assert cli("run", str(cfg), "--quiet", "--limit", "100", cwd=tmp_path).returncode == 0
    folder = tmp_path / "b"
    pairs_run(folder, name="t")
    tasks = folder / "tasks.toml"
    task = f'protocol = "pairwise"\n[tasks.dataset]\nloader = "pairs_jsonl"\npath = "{folder / "pairs.jsonl"}"\n'
    tasks.write_text(f'name = "t"\njudge = "replay:{folder / "answers.jsonl"}"\n[[tasks]]\nname = "one"\n' + task
                     + '[[tasks]]\nname = "two"\n' + task)
    assert cli("run", str(tasks), "--quiet", cwd=tmp_path).returncode == 0
    assert cli("run", str(tasks), "--quiet", "--limit", "100", cwd=tmp_path).returncode == 0
    one_line(cli("run", str(tasks), "--quiet", "--limit", "2", cwd=tmp_path), "limit 2 would rewrite its tables")


def test_a_tasks_and_a_sweep_cells_paths_start_from_the_config_folder(tmp_path):
    """`[tasks.dataset] path` and a sweep cell's template file were read from the working folder
    (a task's source is 'FILE (task NAME)', a cell's 'FILE (cell {...})', neither a file): run from
    elsewhere, the task's data was not found and the cell's template was looked for in the cwd."""
    folder = tmp_path / "study"
    cfg = pairs_run(folder, name="t")
    (folder / "prompt.txt").write_text("Which is better? A: {text_a} B: {text_b}")
    task = 'protocol = "pairwise"\n[tasks.dataset]\nloader = "pairs_jsonl"\npath = "pairs.jsonl"\n'
    (folder / "tasks.toml").write_text(f'name = "tk"\njudge = "replay:{folder / "answers.jsonl"}"\n[[tasks]]\nname = "one"\n'
                                       + task)
    (folder / "sweep.toml").write_text(cfg.read_text().replace('name = "t"', 'name = "sw"')
                                       + '[matrix]\ntemplate = ["", "prompt.txt", "A={text_a} B={text_b}"]\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for name in ("tasks.toml", "sweep.toml"):
        r = cli("run", str(folder / name), "--quiet", cwd=elsewhere)
        assert r.returncode == 0, (name, r.stderr[-2000:])
    text = next(tmp_path.rglob("sw/results.json")).read_text()           # "" is the built-in prompt's cell
    assert {r["cell"] for r in json.loads(text)["results"]} == {"default", "prompt.txt", "A-text_a-B-text_b"}
    assert {r["judge"] for r in json.loads(text)["results"]} == {"replay:answers.jsonl"}   # named as published
    assert str(tmp_path) not in text


def test_a_run_of_another_kind_over_a_folder_leaves_none_of_the_old_runs_files(tmp_path):
    """A hostile pass: a sweep written with --overwrite over a plain run's folder kept the run's
    tables/, verdicts.parquet and log.jsonl beside its ranking (`litjudge annotate`, the item viewer
    and export read them as the sweep's), and a run over the sweep kept its sweep_ranking.csv.
    Each kind now leaves its own files only: a run, a sweep, a run of two tasks, a run again; a
    manifest edited to name task folders outside the run removes nothing there."""
    cfg = pairs_run(tmp_path / "a", name="x")
    folder = tmp_path / "runs" / "out" / "x"
    sweep = tmp_path / "a" / "sweep.toml"
    sweep.write_text(cfg.read_text() + "\n[matrix]\nlimit = [1, 2]\n")
    task = f'protocol = "pairwise"\n[tasks.dataset]\nloader = "pairs_jsonl"\npath = "{tmp_path / "a" / "pairs.jsonl"}"\n'
    tasks = tmp_path / "a" / "tasks.toml"
    tasks.write_text(f'name = "x"\njudge = "replay:{tmp_path / "a" / "answers.jsonl"}"\n[[tasks]]\nname = "one"\n'
                     + task + '[[tasks]]\nname = "tables"\n' + task)
    run_files = {"tables", "verdicts.parquet", "log.jsonl"}
    sweep_files = {"sweep_metrics.parquet", "sweep_ranking.parquet", "sweep_ranking.csv"}

    def held() -> set[str]:
        return {p.name for p in folder.iterdir()}

    def ran(config: Path) -> None:
        r = cli("run", str(config), "--quiet", "--overwrite", cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-3000:]

    ran(cfg)
    assert run_files <= held() and not sweep_files & held()
    ran(sweep)
    assert sweep_files <= held() and not run_files & held(), held()
    ran(tasks)              # a task named as a run's file is the task's folder, kept
    assert {"one", "tables"} <= held() and not sweep_files & held() and not {"verdicts.parquet", "log.jsonl"} & held()
    assert (folder / "tables" / "verdicts.parquet").is_file()
    victim = tmp_path / "victim"
    victim.mkdir()
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["tasks"] += [{"task": "../victim"}, {"task": ".."}, {"task": str(victim)}]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    ran(cfg)
    assert run_files <= held() and not {"one"} & held() and not sweep_files & held(), held()
    assert (folder / "tables" / "accuracy.csv").is_file() and victim.is_dir() and tmp_path.is_dir()
