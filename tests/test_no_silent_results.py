"""The third hostile probe's silent wrong results, each reproduced from the command line: a command
that computed its tables from no verdict, or spent past its budget, must say so and exit non-zero.
Replayed judges and our own pairs: no model is needed."""
from __future__ import annotations

import json

import polars as pl
import pytest

from tests.test_cli_probe import PAIRS, cli, pairs_run


def test_a_recording_that_matches_no_item_is_no_result(tmp_path):
    """Every verdict unparsed (the recording's ids match no item): exit 4 with one line, not 0."""
    cfg = pairs_run(tmp_path, answers={f"other-{i}": "A" for i in range(8)})
    r = cli("run", str(cfg), "--quiet", cwd=tmp_path)
    assert r.returncode == 4, (r.returncode, r.stderr[-2000:])
    line = [ln for ln in r.stderr.splitlines() if ln.startswith("litjudge: error:")]
    assert len(line) == 1 and "no verdict could be read" in line[0] and "all 8 unparsed" in line[0]
    # some verdicts unparsed is a result (with its unparsed count), not a failure
    answers = {f"{p['pair_id']}/{o}": "A" for p in PAIRS for o in ("ab", "ba")}
    answers["p0/ab"] = "neither"
    r = cli("run", str(pairs_run(tmp_path / "some", answers=answers)), "--quiet", cwd=tmp_path / "some")
    assert r.returncode == 0, r.stderr[-2000:]
    manifest = json.loads((tmp_path / "some" / "runs" / "out" / "p" / "manifest.json").read_text())
    assert manifest["verdicts"]["unparsed"] == 1


