"""`[ppi]` end to end: `litjudge run` on the committed TTCW replay with 20% of the expert labels
prints the human-only and PPI++ intervals and writes the table and the manifest's record of the
subset; the hidden labels never reach an estimate; the config is checked at the edge, one line each."""
from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from litjudge.engine.core.config import MissingPolicy, load_config
from litjudge.engine.core.errors import ConfigError
from litjudge.engine.core.settings import PPIConfig
from litjudge.judges.metrics.bootstrap import MIN_CLUSTERS
from litjudge.judges.ttcw import TTCW
from tests.conftest import PROJECT_ROOT, litjudge, needs_data, write_config
from tests.test_report import csv_equals, needs_chromium, screenshot

REPLAY = PROJECT_ROOT / "runs" / "ttcw-replay-ppi.toml"


@needs_data
def test_litjudge_run_prints_both_intervals_and_records_the_subset(runs_dir):
    r = litjudge("run", str(REPLAY), "--show", "20")
    assert r.returncode == 0, r.stderr[-3000:]
    printed = r.stdout[r.stdout.index("\nPpi\n"):]
    for column in ("human_only", "human_low", "human_high", "ppi", "ppi_low", "ppi_high", "lambda", "n_eff"):
        assert column in printed.splitlines()[3], column
    table = pl.read_parquet(runs_dir / "ttcw-replay-ppi" / "tables" / "ppi.parquet")
    pooled = table.filter((pl.col("view") == "all") & (pl.col("test") == "all"))
    assert pooled.height == 7 and pooled["clusters"].to_list() == [10] * 7 and pooled["n_labelled"].to_list() == [140] * 7
    assert pooled["human_low"].is_not_null().all() and pooled["ppi_low"].is_not_null().all()
    assert (pooled["human_low"] <= pooled["all_labels"]).all() and (pooled["all_labels"] <= pooled["human_high"]).all()
    first = pooled.row(0, named=True)
    assert f"{first['human_low']:.3f}" in printed and f"{first['ppi_high']:.3f}" in printed
    # the figures docs/ppi.md reads from this table ("How to read it"): at 10 labelled stories no
    # judge is worth its answers yet, and a lambda of 0 is the human-only point on other degrees of freedom
    row = {r["judge"]: r for r in pooled.iter_rows(named=True)}
    said = (PROJECT_ROOT / "docs" / "ppi.md").read_text()
    gpt4, opus, cgpt = row["replay:gpt4"], row["replay:claude3-opus"], row["replay:cgpt"]
    for figure in (f"{first['human_only']:.3f} [{first['human_low']:.3f}, {first['human_high']:.3f}]",
                   f"{gpt4['ppi']:.3f} [{gpt4['ppi_low']:.3f}, {gpt4['ppi_high']:.3f}] with `n_eff` {gpt4['n_eff']:.0f}",
                   f"{opus['ppi']:.3f} [{opus['ppi_low']:.3f}, {opus['ppi_high']:.3f}]\nwith `n_eff` {opus['n_eff']:.0f}",
                   f"[{cgpt['ppi_low']:.3f}, {cgpt['ppi_high']:.3f}]", f"{first['all_labels']:.3f}"):
        assert figure in said, figure
    assert (pooled["n_eff"] <= 140 + 1e-9).all() and cgpt["lambda"] == 0 and cgpt["ppi"] == cgpt["human_only"]
    # 7 labelled of the 36 judgeable stories: no interval, and the row says why
    judgeable = table.filter(pl.col("view") == "judgeable")
    assert judgeable["ppi_low"].is_null().all() and judgeable["ci_note"].str.starts_with("too few labelled").all()
    manifest = json.loads((runs_dir / "ttcw-replay-ppi" / "manifest.json").read_text())
    # which stories were labelled: the draw itself, in the manifest and as a table of its own
    ids = manifest["ppi"].pop("labelled_ids")
    assert len(ids) == 10 and ids == sorted(ids)
    assert pl.read_parquet(runs_dir / "ttcw-replay-ppi" / "tables" / "ppi_labelled.parquet")["story_id"].to_list() == ids
    assert manifest["ppi"] == {"labelled": 0.2, "seed": 1, "choice": "a seeded random 0.2 of the clusters (seed 1)",
                               "labelled_clusters": 10, "labelled_items": 140, "unlabelled_items": 532}
    assert manifest["config"]["ppi"] == {"labelled": 0.2, "seed": 1}


