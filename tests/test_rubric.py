"""protocol = "rubric": your own questions about each text or pair of texts, from TOML and from a
DataFrame call, with the default local judge (smollm2-135m under vLLM) and with recordings
(replay) where no model is the point."""
from __future__ import annotations

import json
import os
from itertools import combinations

import polars as pl
import pytest

import litjudge
from litjudge.engine.app.report import write_report
from litjudge.engine.app.run import prepare, run
from litjudge.engine.core.config import load_config
from litjudge.engine.core.errors import ConfigError, DataError
from tests.conftest import PROJECT_ROOT, needs_data
from tests.warm_cli import console_env, run_python

DEMO = PROJECT_ROOT / "runs" / "rubric-demo.toml"
POINTS = ["Flat.", "Some life.", "Lively.", "Vivid.", "Unforgettable."]
QUESTIONS = [{"id": "natural", "text": "Does the dialogue sound natural?", "human": "natural_human"},
             {"id": "vivid", "text": "How vivid is the imagery?", "scale": "points", "points": POINTS,
              "human": "vivid_human"},
             {"id": "surprise", "text": "Which ending is more surprising?", "scale": "pairwise",
              "human": "surprise_human"}]
COLUMNS = {"item_id": "id", "group": "prompt", "text": "story"}


def stories(n: int = 12, per_group: int = 4) -> list[dict]:
    return [{"id": f"s{i:02d}", "prompt": f"prompt {i // per_group}", "story": f"Story {i}: the kettle sang "
             + "and the snow kept falling. " * (1 + i % 3), "natural_human": "Yes" if i % 3 else "No",
             "vivid_human": 1 + i % 5, "surprise_human": (i * 7) % 5} for i in range(n)]


def recording(path, rows, pick=lambda item: "A") -> str:
    """Recorded answers for every ask of the three questions (item ids as the rubric names them)."""
    out = []
    for r in rows:
        out += [{"id": f"{r['id']}/natural", "response": "Yes"}, {"id": f"{r['id']}/vivid", "response": "3"}]
    for g in sorted({r["prompt"] for r in rows}):
        for a, b in combinations([r for r in rows if r["prompt"] == g], 2):
            out += [{"id": f"{a['id']}|{b['id']}/surprise/{o}", "response": pick(o)} for o in ("ab", "ba")]
    path.write_text("".join(json.dumps(x) + "\n" for x in out))
    return f"replay:{path}"


def test_the_demo_rubric_runs_from_toml(tiny, runs_dir):
    """The committed demo rubric's three scales, both orders, resumption and the report (the
    session's tiny random judge: the run is the point, not its verdicts)."""
    outcome = run(load_config(DEMO, judge=tiny.spec.name), progress=False, backends={tiny.spec.name: tiny})
    v = outcome.verdicts
    assert outcome.manifest.verdicts.rows == 12 and outcome.manifest.verdicts.unparsed == 0
    by_q = {q: set(g["label"]) for (q,), g in v.group_by(["question"])}
    assert by_q["dialogue"] <= {"Yes", "No"} and by_q["imagery"] <= set("12345") and by_q["ending"] <= {"A", "B"}
    t = outcome.tables
    assert sorted(t["scores"]["question"]) == ["dialogue", "ending", "imagery"] and t["scores"]["unparsed"].sum() == 0
    flips = t["consistency"].filter(pl.col("metric") == "swap_flip_rate")
    assert flips["n"].to_list() == [3]                          # 3 pairs of the demo's 3 stories, both orders
    assert t["agreement"].height == 0                           # no human column: no agreement, no error
    # each story's questions share the story as their prefix; the pairs come in both orders
    assert set(v.filter(pl.col("question") == "ending")["order"]) == {"ab", "ba"}
    assert run(load_config(DEMO, judge=tiny.spec.name), progress=False,
               backends={tiny.spec.name: tiny}).judges[0].generated == 0
    page = write_report([outcome.run_dir]).read_text()
    assert "section class='viewer'" in page and '"imagery"' in page and "Scores" in page