def test_one_run_per_folder_at_a_time(tmp_path):
    """While another process writes a run folder, a second run of the same name is refused in one
    line naming that process; once it is done (or dead: the kernel frees the lock), the run goes."""
    import os

    from litjudge.engine.core.run_lock import RunLock
    from tests.test_cli_probe import one_line

    cfg = pairs_run(tmp_path)
    held = RunLock(tmp_path / "runs" / "out" / "p")
    try:
        one_line(cli("run", str(cfg), "--quiet", cwd=tmp_path), "is in use by another litjudge process",
                 f"pid {os.getpid()}")
    finally:
        held.release()
    r = cli("run", str(cfg), "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]


def test_ensembles_refuse_what_they_cannot_compute(tmp_path):
    """Judges sharing one pair (one cluster): the held-out split would be empty and every figure
    NaN (it printed n = 0 with fitted weights, exit 0); refused naming how many are shared and
    needed. An ensemble config refuses the run overrides it cannot apply (they were ignored)."""
    from tests.test_cli_probe import one_line

    one = pairs_run(tmp_path / "one", "one", pairs=PAIRS[:2])
    two = pairs_run(tmp_path / "two", "two", pairs=[PAIRS[0]] + [dict(p, pair_id=f"q{i}") for i, p in enumerate(PAIRS)])
    for cfg in (one, two):
        assert cli("run", str(cfg), "--quiet", cwd=tmp_path).returncode == 0
    out = tmp_path / "runs" / "out"
    judges = ",".join(f"replay:{tmp_path / n / 'answers.jsonl'}" for n in ("one", "two"))
    for how in (["--jury"], ["--cascade", judges]):
        one_line(cli("ensemble", str(out / "one"), str(out / "two"), *how, cwd=tmp_path),
                 "share 2 human-labelled item(s) in 1 cluster(s)", "at least 2 clusters")
    ens = tmp_path / "one" / "ens.toml"
    ens.write_text('name = "e"\n[[runs]]\nconfig = "one.toml"\n[jury]\n')
    for flag in (["--judge", "smollm2-135m"], ["--mode", "distribution"], ["--data", str(tmp_path / "one" / "pairs.jsonl")]):
        one_line(cli("run", str(ens), *flag, cwd=tmp_path), f"{flag[0]} does not apply to an ensemble config")
    one_line(cli("run", str(ens), "--generate-only", cwd=tmp_path), "--generate-only", "has none")


def test_a_report_folder_holds_only_the_current_report(tmp_path):
    """A run name reused for another protocol kept the old report's CSVs and PNGs beside the new
    ones; `compare --out RUN_B` overwrote RUN_B's own tables. Now the report folder is cleared of an
    earlier report's files, and a folder that is not a report's is refused."""
    from tests.test_cli_probe import one_line

    cfg = pairs_run(tmp_path)
    assert cli("run", str(cfg), "--quiet", cwd=tmp_path).returncode == 0
    run = tmp_path / "runs" / "out" / "p"
    assert cli("report", str(run), cwd=tmp_path).returncode == 0
    (run / "report" / "tables" / "overall.csv").write_text("judge,kappa\nold,0.9\n")     # another protocol's,
    (run / "report" / "per_test_kappa.png").write_bytes(b"old")                          # listed as its report did
    with (run / "report" / ".litjudge-report").open("a") as mark:
        mark.write("tables/overall.csv\nper_test_kappa.png\n")
    assert cli("report", str(run), cwd=tmp_path).returncode == 0
    assert not (run / "report" / "tables" / "overall.csv").exists()
    assert not (run / "report" / "per_test_kappa.png").exists() and (run / "report" / "report.html").exists()
    tables = sorted(p.name for p in (run / "tables").iterdir())
    other = pairs_run(tmp_path / "b", "b")
    assert cli("run", str(other), "--quiet", cwd=tmp_path / "b").returncode == 0
    one_line(cli("compare", str(tmp_path / "b" / "runs" / "out" / "b"), str(run), "--out", str(run), cwd=tmp_path),
             "is a run folder, not a report's")
    assert sorted(p.name for p in (run / "tables").iterdir()) == tables


def test_reparse_says_when_the_data_file_changed(tmp_path):
    """reparse after the data file changed printed "0 changed" and nothing else; it now says the
    file is not the one judged (sha256 then and now)."""
    cfg = pairs_run(tmp_path)
    assert cli("run", str(cfg), "--quiet", cwd=tmp_path).returncode == 0
    run = tmp_path / "runs" / "out" / "p"
    same = cli("reparse", str(run), cwd=tmp_path)
    assert same.returncode == 0 and "changed since the run" not in same.stderr
    flipped = [dict(p, label="b" if p["label"] == "a" else "a") for p in PAIRS]
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in flipped))
    before = pl.read_parquet(run / "tables" / "accuracy.parquet")
    r = cli("reparse", str(run), cwd=tmp_path)
    assert r.returncode == 0 and "the data file" in r.stderr and "changed since the run" in r.stderr
    # and says which labels the tables read: pairwise keeps those stored with its requests (it said "as
    # they are now" while every label stayed as it was)
    assert "keep the human labels stored with the run's requests" in " ".join(r.stderr.split())
    assert pl.read_parquet(run / "tables" / "accuracy.parquet").equals(before)


def test_a_test_run_leaves_the_users_cache_alone(tmp_path):
    """Every litjudge path outside run folders points into the session's temporary folder: a real
    command (which writes a console log and may write calibrations, crash reports, the verdict
    cache) changes nothing under the user's cache folder."""
    from litjudge.engine.core.paths import cache_dir
    from tests.session_settings import SESSION_TMP, USER_CACHE

    assert cache_dir() != USER_CACHE and SESSION_TMP in cache_dir().parents

    def snapshot() -> dict:
        if not USER_CACHE.exists():
            return {}
        return {str(p): p.stat().st_mtime_ns for p in USER_CACHE.rglob("*")
                if p.is_file() and not {"models", "wheels"} & set(p.relative_to(USER_CACHE).parts[:1])}

    before = snapshot()
    cfg = pairs_run(tmp_path)
    assert cli("run", str(cfg), "--quiet", cwd=tmp_path, env={"LITJUDGE_VERDICT_CACHE": ""}).returncode == 0
    assert cli("plan", str(cfg), cwd=tmp_path).returncode == 0
    assert snapshot() == before