def frame(seed: int, stories: int = 40) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    y = rng.random((stories, 14)) < rng.beta(1, 2, (stories, 1))
    said = np.where(y, rng.random(y.shape) < 0.8, rng.random(y.shape) < 0.2)
    s, t = (a.ravel() for a in np.indices(y.shape))
    return pl.DataFrame({"judge": "j", "story_id": [f"s{i}" for i in s], "test": t + 1,
                         "item_id": [f"s{i}t{j}" for i, j in zip(s, t)], "repeat": 0, "status": "ok",
                         "p_yes": None, "judge_pass": said.ravel(), "expert_pass": y.ravel()},
                        schema_overrides={"p_yes": pl.Float64})


def test_the_hidden_labels_never_reach_an_estimate():
    """Changing every label outside the drawn stories changes only `all_labels`."""
    ppi = PPIConfig(0.25, seed=4)
    base = frame(1)
    tables = TTCW.prediction_powered({"all": base}, ppi)
    table, chosen = tables["ppi"], tables["ppi_labelled"]["story_id"].to_list()     # the draw, made once
    assert set(table.filter(pl.col("test") == "all")["clusters"].to_list()) == {10} and len(chosen) == 10
    # flip the labels of the stories that are not labelled: the human-only and PPI++ columns do not move
    flipped = base.with_columns(pl.when(pl.col("story_id").is_in(chosen)).then(pl.col("expert_pass"))
                                .otherwise(~pl.col("expert_pass")).alias("expert_pass"))
    other = TTCW.prediction_powered({"all": flipped}, ppi)["ppi"]
    assert other.drop("all_labels").equals(table.drop("all_labels"))
    assert not other["all_labels"].equals(table["all_labels"])


def test_neither_estimate_depends_on_which_answers_the_judge_could_give():
    """A judge silent on half the passes (unparsed, as the default policy drops it) beside the same
    judge answering all: the human-only rate, its interval and the all-label rate are the same for
    both and equal the labelled stories' own rate (before: the silent judge's items were dropped
    from all three, 0.10 printed for a rate of 0.16); PPI++ reads the silent answers as 0.5, and
    under missing = "wrong" (whose stand-in is made of the experts' labels) no hidden label reaches
    it through the judge's answers."""
    ppi = PPIConfig(0.25, seed=4)
    base = frame(1)
    silent = pl.Series(np.random.default_rng(2).random(base.height) < 0.5) & base["expert_pass"]
    quiet = base.with_columns(pl.lit("quiet").alias("judge"), pl.when(silent).then(pl.lit("unparsed"))
                              .otherwise(pl.col("status")).alias("status"),
                              pl.when(silent).then(None).otherwise(pl.col("judge_pass")).alias("judge_pass"))
    tables = TTCW.prediction_powered({"all": pl.concat([base, quiet])}, ppi)
    table, chosen = tables["ppi"], tables["ppi_labelled"]["story_id"].to_list()
    human = ["human_only", "human_low", "human_high", "all_labels", "n_labelled", "clusters"]
    assert table.filter(pl.col("judge") == "j").select(human).equals(table.filter(pl.col("judge") == "quiet").select(human))
    pooled = table.filter((pl.col("test") == "all") & (pl.col("judge") == "quiet")).row(0, named=True)
    assert pooled["human_only"] == pytest.approx(base.filter(pl.col("story_id").is_in(chosen))["expert_pass"].mean())
    assert pooled["all_labels"] == pytest.approx(base["expert_pass"].mean())
    assert pooled["n_labelled"] == 14 * len(chosen)
    # missing = "wrong": the decision of an unparsed answer is the experts' opposite; PPI++ never reads it
    wrong = quiet.with_columns(pl.when(silent).then(~pl.col("expert_pass")).otherwise(pl.col("judge_pass")).alias("judge_pass"))
    flipped = wrong.with_columns(pl.when(pl.col("story_id").is_in(chosen)).then(pl.col("expert_pass"))
                                 .otherwise(~pl.col("expert_pass")).alias("expert_pass"))
    flipped = flipped.with_columns(pl.when(silent).then(~pl.col("expert_pass")).otherwise(pl.col("judge_pass"))
                                   .alias("judge_pass"))
    policy = MissingPolicy("wrong")
    one, other = (TTCW.prediction_powered({"all": f}, ppi, policy)["ppi"] for f in (wrong, flipped))
    assert one.drop("all_labels").equals(other.drop("all_labels"))


