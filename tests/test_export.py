"""Results as a Hugging Face dataset: `litjudge export RUN --to DIR` writes a folder that
`datasets.load_dataset(DIR)` (and each config by name) loads back with the same rows; its card's
YAML header is what the Hub reads; `Result.to_dataset()` gives the verdicts. No network: the
datasets cache is the test's own folder."""
from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys

import polars as pl
import pytest
import yaml

import datasets
import litjudge
from litjudge.engine.app.export_card import hub_license
from tests.conftest import PROJECT_ROOT, needs_data
from tests.conftest import litjudge as cli
from tests.test_cli_probe import one_line
from tests.test_faults import read_only
from tests.test_rubric import COLUMNS, QUESTIONS, recording, stories


@pytest.fixture
def judged(tmp_path):
    rows = stories()
    return litjudge.judge(rows, protocol="rubric", judge=recording(tmp_path / "rec.jsonl", rows), questions=QUESTIONS,
                          columns=COLUMNS, out=tmp_path / "runs", name="exported", progress=False)


def _same(loaded: datasets.Dataset, stored: pl.DataFrame, exported: bool = False) -> None:
    """The rows loaded back equal the run's, columns typed for the Hub (an export's: the judge's path
    made public too)."""
    from litjudge.engine.app.export import hub_typed, public_judges

    stored = hub_typed(public_judges(stored, None) if exported else stored)
    back = pl.from_arrow(loaded.data.table)
    assert isinstance(back, pl.DataFrame) and back.columns == stored.columns and back.height == stored.height
    key = [c for c in ("key", "judge", "question", "order", "metric", "label") if c in stored.columns]
    simple = [c for c, t in stored.schema.items() if not isinstance(t, (pl.Struct, pl.List, pl.Null))]
    assert back.select(simple).sort(key, nulls_last=True).equals(stored.select(simple).sort(key, nulls_last=True))


def test_an_exported_run_loads_back_with_load_dataset(judged, tmp_path):
    out = tmp_path / "hf" / "exported"
    r = cli("export", str(judged.run_dir), "--to", str(out))
    assert r.returncode == 0, r.stderr
    cache = str(tmp_path / "hf-cache")
    _same(datasets.load_dataset(str(out), cache_dir=cache)["train"], judged.verdicts, exported=True)   # the default config
    header = yaml.safe_load((out / "README.md").read_text().split("---")[1])
    configs = [c["config_name"] for c in header["configs"]]
    assert configs[0] == "verdicts" and header["configs"][0]["default"] is True
    assert {"scores", "agreement", "binary_agreement", "points_agreement", "pairwise_agreement"} <= set(configs)
    assert "skipped" not in configs                                      # empty: a split needs rows (named in the card)
    for name in configs[1:]:
        _same(datasets.load_dataset(str(out), name, cache_dir=cache)["train"], judged.tables[name], exported=True)
    assert header["license"] == "unknown" and "rubric" in header["tags"]
    card = (out / "README.md").read_text()
    assert "`rubric` (version `1`)" in card and "HfApi().upload_folder(" in card and "`skipped`" in card


def test_to_dataset_gives_the_verdicts_and_prompts_when_asked(judged):
    ds = judged.to_dataset()
    _same(ds, judged.verdicts)
    with_prompts = judged.to_dataset(prompts=True)
    logged = {json.loads(line)["key"]: json.loads(line)["prompt"] for line in (judged.run_dir / "log.jsonl").open()}
    assert all(row["prompt"] == logged[row["key"]] for row in with_prompts)
    assert with_prompts[0]["prompt"].startswith("Read the text below")


