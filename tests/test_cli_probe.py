"""The second hostile probe (311 bad inputs and faults through the CLI), its 61 failures each
reproduced from the command line in a temporary folder: silent wrong results, crashes, side
effects and misleading messages. The promise: one line naming what is wrong (exit 2), never a
traceback, never a silently wrong result, nothing written before the check passes. Replayed
judges and a pairs file of our own: no model is needed."""
from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import DATA, PROJECT_ROOT, needs_data
from tests.warm_cli import run_cli

PAIRS = [{"pair_id": f"p{i}", "prompt": "Write.", "text_a": f"one {i}", "text_b": f"two {i} words", "label": "ab"[i % 2]}
         for i in range(4)]


def cli(*args: str, cwd: Path, env: dict | None = None, timeout: float = 300,
        preexec=None) -> subprocess.CompletedProcess:
    """The real CLI in a subprocess, run from `cwd` (its runs/out is there)."""
    path = os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))   # keeps tests/faults
    full = {**os.environ, "PYTHONPATH": path, **(env or {})}
    if preexec is None:
        return run_cli(list(args), cwd, full, timeout)
    return subprocess.run([sys.executable, "-m", "litjudge", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=timeout, preexec_fn=preexec)


def one_line(r: subprocess.CompletedProcess, *expected: str) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout[-1500:], r.stderr[-3000:])
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr[-3000:]
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.startswith("litjudge: error:")]
    assert len(lines) == 1, r.stderr[-3000:]
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


def pairs_run(folder: Path, name: str = "p", extra: str = "", pairs: list[dict] | None = None,
              answers: dict[str, str] | None = None, top: str = "") -> Path:
    """A pairwise config over our own pairs, judged by a recording (A for every item by default);
    `top`: more top-level keys, `extra`: more keys of [dataset], then more tables."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = pairs if pairs is not None else PAIRS
    (folder / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in rows))
    answers = answers if answers is not None else {f"{p['pair_id']}/{o}": "A" for p in rows for o in ("ab", "ba")}
    (folder / "answers.jsonl").write_text("".join(json.dumps({"id": k, "response": v}) + "\n" for k, v in answers.items()))
    cfg = folder / f"{name}.toml"
    cfg.write_text(f'name = "{name}"\nprotocol = "pairwise"\njudge = "replay:{folder / "answers.jsonl"}"\n{top}'
                   f'[dataset]\nloader = "pairs_jsonl"\npath = "pairs.jsonl"\n{extra}')
    return cfg


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished replay run folder (copied by the tests that change it)."""
    folder = tmp_path_factory.mktemp("finished")
    cfg = pairs_run(folder)
    r = cli("run", str(cfg), "--quiet", cwd=folder)
    assert r.returncode == 0, r.stderr[-3000:]
    return folder / "runs" / "out" / "p"


def copy_run(finished: Path, tmp_path: Path, name: str = "p") -> Path:
    target = tmp_path / "runs" / "out" / name
    shutil.copytree(finished, target)
    return target


