"""Results as a Hugging Face dataset: `litjudge export RUN --to DIR` writes a folder that
`datasets.load_dataset(DIR)` (and each config by name) loads back with the same rows; its card's
YAML header is what the Hub reads; `Result.to_dataset()` gives the verdicts. No network: the
datasets cache is the test's own folder."""
from __future__ import annotations

import json

import polars as pl
import pytest
import yaml

import datasets
import litjudge
from litjudge.engine.app.export import hub_license
from tests.conftest import litjudge as cli
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