def test_export_replaces_an_earlier_export_and_refuses_any_other_folder(judged, tmp_path):
    out = tmp_path / "hf"
    assert cli("export", str(judged.run_dir), "--to", str(out)).returncode == 0
    again = cli("export", str(judged.run_dir), "--to", str(out), "--prompts")
    assert again.returncode == 0 and "prompt" in pl.read_parquet(out / "data" / "verdicts.parquet").columns
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    r = cli("export", str(judged.run_dir), "--to", str(other))
    assert r.returncode == 2 and r.stderr.strip() == (f"litjudge: error: {other}: exists and is not an earlier export: "
                                                      "give a new (or empty) folder")
    assert (other / "notes.txt").read_text() == "keep me"
    # a file of the user's in an earlier export's data/ (or beside a card copied into a folder of
    # theirs) was deleted when data/ was replaced: refused, naming it
    (out / "data" / "notes.txt").write_text("keep me too")
    one_line(cli("export", str(judged.run_dir), "--to", str(out)), "data/ holds files the earlier export did not "
             "write (notes.txt)")
    assert (out / "data" / "notes.txt").read_text() == "keep me too"
    r = cli("export", str(tmp_path / "nothing"), "--to", str(tmp_path / "x"))
    assert r.returncode == 2 and "not a run folder" in r.stderr


@pytest.mark.parametrize("card, hub", [("Apache-2.0", "apache-2.0"), ("BSD-3-Clause", "bsd-3-clause"), ("MIT", "mit"),
                                       ("CC BY-SA 4.0 (stories and data; see the upstream README)", "cc-by-sa-4.0"),
                                       ("the texts belong to their Reddit authors; not redistributed here", "other"),
                                       ("", "unknown")])
def test_the_data_card_s_license_as_the_hub_names_it(card, hub):
    assert hub_license(card) == hub


# -- export writes to the user's disk: never removes what it did not make, one line when refused -----------------
def test_export_never_removes_a_folder_it_did_not_make(judged, tmp_path):
    """`--to X/victim` removed a pre-existing `X/.victim.export` (its staging name): export stages in
    a folder of its own, and leaves every other folder as it was."""
    out = tmp_path / "hf" / "victim"
    mine = tmp_path / "hf" / ".victim.export"
    (mine / "data").mkdir(parents=True)
    (mine / "data" / "notes.txt").write_text("keep me")
    assert cli("export", str(judged.run_dir), "--to", str(out)).returncode == 0
    assert (mine / "data" / "notes.txt").read_text() == "keep me"
    assert sorted(p.name for p in (tmp_path / "hf").iterdir()) == [".victim.export", "victim"]
    assert cli("export", str(judged.run_dir), "--to", str(out)).returncode == 0        # again: an earlier export
    assert sorted(p.name for p in (tmp_path / "hf").iterdir()) == [".victim.export", "victim"]
    assert (mine / "data" / "notes.txt").read_text() == "keep me"


def _litjudge_limited(*args: str, size: int) -> subprocess.CompletedProcess:
    """The CLI under a real file-size limit (RLIMIT_FSIZE; SIGXFSZ ignored: writes fail with EFBIG)."""
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    return subprocess.run([sys.executable, "-m", "litjudge", *args], cwd=PROJECT_ROOT, env=dict(os.environ),
                          capture_output=True, text=True, preexec_fn=limit, timeout=300)


def test_a_full_disk_during_export_is_one_line_and_leaves_nothing(judged, tmp_path):
    """A full disk gave `internal error: ComputeError ... No space left on device` and left the
    staging folder behind: one line, as `run` gives, and nothing left."""
    (tmp_path / "hf").mkdir()
    r = _litjudge_limited("export", str(judged.run_dir), "--to", str(tmp_path / "hf" / "ds"), size=2000)
    line = one_line(r, str(tmp_path / "hf"), "full")
    assert "--to" in line and "LITJUDGE_RUNS_DIR" not in line, line
    assert list((tmp_path / "hf").iterdir()) == []