# -- silent wrong results ---------------------------------------------------------------------
@needs_data
def test_conflicting_duplicate_expert_labels_are_refused(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(DATA / "ttcw", data / "ttcw")
    majority = json.loads((data / "ttcw" / "expert_majority.json").read_text())
    first = dict(majority[0])
    first["binary_verdict"] = "No" if first["binary_verdict"] == "Yes" else "Yes"
    (data / "ttcw" / "expert_majority.json").write_text(json.dumps(majority + [first]))
    r = cli("plan", str(PROJECT_ROOT / "runs" / "ttcw-replay.toml"), "--data-root", str(data), "--no-calibrate",
            cwd=tmp_path)
    one_line(r, "expert_majority.json", "is labelled twice (rows 1 and", "a different verdict")


def test_a_stale_report_is_marked_and_a_run_without_tables_refused(tmp_path):
    cfg = pairs_run(tmp_path)
    assert cli("run", str(cfg), "--quiet", cwd=tmp_path).returncode == 0
    run = tmp_path / "runs" / "out" / "p"
    assert cli("report", str(run), cwd=tmp_path).returncode == 0
    assert "Out of date" not in (run / "report" / "report.md").read_text()
    again = cli("run", str(cfg), "--quiet", "--show", "0", cwd=tmp_path)         # the run is written again
    # --show 0: no table (it printed each one's header over a row of ellipses), the counts and folder
    assert again.returncode == 0 and "┌" not in again.stdout and "Results: " in again.stdout, again.stdout
    one_line(cli("run", str(cfg), "--show", "-1", cwd=tmp_path), "--show", "must be >= 0 (0 prints no table), got -1")
    assert (run / "report" / "report.md").read_text().startswith("> **Out of date.**")
    assert "id='stale'" in (run / "report" / "report.html").read_text() and (run / "report" / "STALE.txt").exists()
    assert cli("report", str(run), cwd=tmp_path).returncode == 0                  # rebuilt: no longer stale
    assert not (run / "report" / "STALE.txt").exists() and "Out of date" not in (run / "report" / "report.md").read_text()
    shutil.rmtree(run / "tables")
    for command in ("report", "compare"):
        one_line(cli(command, str(run), cwd=tmp_path), "the run has no tables", f"litjudge reparse {run}")


def test_compare_labels_runs_by_folder_and_refuses_a_run_twice(tmp_path, finished):
    a = copy_run(finished, tmp_path / "a", "r1")
    b = copy_run(finished, tmp_path / "b", "r1")
    r = cli("compare", str(a), str(b), "--out", str(tmp_path / "cmp"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    runs = pl.read_csv(tmp_path / "cmp" / "tables" / "runs.csv")
    assert sorted(runs["run"].unique().to_list()) == ["a/runs/out/r1", "b/runs/out/r1"]
    one_line(cli("compare", str(a), str(a), "--out", str(tmp_path / "cmp2"), cwd=tmp_path), "the same run is given twice")
    assert not (tmp_path / "cmp2").exists()


@pytest.mark.parametrize("score", ["NaN", "1e400", "-Infinity"])
def test_non_finite_human_scores_are_refused_with_file_and_line(tmp_path, score):
    rows = [f'{{"group": "g", "item_id": "{i}", "text": "story {i}", "human_score": {s}, "reference": {str(i == 0).lower()}}}'
            for i, s in enumerate(["5", score, "3"])]
    (tmp_path / "ref.jsonl").write_text("\n".join(rows) + "\n")
    cfg = tmp_path / "c.toml"
    cfg.write_text('name = "c"\nprotocol = "reference_likert"\njudge = "replay:x.jsonl"\n'
                   '[dataset]\nloader = "table"\npath = "ref.jsonl"\n')
    (tmp_path / "x.jsonl").write_text("")
    one_line(cli("plan", str(cfg), "--no-calibrate", cwd=tmp_path), "ref.jsonl:2", "must be a finite number")


def test_an_ensemble_of_judges_without_shared_items_is_refused(tmp_path):
    one = pairs_run(tmp_path / "one", "one", pairs=PAIRS[:2])
    two = pairs_run(tmp_path / "two", "two", pairs=[dict(p, pair_id=f"q{i}") for i, p in enumerate(PAIRS)])
    for cfg in (one, two):
        assert cli("run", str(cfg), "--quiet", cwd=tmp_path).returncode == 0
    out = tmp_path / "runs" / "out"
    judges = [f"replay:{tmp_path / 'one' / 'answers.jsonl'}", f"replay:{tmp_path / 'two' / 'answers.jsonl'}"]
    one_line(cli("ensemble", str(out / "one"), str(out / "two"), "--jury", cwd=tmp_path), "share 0 human-labelled item(s)")
    one_line(cli("ensemble", str(out / "one"), str(out / "two"), "--cascade", ",".join(judges), cwd=tmp_path),
             "share 0 human-labelled item(s)")
    one_line(cli("ensemble", str(out / "one"), "--jury", "replay:nobody", cwd=tmp_path),
             "--jury names 'replay:nobody', not a judge of these runs")


@pytest.mark.parametrize("top, extra, message", [
    ("", '[engine.judges."nosuch-judge"]\nmax_num_seqs = 4\n', 'engine.judges.nosuch-judge: names no judge of this run'),
    ('backend = "nosuch"\n', "", "backend: unknown backend 'nosuch'"),
    ("", 'format = "xlsx"\n', "dataset.format: must be one of"),
])
def test_ignored_or_misread_config_values(tmp_path, top, extra, message):
    one_line(cli("plan", str(pairs_run(tmp_path, extra=extra, top=top)), "--no-calibrate", cwd=tmp_path), message)


def test_max_tokens_past_the_context_window(tmp_path):
    cfg = tmp_path / "d.toml"
    cfg.write_text((PROJECT_ROOT / "runs" / "demo.toml").read_text() + "\n[sampling]\nmax_tokens = 1000000000\n")
    one_line(cli("plan", str(cfg), "--no-calibrate", cwd=tmp_path), "max_tokens = 1,000,000,000 leaves no room")


@needs_data
@pytest.mark.parametrize("options, message", [
    ('criterion = ""', "options.criterion is empty"),
    ('criterion = "creativty"', "options.criterion 'creativty' is none of the papers' criteria (creativity, quality, "
                                "innovativeness, similarity, poeticness, aut) (did you mean 'creativity'?); an "
                                "instruction of your own is a sentence"),      # the typo was the whole instruction
    ('criterion = "Quality"', "(did you mean 'quality'?)"),
    ('criterion = "aut"\nsegments = 0\ndesign = "segmented"', "options.segments must be >= 1"),
])
def test_listwise_options_that_cannot_judge_anything(tmp_path, options, message):
    cfg = tmp_path / "l.toml"
    cfg.write_text(f'name = "l"\nprotocol = "listwise"\ndataset = "aut-ocsai"\n[options]\n{options}\n')
    one_line(cli("plan", str(cfg), "--no-calibrate", cwd=tmp_path), message)


def test_a_group_of_one_item_is_named(tmp_path):
    rows = [{"group": "solo", "item_id": "a", "text": "a use"}] + [
        {"group": "pair", "item_id": f"b{i}", "text": f"use {i}"} for i in range(2)]
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = tmp_path / "l.toml"
    cfg.write_text('name = "l"\nprotocol = "listwise"\n[dataset]\nloader = "table"\npath = "items.jsonl"\n')
    one_line(cli("plan", str(cfg), "--no-calibrate", cwd=tmp_path), "group 'solo'", "list 1 holds 1 item(s)")


# -- crashes ------------------------------------------------------------------------------------
@pytest.mark.parametrize("args, message", [
    (("bench", "--stories", "0"), "--stories: must be >= 1"),
    (("bench", "--stories", "-1"), "--stories: must be >= 1"),
    (("generate", "--out", "x.jsonl", "--limit", "-1"), "--limit: must be >= 0"),
    (("judges", "nosuch"), "unknown judge alias 'nosuch'"),
])
def test_command_line_values(tmp_path, args, message):
    r = cli(*args, cwd=tmp_path)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]


@pytest.mark.parametrize("content, message", [("{not json", "not valid JSON"), ("{}", "no entry 'pairwise_litbench")])
def test_damaged_paper_prompts(tmp_path, content, message):
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "paper_prompts.json").write_text(content)
    cfg = pairs_run(tmp_path, extra='[options]\ntemplate = "minimal"\n')
    one_line(cli("plan", str(cfg), "--no-calibrate", cwd=tmp_path, env={"LITJUDGE_PROMPTS_ROOT": str(prompts)}),
             "paper_prompts.json", message)


@pytest.mark.parametrize("damage, command, message", [
    ("manifest-config", "report", "damaged (no config.protocol)"),
    ("manifest-judges", "report", "damaged (no judges)"),
    ("manifest-judges", "reparse", "damaged (no judges)"),
    ("parquet", "report", "unreadable"),
    ("sweep", "reparse", "a sweep, not a run"),
])
def test_damaged_run_folders(tmp_path, finished, damage, command, message):
    run = copy_run(finished, tmp_path)
    manifest = json.loads((run / "manifest.json").read_text())
    if damage == "manifest-config":
        manifest = {"config": {}}
    elif damage == "manifest-judges":
        manifest.pop("judges")
    elif damage == "sweep":
        manifest["kind"] = "sweep"
    (run / "manifest.json").write_text(json.dumps(manifest))
    if damage == "parquet":
        (run / "tables" / "accuracy.parquet").write_bytes(b"PAR1 not really")
    one_line(cli(command, str(run), cwd=tmp_path), message)


def test_every_command_that_reads_a_run_takes_its_name(tmp_path, finished):
    """`report NAME` and `export NAME` were "not a run folder" where `annotate NAME` and `run`
    took the run's name (a new user's try); a name of no run names where runs are looked for."""
    run = copy_run(finished, tmp_path, "mine")
    env = {"LITJUDGE_RUNS_DIR": str(run.parent)}
    r = cli("report", "mine", "--out", str(tmp_path / "rep"), cwd=tmp_path, env=env)
    assert r.returncode == 0 and (tmp_path / "rep" / "report.html").is_file(), r.stderr[-2000:]
    r = cli("export", "mine", "--to", str(tmp_path / "ds"), cwd=tmp_path, env=env)
    assert r.returncode == 0 and (tmp_path / "ds" / "README.md").is_file(), r.stderr[-2000:]
    one_line(cli("export", "nope", "--to", str(tmp_path / "ds2"), cwd=tmp_path, env=env),
             f"not a run folder (give the folder `litjudge run` wrote, e.g. {run.parent / 'NAME'}, or the run's name)")


def test_reparse_survives_a_bad_log_line(tmp_path, finished):
    run = copy_run(finished, tmp_path)
    with (run / "log.jsonl").open("a") as fh:
        fh.write("{not json\n")
    r = cli("reparse", str(run), cwd=tmp_path)
    assert r.returncode == 0 and "log.jsonl:9 is not valid JSON" in r.stderr, r.stderr[-2000:]


def test_a_recorded_response_that_is_not_text(tmp_path):
    cfg = pairs_run(tmp_path)
    (tmp_path / "answers.jsonl").write_text('{"id": "p0/ab", "response": ["A"]}\n')
    one_line(cli("plan", str(cfg), "--no-calibrate", cwd=tmp_path), "answers.jsonl:1", "'response' must be text")


@pytest.mark.parametrize("engine, message", [
    ("kv_cache_gib = 1e6", "engine.kv_cache_gib: kv_cache_gib = 1e+06 is more than this machine's memory"),
    ("max_num_batched_tokens = 1", "engine.max_num_batched_tokens: on CPU a prompt is never split"),
    ("max_model_len = 100000", "engine.max_model_len: max_model_len 100000 is longer than judge 'smollm2-135m'"),
])
def test_engine_settings_vllm_would_refuse_are_one_line_before_it_starts(tmp_path, engine, message):
    cfg = tmp_path / "d.toml"
    demo = (PROJECT_ROOT / "runs" / "demo.toml").read_text()
    cfg.write_text(demo.split("[engine]")[0] + "[engine]\n" + engine + "\n")
    r = cli("run", str(cfg), "--quiet", cwd=tmp_path)
    one_line(r, message)
    assert not (tmp_path / "runs" / "out" / "demo").exists()              # refused: no run folder left behind


def test_generate_only_needs_a_generate_stage(tmp_path):
    cfg = pairs_run(tmp_path)
    one_line(cli("run", str(cfg), "--generate-only", cwd=tmp_path), "--generate-only runs a [generate] stage")


# -- side effects -------------------------------------------------------------------------------
def test_names_cannot_leave_the_outputs_folder(tmp_path, finished):
    r = cli("ensemble", str(finished), "--jury", "--name", "../../x", cwd=tmp_path)
    one_line(r, "letters, digits, '-' and '_' only")
    assert not (tmp_path.parent / "x").exists() and not (tmp_path / "x").exists()


def test_a_refused_run_creates_no_folder(tmp_path):
    bad = [dict(PAIRS[0]), dict(PAIRS[1], label="maybe")]
    cfg = pairs_run(tmp_path, pairs=bad)
    one_line(cli("run", str(cfg), "--quiet", cwd=tmp_path), "pairs.jsonl:2")
    assert not (tmp_path / "runs" / "out" / "p").exists()


def test_an_ensemble_config_is_checked_whole_before_its_members_run(tmp_path):
    pairs_run(tmp_path, "m")
    ens = tmp_path / "ens.toml"
    ens.write_text('name = "e"\n[[runs]]\nconfig = "m.toml"\n[cascade]\njudges = ["x"]\ntarget = 2.0\n')
    one_line(cli("run", str(ens), cwd=tmp_path), "ens.toml", "target")
    assert not (tmp_path / "runs" / "out" / "m").exists()                  # no member ran
    ens.write_text('name = "e"\n[[runs]]\nconfig = "m.toml"\nmdoe = "label"\n[jury]\n')
    one_line(cli("run", str(ens), cwd=tmp_path), "ens.toml runs[0]: mdoe: unknown key")
    one_line(cli("plan", str(ens), cwd=tmp_path), "an ensemble config pools finished runs")


def test_an_output_path_that_is_a_file(tmp_path):
    cfg = pairs_run(tmp_path)
    (tmp_path / "outfile").write_text("x")
    one_line(cli("run", str(cfg), "--quiet", "--out", str(tmp_path / "outfile"), cwd=tmp_path),
             "a file stands where a folder is needed")


def test_a_file_size_limit_is_named(tmp_path):
    cfg = pairs_run(tmp_path, pairs=[dict(PAIRS[0], text_a="long " * 4000)] + PAIRS[1:])

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))
    r = cli("run", str(cfg), "--quiet", cwd=tmp_path, preexec=limit)
    line = one_line(r)
    assert "file-size limit" in line, line