def test_distribution_mode_gives_p_label_and_the_expected_score(tiny, runs_dir):
    """Distribution mode's columns and the expected score (the session's tiny random judge: what
    the tables make of its probabilities is the point)."""
    outcome = run(load_config(DEMO, mode="distribution", judge=tiny.spec.name), progress=False,
                  backends={tiny.spec.name: tiny}, run_dir=runs_dir / "dist")
    d = outcome.tables["per_verdict"]
    assert outcome.manifest.verdicts.unparsed == 0 and d["expected"].is_not_null().all()
    assert ((d["p_answer"] > 0) & (d["p_answer"] <= 1)).all()
    points = d.filter(pl.col("question") == "imagery")["expected"]
    assert ((points >= 1) & (points <= 5)).all()
    assert outcome.tables["scores"]["mean_expected"].is_not_null().all()


def test_analyze_mode_ends_with_a_constrained_verdict(tiny, runs_dir):
    """Free analysis, then a verdict the grammar holds (the session's tiny random judge writes both).
    The labels' probabilities after the analysis are kept, so the annotation queue of this one
    judge draws by them (a label-mode judge alone gives it 0 uncertainty everywhere)."""
    from litjudge.engine.app.annotate.queue import build_queue
    from litjudge.engine.app.report.viewer import viewer_frame
    from litjudge.engine.app.runs import load_run

    outcome = run(load_config(DEMO, mode="analyze", options={"analysis_tokens": 16}, judge=tiny.spec.name),
                  progress=False, backends={tiny.spec.name: tiny}, run_dir=runs_dir / "analyze")
    assert outcome.manifest.verdicts.rows == 12 and outcome.manifest.verdicts.unparsed == 0
    kept = outcome.verdicts["analysis_distribution"]
    assert kept.is_not_null().all() and outcome.verdicts["distribution"].is_null().all()
    # analyses cut at analysis_tokens (a random judge rarely writes the marker in 16 tokens): stored as
    # cut and said (a hostile pass: stored as finished, nothing said)
    cut = outcome.verdicts.filter(pl.col("cut") == 1).height
    assert 0 < cut <= 12 and any(w.startswith(f"{tiny.spec.name}: {cut} of its 12 verdicts followed an analysis cut "
                                              "at analysis_tokens") for w in outcome.manifest.warnings), \
        outcome.manifest.warnings
    q = build_queue(runs_dir / "analyze", 4)
    headline = [any(x.counted for x in c.questions) for c in q.clusters]     # the 3 texts (the first question's)
    assert sum(headline) == 3 and all(q.uncertainty[headline] > 0)
    assert q.uncertainty_source == "the judges' P(label) read after their analysis"
    shown = viewer_frame(load_run(runs_dir / "analyze"))           # the report's item viewer shows them, said so
    assert shown["probability"].is_not_null().all() and shown["distribution"].str.starts_with("after the analysis: ").all()
    # as stored before they were kept: the queue says why it has nothing to draw by, and what reads them
    verdicts = runs_dir / "analyze" / "verdicts.parquet"
    pl.read_parquet(verdicts).with_columns(pl.lit(None).alias("analysis_distribution")).write_parquet(verdicts)
    said = build_queue(runs_dir / "analyze", 4).uncertainty_source
    assert "0 for every cluster" in said and "this analyze run's verdicts hold no label probabilities" in said, said


DATAFRAME_CALL = """
import json, sys
import polars as pl
import litjudge
rows, questions, columns, judge, out = json.loads(sys.argv[1])
r = litjudge.judge(pl.DataFrame(rows), protocol="rubric", questions=questions, columns=columns, judge=judge,
                   engine={"max_model_len": 2048, "kv_cache_gib": 1}, out=out, progress=False)
print(json.dumps({"rows": r.manifest.verdicts.rows, "unparsed": r.manifest.verdicts.unparsed,
                  "tables": {k: r.tables[k].to_dicts() for k in ("agreement", "binary_agreement", "points_agreement",
                                                                    "pairwise_agreement")}}, default=str))
"""


