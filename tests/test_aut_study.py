"""The AUT study (Al Rabeyah et al. 2024) as one resumable run: generators write the uses (every
turn constrained to a numbered list), then the judges score and rank them in context.

The model runs go through the real CLI in subprocesses (their engines are created and closed
there); the one slow test shares its store across a killed run, its resumption, a re-run and a
judging run, so each generator's turns are generated once."""
import json
import sqlite3
from pathlib import Path

import polars as pl
import pytest

from litjudge.engine.app.generate_stage import with_generated_dataset
from litjudge.engine.app.sweep import load_sweep
from litjudge.engine.app.sweep_run import plan_summary
from litjudge.engine.core.config import GenerateConfig, load_config
from litjudge.engine.core.errors import ConfigError
from litjudge.engine.core.paths import PROJECT_ROOT, prompts_root
from litjudge.judges.generation import AUTGeneration, across_levels, duplicates
from tests.conftest import OWN_KV_CACHE, litjudge, needs_prompts, with_kv_cache, write_config

OBJECTS = ["fork", "wallet", "soap", "cotton swab", "paperclip"]


@needs_prompts
def test_conversations_follow_the_papers_design():
    prompts = json.loads((prompts_root() / "paper_prompts.json").read_text())["aut_generation"]
    cfg = GenerateConfig(generators=["g"], objects=OBJECTS, phrases={"soap": "a bar of soap"})
    convs = AUTGeneration().conversations(cfg, None)
    assert [(c.group, c.category) for c in convs][:3] == [("fork", "common"), ("fork", "creative"),
                                                          ("fork", "highly_creative")]
    assert len(convs) == 15
    hc = next(c for c in convs if c.conv_id == "cotton swab/highly_creative")
    assert hc.turns[1:] == tuple(prompts["highly_creative_followups"])            # four forceful follow-ups, verbatim
    assert hc.turns[0].startswith("Create a list of 5 creative alternative uses for a cotton swab. They should be 5 "
                                  "words long.") and "[an object]" not in hc.turns[0]
    assert "for a bar of soap." in next(c for c in convs if c.conv_id == "soap/common").turns[0]
    assert all(len(c.turns) == 1 for c in convs if c.category != "highly_creative")
    short = AUTGeneration().conversations(GenerateConfig(generators=["g"], objects=OBJECTS, followups=1, uses=3), 2)
    assert {c.group for c in short} == {"fork", "wallet"} and max(len(c.turns) for c in short) == 2
    assert "list of 3 creative" in short[1].turns[0]


def test_uses_written_twice_are_reported_with_their_levels():
    items = [{"group": "fork", "item_id": f"fork/{g}/{lv}/{k}", "text": t, "category": lv, "source": g}
             for k, (g, lv, t) in enumerate([("a", "common", "Eat pasta"), ("a", "creative", "eat  pasta!"),
                                             ("b", "common", "Eat pasta"), ("a", "common", "Comb hair"),
                                             ("b", "common", "comb hair"), ("a", "creative", "Dig holes")])]
    rows = {r["use"]: r for r in duplicates(items)}
    assert set(rows) == {"eat pasta", "comb hair"}
    assert rows["eat pasta"]["across_levels"] and rows["eat pasta"]["count"] == 3
    assert rows["eat pasta"]["levels"] == "common, creative" and rows["eat pasta"]["generators"] == "a, b"
    assert not rows["comb hair"]["across_levels"]
    assert across_levels(items) == {"fork/a/common/0", "fork/a/creative/1", "fork/b/common/2"}


def test_uses_at_two_levels_are_counted_for_an_object_whose_name_has_a_comma():
    """A hostile pass: the ids were joined with ", " for the table and split again to count, so an
    object "salt, pepper" counted 0 uses at two levels where the table listed one."""
    items = [{"group": "salt, pepper", "item_id": f"salt, pepper/g/{lv}/0", "text": "season food", "category": lv,
              "source": "g"} for lv in ("common", "creative")]
    assert across_levels(items) == {"salt, pepper/g/common/0", "salt, pepper/g/creative/0"}
    assert duplicates(items)[0]["across_levels"]


def test_judging_tasks_read_the_generated_items(tmp_path):
    config = load_config(PROJECT_ROOT / "runs" / "aut-study.toml")
    out = with_generated_dataset(config, tmp_path / "aut-study")
    for _, task in out.task_configs():
        assert task.dataset["name"] == "generated" and task.dataset["category_order"] == config.generate.levels
        assert Path(task.dataset["path"]) == (tmp_path / "aut-study" / "generated" / "items.jsonl").resolve()
        # each judge that also generated is matched with its own items (self-preference)
        assert task.options["self_sources"] == {"smollm2-135m": "smollm2-135m", "gemma3-270m": "gemma3-270m"}
    assert {n for n, _ in out.task_configs()} == {"comprehensive", "segmented"}