def _labelled_stories(rows: pl.DataFrame, ppi: PPIConfig) -> list[str]:
    """The stories whose labels the table read, as it records them (its ppi_labelled table)."""
    return TTCW.prediction_powered({"all": rows}, ppi)["ppi_labelled"]["story_id"].to_list()


def test_the_draw_is_seeded_and_by_story():
    rows = frame(2)
    a, b = _labelled_stories(rows, PPIConfig(0.25, seed=4)), _labelled_stories(rows, PPIConfig(0.25, seed=4))
    assert sorted(a) == sorted(b) and len(a) == 10
    assert sorted(_labelled_stories(rows, PPIConfig(0.25, seed=5))) != sorted(a)
    marked = rows.with_columns(pl.col("story_id").is_in(["s1", "s2"]).alias("judgeable"))
    assert sorted(_labelled_stories(marked, PPIConfig("column:judgeable"))) == ["s1", "s2"]
    table = TTCW.prediction_powered({"all": marked}, PPIConfig("column:judgeable"))["ppi"]
    assert (table["ci_note"] == f"too few labelled clusters (2; an interval needs {MIN_CLUSTERS})").all()


def test_repeats_of_an_item_are_one_judge_value():
    """Two repeats of every verdict: the judge value is their mean (one item, not two)."""
    base = frame(3)
    twice = pl.concat([base, base.with_columns(pl.lit(1).alias("repeat"), ~pl.col("judge_pass"))])
    table = TTCW.prediction_powered({"all": twice}, PPIConfig(0.25, seed=4))["ppi"]
    pooled = table.filter(pl.col("test") == "all").row(0, named=True)
    assert pooled["n_labelled"] + pooled["n_unlabelled"] == 40 * 14
    assert pooled["lambda"] == 0.0          # every item's judge value is 0.5: no signal


@pytest.mark.parametrize("table,message", [
    ("labelled = 1.5", "ppi.labelled: a share of the clusters must be in (0, 1), got 1.5"),
    ("labelled = 1.0", 'got 1.0; every item the data holds a human label for is labelled = "all"'),
    ("labelled = 0", "ppi.labelled: a share of the clusters must be in (0, 1), got 0.0"),
    ('labelled = "some"', 'ppi.labelled: must be a share in (0, 1), "column:NAME", "annotations:RUN_FOLDER" or "all", got \'some\''),
    ("seed = 3", "ppi.labelled: needed once [ppi] is written (leave the table out for none)"),
    ("", "ppi.labelled: needed once [ppi] is written (leave the table out for none)"),      # did nothing, silently
    ("labeled = 0.2", "ppi.labeled: unknown key (did you mean 'ppi.labelled'?)"),
])
def test_a_wrong_ppi_table_is_one_line(tmp_path, table, message):
    cfg = write_config(tmp_path / "c.toml", f'name = "c"\nprotocol = "ttcw"\ndataset = "ttcw"\n[ppi]\n{table}\n')
    with pytest.raises(ConfigError) as caught:
        load_config(cfg)
    assert message in str(caught.value) and "\n" not in str(caught.value)