@pytest.mark.slow
def test_a_three_question_rubric_from_a_dataframe_with_human_columns(tmp_path, tiny_folder):
    """The DataFrame call with a local judge by its path (the session's tiny random model: the
    call and its tables are the point; in a process of its own: one engine per process), 0
    unparsed, and an agreement table for each question that names a human column."""
    args = json.dumps([stories(), QUESTIONS, COLUMNS, str(tiny_folder), str(tmp_path)])
    done = run_python(["-c", DATAFRAME_CALL, args], tmp_path, console_env({**os.environ, "LITJUDGE_VERDICT_CACHE": "off"}),
                      1800)
    assert done.returncode == 0, done.stderr[-2000:]
    r = json.loads(done.stdout.strip().splitlines()[-1])
    assert r["rows"] == 12 * 2 + 3 * 6 * 2 and r["unparsed"] == 0
    t = r["tables"]
    assert [row["n"] for row in t["binary_agreement"]] == [12] and [row["n"] for row in t["points_agreement"]] == [12]
    assert [row["order"] for row in t["pairwise_agreement"]] == ["ab", "ba", "mean of both"]
    assert sorted(row["metric"] for row in t["agreement"]) == ["accuracy", "kappa", "qwk"]


def test_questions_as_a_keyword_or_in_options_and_the_humans_beside_each_verdict(tmp_path):
    rows = stories()
    judge = recording(tmp_path / "rec.jsonl", rows)
    a = litjudge.judge(rows, protocol="rubric", judge=judge, questions=QUESTIONS, columns=COLUMNS, out=tmp_path,
                       name="kw", progress=False)
    b = litjudge.judge(rows, protocol="rubric", judge=judge, options={"questions": QUESTIONS}, columns=COLUMNS,
                       out=tmp_path, name="opts", progress=False)
    assert a.verdicts.select("key").sort("key").equals(b.verdicts.select("key").sort("key"))
    natural = a.tables["per_verdict"].filter(pl.col("question") == "natural")
    assert natural["human"].to_list() == ["No" if i % 3 == 0 else "Yes" for i in range(12)]
    pairs = a.tables["per_verdict"].filter(pl.col("question") == "surprise")
    # the humans' preference between two items: the higher value in the human column
    first = pairs.filter(pl.col("item_id") == "s00|s01/surprise/ab").row(0, named=True)
    assert first["human"] == "b" and first["answer"] == "a" and first["cluster"] == "s00|s01"
    picked_first = a.tables["consistency"].filter(pl.col("metric") == "first_position_win_rate")["value"][0]
    assert picked_first == 1.0                                  # the recording always answers "A"
    with pytest.raises(ConfigError, match="'questions' is given twice"):
        litjudge.judge(rows, protocol="rubric", judge=judge, questions=QUESTIONS, options={"questions": QUESTIONS},
                       columns=COLUMNS, out=tmp_path, progress=False)


def test_a_sweep_over_wordings_generates_an_unchanged_question_once(tmp_path):
    rows = stories()
    data = tmp_path / "stories.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    judge = recording(tmp_path / "rec.jsonl", rows)
    natural, vivid = QUESTIONS[0], QUESTIONS[1]
    table = {"name": "wordings", "protocol": "rubric", "judge": judge,
             "dataset": {"path": str(data), "columns": COLUMNS},
             "matrix": {"options.questions": [[natural, vivid], [natural, {**vivid, "text": "How concrete is it?"}]]}}
    result = litjudge.run(table, out=tmp_path / "out", progress=False)
    sharing = result.manifest.raw["sharing"]
    assert (sharing["requests"], sharing["distinct_requests"], sharing["model_calls_saved_across_cells"]) == (48, 36, 12)
    assert result.manifest.raw["judges"][0]["generated"] == 36                 # natural once, each wording once
    assert len({c["id"] for c in result.manifest.raw["cells"]}) == 2