def test_a_read_only_target_names_to_and_leaves_nothing(judged, tmp_path):
    """A read-only target advised `LITJUDGE_RUNS_DIR / --out` (run's options) and left its staging
    folder beside it: one line naming export's own `--to`, and nothing left."""
    parent = tmp_path / "hf"
    target = parent / "roempty"
    target.mkdir(parents=True)
    if not read_only(target):
        pytest.skip("this machine may not make a read-only bind mount (mount --bind)")
    try:
        r = cli("export", str(judged.run_dir), "--to", str(target))
        left = sorted(p.name for p in parent.iterdir())
    finally:
        subprocess.run(["umount", str(target)], capture_output=True)
    line = one_line(r, "not writable", "--to")
    assert "LITJUDGE_RUNS_DIR" not in line and "--out" not in line, line
    assert left == ["roempty"] and list(target.iterdir()) == []


def test_only_export_s_own_marked_staging_folders_are_ever_removed(judged, tmp_path):
    """A staging folder a killed export left (it carries export's marker) is removed by the next
    export; a folder of the same kind of name without the marker is someone else's and stays."""
    from litjudge.engine.app.export import STAGED, STAGING, export

    out = tmp_path / "hf"
    export(judged.run_dir, out)
    stale, other = out / f"{STAGING}killed", out / f"{STAGING}mine"
    (stale / "data").mkdir(parents=True)
    (stale / STAGED).write_text("")
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    export(judged.run_dir, out)
    assert not stale.exists() and (other / "notes.txt").read_text() == "keep me"
    assert sorted(p.name for p in out.iterdir()) == [f"{STAGING}mine", "README.md", "data"]


