"""Settings that change no request re-aggregate a finished run's stored verdicts in its own folder
(engine.app.run_folder: a folder's identity is what changes requests): `[ppi]` added to a finished
run's config (docs/ppi.md says it reads the stored verdicts; it was refused as "another run (another
ppi)"), another missing-answer policy, a protocol's aggregate-only option. Nothing is generated,
the manifest records the new settings. A recorded judge: no model is the point."""
from __future__ import annotations

import json
from pathlib import Path

import polars as pl

import litjudge
from tests.conftest import PROJECT_ROOT, needs_data
from tests.test_cli_probe import cli, pairs_run

PPI = "\n[ppi]\nlabelled = 0.5\nseed = 1\n"


def ttcw_replay(folder: Path, name: str, ppi: str = "") -> Path:
    """The committed TTCW replay with one recorded judge, without [ppi] unless given."""
    text = (PROJECT_ROOT / "runs" / "ttcw-replay-ppi.toml").read_text()
    text = text[:text.index("[ppi]")].replace("name = \"ttcw-replay-ppi\"", f"name = \"{name}\"")
    text = "\n".join('judge = "replay:gpt4"' if line.startswith("judge =") else line for line in text.splitlines())
    cfg = folder / f"{name}.toml"
    cfg.write_text(text + ppi)
    return cfg


@needs_data
def test_ppi_added_to_a_finished_run_re_aggregates_it_from_the_console(tmp_path):
    cfg = ttcw_replay(tmp_path, "finished")
    first = cli("run", str(cfg), "--quiet", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    folder = tmp_path / "runs" / "out" / "finished"
    assert not (folder / "tables" / "ppi.parquet").exists()
    ttcw_replay(tmp_path, "finished", PPI)
    again = cli("run", str(cfg), "--quiet", cwd=tmp_path)
    assert again.returncode == 0 and "another run" not in again.stderr, again.stderr[-2000:]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["generated_now"] == 0 and manifest["config"]["ppi"] == {"labelled": 0.5, "seed": 1}
    assert manifest["ppi"]["labelled_clusters"] == 24
    ppi = pl.read_parquet(folder / "tables" / "ppi.parquet")
    assert ppi.filter((pl.col("view") == "all") & (pl.col("test") == "all"))["clusters"].to_list() == [24]


@needs_data
def test_ppi_added_to_a_finished_run_re_aggregates_it_from_python(tmp_path):
    cfg = ttcw_replay(tmp_path, "finished")
    first = litjudge.run(cfg, out=tmp_path / "out", progress=False)
    assert "ppi" not in first.tables and first.manifest.generated_now > 0
    ttcw_replay(tmp_path, "finished", PPI)
    again = litjudge.run(cfg, out=tmp_path / "out", progress=False)
    assert again.run_dir == first.run_dir and again.manifest.generated_now == 0
    assert again.tables["ppi"].height > 0 and again.manifest.raw["config"]["ppi"]["labelled"] == 0.5
    assert again.verdicts.equals(first.verdicts)


def test_another_missing_policy_or_aggregate_only_option_re_aggregates_in_place(tmp_path):
    """`missing` and pairwise's `tie_rule` change no request: the same folder, nothing generated,
    the manifest names the new setting."""
    cfg = pairs_run(tmp_path, name="agg")
    assert cli("run", str(cfg), "--quiet", cwd=tmp_path).returncode == 0
    folder = tmp_path / "runs" / "out" / "agg"
    for top, extra in (('missing = "wrong"\n', ""), ("", '[options]\ntie_rule = "probability"\n')):
        changed = pairs_run(tmp_path, name="agg", top=top, extra=extra)
        r = cli("run", str(changed), "--quiet", cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-2000:]
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest["generated_now"] == 0
        assert (manifest["missing_policy"] == "wrong") if top else (manifest["config"]["options"]["tie_rule"] ==
                                                                   "probability")