@pytest.mark.parametrize("questions, words", [
    ([], "lists no question"),
    ([{"id": "a", "text": "A?", "scale": "likert"}], "scale must be one of ['binary', 'points', 'pairwise', 'categorical']"),
    ([{"id": "a", "text": "A?", "scale": "points", "points": ["one"]}], "describes each point 1..N"),
    ([{"id": "a", "text": "A?"}, {"id": "a", "text": "B?"}], "question ids must be distinct"),
    ([{"id": "a/b", "text": "A?"}], "letters, digits, '-' and '_'"),
    ([{"id": "a", "text": "A?", "labels": ["Yes"]}], "a binary scale has two labels, the positive first"),
    ([{"id": "a", "text": "A?", "labels": ["Yes", "yes"]}], "label names must differ in more than case"),
    ([{"id": "a", "text": "A?", "labels": ["unparsed", "No"]}], "'unparsed' names a verdict with no answer"),
    ([{"id": "a", "text": "A?", "labels": ["<b>Yes</b>", "No"]}], "label '<b>Yes</b>' is not a plain, unpadded name"),
    ([{"id": "a", "text": "A?", "labels": ["Yes", "<|im_start|>"]}], "label '<|im_start|>' is not a plain"),
    ([{"id": "a", "text": "A?", "scale": "points", "points": ["a", "  "]}], "point 2's description '  ' is blank"),
    ([{"id": "a", "text": "A?", "scale": "points", "points": ["bad", "x\n\n5: fake"]}],
     "point 2's description 'x\\n\\n5: fake' is not one line"),
    ([{"id": "a", "text": "A?", "scale": "pairwise", "labels": ["X", "Y"]}], "labels name a binary question's"),
    ([{"id": "a", "text": "A?", "tie": True}], "a tie is an answer of a pairwise question"),
    ([{"id": "a", "text": "A?", "scael": "binary"}], "options.questions[0].scael: unknown key (did you mean"),
])
def test_question_mistakes_are_one_line(questions, words):
    table = {"name": "r", "protocol": "rubric", "dataset": "ttcw-demo", "judge": "smollm2-135m",
             "options": {"questions": questions}}
    with pytest.raises(ConfigError) as exc:
        prepare(load_config("r", table))
    assert words in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("protocol, dataset, resamples", [("rubric", "ttcw-demo", 0), ("rubric", "ttcw-demo", 10**8),
                                                       ("pairwise", "pairs-generic", 0),
                                                       ("pairwise", "pairs-generic", 10**8)])
def test_resamples_out_of_bounds_are_one_line_before_any_inference(protocol, dataset, resamples):
    """A bootstrap's draws are resamples x clusters integers at once: 10^8 resamples were accepted and
    failed as an internal error (out of memory) after all the run's inference; 0 was not refused.
    Both protocols word it alike (the rubric's said "options: options.resamples must be ...")."""
    options = {"questions": [{"id": "a", "text": "A?"}]} if protocol == "rubric" else {}
    with pytest.raises(ConfigError) as exc:
        prepare(load_config("r", {"name": "r", "protocol": protocol, "dataset": dataset, "judge": "smollm2-135m",
                                  "options": {**options, "resamples": resamples}}))
    assert f"options.resamples: must be 1 to 20,000, got {resamples:,}" in str(exc.value), str(exc.value)
    assert "\n" not in str(exc.value)


def test_one_kind_of_data_per_run_and_the_data_each_kind_reads():
    single, pair = {"id": "a", "text": "A?"}, {"id": "b", "text": "B?", "scale": "pairwise", "human": "label"}
    base = {"name": "r", "protocol": "rubric", "judge": "smollm2-135m"}
    with pytest.raises(ConfigError, match="pairs_from = \"data\" reads pairs, and a single-text question reads items"):
        prepare(load_config("r", {**base, "dataset": "pairs-generic",
                                  "options": {"questions": [single, pair], "pairs_from": "data"}}))
    with pytest.raises(ConfigError, match="reads items data, and dataset 'pairs-generic'"):
        prepare(load_config("r", {**base, "dataset": "pairs-generic", "options": {"questions": [single]}}))
    prep = prepare(load_config("r", {**base, "dataset": "pairs-generic", "options": {"questions": [pair]}}))
    asked = list(prep.protocol.build(prep.context(prep.specs[0])).requests)
    assert [r.meta.item_id for r in asked[:2]] == ["d1/b/ab", "d1/b/ba"] and dict(asked[0].meta.fields)["human"] in "ab"


