"""Reruns never lose results, and lose no work. Settings that change no request re-aggregate a finished run's stored verdicts in its own folder
(engine.app.run_folder: a folder's identity is what changes requests): `[ppi]` added to a finished
run's config (docs/ppi.md says it reads the stored verdicts; it was refused as "another run (another
ppi)"), another missing-answer policy, a protocol's aggregate-only option. Nothing is generated,
the manifest records the new settings. A recorded judge: no model is the point."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import polars as pl
import pytest

import litjudge
from litjudge.engine.app.generate_stage import with_generated_dataset
from litjudge.engine.app.run_folder import Claim, DataRead, claim, claim_of, holds_judged_tables
from litjudge.engine.core.config import load_config
from litjudge.engine.core.manifest import config_dict
from tests.conftest import PROJECT_ROOT, needs_data
from tests.test_cli_probe import cli, one_line, pairs_run
from tests.test_rubric import COLUMNS, QUESTIONS, recording, stories
from tests.warm_cli import console_env, run_python

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


# -- issue 58 item 7: reruns never lose results ---------------------------------------------------
def test_a_smaller_limit_on_a_finished_run_is_refused_not_written_over_it(tmp_path):
    """`--limit 2` on a finished run of 4 pairs rewrote its tables to 2: refused in one line saying
    where the limited run can go; the full run's files untouched; a larger limit still grows it."""
    cfg = pairs_run(tmp_path, name="full")
    assert cli("run", str(cfg), "--quiet", cwd=tmp_path).returncode == 0
    folder = tmp_path / "runs" / "out" / "full"
    before = {p.name: p.read_bytes() for p in (folder / "tables").iterdir()}
    manifest = (folder / "manifest.json").read_bytes()
    line = one_line(cli("run", str(cfg), "--quiet", "--limit", "2", cwd=tmp_path), str(folder), "limit 2",
                    "--out", "--overwrite")
    assert "every item" in line, line
    assert {p.name: p.read_bytes() for p in (folder / "tables").iterdir()} == before
    assert (folder / "manifest.json").read_bytes() == manifest
    with pytest.raises(litjudge.ConfigError, match="out=") as caught:
        litjudge.run(cfg, out=tmp_path / "runs" / "out", limit=3, progress=False)
    assert "limit 3" in str(caught.value) and "\n" not in str(caught.value)
    elsewhere = litjudge.run(cfg, out=tmp_path / "limited", limit=2, progress=False)
    assert elsewhere.manifest.verdicts.rows == 4 and (folder / "manifest.json").read_bytes() == manifest
    limited = pairs_run(tmp_path / "small", name="small")
    assert cli("run", str(limited), "--quiet", "--limit", "2", cwd=tmp_path).returncode == 0
    assert cli("run", str(limited), "--quiet", "--limit", "2", cwd=tmp_path).returncode == 0   # the same limit
    grown = cli("run", str(limited), "--quiet", "--limit", "3", cwd=tmp_path)
    assert grown.returncode == 0 and "6 verdicts" in grown.stdout, grown.stdout[-1000:]


GENERATE = """name = "g"
judge = "replay:{folder}/judge.jsonl"
protocol = "listwise"
mode = "label"
options = {{ criterion = "aut", item_kind = "alternative uses" }}
[generate]
generators = ["replay:{folder}/uses.jsonl"]
objects = ["fork"]
followups = 0
"""