# -- misleading messages ------------------------------------------------------------------------
@needs_data
@pytest.mark.parametrize("judge, root, message", [
    ("replay:nosuch", None, "no recorded judge 'nosuch'"),
    ("replay:gpt4", "elsewhere", "are not at"),
])
def test_replay_messages_say_what_is_missing(tmp_path, judge, root, message):
    args = ["plan", str(PROJECT_ROOT / "runs" / "ttcw-replay.toml"), "--judge", judge, "--no-calibrate"]
    if root:
        args += ["--data-root", str(tmp_path / root)]
    line = one_line(cli(*args, cwd=tmp_path), message)
    if root is None:
        assert "recorded: " in line and "gpt4" in line and "data fetch" not in line


def test_a_config_with_a_byte_order_mark_reads(tmp_path):
    cfg = pairs_run(tmp_path)
    cfg.write_bytes(b"\xef\xbb\xbf" + cfg.read_bytes())
    r = cli("plan", str(cfg), "--no-calibrate", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]


@needs_data
def test_data_file_on_a_folder_layout(tmp_path):
    (tmp_path / "mine.jsonl").write_text('{"x": 1}\n')
    one_line(cli("plan", str(PROJECT_ROOT / "runs" / "ttcw-replay.toml"), "--data", str(tmp_path / "mine.jsonl"),
                 "--no-calibrate", cwd=tmp_path), "reads a folder", "not a file")


