"""A newcomer's first hour, each gap as the user met it (the CLI in a temporary folder): `plan`
answers from the plan alone with no engine and counts what is stored; one verdict cache shared by
every run folder (and `--no-cache`); a run folder keeps every invocation's figures; `--limit`
takes the data's own order; labels in another case; the words of prompts, reports and files; a
quick console; the installed path (tests/test_install.py)."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import polars as pl

from tests.conftest import PROJECT_ROOT, needs_prompts
from tests.fake_api import FakeAPI
from tests.test_cli_probe import cli, pairs_run

DEMO_API = """name = "{name}"
protocol = "ttcw"
dataset = "ttcw-demo"
judge = "openai-compatible:{url}/v1:fake-judge"
[api]
concurrency = 2
"""


def imported(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run the CLI with -X importtime: its result and the modules it imported (in this process:
    the tcmalloc re-execution, which would start a fresh one, is off)."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "LITJUDGE_PRELOAD": "off"}
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "litjudge", *args], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=300)
    modules = {line.split("|")[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    return r, modules


def test_plan_answers_from_the_plan_alone_with_no_engine(tmp_path):
    """A committed config on a machine with no calibration: the plan is printed, no engine (vLLM
    is not even imported), "not calibrated" says how to measure; nothing is written."""
    r, modules = imported(["plan", "demo"], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout
    assert "12 requests, 12 distinct" in out and "12 to generate" in out
    assert "not calibrated for this judge, dtype and CPU: `litjudge plan CONFIG --calibrate`" in out
    assert "vllm" not in modules and "torch" not in modules, sorted(m for m in modules if "vllm" in m)[:5]
    assert not (tmp_path / "runs").exists()


def test_plan_after_a_complete_run_has_nothing_to_generate(tmp_path):
    cfg = pairs_run(tmp_path)
    before = cli("plan", str(cfg), cwd=tmp_path)
    assert before.returncode == 0 and "0 of 8 distinct requests are stored already" in before.stdout
    assert cli("run", str(cfg), "--quiet", cwd=tmp_path).returncode == 0
    after = cli("plan", str(cfg), cwd=tmp_path)
    assert "8 of 8 distinct requests are stored already" in after.stdout and ": 0 to generate" in after.stdout


def test_one_verdict_cache_across_output_folders(tmp_path):
    """The same config in a second output folder generates nothing (the shared cache serves every
    verdict, each folder keeps a complete copy); --no-cache asks the judge again."""
    cache = tmp_path / "verdicts.sqlite"
    env = {"LITJUDGE_VERDICT_CACHE": str(cache)}
    with FakeAPI() as server:
        cfg = tmp_path / "api.toml"
        cfg.write_text(DEMO_API.format(name="api", url=server.url))
        first = cli("run", str(cfg), "--quiet", cwd=tmp_path, env=env)
        assert first.returncode == 0 and len(server.received) == 12, first.stderr[-2000:]
        second = cli("run", str(cfg), "--quiet", "--out", str(tmp_path / "elsewhere"), cwd=tmp_path, env=env)
        assert second.returncode == 0 and len(server.received) == 12, second.stderr[-2000:]
        assert "0 generated" in second.stdout and "12 from the shared verdict cache" in second.stdout
        copy = pl.read_parquet(tmp_path / "elsewhere" / "api" / "verdicts.parquet").sort("key")
        orig = pl.read_parquet(tmp_path / "runs" / "out" / "api" / "verdicts.parquet").sort("key")
        assert copy.select("key", "label").equals(orig.select("key", "label"))
        plan = cli("plan", str(cfg), cwd=tmp_path / "elsewhere", env=env)
        assert "12 of 12 distinct requests are stored already" in plan.stdout
        third = cli("run", str(cfg), "--quiet", "--no-cache", "--out", str(tmp_path / "third"), cwd=tmp_path, env=env)
        assert third.returncode == 0 and len(server.received) == 24 and "12 generated" in third.stdout


def test_a_cache_hit_goes_through_the_current_parser(tmp_path):
    """A verdict copied from the shared cache is parsed again under this run's verdict language:
    a cached row whose label was edited (or parsed by an older parser) does not come through as is."""
    import sqlite3

    cache = tmp_path / "verdicts.sqlite"
    env = {"LITJUDGE_VERDICT_CACHE": str(cache)}
    with FakeAPI() as server:
        cfg = tmp_path / "api.toml"
        cfg.write_text(DEMO_API.format(name="api", url=server.url))
        assert cli("run", str(cfg), "--quiet", cwd=tmp_path, env=env).returncode == 0
    db = sqlite3.connect(cache)
    with db:
        db.execute("UPDATE results SET label = 'No', status = 'ok' WHERE raw = 'Yes'")       # a tampered cache
        db.execute("UPDATE results SET raw = 'Maybe' WHERE rowid = (SELECT MIN(rowid) FROM results)")
    db.close()
    second = cli("run", str(cfg), "--quiet", "--out", str(tmp_path / "elsewhere"), cwd=tmp_path, env=env)
    assert second.returncode == 0 and "12 from the shared verdict cache" in second.stdout, second.stderr[-2000:]
    v = pl.read_parquet(tmp_path / "elsewhere" / "api" / "verdicts.parquet")
    assert (v.filter(pl.col("raw") == "Yes")["label"] == "Yes").all()              # the raw text decides
    maybe = v.filter(pl.col("raw") == "Maybe").row(0, named=True)
    assert maybe["status"] == "unparsed" and maybe["label"] is None


def test_a_run_folder_keeps_every_invocation(tmp_path):
    """A re-run that finds every verdict stored generates nothing; the report still shows what the
    first invocation did (history.jsonl), beside the latest."""
    with FakeAPI() as server:
        cfg = tmp_path / "api.toml"
        cfg.write_text(DEMO_API.format(name="api", url=server.url))
        for _ in range(2):
            assert cli("run", str(cfg), "--quiet", cwd=tmp_path).returncode == 0
    run = tmp_path / "runs" / "out" / "api"
    lines = (run / "history.jsonl").read_text().splitlines()
    assert [json.loads(x)["judges"][0]["generated"] for x in lines] == [12, 0]
    assert cli("report", str(run), cwd=tmp_path).returncode == 0
    runs = pl.read_csv(run / "report" / "tables" / "runs.csv").row(0, named=True)
    assert runs["generated"] == 0 and runs["generated_all"] == 12 and runs["invocations"] == 2
    assert runs["verdicts_per_s_all"] > 0


@needs_prompts
def test_limit_takes_the_first_groups_in_file_order(tmp_path):
    rows = [{"group": g, "item_id": f"{g}-{i}", "text": f"use {i} of {g}"} for g in ("p5", "p0", "p1") for i in range(3)]
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "empty.jsonl").write_text("")
    cfg = tmp_path / "l.toml"
    cfg.write_text('name = "l"\nprotocol = "listwise"\njudge = "replay:empty.jsonl"\nlimit = 1\n'
                   '[dataset]\nloader = "table"\npath = "items.jsonl"\n')
    r = cli("run", str(cfg), "--quiet", cwd=tmp_path)
    assert r.returncode == 4 and "no verdict could be read" in r.stderr, r.stderr[-2000:]   # an empty replay parses nothing
    groups = pl.read_parquet(tmp_path / "runs" / "out" / "l" / "verdicts.parquet")["group"].unique().to_list()
    assert groups == ["p5"]                     # the file's first group, not the first in sorted order


def test_labels_in_another_case_are_accepted_and_others_name_the_way_out(tmp_path):
    upper = [dict(p, label=p["label"].upper()) for p in json.loads(json.dumps(
        [{"pair_id": f"p{i}", "prompt": "W.", "text_a": "a", "text_b": "b", "label": "ab"[i % 2]} for i in range(2)]))]
    cfg = pairs_run(tmp_path, pairs=upper)
    assert cli("plan", str(cfg), cwd=tmp_path).returncode == 0
    bad = pairs_run(tmp_path / "bad", pairs=[dict(upper[0], label="model_a")])
    r = cli("plan", str(bad), cwd=tmp_path)
    assert r.returncode == 2 and "map each of your values to a, b or tie, e.g. [dataset.values.label] model_a = \"a\" " \
        "if 'model_a' means text a is the better" in r.stderr
    # the example's answer is guessed where the word says it (it was "a" for every value: copied for
    # "second", the humans' preference reversed), and a map to no label is named as the cause
    second = pairs_run(tmp_path / "second", pairs=[dict(upper[0], label="Second")])
    assert '[dataset.values.label] Second = "b" if \'Second\' means text b is the better' in \
        cli("plan", str(second), cwd=tmp_path).stderr


def test_words_of_prompts_reports_and_files(tmp_path):
    from litjudge.judges.listwise import singular

    assert [singular(w) for w in ("stories", "poems", "alternative uses", "boxes", "glasses")] == \
        ["story", "poem", "alternative use", "box", "glass"]
    from litjudge.engine.app.summary import rate

    assert rate(0.002) == "0.002" and rate(0.0) == "0" and rate(None) == "n/a"
    # one file mode, the user's umask: the report and the run's files as its PNGs
    old = os.umask(0o022)
    try:
        cfg = pairs_run(tmp_path)
        assert cli("run", str(cfg), "--quiet", cwd=tmp_path).returncode == 0
        run = tmp_path / "runs" / "out" / "p"
        assert cli("report", str(run), cwd=tmp_path).returncode == 0
    finally:
        os.umask(old)
    for path in (run / "manifest.json", run / "log.jsonl", run / "verdicts.parquet", run / "report" / "report.html",
                 run / "report" / "report.md", run / "tables" / "accuracy.csv"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, (path, oct(path.stat().st_mode))
    assert stat.S_IMODE((run / "tables").stat().st_mode) == 0o755


def test_the_console_answers_without_heavy_imports(tmp_path):
    """--help, data list, judges and a config error load neither polars' plotting nor scipy, torch
    or vLLM (they answered in 9 s before; now in about 0.1 s on this machine)."""
    (tmp_path / "bad.toml").write_text('name = "x"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\nmode = "nonsense"\n')
    for args in (["--help"], ["data", "list"], ["judges"], ["run", str(tmp_path / "bad.toml")]):
        r, modules = imported(args, tmp_path)
        assert r.returncode in (0, 2), r.stderr[-2000:]
        heavy = {m for m in modules if m.split(".")[0] in ("scipy", "torch", "vllm", "matplotlib", "transformers")}
        assert not heavy, (args, sorted(heavy)[:5])