def test_a_shorter_limit_is_refused_only_where_the_folder_holds_judged_tables(tmp_path):
    """The rule behind the refusal: a shorter limit would rewrite a finished run's judged tables. A
    generation-only run's folder (the AUT study's `--limit 1` after `--generate-only`) holds none, nor
    does a finished run's folder whose tables and verdicts were removed: a limited run loses nothing
    there. A folder with judged tables is refused (its own, or a task's in RUN/<task>/)."""
    uses = "1. comb hair\n2. dig soil\n3. stir paint\n4. pick a lock\n5. hold notes"
    (tmp_path / "uses.jsonl").write_text("".join(json.dumps({"id": f"fork/{level}", "response": uses}) + "\n"
                                                 for level in ("common", "creative", "highly_creative")))
    gen = tmp_path / "g.toml"
    gen.write_text(GENERATE.format(folder=tmp_path))
    assert cli("run", str(gen), "--generate-only", "--quiet", cwd=tmp_path).returncode == 0
    generated = tmp_path / "runs" / "out" / "g"
    assert (generated / "tables" / "generation.parquet").exists() and not holds_judged_tables(generated)

    def limited(cfg: Path, limit: int, run_dir: Path, *data: Path) -> Claim:
        """The claim `run CFG --limit LIMIT` makes of its folder (a [generate] run's reads its items)."""
        config = load_config(cfg, limit=limit)
        config = with_generated_dataset(config, run_dir) if config.generate.enabled else config
        return claim_of("run", config_dict(config), [DataRead.of(d) for d in data])
    claim(generated, limited(gen, 1, generated), overwrite=False, switch="--overwrite")          # accepted
    cfg = pairs_run(tmp_path / "judged", name="full")
    assert cli("run", str(cfg), "--quiet", cwd=tmp_path).returncode == 0
    judged = tmp_path / "runs" / "out" / "full"
    with pytest.raises(litjudge.ConfigError, match="limit 2 would rewrite its tables"):
        claim(judged, limited(cfg, 2, judged, cfg.parent / "pairs.jsonl"), overwrite=False, switch="--overwrite")
    as_task = tmp_path / "tasks"                                     # a task's tables, one folder down
    shutil.copytree(judged, as_task / "t", ignore=shutil.ignore_patterns("manifest.json"))
    assert holds_judged_tables(as_task) and not holds_judged_tables(tmp_path / "judged")
    shutil.rmtree(judged / "tables")
    (judged / "verdicts.parquet").unlink()
    claim(judged, limited(cfg, 2, judged, cfg.parent / "pairs.jsonl"), overwrite=False, switch="--overwrite")                # nothing left to rewrite


def test_a_generation_that_writes_no_items_says_why_and_keeps_the_folders_items(tmp_path):
    """A hostile pass: every turn unparsed, a judged run wrote an empty items file over the folder's
    (a finished run's manifest then described items no longer there) and stopped at "no items",
    without the generation's reason (--generate-only printed it)."""
    uses = "1. comb hair\n2. dig soil\n3. stir paint\n4. pick a lock\n5. hold notes"
    recording = tmp_path / "uses.jsonl"
    recording.write_text("".join(json.dumps({"id": f"fork/{level}", "response": uses}) + "\n"
                                 for level in ("common", "creative", "highly_creative")))
    gen = tmp_path / "g.toml"
    gen.write_text(GENERATE.format(folder=tmp_path))
    assert cli("run", str(gen), "--generate-only", "--quiet", cwd=tmp_path).returncode == 0
    items = tmp_path / "runs" / "out" / "g" / "generated" / "items.jsonl"
    before = items.read_bytes()
    assert before.count(b"\n") == 15
    recording.write_text("".join(json.dumps({"id": f"fork/{level}", "response": " "}) + "\n"
                                 for level in ("common", "creative", "highly_creative")))
    (tmp_path / "judge.jsonl").write_text("")                        # never asked: nothing to judge
    r = cli("run", str(gen), "--quiet", cwd=tmp_path)
    assert one_line(r).endswith(
        "the generation stage wrote no items to judge (3 generation turn(s) did not parse: their conversations wrote "
        "no items (tables/generation)); the folder's items are kept as they were (--generate-only shows the "
        "generation table)"), r.stderr
    assert items.read_bytes() == before


COUNT_OPENS = """
import sys
import litjudge
data, opened = sys.argv[1], []
litjudge.run(sys.argv[2], out=sys.argv[4], progress=False)              # a finished run of other data
sys.addaudithook(lambda event, args: opened.append(1) if event == "open" and str(args[0]) == data else None)
try:
    litjudge.run(sys.argv[3], out=sys.argv[4], progress=False)
except litjudge.ConfigError as exc:
    print(len(opened), "opens;", exc)
"""