def test_an_export_stopped_between_its_renames_is_made_whole_and_a_missing_table_is_one_line(
        judged, config_run, tmp_path, monkeypatch):
    """A hostile pass: an export killed between moving its data/ in and its card left one run's card
    over another's rows (load_dataset read them in silence) and the next export refused with a
    misleading line; Ctrl-C there now moves the card in, and the next export finishes what a kill
    left. A table deleted since the run was left out of the export in silence: now one line."""
    import shutil

    from litjudge.engine.app import export as module
    from litjudge.engine.core.errors import StoreError

    out = tmp_path / "hf"
    module.export(judged.run_dir, out)
    real, stopped = os.replace, []

    def interrupted(src, dst):
        if str(dst).endswith("README.md") and not stopped:
            stopped.append(dst)
            raise KeyboardInterrupt
        return real(src, dst)

    monkeypatch.setattr(module.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        module.export(config_run, out)
    monkeypatch.setattr(module.os, "replace", real)
    assert stopped and 'pretty_name: "litjudge run p"' in (out / "README.md").read_text()          # the card followed its data
    assert "verdicts.parquet" in os.listdir(out / "data") and not list(out.glob(f"{module.STAGING}*"))
    # killed there (no finally): the staged card is left beside the new data/ until the next export
    module.export(judged.run_dir, out)
    stale = out / f"{module.STAGING}killed"
    stale.mkdir()
    (stale / module.STAGED).write_text("")
    shutil.copytree(out / "data", stale / "old-data")
    other = tmp_path / "other"
    module.export(config_run, other)
    shutil.rmtree(out / "data")
    shutil.copytree(other / "data", out / "data")
    shutil.copy(other / "README.md", stale / "README.md")
    assert 'pretty_name: "litjudge run exported"' in (out / "README.md").read_text()               # the mixed folder
    module.export(config_run, out)                       # made whole first, then replaced: no refusal
    assert 'pretty_name: "litjudge run p"' in (out / "README.md").read_text() and not stale.exists()
    copy = tmp_path / "copy"
    shutil.copytree(config_run, copy)
    gone = sorted((copy / "tables").glob("*.parquet"))[0]
    gone.unlink()
    with pytest.raises(StoreError, match=f"tables/{gone.stem}.parquet is missing .*though the run wrote it"):
        module.export(copy, tmp_path / "hf3")
    assert not (tmp_path / "hf3").exists()


# -- a card you can publish: no absolute path of the user's disk, what ran and what it found on it ------------------
@pytest.fixture
def config_run(tmp_path):
    """A pairwise run from a config file in its own folder (data and a recording beside it, named
    relative to it, run from there), as a user runs one."""
    from tests.test_cli_probe import cli as cli_in
    from tests.test_cli_probe import pairs_run

    cfg = pairs_run(tmp_path / "project")
    cfg.write_text(cfg.read_text().replace(f"replay:{tmp_path / 'project' / 'answers.jsonl'}", "replay:answers.jsonl"))
    r = cli_in("run", cfg.name, "--quiet", cwd=cfg.parent)
    assert r.returncode == 0, r.stderr[-3000:]
    return cfg.parent / "runs" / "out" / "p"


def test_the_card_and_results_json_name_no_absolute_path(config_run, tmp_path):
    """The card held the data file's absolute path (`/home/you/project/pairs.jsonl`) and an empty
    source; results.json's config and dataset the same. Now data files are named relative to the
    config's folder, the source is filled, and the card carries the headline metrics, mode and sampling."""
    out = tmp_path / "hf"
    r = cli("export", str(config_run), "--to", str(out))
    assert r.returncode == 0, r.stderr
    card = (out / "README.md").read_text()
    results = (config_run / "results.json").read_text()
    for text in (card, results):
        assert str(tmp_path) not in text and "/tmp/" not in text
    record = json.loads(results)
    assert record["dataset"]["data"]["path"] == "pairs.jsonl" and record["config"]["judge"] == "replay:answers.jsonl"
    assert "(`pairs.jsonl`)" in card and "- source: `the file pairs.jsonl`" in card
    assert "## Headline metrics" in card and "`accuracy.accuracy`, pooled view `order=mean of both`" in card
    headline = next(x for x in record["results"] if x["headline"])
    assert f"| `{headline['view']}` (headline) | {headline['value']:.3f} |" in card
    assert "- mode: `label`" in card and "temperature `0.0`" in card and "repeats `1`" in card


def test_a_path_outside_the_config_folder_is_redacted_everywhere_it_is_published(judged, tmp_path):
    """A run of `litjudge.judge` (no config file) judged by a recording at an absolute path: its path
    is in the judge's name. The card, the exported tables' `judge` column and results.json's config and
    dataset keep only its name; the card lists the rubric's questions and the template's sha256."""
    out = tmp_path / "hf"
    assert cli("export", str(judged.run_dir), "--to", str(out)).returncode == 0
    card = (out / "README.md").read_text()
    assert str(tmp_path) not in card and "`replay:<local path>/rec.jsonl`" in card
    assert "(`<local path>/data.jsonl`)" in card
    for question in QUESTIONS:
        assert f"| `{question['id']}` | `{question.get('scale', 'binary')}` | `{question['text']}` |" in card
    assert set(pl.read_parquet(out / "data" / "verdicts.parquet")["judge"]) == {"replay:<local path>/rec.jsonl"}
    assert set(pl.read_parquet(out / "data" / "scores.parquet")["judge"]) == {"replay:<local path>/rec.jsonl"}
    record = json.loads((judged.run_dir / "results.json").read_text())
    assert str(tmp_path) not in json.dumps([record["config"], record["dataset"]])
    assert record["dataset"]["data"]["path"] == "<local path>/data.jsonl"


def test_public_judge_names_are_whole_and_each_its_own():
    """Two recordings named outputs.jsonl in two folders were published as one judge (its tables
    pooled both), and a path with a space was cut at it, publishing the rest (/home/Jane Doe/...)."""
    from pathlib import Path

    from litjudge.engine.app.public import public_names, redact

    base = Path("/home/Jane Doe/study")
    names = ["replay:/r/gpt/outputs.jsonl", "replay:/r/claude/outputs.jsonl", "replay:/home/Jane Doe/study/d/rec.jsonl",
             "/home/Jane Doe/models/my qwen", "smollm2-135m", "openai:gpt-4o"]
    assert public_names(names, base) == {
        "replay:/r/gpt/outputs.jsonl": "replay:<local path>/gpt/outputs.jsonl",
        "replay:/r/claude/outputs.jsonl": "replay:<local path>/claude/outputs.jsonl",
        "replay:/home/Jane Doe/study/d/rec.jsonl": "replay:d/rec.jsonl", "/home/Jane Doe/models/my qwen": "<local path>/my qwen",
        "smollm2-135m": "smollm2-135m", "openai:gpt-4o": "openai:gpt-4o"}
    assert redact({"path": "/home/Jane Doe/elsewhere/pairs.jsonl"}, base) == {"path": "<local path>/pairs.jsonl"}


def test_redact_keeps_urls_and_relative_paths():
    from pathlib import Path

    from litjudge.engine.app.public import redact

    base = Path("/home/you/project")
    assert redact({"a": ["/home/you/project/data/x.csv", "replay:/elsewhere/rec.jsonl", "C:\\Users\\you\\d.csv"],
                   "b": "https://huggingface.co/datasets/x/y and data/x.csv, 1/2"}, base) == {
        "a": ["data/x.csv", "replay:<local path>/rec.jsonl", "<local path>/d.csv"],
        "b": "https://huggingface.co/datasets/x/y and data/x.csv, 1/2"}


def test_exported_columns_are_typed_for_the_hub(config_run, tmp_path):
    """`distribution` was a null-typed column (the Hub's viewer and `load_dataset` take it as
    `null`): a list of floats, and a struct of label probabilities the same list beside its labels."""
    from litjudge.engine.app.export import hub_typed

    out = tmp_path / "hf"
    assert cli("export", str(config_run), "--to", str(out)).returncode == 0
    features = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "cache"))["train"].features
    assert features["distribution"].feature.dtype == "float64" and features["value"].dtype != "null"
    assert not [name for name, f in features.items() if getattr(f, "dtype", "") == "null"]
    assert litjudge.load(config_run).to_dataset().features == features      # in memory, typed the same (it was null)
    frame = pl.DataFrame({"value": [None, None], "distribution": [{"A": 0.75, "B": 0.25}, None],
                          "analysis_distribution": [None, {"Yes": 0.5, "No": 0.5}]})
    typed = hub_typed(frame)
    assert typed["distribution"].to_list() == [[0.75, 0.25], None]
    assert typed["distribution_labels"].to_list() == [["A", "B"], None] and typed.schema["value"] == pl.Utf8
    assert typed["analysis_distribution"].to_list() == [None, [0.5, 0.5]]
    assert typed["analysis_distribution_labels"].to_list() == [None, ["Yes", "No"]]
    none = hub_typed(pl.DataFrame({"distribution": [None, None]}))        # no verdict had any: the same columns
    assert none.schema == {"distribution": pl.List(pl.Float64), "distribution_labels": pl.List(pl.Utf8)}
    (tmp_path / "t" / "data").mkdir(parents=True)
    typed.write_parquet(tmp_path / "t" / "data" / "train.parquet")
    back = datasets.load_dataset(str(tmp_path / "t"), cache_dir=str(tmp_path / "cache2"))["train"]
    assert back.features["distribution"].feature.dtype == "float64" and back[0]["distribution_labels"] == ["A", "B"]