def test_a_damaged_history_line_does_not_stop_a_report(tmp_path):
    cfg = pairs_run(tmp_path)
    assert cli("run", str(cfg), "--quiet", cwd=tmp_path).returncode == 0
    run = tmp_path / "runs" / "out" / "p"
    with open(run / "history.jsonl", "a") as f:
        f.write('[1, 2]\n{"judges": "x"}\n{"judges": [5]}\n{"judges": [{"judge": "j", "requests": "many"}]}\n'
                '{"judges": [{"judge": 1}]}\n' + "[" * 100_000 + "\n{not json\n")
    r = cli("report", str(run), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    r = cli("run", str(cfg), "--quiet", cwd=tmp_path)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]


def test_jsonl_that_json_allows_but_no_text_can_hold(tmp_path):
    """A lone surrogate escape and nesting deeper than the parser goes were internal errors (a
    TypeError from the store's UTF-8, a RecursionError); now one line naming the file and line."""
    from tests.test_cli_probe import one_line

    good = json.dumps(PAIRS[0]) + "\n"
    for body, message in (('{"pair_id": "x", "prompt": "W\\ud800", "text_a": "a", "text_b": "b", "label": "a"}',
                           "lone surrogate escape"),
                          ('{"pair_id": "x", "prompt": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply")):
        folder = tmp_path / message.split()[-1]
        cfg = pairs_run(folder)
        (folder / "pairs.jsonl").write_text(good + body + "\n")
        one_line(cli("run", str(cfg), "--quiet", cwd=folder), "pairs.jsonl:2:", message)
    # an escaped pair (an emoji) is a character, and reads
    folder = tmp_path / "emoji"
    cfg = pairs_run(folder, pairs=[dict(PAIRS[0], prompt="\U0001F600")])
    (folder / "pairs.jsonl").write_text(json.dumps(dict(PAIRS[0], prompt="\U0001F600")) + "\n")   # \ud83d\ude00
    assert "\\ud83d" in (folder / "pairs.jsonl").read_text()
    assert cli("run", str(cfg), "--quiet", cwd=folder).returncode == 0


def test_generate_with_a_model_that_cannot_write_is_refused(tmp_path):
    """`litjudge generate --model replay:...` was an internal error (no renderer); an API judge
    asked for a key first. Both are one line: generation needs a local model."""
    from tests.test_cli_probe import one_line

    (tmp_path / "r.jsonl").write_text('{"id": "x", "response": "y"}\n')
    for model in (f"replay:{tmp_path / 'r.jsonl'}", "openai:gpt-x", "reward:smollm2-135m"):
        one_line(cli("generate", "--model", model, "--out", str(tmp_path / "g.jsonl"), cwd=tmp_path),
                 "--model", "writes stories with a local model")
    assert not (tmp_path / "g.jsonl").exists()
    # a reward model was "judge ... runs on the vllm-reward backend, which serves mode reward, not 'label'"
    one_line(cli("generate", "--model", "reward:smollm2-135m", "--out", str(tmp_path / "g.jsonl"), cwd=tmp_path),
             "--model", "a reward model: it scores texts and generates none")


def test_a_damaged_cache_blocks_nothing(tmp_path):
    """A corrupt shared cache blocked even replay runs (which never use it) and advised
    --rebuild-store (no help). A replay run now does not open it; a run that would use it sets it
    aside with one warning naming the file, how to move it, --cache and --no-cache."""
    from tests.fake_api import FakeAPI
    from tests.test_newcomer import DEMO_API

    cache = tmp_path / "verdicts.sqlite"
    cache.write_bytes(b"this is not a database" * 100)
    env = {"LITJUDGE_VERDICT_CACHE": str(cache)}
    r = cli("run", str(pairs_run(tmp_path)), "--quiet", cwd=tmp_path, env=env)
    assert r.returncode == 0 and "cache" not in r.stderr, r.stderr[-2000:]
    with FakeAPI() as server:
        cfg = tmp_path / "api.toml"
        cfg.write_text(DEMO_API.format(name="api", url=server.url))
        r = cli("run", str(cfg), "--quiet", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    warning = [ln for ln in r.stderr.splitlines() if "shared verdict cache is left aside" in ln]
    assert len(warning) == 1 and str(cache) in warning[0] and "--no-cache" in warning[0] and "--cache" in warning[0]
    assert "--rebuild-store" not in r.stderr


def test_a_killed_runs_temporaries_are_removed_by_the_next_run(tmp_path):
    cfg = pairs_run(tmp_path)
    assert cli("run", str(cfg), "--quiet", cwd=tmp_path).returncode == 0
    run = tmp_path / "runs" / "out" / "p"
    for leftover in (run / ".verdicts.parquet.k3j_x9a2", run / "tables" / ".accuracy.parquet.zz81ab0c"):
        leftover.write_bytes(b"half written")
    assert cli("run", str(cfg), "--quiet", cwd=tmp_path).returncode == 0
    assert not list(run.glob(".verdicts.parquet.*")) and not list((run / "tables").glob(".*"))
    assert (run / ".lock").exists() and (run / "verdicts.parquet").exists()


def test_csv_cells_are_text_and_another_delimiter_is_named(tmp_path):
    """A CSV whose text cells look like numbers was refused ("got 1"): cells are read as text now
    (numeric fields converted where a number is expected); a ;-separated file said only "missing
    field 'prompt'": its one-column header is named now, with the delimiter it looks like."""
    from tests.test_cli_probe import one_line

    (tmp_path / "prefs.csv").write_text("pair_id,prompt,text_a,text_b,label\n" + "".join(
        f"{i:03d},{i},1,2,{'ab'[i % 2]}\n" for i in range(6)))
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'name = "c"\nprotocol = "pairwise"\njudge = "replay:{tmp_path / "a.jsonl"}"\n'
                   '[dataset]\nloader = "table"\npath = "prefs.csv"\nprotocols = ["pairwise"]\n')
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"id": f"{i:03d}/{o}", "response": "A"}) + "\n"
                                              for i in range(6) for o in ("ab", "ba")))
    r = cli("run", str(cfg), "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    import polars as pl
    v = pl.read_parquet(tmp_path / "runs" / "out" / "c" / "verdicts.parquet")
    assert sorted(set(v["pair_id"].to_list())) == [f"{i:03d}" for i in range(6)]        # "000", not 0
    (tmp_path / "prefs.csv").write_text("pair_id;prompt;text_a;text_b;label\n1;p;a;b;a\n")
    one_line(cli("run", str(cfg), "--quiet", cwd=tmp_path), "prefs.csv:1:", "looks ';'-separated")


def test_a_plan_that_selects_no_item_says_why_and_an_unknown_loader_is_named(tmp_path):
    from tests.test_cli_probe import one_line

    (tmp_path / "a.jsonl").write_text("")
    cfg = tmp_path / "z.toml"
    cfg.write_text(f'name = "z"\nprotocol = "classification"\ndataset = "confederacy"\njudge = "replay:{tmp_path / "a.jsonl"}"\n')
    r = cli("plan", str(cfg), "--no-calibrate", cwd=tmp_path)
    if "not at" not in r.stderr:                                    # the Confederacy data is there
        assert r.returncode == 0 and "selects no item to judge" in r.stderr and "no ground-truth category" in r.stderr
    bad = pairs_run(tmp_path / "l", extra="").read_text().replace('loader = "pairs_jsonl"', 'loader = "pairs_jsnl"')
    (tmp_path / "l" / "p.toml").write_text(bad)
    one_line(cli("run", str(tmp_path / "l" / "p.toml"), cwd=tmp_path / "l"), "dataset.loader",
             "unknown loader 'pairs_jsnl'", "did you mean 'pairs_jsonl'")


def test_an_ensemble_config_names_an_unknown_jury_judge_before_running(tmp_path):
    from tests.test_cli_probe import one_line

    pairs_run(tmp_path, "m")
    ens = tmp_path / "ens.toml"
    ens.write_text('name = "e"\n[[runs]]\nconfig = "m.toml"\n[jury]\njudges = ["replay:nobody"]\n')
    one_line(cli("run", str(ens), cwd=tmp_path), "ens.toml: jury.judges", "names 'replay:nobody'")
    assert not (tmp_path / "runs" / "out" / "m").exists()                  # no member ran first


def test_plan_refuses_the_engine_settings_a_run_refuses(tmp_path):
    from tests.test_cli_probe import one_line

    cfg = tmp_path / "k.toml"
    cfg.write_text('name = "k"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\njudge = "smollm2-135m"\n'
                   "[engine]\nkv_cache_gib = 1e6\n")
    one_line(cli("plan", str(cfg), "--no-calibrate", cwd=tmp_path), "engine.kv_cache_gib",
             "more than this machine's memory")


def test_plan_sees_a_run_written_with_out(tmp_path):
    cfg = pairs_run(tmp_path)
    assert cli("run", str(cfg), "--quiet", "--out", str(tmp_path / "elsewhere"), cwd=tmp_path).returncode == 0
    r = cli("plan", str(cfg), "--out", str(tmp_path / "elsewhere"), cwd=tmp_path)
    assert r.returncode == 0 and "8 of 8 distinct requests are stored already" in r.stdout, r.stdout[-1500:]


def test_console_tables_never_split_a_judge_name(capsys):
    import polars as pl

    from litjudge.engine.app.console.tables import print_table

    names = ["replay:claude3-opus", "replay:gpt4-turbo-2024-04-09", "qwen2.5-coder-1.5b"]
    print_table(pl.DataFrame({"judge": names, **{f"metric_{i}": [0.123456] * 3 for i in range(14)}}), "t")
    out = capsys.readouterr().out
    assert all(name in out for name in names)
    # a value that rounds to zero is shown as 0.000 (a jury's kappa read -0.000); NaN and null stay
    print_table(pl.DataFrame({"kappa": [-0.0001, 0.25, float("nan"), None]}), "t")
    out = capsys.readouterr().out
    assert "-0.000" not in out and "0.000" in out and "0.25" in out and "NaN" in out and "null" in out


def test_a_folder_that_is_no_model_is_refused_before_its_files_are_listed(tmp_path, capsys):
    """`judge = "~"` listed every file under the home folder (8 s here; `"/"`, the whole disk)
    before saying it is no model folder: the judge's version, every file's size and time, was read
    first. It is refused from its top level now: no folder under it is opened (Python's audit
    events for os.scandir and os.listdir, in this process)."""
    from litjudge.engine.app.console.cli import main
    from tests.audit_events import Watched

    home = tmp_path / "home"
    for i in range(3):
        (home / f"sub{i}" / "deeper").mkdir(parents=True)
        (home / f"sub{i}" / "deeper" / "notes.txt").write_text("x")
    cfg = tmp_path / "f.toml"
    cfg.write_text(f'name = "f"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\njudge = "{home}"\n')
    with Watched(home / "sub", ("os.scandir", "os.listdir")) as listed:
        try:
            rc = main(["plan", str(cfg), "--no-calibrate"])
        except SystemExit as exc:
            rc = int(exc.code or 0)
    err = capsys.readouterr().err
    assert rc == 2 and "not a complete Hugging Face model folder" in err and len(err.strip().splitlines()) == 1, err
    assert listed.seen == [], listed.seen


def test_incomplete_judge_folders_are_named(tmp_path):
    """A judge folder with only config.json, and a converted judge whose litjudge-model.json was cut
    short, were internal errors; each is one line now."""
    from tests.test_cli_probe import one_line

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text('{"model_type": "llama"}')
    cfg = tmp_path / "f.toml"
    cfg.write_text(f'name = "f"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\njudge = "{tmp_path / "model"}"\n')
    one_line(cli("plan", str(cfg), "--no-calibrate", cwd=tmp_path), "not a complete Hugging Face model folder",
             "weights", "tokenizer")
    # a recording given as the judge, without `replay:` (a new user's try: "not a complete Hugging Face
    # model folder", of a file)
    (tmp_path / "answers.jsonl").write_text('{"id": "x", "response": "Yes"}\n')
    cfg.write_text('name = "f"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\njudge = "answers.jsonl"\n')
    one_line(cli("plan", str(cfg), "--no-calibrate", cwd=tmp_path),
             "judge answers.jsonl is a file, not a model folder: a recording of answers is the judge replay:answers.jsonl")
    cache = tmp_path / "models-cache"
    (cache / "models" / "smollm2-135m").mkdir(parents=True)
    (cache / "models" / "smollm2-135m" / "litjudge-model.json").write_text('{"alias": "smollm2-135m", "chec')
    cfg.write_text('name = "f"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\njudge = "smollm2-135m"\n')
    one_line(cli("plan", str(cfg), "--no-calibrate", cwd=tmp_path, env={"LITJUDGE_MODEL_CACHE": str(cache)}),
             "litjudge-model.json is damaged", "delete the folder")


def test_status_and_plan_read_a_read_only_run_folder(tmp_path):
    """`status` and `plan` only read: a run folder on a read-only disk (a bind mount here, since
    root's permissions are not enforced) is inspected, not refused."""
    import subprocess

    cfg = pairs_run(tmp_path)
    assert cli("run", str(cfg), "--quiet", "--out", str(tmp_path / "src"), cwd=tmp_path).returncode == 0
    ro = tmp_path / "ro"
    ro.mkdir()
    mounted = subprocess.run(["mount", "--bind", str(tmp_path / "src"), str(ro)], capture_output=True)
    if mounted.returncode:
        pytest.skip(f"a read-only bind mount is not permitted here: {mounted.stderr.decode()[:200]}")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(ro)], check=True, capture_output=True)
        status = cli("status", str(ro / "p"), cwd=tmp_path)
        assert status.returncode == 0 and "no provider batches" in status.stdout, status.stderr[-2000:]
        plan = cli("plan", str(cfg), "--out", str(ro), cwd=tmp_path)
        assert plan.returncode == 0 and "8 of 8 distinct requests are stored already" in plan.stdout, plan.stderr[-2000:]
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True)