def test_replicas_zero_and_data_on_a_generate_config(tmp_path):
    cfg = pairs_run(tmp_path)
    r = cli("run", str(cfg), "--replicas", "0", cwd=tmp_path)
    assert r.returncode == 2 and "--replicas: must be >= 1 (1 is one engine" in r.stderr
    one_line(cli("run", str(PROJECT_ROOT / "runs" / "aut-study.toml"), "--data", str(tmp_path / "pairs.jsonl"),
                 cwd=tmp_path), "--data reads your file", "[generate]")


def test_budgets_on_an_ensemble_folder(tmp_path, finished):
    r = cli("ensemble", str(finished), "--jury", "--name", "ens", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    one_line(cli("budgets", str(tmp_path / "runs" / "out" / "ens"), cwd=tmp_path), "this folder is a ensemble")


def test_data_list_says_partial_after_an_interrupted_fetch(tmp_path):
    from litjudge.engine.data.cards import load_card

    card = load_card("ttcw")
    folder = tmp_path / "data" / card.path
    folder.mkdir(parents=True)
    for name in list(card.upstream["files"])[:3]:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("x")
    r = cli("data", "list", "--data-root", str(tmp_path / "data"), cwd=tmp_path)
    assert r.returncode == 0
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("ttcw "))
    assert f"partial (3 of {len(card.upstream['files'])} files)" in line