def test_a_text_s_questions_share_its_prefix():
    prep = prepare(load_config(DEMO))
    asked = list(prep.protocol.build(prep.context(prep.specs[0])).requests)
    first = [r.messages[-1].content for r in asked if dict(r.meta.fields).get("text_id") == "0_Demo1"]
    story = first[0].split("Question:")[0]
    assert len(first) == 2 and all(p.startswith(story) for p in first) and len(story) > 500


def test_human_columns_that_are_absent_or_unreadable_are_one_line(tmp_path):
    rows = stories()
    judge = recording(tmp_path / "rec.jsonl", rows)
    absent = [{**QUESTIONS[0], "human": "nope"}]
    with pytest.raises(ConfigError) as exc:
        litjudge.judge(rows, protocol="rubric", judge=judge, questions=absent, columns=COLUMNS, out=tmp_path,
                       progress=False)
    first = rows[0]["id"]
    assert (f"options.questions[0]: column 'nope' is not in the data: item {first!r} has no such column (columns: "
            "prompt, id, story, natural_human, vivid_human, surprise_human)") in str(exc.value)
    misspelt = [{**QUESTIONS[0], "human": "natral_human"}]            # "did you mean", as for a misspelt config key
    with pytest.raises(ConfigError, match=r"column 'natral_human' is not in the data: item '\w+' has no such column "
                                          r"\(did you mean 'natural_human'\?\) \(columns: "):
        litjudge.judge(rows, protocol="rubric", judge=judge, questions=misspelt, columns=COLUMNS, out=tmp_path,
                       progress=False)
    with pytest.raises(ConfigError) as exc:                 # a constant ("=all") is no column of the data
        litjudge.judge(rows, protocol="rubric", judge=judge, questions=absent, columns={**COLUMNS, "group": "=all"},
                       out=tmp_path, progress=False)
    assert "(columns: id, story, prompt, natural_human," in str(exc.value) and "=all" not in str(exc.value), exc.value
    # a field's name that [dataset.columns] reads from another column (group from "prompt"): your own column
    # of that name was never read, and the field's values (the prompts) were taken for the humans' answers
    clash = [dict(r, group="Yes") for r in rows]
    with pytest.raises(ConfigError, match="column 'group' is litjudge's field group, which \\[dataset.columns\\] "
                                          "reads from your column 'prompt': name that column here"):
        litjudge.judge(clash, protocol="rubric", judge=judge, questions=[{**QUESTIONS[0], "human": "group"}],
                       columns=COLUMNS, out=tmp_path, progress=False)
    bad = [dict(r, natural_human="maybe") for r in rows]
    with pytest.raises(DataError, match="column 'natural_human' holds 'maybe', which is none of"):
        litjudge.judge(bad, protocol="rubric", judge=judge, questions=QUESTIONS[:1], columns=COLUMNS, out=tmp_path,
                       progress=False)


@needs_data
def test_the_committed_confederacy_rubric_replays_its_recording(runs_dir):
    result = litjudge.run(PROJECT_ROOT / "runs" / "rubric-confederacy.toml", out=runs_dir, progress=False)
    assert result.manifest.verdicts.unparsed == 0 and result.manifest.verdicts.missing == 0
    acc = result.tables["pairwise_agreement"]
    assert acc["order"].to_list() == ["ab", "ba", "mean of both"] and acc["ci_low"].is_not_null().all()
    assert result.tables["consistency"]["metric"].to_list() == ["swap_flip_rate", "first_position_win_rate"]


