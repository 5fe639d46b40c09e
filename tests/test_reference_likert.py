"""Reference-based Likert: the sign convention, the cutoff rule and rankings, by hand; a real run
on the generic example with the default judge; the Confederacy loader on the real files."""
import math

import polars as pl
import pytest

import litjudge.grammars as g
from litjudge.engine.app.run import run
from litjudge.engine.core.config import RunConfig
from litjudge.engine.core.errors import DataError
from litjudge.engine.data.cards import load_card
from litjudge.engine.data.reference import load_confederacy, load_reference_jsonl
from litjudge.judges.base import Context
from litjudge.judges.reference_likert import ReferenceLikert, paper_template
from tests.conftest import DATA, needs_data, needs_prompts


def ctx_for(**options):
    cfg = RunConfig(name="t", protocol="reference_likert", dataset="reference-generic", options=options)
    p = ReferenceLikert()
    return p, Context(cfg, p.options(cfg), load_card("reference-generic"))


def verdict_rows(cases):
    """cases: candidate -> (label with ref as A, label with cand as A)."""
    lang, rows = g.likert(5), []
    for i, (cand, (ref_first, cand_first)) in enumerate(cases.items()):
        for order, label in (("ref_first", ref_first), ("cand_first", cand_first)):
            rows.append({"judge": "j", "group": "g", "candidate": cand, "source": "s", "human_score": float(i),
                         "test": 1, "repeat": 0, "order": order, "status": "ok", "label": label,
                         "value": str(lang.value_of(label))})
    return pl.DataFrame(rows)


def test_sign_convention_and_cutoff_by_hand():
    p, ctx = ctx_for(tests=[1])
    table = verdict_rows({
        "worse": ("[[A>>B]]", "[[B>>A]]"),        # ref much better both ways: L+ = -2, L- = +2, diff -4
        "slightly": ("[[A>B]]", "[[A=B]]"),       # L+ = -1, L- = 0, diff -1
        "better": ("[[B>>A]]", "[[A>>B]]"),       # candidate much better: L+ = +2, L- = -2, diff +4
    })
    out = p.aggregate(table, ctx)
    per = {r["candidate"]: r for r in out["per_item"].iter_rows(named=True)}
    assert (per["worse"]["L_plus"], per["worse"]["L_minus"], per["worse"]["diff"]) == (-2, 2, -4)
    assert (per["slightly"]["L_plus"], per["slightly"]["L_minus"], per["slightly"]["diff"]) == (-1, 0, -1)
    assert per["better"]["diff"] == 4
    at = {r["candidate"]: r["score"] for r in out["story_scores"].iter_rows(named=True)}   # cutoff -2
    assert at == {"worse": 0, "slightly": 1, "better": 1}
    sweep = {r["cutoff"]: r["pairwise_accuracy"] for r in out["cutoff_sweep"].iter_rows(named=True)}
    assert sweep[0] == pytest.approx(2.5 / 3)          # scores 0, 0, 1 vs human 0, 1, 2: one tied pair
    assert sweep[-4] == 0.5                            # at -4 all pass: every pair tied -> half credit
    bias = out["bias"].row(0, named=True)
    assert bias["swap_flip_rate"] == pytest.approx(1 / 3)   # "slightly": -1 vs 0 disagree in direction
    assert bias["first_position_win_rate"] == pytest.approx(3 / 5)   # the tie [[A=B]] prefers neither side


def test_dropped_answers_neither_pass_nor_fail_a_candidate():
    """A judge answering [[A=B]] throughout says nothing about the candidates; where lower-rated
    stories lost more answers (unreadable, dropped by the default policy), counting passes ranked
    them by their losses, a Spearman of 1.000 with the humans. Ranked by the share of judged tests
    passed, every candidate passes all it was judged on: no ranking (NaN), pairs tied (0.5)."""
    p, ctx = ctx_for(tests=[1, 2, 3, 4, 5])
    rows = []
    for i in range(5):                              # candidate c{i}: human score i, 4 - i answers unreadable
        for test in range(1, 6):
            for order in ("ref_first", "cand_first"):
                lost = order == "cand_first" and test <= 4 - i
                rows.append({"judge": "j", "group": "g", "candidate": f"c{i}", "source": "s", "human_score": float(i),
                             "test": test, "repeat": 0, "order": order, "status": "unparsed" if lost else "ok",
                             "label": None if lost else "[[A=B]]", "value": None if lost else "0"})
    out = p.aggregate(pl.DataFrame(rows), ctx)
    scores = out["story_scores"].sort("candidate")
    assert scores["score"].to_list() == [1, 2, 3, 4, 5] and scores["pass_rate"].to_list() == [1.0] * 5
    row = out["ranking"].row(0, named=True)
    assert math.isnan(row["spearman"]) and math.isnan(row["kendall"]) and row["pairwise_accuracy"] == 0.5