@pytest.mark.parametrize("extra, key, message", [
    ('dataset = "aut-ocsai"\n', "dataset", "judges the items it generates"),
    ('[generate]\ngenerators = ["smollm2-135m"]\nobjects = ["fork"]\nfollowups = 5\n', "generate.followups", "0..4"),
    ('[generate]\ngenerators = ["smollm2-135m", "smollm2-135m"]\nobjects = ["fork"]\n', "generate.generators",
     "twice"),
    ('[generate]\ngenerators = ["smollm2-135m"]\n', "generate.objects", "list the objects"),
    pytest.param('[generate]\ngenerators = ["no-such-model"]\nobjects = ["fork"]\n', None, "no-such-model",
                 marks=needs_prompts),                   # the AUT prompts are read before the judges
])
def test_bad_generation_settings_fail_before_any_work(tmp_path, extra, key, message):
    base = 'name = "g"\njudge = "smollm2-135m"\n'
    if "[generate]" not in extra:
        base += extra
        extra = '[generate]\ngenerators = ["smollm2-135m"]\nobjects = ["fork"]\n'
    cfg = write_config(tmp_path / "g.toml", base + 'protocol = "listwise"\n' + extra)
    r = litjudge("run", str(cfg), "--out", str(tmp_path / "out"), timeout=120)
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert message in line and (key is None or key in line), line
    assert not (tmp_path / "out" / "g" / "generated").exists()        # nothing generated


STUDY = """
name = "study"
judge = "{first}"
mode = "label"

[generate]
generators = ["{first}", "{second}"]
objects = ["fork", "wallet", "soap"]
uses = 3                       # the paper's 5 (AUTGeneration's default) cost 5/3 the decoding and judging
max_words = 4
followups = 1                  # the paper's four follow-ups are test_conversations_follow_the_papers_design's
temperature = 0.7

[[tasks]]
name = "segmented"
protocol = "listwise"
options = { criterion = "aut", item_kind = "alternative uses", design = "segmented", segments = 3 }

[engine]
max_model_len = 2048
kv_cache_gib = 1
"""


def _generation(run_dir: Path) -> pl.DataFrame:
    return pl.read_csv(run_dir / "tables" / "generation.csv")