@needs_data
@pytest.mark.parametrize("extra,message", [
    ('[ppi]\nlabelled = "column:labelled"', "ppi.labelled: 'labelled' is no boolean field of protocol 'ttcw'"),
])
def test_an_unknown_column_is_refused_before_anything_runs(runs_dir, tmp_path, extra, message):
    text = REPLAY.read_text().split("[ppi]")[0] + extra + "\n"
    r = litjudge("run", str(write_config(tmp_path / "c.toml", text)))
    assert r.returncode == 2, r.stderr[-2000:]
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.startswith("litjudge: error:")]
    assert len(lines) == 1 and message in lines[0] and "boolean fields: judgeable" in lines[0], r.stderr[-2000:]
    assert not (runs_dir / "ttcw-replay-ppi").exists()


def test_a_protocol_without_a_human_quantity_refuses_ppi():
    from litjudge.judges import PROTOCOLS
    from litjudge.judges.ppi_tables import check_ppi

    with pytest.raises(ConfigError, match="protocol 'listwise' has no human quantity"):
        check_ppi(PPIConfig(0.2), PROTOCOLS.get("listwise").declared, "c.toml")


@needs_data
@needs_chromium
def test_the_report_shows_both_intervals_and_renders_in_chromium(runs_dir, tmp_path):
    from litjudge.engine.app.report import write_report
    from litjudge.engine.app.run import run

    out = run(load_config(REPLAY), progress=False)
    page = write_report([out.run_dir])
    csv_equals(page.parent, "ppi", pl.read_parquet(out.run_dir / "tables" / "ppi.parquet"))
    csv_equals(page.parent, "ppi_labelled", pl.read_parquet(out.run_dir / "tables" / "ppi_labelled.parquet"))
    html = page.read_text()
    assert "Prediction-powered estimates (PPI++)" in html and "ppi_all" in html and "ppi_judgeable" in html
    # every scored story is labelled here, so Rogan-Gladen has no rate: no empty chart, the reason instead
    assert "alt='corrected_pass_rates'" not in html and "No rate to draw here: every scored item is labelled" in html
    plots, ok = screenshot(page, tmp_path / "ppi.png")
    assert plots >= 6 and ok == plots


def test_a_numpy_seed_from_python_is_its_number():
    """`ppi={"seed": np.int64(1)}` from a notebook was refused ("expected int, got int64")."""
    from litjudge.engine.core.config import RunConfig
    from litjudge.engine.core.schema import build
    config = build(RunConfig, {"name": "c", "protocol": "ttcw", "dataset": "ttcw",
                               "ppi": {"labelled": np.float64(0.2), "seed": np.int64(1)}}, "python")
    assert config.ppi.seed == 1 and type(config.ppi.seed) is int and config.ppi.share == 0.2


def test_annotations_naming_the_store_file_point_at_its_run_folder(tmp_path):
    """`labelled = "annotations:RUN/annotations.sqlite"` said "no annotation store in
    RUN/annotations.sqlite: label its items with `litjudge annotate RUN/annotations.sqlite`"."""
    from litjudge.engine.app.annotate.annotations import load_annotations
    cfg = write_config(tmp_path / "c.toml", 'name = "c"\nprotocol = "ttcw"\ndataset = "ttcw"\n[ppi]\n'
                       'labelled = "annotations:runs/x/annotations.sqlite"\n')
    with pytest.raises(ConfigError) as caught:
        load_annotations(load_config(cfg))
    assert str(caught.value) == (f'{cfg}: ppi.labelled: give the run folder that holds annotations.sqlite: '
                                 f'labelled = "annotations:{tmp_path / "runs" / "x"}"')


def test_every_item_labelled_has_no_ppi_estimate_and_so_no_lambda_or_n_eff():
    """labelled = "all": no unlabelled item, so no PPI++ estimate (the note says why); lambda read
    0 and n_eff the item count beside the empty estimate."""
    table = TTCW.prediction_powered({"all": frame(7)}, PPIConfig("all"))["ppi"]
    assert table["ppi"].is_null().all() and table["lambda"].is_null().all() and table["n_eff"].is_null().all()
    assert table["human_only"].is_not_null().all() and table["ci_note"].str.contains("every item is labelled").all()