def test_push_to_hub_offline_is_one_line_and_keeps_the_export(config_run, tmp_path):
    """No network (the Hub's endpoint a closed loopback port): one line naming --push-to-hub and what
    to do, the folder written."""
    from tests.fake_api import refusing_port

    out = tmp_path / "hf"
    with refusing_port() as port:                     # refused for as long as the command runs
        env = {**os.environ, "HF_ENDPOINT": f"http://127.0.0.1:{port}", "HF_TOKEN": "hf_not_a_real_token",
               "HF_HOME": str(tmp_path / "hf-home")}
        env.pop("HF_HUB_OFFLINE", None)
        r = subprocess.run([sys.executable, "-m", "litjudge", "export", str(config_run), "--to", str(out),
                            "--push-to-hub", "you/ds"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
                           timeout=300)
    line = one_line(r, "--push-to-hub you/ds", "could not push to the Hub", "check the network")
    assert "Traceback" not in r.stderr and len(line) < 600, line
    assert (out / "README.md").exists() and (out / "data" / "verdicts.parquet").exists()


@needs_data
def test_a_ttcw_export_carries_the_experts_answer_beside_each_verdict(tmp_path):
    """TTCW's expert majority is in per_item, not in a request: the exported verdicts had no human
    answer (export.md says they carry it). `human` is now the experts' Yes / No, in the frame of
    `answer`, and their agreement is the run's own per-item agreement."""
    from litjudge.engine.app.export import export

    r = litjudge.run("ttcw-replay", limit=2, out=tmp_path / "runs", progress=False)
    export(r.run_dir, tmp_path / "hf")
    v = pl.read_parquet(tmp_path / "hf" / "data" / "verdicts.parquet")
    assert set(v["human"].drop_nulls()) <= {"Yes", "No"} and v["human"].null_count() < v.height
    items = r.tables["per_item"].filter(pl.col("expert_pass").is_not_null() & pl.col("judge_pass").is_not_null())
    read = v.filter(pl.col("answer").is_not_null() & pl.col("human").is_not_null())
    assert read.height == items.height
    assert (read["answer"] == read["human"]).sum() == (items["judge_pass"] == items["expert_pass"]).sum()


def test_a_pipe_in_a_rubric_question_stays_in_its_cell_of_the_card(tmp_path):
    """A question "Dialogue | monologue?" split its row of the card's table (GitHub showed `Dialogue)."""
    import re

    rows = stories()
    questions = [{**QUESTIONS[0], "text": "Dialogue | monologue?"}]
    run = litjudge.judge(rows, protocol="rubric", judge=recording(tmp_path / "rec.jsonl", rows), questions=questions,
                         columns=COLUMNS, out=tmp_path / "runs", name="piped", progress=False)
    assert cli("export", str(run.run_dir), "--to", str(tmp_path / "hf")).returncode == 0
    row = next(line for line in (tmp_path / "hf" / "README.md").read_text().splitlines() if "monologue" in line)
    assert len(re.findall(r"(?<!\\)\|", row)) == 4 and "Dialogue \\| monologue?" in row, row


def test_an_export_says_how_many_of_its_answers_hold_no_verdict(tmp_path):
    """A run whose answers could not be read exports them (rows with status unparsed and why), and
    the command says so, where it printed its rows alone: every answer unread is a dataset with no
    verdict, some a dataset some of whose rows hold no label."""
    rows = stories()
    for name, unread in (("none-read", lambda answer: "I cannot say"),
                         ("pairs-unread", lambda answer: "I cannot say" if answer in "AB" else answer)):
        recorded = tmp_path / f"{name}.jsonl"
        recording(recorded, rows)
        recorded.write_text("".join(json.dumps({**line, "response": unread(line["response"])}) + "\n"
                                    for line in map(json.loads, recorded.read_text().splitlines())))
        run = litjudge.judge(rows, protocol="rubric", judge=f"replay:{recorded}", questions=QUESTIONS, columns=COLUMNS,
                             out=tmp_path / "runs", name=name, progress=False)
        unparsed = run.verdicts.filter(pl.col("status") == "unparsed").height
        r = cli("export", str(run.run_dir), "--to", str(tmp_path / f"{name}-hf"))
        assert r.returncode == 0 and unparsed, r.stderr[-2000:]
        said = f"warning: {unparsed} of the {run.verdicts.height} answers exported could not be read as a verdict"
        assert said in r.stderr and ("the dataset holds no verdict" in r.stderr) == (name == "none-read"), r.stderr