def test_report_axes_show_a_zero_share_as_zero(tmp_path):
    """A judge that always answers No has a share of 0: its bar is drawn on the share's whole range
    (it looked like an empty chart on a -0.04..0.04 axis); kappas on [-1, 1]; mean points keep theirs,
    in a chart of their own (0-1 shares and 1-5 means shared one axis: the shares were slivers)."""
    from litjudge.engine.app.report.rubric_panels import _agreement_axis, score_figures

    rows = stories()
    scores = litjudge.judge(rows, protocol="rubric", judge=recording(tmp_path / "rec.jsonl", rows), questions=QUESTIONS,
                            columns=COLUMNS, out=tmp_path / "runs", progress=False).tables["scores"]
    assert set(scores["scale"]) == {"binary", "points", "pairwise"}
    (shares_name, shares), (points_name, points) = score_figures(scores)
    assert (shares_name, points_name) == ("scores", "scores_points")
    assert [t.get_text() for t in shares.axes[0].get_xticklabels()] == ["natural", "surprise"]
    assert shares.axes[0].get_ylim() == (0.0, 1.0)
    assert [t.get_text() for t in points.axes[0].get_xticklabels()] == ["vivid"] and points.axes[0].get_ylim()[1] >= 3
    assert _agreement_axis(pl.DataFrame({"metric": ["kappa", "accuracy"]})) == (-1.0, 1.0)
    assert _agreement_axis(pl.DataFrame({"metric": ["accuracy"]})) == (0.0, 1.0)


def test_a_judge_with_no_readable_answer_is_a_row_and_an_unranked_cell(tmp_path):
    """A judge answering "9" to every vivid question (points 1-5): its agreement row says why it has
    none (n 0), and a sweep ranking by that question lists its cell last, unranked, saying so (it
    was left out: a sweep of one cell, exit 0). Another judge's unread share is its vivid answers'
    (3 of 12), not every question's pooled (3 of 24). A rank_by row the table has not is refused."""
    rows = stories()
    data = tmp_path / "stories.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    questions = QUESTIONS[:2]
    answers = {name: [a for i, r in enumerate(rows) for a in
                      ({"id": f"{r['id']}/natural", "response": "Yes"},
                       {"id": f"{r['id']}/vivid", "response": "9" if name == "y" or i % 4 == 0 else str(1 + i % 5)})]
               for name in ("x", "y")}
    judges = []
    for name, recorded in answers.items():
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(a) + "\n" for a in recorded))
        judges.append(f"replay:{tmp_path / name}.jsonl")
    table = {"name": "unreadable", "protocol": "rubric", "dataset": {"path": str(data), "columns": COLUMNS},
             "options": {"questions": questions}}
    single = litjudge.run({**table, "judge": judges}, out=tmp_path / "out", progress=False)
    vivid = single.tables["agreement"].filter(pl.col("question") == "vivid").sort("judge")
    assert vivid["n"].to_list() == [9, 0] and vivid["agreement"][1] is None
    assert vivid["ci_note"][1] == "none of this judge's 12 answers could be read: no agreement"
    sweep = {**table, "name": "unreadable-sweep", "matrix": {"judge": judges},
             "sweep": {"rank_by": "agreement.agreement@question=vivid"}}
    ranked = litjudge.run(sweep, out=tmp_path / "out", progress=False).tables["sweep_ranking"]
    assert ranked["judge"].to_list() == judges and ranked["rank"].to_list() == [1, None]
    assert ranked["value"][1] is None and ranked["ci_note"][1] == ("none of this judge's 12 answers could be read: "
                                                                   "no agreement: unranked")
    assert ranked["unread"].to_list() == [0.25, 1.0]
    for rank_by, words in [("agreement.agreement@question=vivid,order=ab", "agreement has no column 'order'"),
                           ("points_agreement.qwk@question=vivid,order=ab", "points_agreement has no column 'order'")]:
        with pytest.raises(ConfigError, match=words):
            litjudge.run({**sweep, "sweep": {"rank_by": rank_by}}, out=tmp_path / "out", progress=False)
    with pytest.raises(ConfigError, match="pairwise_agreement's order is one of ab, ba, mean of both, not 'xy'"):
        litjudge.run({**sweep, "options": {"questions": QUESTIONS},
                      "sweep": {"rank_by": "pairwise_agreement.accuracy@question=surprise,order=xy"}},
                     out=tmp_path / "out", progress=False)