def test_a_hostile_pass_s_ppi_counts_and_settings():
    """A hostile pass: (1) from annotations, a per-test row counted a drawn story with no item in that
    row among its labelled clusters and subtracted it from the unlabelled (9 and 25 for 8 and 26);
    (2) n_eff was null or n_labelled at lambda 0 as a variance came out 0 or 5.7e-31; (3) a seed
    with labelled = "all" or a column was accepted and recorded, changing nothing; (4) a sweep's
    ppi rows had no `n`."""
    from types import SimpleNamespace

    from litjudge.engine.app.results_file import tidy
    from litjudge.engine.core.schema import FieldError
    from litjudge.judges.metrics.ppi import effective_labels
    from litjudge.judges.ppi_annotated import Annotated, estimates

    clusters = tuple(f"s{i}" for i in range(6))
    annotated = Annotated("queue", "ttcw", clusters, (1 / 6,) * 6, (0, 1, 2), {}, floor=0.2)
    # this row's items: none in s0 (drawn, a test nobody answered there), one in each of s1..s5
    items = pl.DataFrame({"story_id": clusters[1:], "_f": [1.0, 0.0, 1.0, 0.0, 1.0],
                          "_y": [1.0, 0.0, None, None, None], "_h": [None] * 5})
    row = estimates(items, annotated, "story_id", 3)
    assert (row["n_labelled"], row["clusters"], row["n_unlabelled"], row["unlabelled_clusters"]) == (2, 2, 3, 3)

    zero = np.asarray([0.0])
    for variance in (0.0, 5.7e-31):
        powered = SimpleNamespace(labelled_items=np.asarray([14]), unlabelled_items=np.asarray([20]),
                                  variance=np.asarray([variance]), lam=zero)
        assert effective_labels(SimpleNamespace(variance=np.asarray([variance])), powered).tolist() == [14.0]

    for labelled in ("all", "column:judgeable"):
        with pytest.raises(FieldError, match=f"seed draws a share, and labelled = '{labelled}' draws none"):
            PPIConfig(labelled=labelled, seed=3)
    assert PPIConfig(labelled=0.2, seed=3).seed == 3

    table = pl.DataFrame({"view": ["all"], "test": ["all"], "judge": ["j"], "n_labelled": [140], "ppi": [0.4]})
    rows = tidy({"ppi": table}, TTCW().declared, {"cell": "c"})
    assert rows and all(r["n"] == 140 for r in rows)


@needs_data
def test_a_sweep_with_ppi_records_each_cells_labelled_stories_as_a_run_does(tmp_path):
    """A sweep writes no per-cell tables, so its manifest kept no trace of which stories were
    labelled: now `ppi` lists each cell's choice and ids, the same as a run of that cell records."""
    import litjudge

    text = REPLAY.read_text().replace('name = "ttcw-replay-ppi"', 'name = "swept"')
    text = "\n".join('judge = "replay:gpt4"' if line.startswith("judge =") else line for line in text.splitlines())
    alone = write_config(tmp_path / "alone.toml", text.replace('name = "swept"', 'name = "alone"'))
    swept = write_config(tmp_path / "swept.toml", text + '\n[matrix]\njudge = ["replay:gpt4", "replay:cgpt"]\n')
    manifest = litjudge.run(swept, out=tmp_path / "out", progress=False).manifest.raw
    ran = litjudge.run(alone, out=tmp_path / "out", progress=False).manifest.raw
    assert len(manifest["ppi"]) == 2 and {c["cell"] for c in manifest["ppi"]} == {c["id"] for c in manifest["cells"]}
    for cell in manifest["ppi"]:
        assert (cell["labelled"], cell["seed"], cell["choice"]) == (0.2, 1, ran["ppi"]["choice"])
        assert cell["labelled_ids"] == ran["ppi"]["labelled_ids"] and len(cell["labelled_ids"]) == 10