@needs_prompts
@pytest.mark.slow
@pytest.mark.heavy
def test_generate_then_judge_resumes_after_a_kill_and_reruns_for_free(tmp_path, tiny_folder, tiny_qwen_folder):
    # The study's plumbing, not its models' answers, is the point: its generators are the session's
    # two tiny random judges (every turn is still a numbered list: the grammar's language is finite),
    # the first of them the judge. Each engine keeps a quarter GiB of KV cache, not the session's 1 GiB.
    generators = (str(tiny_folder), str(tiny_qwen_folder))
    cfg = write_config(tmp_path / "study.toml",
                       with_kv_cache(STUDY.replace("{first}", generators[0]).replace("{second}", generators[1]), 0.25))
    out, run_dir = tmp_path / "out", tmp_path / "out" / "study"
    env = {**OWN_KV_CACHE, "LITJUDGE_VERDICT_CACHE": str(tmp_path / "verdicts.sqlite")}     # shared by every run
    # 1. Killed (SIGKILL) during generation once 10 turns are stored (of the first generator's
    #    12: its 9 opening turns and one of its follow-ups).
    killed = litjudge("run", str(cfg), "--generate-only", "--quiet", "--out", str(out),
                      env={"LITJUDGE_FAULT_KILL_AFTER": "10", **env})
    assert killed.returncode == -9, killed.stderr[-2000:]
    con = sqlite3.connect(run_dir / "store.sqlite")
    stored = con.execute("SELECT count(*) FROM results").fetchone()[0]
    con.close()
    assert 10 <= stored < 24
    # 2. Resumed: only the missing turns are generated; all 2 x 3 x 3 lists parse (24 turns).
    resumed = litjudge("run", str(cfg), "--generate-only", "--quiet", "--out", str(out), env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert sum(g["generated"] for g in manifest["generation"]) == 24 - stored
    gen = _generation(run_dir)
    assert gen.height == 6 and gen["malformed"].sum() == 0 and gen["parsed"].sum() == 24
    assert gen["uses"].to_list() == [9] * 6                                 # 3 objects x 3 uses per cell
    items = [json.loads(line) for line in (run_dir / "generated" / "items.jsonl").open()]
    assert len(items) == 54 and len({i["item_id"] for i in items}) == 54
    assert all(1 <= len(i["text"].split()) <= 4 for i in items)
    assert {(i["source"], i["category"]) for i in items} == {(g, lv) for g in generators
                                                             for lv in ("common", "creative", "highly_creative")}
    # The same generation in another folder reads the shared verdict cache: no turn generated again
    # (a hostile pass: generated turns skipped the cache), no engine started.
    elsewhere = litjudge("run", str(cfg), "--generate-only", "--quiet", "--out", str(tmp_path / "elsewhere"),
                         env=env)
    assert elsewhere.returncode == 0, elsewhere.stderr[-3000:]
    copied = json.loads((tmp_path / "elsewhere" / "study" / "manifest.json").read_text())["generation"]
    assert [(g["generated"], g["engine_starts"]) for g in copied] == [(0, 0), (0, 0)]
    assert (tmp_path / "elsewhere" / "study" / "generated" / "items.jsonl").read_bytes() == \
        (run_dir / "generated" / "items.jsonl").read_bytes()
    nothing_to_report = litjudge("report", str(run_dir))
    assert nothing_to_report.returncode == 2 and "a generation-only run" in nothing_to_report.stderr
    # The items plan as a dataset of their own, as `plan` of the [generate] config says (it refuses).
    own = write_config(tmp_path / "items.toml", f'name = "items"\njudge = "{generators[0]}"\nmode = "label"\n'
                       'protocol = "listwise"\noptions = { criterion = "aut", item_kind = "alternative uses" }\n'
                       f'dataset = {{ loader = "rated_items_jsonl", path = "{run_dir / "generated" / "items.jsonl"}" }}\n')
    with pytest.raises(ConfigError, match="rated_items_jsonl"):
        load_sweep(cfg)
    assert [row["requests"] for row in plan_summary(load_sweep(own))] == [3]            # a list per object
    # 3. Judge the first object in the same run folder: its generation is stored, so the run
    #    only judges (and the judge's engine starts once): its 6 cells x 3 uses in 3 lists, one use
    #    of each cell in each.
    judged = litjudge("run", str(cfg), "--limit", "1", "--quiet", "--out", str(out), env=env)
    assert judged.returncode == 0, judged.stderr[-3000:]
    task = run_dir / "segmented"
    m = json.loads((task / "manifest.json").read_text())
    assert [g["generated"] for g in m["generation"]] == [0, 0]
    assert m["judges"][0]["generated"] == 3 and m["judges"][0]["engine_starts"] == 1
    means = pl.read_parquet(task / "tables" / "category_means.parquet")
    assert means.height == 6 and set(means["items"]) == {3}
    sp = pl.read_parquet(task / "tables" / "self_preference.parquet").filter(pl.col("score") == "score").row(0, named=True)
    assert sp["own_items"] == 9 and sp["other_items"] == 9
    # Six lists are six independent units: too few for an interval, and the row says so.
    assert sp["groups"] < 10 and sp["ci_low"] is None and sp["ci_high"] is None and sp["ci_note"]
    # 4. A re-run generates and judges nothing, and starts no engine.
    again = litjudge("run", str(cfg), "--limit", "1", "--quiet", "--out", str(out), env=env)
    assert again.returncode == 0
    m2 = json.loads((task / "manifest.json").read_text())
    assert [g["engine_starts"] for g in m2["generation"]] == [0, 0]
    assert m2["judges"][0]["generated"] == 0 and m2["judges"][0]["engine_starts"] == 0
    # 5. The report (of the run: its task folders side by side) shows the study's bars, the oracle
    #    correlations and self-preference.
    report = litjudge("report", str(run_dir), "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr[-2000:]
    page = (tmp_path / "report" / "report.html").read_text()
    for title in ("Mean score per (source, category)", "Agreement with the ground truth", "Self-preference",
                  "Generation"):
        assert title in page
    for png in ("category_means", "category_positions", "oracle_spearman", "self_preference"):
        assert (tmp_path / "report" / f"{png}.png").stat().st_size > 1000


def test_a_generate_only_run_of_other_items_drops_what_was_judged_of_the_old_ones(tmp_path):
    """A hostile pass: `--generate-only --overwrite` with other [generate] settings wrote new items,
    and each task's verdicts, tables and manifest of the old ones stayed under the same item ids,
    read as theirs by report. Outputs judged of other items go (the store keeps every verdict);
    those of the same items stay."""
    import json as json_
    from types import SimpleNamespace

    from litjudge.engine.app.generate_stage import drop_judged_of_other_items

    def judged(folder, sha):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "manifest.json").write_text(json_.dumps({"dataset": {"data": {"sha256": sha}}}))
        for name in ("verdicts.parquet", "results.json"):
            (folder / name).write_text("x")
        (folder / "report").mkdir(exist_ok=True)

    run, config = tmp_path / "study", SimpleNamespace(tasks=[{"name": "cls"}, {"name": "lists"}])
    judged(run, "old")
    judged(run / "cls", "old")
    judged(run / "lists", "new")
    (run / "store.sqlite").write_text("kept")
    drop_judged_of_other_items(run, config, "new")
    assert not (run / "cls").exists() and (run / "lists" / "verdicts.parquet").exists()
    assert not (run / "verdicts.parquet").exists() and not (run / "results.json").exists()
    assert not (run / "report").exists() and (run / "store.sqlite").read_text() == "kept"
    drop_judged_of_other_items(run, config, "new")                 # again: nothing more to drop
    assert (run / "lists" / "manifest.json").exists()