@needs_prompts
def test_paper_template_scales():
    assert "[[B>>A]]" in paper_template(5) and "{stories_and_question}" in paper_template(5)
    assert "[[A>>>B]]" in paper_template(7) and "[[A>>B]]" not in paper_template(3)


def test_generic_format_errors_name_file_and_line(tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text('{"group": 1, "item_id": "a", "text": "x", "human_score": 1, "reference": true}\n'
                 '{"group": 1, "item_id": "a", "text": "y", "human_score": 2}\n')
    with pytest.raises(DataError, match="r.jsonl:2: duplicate item_id 'a'"):
        load_reference_jsonl(f)
    f.write_text('{"group": 1, "item_id": "a", "text": "x", "human_score": 1}\n')
    with pytest.raises(DataError, match="expected exactly one reference story, found 0"):
        load_reference_jsonl(f)
    f.write_text('{"group": 1, "item_id": "a", "text": "x"}\n')
    with pytest.raises(DataError, match="r.jsonl:1: missing field 'human_score'"):
        load_reference_jsonl(f)
    # a group of its reference alone went unjudged and uncounted in silence (12 groups of 13)
    f.write_text('{"group": 1, "item_id": "a", "text": "x", "human_score": 1, "reference": true}\n'
                 '{"group": 1, "item_id": "b", "text": "y", "human_score": 2}\n'
                 '{"group": "lone", "item_id": "c", "text": "z", "human_score": 1, "reference": true}\n')
    with pytest.raises(DataError, match="group lone: only its reference story, no candidate to judge beside it"):
        load_reference_jsonl(f)


def test_a_cutoff_the_scale_cannot_reach_is_refused_and_the_sweep_is_the_scale_s():
    """L+ - L- of a p-point scale is in [-(p-1), p-1]: cutoff = 10 on 5 points passed no test, and
    its every-story-tied ranking printed a pairwise accuracy of 0.5 with an interval."""
    from litjudge.engine.core.schema import FieldError
    from litjudge.judges.reference_likert import ReferenceLikertOptions as Options

    with pytest.raises(FieldError, match=r"must be in \[-4, 4\] on a 5-point scale \(L\+ - L-\), got 10"):
        Options(cutoff=10)
    with pytest.raises(FieldError, match=r"\[3, -3\] beyond \[-2, 2\], the 3-point scale's"):
        Options(points=3, cutoff=0, cutoffs=(3, 0, -3))
    assert Options(points=3, cutoff=-1).cutoffs == (-2, -1, 0, 1, 2)
    assert Options(points=7).cutoffs == tuple(range(-6, 7)) and Options().cutoffs == tuple(range(-4, 5))
    assert Options(cutoffs=(0, 1)).cutoffs == (0, 1)


@needs_data
def test_confederacy_groups_and_references():
    groups = load_confederacy(DATA / "confederacy")
    assert len(groups) == 5 and all(len(gr.candidates) == 12 for gr in groups)
    assert {gr.reference.source for gr in groups} == {"chatgpt-gpt4"}
    assert all(c.text and c.human_score > 0 for gr in groups for c in gr.candidates)


@needs_data
def test_reference_run_on_the_generic_example(tiny, runs_dir):
    """Both orders, the Likert scale and every table (the session's tiny random judge)."""
    cfg = RunConfig(name="ref", protocol="reference_likert", dataset="reference-generic", judge=tiny.spec.name,
                    options={"tests": [1, 11]})
    out = run(cfg, progress=False, backends={tiny.spec.name: tiny})
    assert out.manifest.verdicts.rows == 2 * 2 * 2 and out.manifest.verdicts.unparsed == 0
    assert set(out.verdicts["label"]) <= set(g.likert(5).labels())
    assert {"per_item", "story_scores", "ranking", "cutoff_sweep", "bias"} <= set(out.tables)
    assert out.tables["cutoff_sweep"].height == 9


@needs_data
def test_candidate_generation_expands_toward_the_target_and_is_a_dataset(tiny, tmp_path):
    from litjudge.engine.app.generate import generate_candidates

    out = tmp_path / "gen.jsonl"
    # 24 tokens a round hold at most 24 words (each word is a token or more), short of 60 - 20:
    # every draft is expanded at least once, and the rounds stop at max_rounds (the session's tiny
    # random model writes them: the rounds and the file are the point, not the prose)
    drafts = generate_candidates(tiny, DATA / "ttcw", out, limit=2, target_words=60, tolerance=20,
                                 max_rounds=2, max_tokens=24)
    assert len(drafts) == 2 and all(d.story for d in drafts)
    assert all(1 <= d.rounds <= 2 for d in drafts), [(d.rounds, d.words) for d in drafts]
    groups = load_reference_jsonl(out)                  # reusable as a reference-format dataset
    assert len(groups) == 2 and all(gr.reference.source == "GPT4" and len(gr.candidates) == 1 for gr in groups)


@needs_data
@pytest.mark.parametrize("points, mode, reference", [(3, "label", True), (7, "analyze", True), (5, "label", False)])
def test_reference_options_run_end_to_end(tiny, runs_dir, points, mode, reference):
    """Each option through a run, on the session's tiny random judge (the options' plumbing is the point)."""
    cfg = RunConfig(name=f"ref{points}{mode}{reference}", protocol="reference_likert", dataset="reference-generic",
                    judge=tiny.spec.name, mode=mode,
                    options={"tests": [1], "points": points, "reference": reference, "analysis_tokens": 24})
    out = run(cfg, progress=False, backends={tiny.spec.name: tiny})
    assert out.manifest.verdicts.unparsed == 0
    if reference:
        assert out.verdicts.height == 2 * 2 and set(out.verdicts["label"]) <= set(g.likert(points).labels())
        assert out.tables["per_item"]["diff"].is_not_null().all()
    else:
        assert out.verdicts.height == 2 and set(out.verdicts["label"]) <= {"Yes", "No"}
        assert "ranking" in out.tables
    if mode == "analyze":
        assert out.verdicts["analysis"].is_not_null().all()


@pytest.mark.parametrize("marker", ["Therefore: ", " Therefore:", "", "Therefore:\nSo:"])
def test_a_marker_with_spaces_around_it_or_two_lines_is_one_line(tmp_path, marker):
    """A marker ending in a space wrote the verdict after two (`Therefore:  [[A>B]]`); an empty one
    was refused without naming the option."""
    import litjudge

    config = {"name": "m", "protocol": "reference_likert", "dataset": "confederacy", "judge": "replay:x.jsonl",
              "mode": "analyze", "options": {"marker": marker}}
    with pytest.raises(litjudge.ConfigError) as exc:
        litjudge.run(config, out=tmp_path / "out", progress=False)
    assert "\n" not in str(exc.value) and "options.marker: must be one line without spaces around it" in str(exc.value)


def test_the_published_n_is_the_groups_behind_each_mean_and_the_ablation_has_a_headline():
    """Through results.json's path: a group whose candidates all tie has no Spearman and is left out
    of the mean, and the published n counted it all the same (2 for a mean over 1 group); the
    ablation without a reference published no value at all, its note blaming the human labels."""
    from litjudge.engine.app.results_file import results

    lang, rows = g.likert(5), []
    for group, cases in (("g0", {"worse": ("[[A>>B]]", "[[B>>A]]"), "slightly": ("[[A>B]]", "[[A=B]]"),
                                 "better": ("[[B>>A]]", "[[A>>B]]")}),
                         ("g1", {"a": ("[[A=B]]", "[[A=B]]"), "b": ("[[A=B]]", "[[A=B]]")})):   # all tie
        for i, (cand, labels) in enumerate(cases.items()):
            for order, label in zip(("ref_first", "cand_first"), labels):
                rows.append({"judge": "j", "group": group, "candidate": cand, "source": "s", "human_score": float(i),
                             "test": 1, "repeat": 0, "order": order, "status": "ok", "label": label,
                             "value": str(lang.value_of(label))})
    p, ctx = ctx_for(tests=[1])
    record = results(p, ctx.options, p.aggregate(pl.DataFrame(rows), ctx), {"judges": [{"judge": "j"}]})
    at = {(r["metric"], r["view"]): r for r in record["results"]}
    assert at["cutoff_sweep.spearman", "cutoff=-2"]["n"] == 1 and at["cutoff_sweep.kendall", "cutoff=-2"]["n"] == 1
    assert at["cutoff_sweep.pairwise_accuracy", "cutoff=-2"]["n"] == 2      # a tied group is in it, at 0.5
    passed = {"slightly", "better", "b"}
    alone = [{**r, "order": "alone", "label": "Yes" if r["candidate"] in passed else "No",
              "value": "1" if r["candidate"] in passed else "0"} for r in rows if r["order"] == "ref_first"]
    p, ctx = ctx_for(tests=[1], reference=False)
    record = results(p, ctx.options, p.aggregate(pl.DataFrame(alone), ctx), {"judges": [{"judge": "j"}]})
    assert record["headline"] == {"metric": "ranking_mean.spearman", "view": "all", "higher_is_better": True}
    top = next(r for r in record["results"] if r["headline"])
    assert top["value"] == pytest.approx(math.sqrt(3) / 2) and top["n"] == 1     # g0's scores 0, 1, 1 vs 0, 1, 2