def test_a_recording_named_relatively_is_never_another_folders_file_of_the_name(tmp_path):
    """A hostile pass: `judge = "replay:judge.jsonl"` read the working folder's file of the name
    before the one beside the config: run from another folder holding one, the same config judged
    with other answers (accuracy 1.000 -> 0.000), into the same run folder, silently. Both there
    and different is one line; beside the config alone (or where both are one file) it runs."""
    cfg = pairs_run(tmp_path / "proj")
    cfg.write_text(cfg.read_text().replace(f"replay:{tmp_path / 'proj' / 'answers.jsonl'}", "replay:answers.jsonl"))
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "answers.jsonl").write_text((tmp_path / "proj" / "answers.jsonl").read_text().replace('"A"', '"B"'))
    r = cli("run", str(cfg), "--quiet", cwd=other)
    line = [ln for ln in r.stderr.splitlines() if ln.startswith("litjudge: error:")]
    assert r.returncode == 2 and len(line) == 1, r.stderr[-2000:]
    assert f"answers.jsonl is both beside the config ({tmp_path / 'proj' / 'answers.jsonl'}) and in the working " \
           f"folder ({other / 'answers.jsonl'}), two files: give the path of the one meant" in line[0], line
    assert not (other / "runs").exists()
    (tmp_path / "third").mkdir()
    for cwd in (tmp_path / "proj", tmp_path / "third"):
        assert cli("run", str(cfg), "--quiet", cwd=cwd).returncode == 0