def test_blank_humans_are_no_answer_and_an_undefined_headline_says_why(tmp_path):
    """A blank human cell ("", "  ") is no answer, as an empty CSV cell and null are (it was refused
    as 'not a finite number (leave the cell empty ...)'); a headline with no value says why in its
    note (it spoke only of the other metrics' intervals); a pairwise question over items data
    without pairs_from names the option (the columns error alone did not)."""
    rows = stories()
    for i, r in enumerate(rows):
        r["natural_human"] = "" if i == 0 else "  " if i == 1 else "Yes"
        r["vivid_human"] = "" if i == 2 else r["vivid_human"]
    result = litjudge.judge(rows, protocol="rubric", judge=recording(tmp_path / "rec.jsonl", rows),
                            questions=QUESTIONS[:2], columns=COLUMNS, out=tmp_path / "out", progress=False)
    head = {r["question"]: r for r in result.tables["agreement"].iter_rows(named=True)}
    assert head["natural"]["n"] == 10 and head["vivid"]["n"] == 11
    assert [w for w in result.manifest.warnings if "no human answer" in w] == [  # said beside n
        "question 'natural': 2 of 12 texts have no human answer in 'natural_human': its agreement reads the 10 "
        "that have one, of them those the judge's answer was read for (its n)", "question 'vivid': 1 of 12 texts "
        "have no human answer in 'vivid_human': its agreement reads the 11 that have one, of them those the judge's "
        "answer was read for (its n)"]
    assert head["natural"]["agreement"] is None
    assert head["natural"]["ci_note"].startswith(f"{head['natural']['metric']} is undefined: the humans and the judge "
                                                 "each gave one answer (over 10 answers)")
    with pytest.raises(litjudge.DataError, match='set options.pairs_from = "groups"'):
        litjudge.judge(rows, protocol="rubric", judge=recording(tmp_path / "rec.jsonl", rows), questions=QUESTIONS[2:],
                       columns=COLUMNS, out=tmp_path / "out", progress=False)


def test_a_text_alone_in_its_group_is_said_not_dropped_by_a_pairwise_question(tmp_path):
    """Texts alone in their group (a stray space made " prompt 0" a group of its own) were never
    asked a pairwise question, with no warning and no row in tables/skipped."""
    rows = stories(9)
    rows[8]["prompt"] = "prompt 9"                                   # alone; and one with a stray space
    rows[7]["prompt"] = " prompt 1"
    result = litjudge.judge(rows, protocol="rubric", judge=recording(tmp_path / "rec.jsonl", rows), questions=QUESTIONS,
                            columns=COLUMNS, options={"pairs_from": "groups"}, out=tmp_path / "out", progress=False)
    skipped = result.tables["skipped"]
    assert sorted(skipped["item_id"]) == ["s07/surprise", "s08/surprise"] and skipped.columns == ["judge", "item_id",
                                                                                                   "reason"]
    assert [w for w in result.manifest.warnings if "not judged" in w] == [
        "2 item(s) not judged: a text alone in its group has no pair for pairwise question 'surprise' (listed in "
        "tables/skipped)"]


def test_a_headlines_note_is_about_its_own_metric(tmp_path):
    """A points question's headline is its quadratic-weighted kappa: its note is the kappa's, not
    another metric's of the same row (within-one, where every answer is within one point: the
    statistics audit found that note on the headline)."""
    rows = stories(40, 4)
    out = [{"id": f"{r['id']}/natural", "response": "Yes"} for r in rows]
    out += [{"id": f"{r['id']}/vivid", "response": str(min(5, r["vivid_human"] + (i % 2)))} for i, r in enumerate(rows)]
    path = tmp_path / "rec.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in out))
    questions = [q for q in QUESTIONS if q["id"] != "surprise"]
    result = litjudge.judge(rows, protocol="rubric", judge=f"replay:{path}", options={"questions": questions},
                            columns=COLUMNS, out=tmp_path / "out", progress=False)
    detail = result.tables["points_agreement"].to_dicts()[0]
    assert detail["within_one"] == 1.0 and "within_one: " in detail["ci_note"], detail
    headline = result.tables["agreement"].filter(pl.col("question") == "vivid").to_dicts()[0]
    assert headline["metric"] == "qwk" and headline["agreement_low"] is not None, headline
    assert headline["ci_note"] is None or "within_one" not in headline["ci_note"], headline