def test_type_errors_read_as_words(tmp_path):
    rows = ['{"group": "g", "item_id": "a", "text": "x", "human_score": "high", "reference": true}']
    (tmp_path / "ref.jsonl").write_text("\n".join(rows) + "\n")
    cfg = tmp_path / "c.toml"
    cfg.write_text('name = "c"\nprotocol = "reference_likert"\njudge = "replay:x.jsonl"\n'
                   '[dataset]\nloader = "reference_jsonl"\npath = "ref.jsonl"\n')
    (tmp_path / "x.jsonl").write_text("")
    line = one_line(cli("plan", str(cfg), "--no-calibrate", cwd=tmp_path), "should be a number")
    assert "<class" not in line


def test_a_listing_into_a_closed_pipe_ends_quietly(tmp_path):
    """`litjudge protocols | head -0`: the reader is gone before litjudge writes; no "cannot be
    written" error, the shell's exit status for a closed pipe."""
    path = os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))
    read, write = os.pipe()
    os.close(read)
    try:
        r = subprocess.run([sys.executable, "-m", "litjudge", "protocols"], cwd=tmp_path, stdout=write,
                           stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": path}, text=True, timeout=120)
    finally:
        os.close(write)
    assert r.returncode == 141 and r.stderr == "", (r.returncode, r.stderr)


def test_the_parser_is_built_once_and_each_call_parses_afresh():
    """The console's parser is built once a process (console/cli.py: `parser`); a call's options
    never reach the next call's namespace."""
    from litjudge.engine.app.console.cli import parser

    first = parser().parse_args(["run", "demo", "--limit", "3", "--show", "5", "--no-cache"])
    second = parser().parse_args(["plan", "other"])
    assert parser() is parser()
    assert (first.command, first.config, first.show, first.no_cache) == ("run", "demo", 5, True)
    assert (second.command, second.config, second.limit, second.no_cache) == ("plan", "other", None, False)
    assert not hasattr(second, "show") and first.fn is not second.fn


def test_a_reparse_stopped_mid_write_is_refused_by_report_and_export_until_reparsed(tmp_path, finished, monkeypatch):
    """A reparse killed between its tables and its verdicts left new tables beside the old verdicts
    and manifest, which export published as one run (a card's kappa 0.052 over data whose was 0.0).
    The folder is marked while its outputs are written: report and export refuse it in one line
    naming reparse, which writes it whole again."""
    from litjudge.engine.app import outputs
    from litjudge.engine.app.reparse import reparse

    run = copy_run(finished, tmp_path)
    real = outputs.write_file

    def stopped(path, write):
        if path.name == "verdicts.parquet":
            raise KeyboardInterrupt
        return real(path, write)

    monkeypatch.setattr(outputs, "write_file", stopped)
    with pytest.raises(KeyboardInterrupt):
        reparse(run)
    monkeypatch.setattr(outputs, "write_file", real)
    assert (run / outputs.WRITING).exists()
    for args in (("report", str(run)), ("export", str(run), "--to", str(tmp_path / "hf"))):
        one_line(cli(*args, cwd=tmp_path), "were being written when that stopped", f"litjudge reparse {run}")
    assert not (tmp_path / "hf").exists()
    assert reparse(run)["results"] > 0 and not (run / outputs.WRITING).exists()
    assert cli("report", str(run), cwd=tmp_path).returncode == 0


def test_reparse_and_status_of_a_damaged_or_busy_store_are_one_line(tmp_path, finished):
    """An emptied store.sqlite: reparse was an internal error (ColumnNotFoundError) and made the
    file an empty store; a damaged provider batch row: status a JSONDecodeError; a folder a run
    holds: reparse rewrote its tables under it (two budgets at once printed each other's rows)."""
    import sqlite3

    from litjudge.engine.core.run_lock import RunLock

    run = copy_run(finished, tmp_path)
    (run / "store.sqlite").replace(run / "kept.sqlite")
    (run / "store.sqlite").write_bytes(b"")
    for command in ("reparse", "status"):
        one_line(cli(command, str(run), cwd=tmp_path), "store.sqlite: holds no litjudge store (empty, or another",
                 "--rebuild-store")
    assert (run / "store.sqlite").stat().st_size == 0                   # left as found
    (run / "store.sqlite").unlink()
    (run / "store.sqlite").mkdir()                                      # a folder: not permissions, not the disk
    for command in ("reparse", "status"):
        one_line(cli(command, str(run), cwd=tmp_path), "store.sqlite: is a folder, where the store's file belongs")
    (run / "store.sqlite").rmdir()
    (run / "kept.sqlite").replace(run / "store.sqlite")
    with sqlite3.connect(run / "store.sqlite") as db:
        db.execute("INSERT INTO batches VALUES ('l2', NULL, 'fp', 'anthropic', 'submitting', 1700000000, 'not json')")
    one_line(cli("status", str(run), cwd=tmp_path), "provider batch 'l2' is damaged (its keys or its time)")
    with sqlite3.connect(run / "store.sqlite") as db:
        db.execute("UPDATE batches SET keys = '[\"k1\"]', created = 'yesterday' WHERE local_id = 'l2'")
    one_line(cli("status", str(run), cwd=tmp_path), "provider batch 'l2' is damaged (its keys or its time)")
    with sqlite3.connect(run / "store.sqlite") as db:
        db.execute("DELETE FROM batches")
    held = RunLock(run)
    try:
        one_line(cli("reparse", str(run), cwd=tmp_path), f"run folder {run} is in use by another")
    finally:
        held.release()
    assert cli("reparse", str(run), cwd=tmp_path).returncode == 0


def test_generate_refuses_an_output_it_cannot_write_before_generating(tmp_path):
    """`litjudge generate` writes its stories once, at the end: an --out it cannot write was met after
    minutes of generation, and the stories lost. Refused first, in one line, no engine started."""
    (tmp_path / "afile").write_text("")
    for out, says in ((tmp_path / "afile" / "x.jsonl", "afile is a file, in the way of the folder"),
                      (tmp_path, "is a folder: give the dataset's file name")):
        r = cli("generate", "--out", str(out), "--limit", "1", "--max-rounds", "0", cwd=tmp_path)
        one_line(r, "--out", says)
        assert "preparing" not in r.stderr and not list(tmp_path.glob("runs*"))


def test_data_list_reads_the_names_it_is_given(tmp_path):
    one_line(cli("data", "list", "nosuch", cwd=tmp_path), "unknown dataset 'nosuch'")
    r = cli("data", "list", "ttcw-demo", cwd=tmp_path)
    assert r.returncode == 0 and [ln.split()[0] for ln in r.stdout.splitlines()] == ["ttcw-demo"], r.stdout