def test_the_data_is_read_once_before_the_folder_is_claimed(tmp_path):
    """Before the claim, a table's data file is opened twice: hashed, and its first unit read
    through the loader (which checks the maps on that first row). A first-row check of its own
    read it a third time. Counted by the interpreter's audit hook of every open, in a run stopped at
    the claim (its folder holds a finished run of other data)."""
    rows = [{"id": f"p{i}", "prompt": "Write.", "a": f"one {i}", "b": f"two {i}", "winner": "a"} for i in range(6)]
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"id": f"p{i}/{o}", "response": "A"}) + "\n" for i in range(6)
                               for o in ("ab", "ba")))
    for name, mine in (("prefs", rows), ("other", rows[:4])):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in mine))
        (tmp_path / f"{name}.toml").write_text(
            f'name = "c"\nprotocol = "pairwise"\njudge = "replay:{answers}"\n[dataset]\nloader = "table"\n'
            f'path = "{name}.jsonl"\ncolumns = {{ pair_id = "id", text_a = "a", text_b = "b", label = "winner" }}\n')
    done = run_python(["-c", COUNT_OPENS, str(tmp_path / "prefs.jsonl"), str(tmp_path / "other.toml"),
                       str(tmp_path / "prefs.toml"), str(tmp_path / "out")], tmp_path, console_env(dict(os.environ)), 300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("2 opens;") and "holds the results of another run" in done.stdout, done.stdout


def test_a_typo_in_a_rubric_question_is_named_before_the_folder_is_claimed(tmp_path):
    """The same run name, a question's human column misspelled: the column is the error, not
    "holds the results of another run" (which sent the user to --overwrite)."""
    rows = stories()
    data = tmp_path / "stories.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    judge = recording(tmp_path / "rec.jsonl", rows)

    def config(human: str) -> Path:
        cfg = tmp_path / "rubric.toml"
        cfg.write_text(f'name = "asked"\nprotocol = "rubric"\njudge = "{judge}"\n'
                       f'[dataset]\npath = "{data}"\ncolumns = {{ item_id = "id", group = "prompt", text = "story" }}\n'
                       f'[[options.questions]]\nid = "natural"\ntext = "Natural?"\nhuman = "{human}"\n')
        return cfg
    assert cli("run", str(config("natural_human")), "--quiet", cwd=tmp_path).returncode == 0
    one_line(cli("run", str(config("natral_human")), "--quiet", cwd=tmp_path),
             "options.questions[0]: column 'natral_human' is not in the data")


def test_a_sweep_ranked_again_by_another_question_reads_its_stored_verdicts(tmp_path):
    """`rank_by` and [sweep.post] change no request: the sweep ranks again in its folder (it was
    refused as another run)."""
    rows = stories()
    data = tmp_path / "stories.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    natural, vivid = QUESTIONS[0], QUESTIONS[1]
    table = {"name": "ranked", "protocol": "rubric", "judge": recording(tmp_path / "rec.jsonl", rows),
             "dataset": {"path": str(data), "columns": COLUMNS},
             "matrix": {"options.questions": [[natural, vivid], [natural, {**vivid, "text": "How concrete?"}]]}}
    first = litjudge.run(table, out=tmp_path / "out", progress=False)
    again = litjudge.run({**table, "sweep": {"rank_by": "agreement.agreement@question=vivid"}}, out=tmp_path / "out",
                         progress=False)
    assert again.run_dir == first.run_dir and again.manifest.raw["judges"][0]["generated"] == 0
    assert again.manifest.raw["rank_by"] == "agreement.agreement@question=vivid"


def test_a_missing_override_on_the_command_line_still_goes_beside_the_config_s_run(tmp_path):
    """`run CONFIG --missing wrong` is the config's run with an override: a folder of its own beside
    it (the config's tables kept), as `--judge` and `--mode` do; nothing generated there."""
    cfg = pairs_run(tmp_path, name="kept")
    assert cli("run", str(cfg), "--quiet", cwd=tmp_path).returncode == 0
    folder = tmp_path / "runs" / "out" / "kept"
    before = (folder / "manifest.json").read_bytes()
    r = cli("run", str(cfg), "--quiet", "--missing", "wrong", cwd=tmp_path)
    assert r.returncode == 0 and "this one (--missing) goes to" in r.stderr, r.stderr[-2000:]
    derived = [p for p in folder.parent.iterdir() if p.name.startswith("kept-")]
    assert len(derived) == 1 and (folder / "manifest.json").read_bytes() == before
    assert json.loads((derived[0] / "manifest.json").read_text())["missing_policy"] == "wrong"


def test_a_recorded_generator_of_a_conversation_of_several_turns_is_refused(tmp_path):
    """A recording answers by conversation id: each turn of a conversation with follow-ups was served
    the same recorded answer. One turn (followups = 0) is fine; more are refused in one line."""
    (tmp_path / "uses.jsonl").write_text(json.dumps({"id": "fork/common", "response": "1. comb hair"}) + "\n")
    gen = tmp_path / "g.toml"
    gen.write_text(GENERATE.format(folder=tmp_path).replace("followups = 0", "followups = 2"))
    one_line(cli("run", str(gen), "--generate-only", "--quiet", cwd=tmp_path), "generate.generators",
             "is recorded: it holds one answer per conversation id, which all 3 turns")
