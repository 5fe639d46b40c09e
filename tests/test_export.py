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
from litjudge.engine.app.export import hub_license
from tests.conftest import PROJECT_ROOT
from tests.conftest import litjudge as cli
from tests.test_cli_probe import one_line
from tests.test_faults import read_only
from tests.test_rubric import COLUMNS, QUESTIONS, recording, stories


@pytest.fixture
def judged(tmp_path):
    rows = stories()
    return litjudge.judge(rows, protocol="rubric", judge=recording(tmp_path / "rec.jsonl", rows), questions=QUESTIONS,
                          columns=COLUMNS, out=tmp_path / "runs", name="exported", progress=False)


def _same(loaded: datasets.Dataset, stored: pl.DataFrame) -> None:
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
    _same(datasets.load_dataset(str(out), cache_dir=cache)["train"], judged.verdicts)      # the default config
    header = yaml.safe_load((out / "README.md").read_text().split("---")[1])
    configs = [c["config_name"] for c in header["configs"]]
    assert configs[0] == "verdicts" and header["configs"][0]["default"] is True
    assert {"scores", "agreement", "binary_agreement", "points_agreement", "pairwise_agreement"} <= set(configs)
    assert "skipped" not in configs                                      # empty: a split needs rows (named in the card)
    for name in configs[1:]:
        _same(datasets.load_dataset(str(out), name, cache_dir=cache)["train"], judged.tables[name])
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
