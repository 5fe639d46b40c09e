"""A rubric's human labels and ranking are taken as meant, or refused in one line: a "nan" cell is
no preference (it was read as a tie and counted in the accuracy), JSON true is no point, a sweep
ranked by a question the rubric does not ask is refused before anything runs (it ranked nothing,
exit 0), and a rubric of pairwise questions over items data says how to pair them."""
from __future__ import annotations

import csv
import json

import polars as pl
import pytest

import litjudge
from litjudge.engine.core.errors import ConfigError, DataError
from tests.test_rubric import COLUMNS, QUESTIONS, recording, stories


def write_csv(path, rows: list[dict]) -> str:
    with open(path, "w", newline="") as fh:
        out = csv.DictWriter(fh, fieldnames=list(rows[0]))
        out.writeheader()
        out.writerows(rows)
    return str(path)


def one_line(exc: pytest.ExceptionInfo, *words: str) -> None:
    text = str(exc.value)
    assert "\n" not in text and all(w in text for w in words), text


@pytest.mark.parametrize("cell", ["nan", "NaN", "inf"])
def test_a_nan_cell_in_a_pairwise_human_column_is_refused_not_a_tie(tmp_path, cell):
    rows = stories()
    rows[5]["surprise_human"] = cell
    data = write_csv(tmp_path / "stories.csv", rows)
    judge = recording(tmp_path / "rec.jsonl", rows)
    with pytest.raises(DataError) as exc:
        litjudge.judge(data, protocol="rubric", judge=judge, questions=QUESTIONS[2:], columns=COLUMNS,
                       options={"pairs_from": "groups"}, out=tmp_path / "out", progress=False)
    one_line(exc, "item s05", "'surprise_human'", repr(cell), "not a finite number")


def pairs_judged(tmp_path, rows: list[dict]):
    """The pairwise question over the groups' pairs of `rows`, judged by a recording."""
    return litjudge.judge(write_csv(tmp_path / "stories.csv", rows), protocol="rubric",
                          judge=recording(tmp_path / "rec.jsonl", rows), questions=QUESTIONS[2:], columns=COLUMNS,
                          options={"pairs_from": "groups"}, out=tmp_path / "out", progress=False)


def test_an_empty_cell_in_a_pairwise_human_column_is_still_missing(tmp_path):
    rows = stories()
    rows[5]["surprise_human"] = ""
    result = pairs_judged(tmp_path, rows)
    acc = result.tables["pairwise_agreement"]
    assert acc["n"].to_list() == [15, 15, 30]    # of 18 pairs, the 3 with s05 have no human answer
    assert "question 'surprise': 3 of 18 pairs have no human answer in 'surprise_human': its agreement reads " \
           "the 15 that have one, of them those the judge's answer was read for (its n)" in result.manifest.warnings


def test_the_missing_answers_warning_counts_the_human_ties_agreement_leaves_out(tmp_path):
    """s00 and s01 hold the same value (a human tie: left out of agreement), s05 none: of the 15
    pairs with a human answer, the warning says 1 is a tie, and accuracy reads the other 14."""
    rows = stories()
    rows[5]["surprise_human"] = ""
    rows[1]["surprise_human"] = rows[0]["surprise_human"]
    result = pairs_judged(tmp_path, rows)
    assert result.tables["pairwise_agreement"]["n"].to_list() == [14, 14, 28]
    assert "question 'surprise': 3 of 18 pairs have no human answer in 'surprise_human': its agreement reads " \
           "the 15 that have one (1 of them tied by the humans, which agreement leaves out), of them those the " \
           "judge's answer was read for (its n)" in result.manifest.warnings


def test_human_ties_alone_are_said_too(tmp_path):
    """A hostile pass: without an empty cell, the pairs the humans tied left agreement unsaid."""
    rows = stories()
    rows[1]["surprise_human"] = rows[0]["surprise_human"]
    result = pairs_judged(tmp_path, rows)
    assert result.tables["pairwise_agreement"]["n"].to_list() == [17, 17, 34]
    assert "question 'surprise': 1 of 18 pairs were tied by the humans in 'surprise_human', which agreement leaves " \
           "out: it reads the 17 others" in result.manifest.warnings


def test_unread_answers_are_said_per_question(tmp_path):
    """A hostile pass: 4 of a points question's 12 answers unread (33%) were 4 of the judge's 60
    (7%, under the warning's 10%), and unsaid."""
    rows = stories()
    judge = recording(tmp_path / "rec.jsonl", rows)
    lines = [json.loads(x) for x in (tmp_path / "rec.jsonl").read_text().splitlines()]
    for x in lines:
        if x["id"].endswith("/vivid") and x["id"] < "s04":
            x["response"] = "7"
    (tmp_path / "rec.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    result = litjudge.judge(write_csv(tmp_path / "stories.csv", rows), protocol="rubric", judge=judge,
                            questions=QUESTIONS, columns=COLUMNS, options={"pairs_from": "groups"},
                            out=tmp_path / "out", progress=False)
    said = [w for w in result.manifest.warnings if "could not be read as a verdict" in w]
    assert len(said) == 1 and said[0].startswith(f"{judge} (question 'vivid'): 4 of 12 answers (33%) could not be "
                                                 "read as a verdict, most often '7' (4)"), said


def test_a_text_without_its_reference_is_skipped_for_that_question_and_said(tmp_path):
    """A hostile pass: a question with a reference column was asked without a reference where a
    text's cell was empty, silently, and pooled with the texts asked with theirs."""
    rows = [{**r, "ref": f"Reference {i}." if i != 1 else " "} for i, r in enumerate(stories())]
    result = litjudge.judge(write_csv(tmp_path / "stories.csv", rows), protocol="rubric",
                            judge=recording(tmp_path / "rec.jsonl", rows), questions=[{**QUESTIONS[0], "reference": "ref"}],
                            columns=COLUMNS, out=tmp_path / "out", progress=False)
    assert sorted(result.verdicts["item_id"].to_list()) == [f"s{i:02d}/natural" for i in range(12) if i != 1]
    assert any("no reference text in 'ref' for question 'natural'" in w for w in result.manifest.warnings), \
        result.manifest.warnings
    skipped = pl.read_parquet(result.run_dir / "tables" / "skipped.parquet")
    assert skipped["item_id"].to_list() == ["s01/natural"]


def test_json_true_in_a_points_human_column_is_refused_not_point_one(tmp_path):
    rows = stories()
    rows[3]["vivid_human"] = True
    data = tmp_path / "stories.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError) as exc:
        litjudge.judge(str(data), protocol="rubric", judge=recording(tmp_path / "rec.jsonl", rows),
                       questions=QUESTIONS[1:2], columns=COLUMNS, out=tmp_path / "out", progress=False)
    one_line(exc, "item s03", "'vivid_human'", "True", "not a whole point from 1 to 5")


@pytest.mark.parametrize("rank_by, words", [
    ("agreement.agreement@question=nosuch", ("asks no question 'nosuch'", "natural, vivid")),
    ("agreement.agreement@question=vivdi", ("did you mean 'vivid'?",)),
    ("binary_agreement.kappa@question=vivid", ("question 'vivid' is a points question",
                                               "points_agreement")),
    ("agreement.agreement@question=plain", ("question 'plain' has no human column",)),
])
def test_a_sweep_ranked_by_a_question_it_does_not_ask_is_refused(tmp_path, rank_by, words):
    rows = stories()
    data = tmp_path / "stories.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    plain = {"id": "plain", "text": "Is it plain?"}
    table = {"name": "ranked", "protocol": "rubric", "judge": recording(tmp_path / "rec.jsonl", rows),
             "dataset": {"path": str(data), "columns": COLUMNS},
             "matrix": {"options.questions": [[*QUESTIONS[:2], plain], [QUESTIONS[0], QUESTIONS[1]]]},
             "sweep": {"rank_by": rank_by}}
    with pytest.raises(ConfigError) as exc:
        litjudge.run(table, out=tmp_path / "out", progress=False)
    one_line(exc, "sweep.rank_by", *words)
    assert not (tmp_path / "out").exists()                  # refused before anything ran


def test_a_pairwise_rubric_over_items_data_hints_at_pairs_from_groups(tmp_path):
    rows = [{"item_id": f"s{i}", "group": f"p{i // 3}", "text": f"Story {i}", "score": i % 4} for i in range(6)]
    data = write_csv(tmp_path / "stories.csv", rows)
    (tmp_path / "rec.jsonl").write_text("")
    question = [{"id": "end", "text": "Which ending surprises more?", "scale": "pairwise", "human": "score"}]
    with pytest.raises(DataError) as exc:
        litjudge.judge(data, protocol="rubric", judge=f"replay:{tmp_path / 'rec.jsonl'}", questions=question,
                       out=tmp_path / "out", progress=False)
    one_line(exc, "missing field 'prompt'", 'options.pairs_from = "groups"')


def test_true_false_in_a_binary_human_column_mean_the_label_of_that_name(tmp_path):
    """Labels that are themselves true/false words take 1/0 by meaning: with ["false", "true"] (the
    positive listed first) a 0 was read as the positive label, "false", only by its place."""
    rows = stories()
    for i, r in enumerate(rows):
        r["natural_human"] = [0, 1, "true", "FALSE", False, "yes"][i % 6]     # 6 false, 6 true
    data = tmp_path / "stories.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rec = tmp_path / "rec.jsonl"
    rec.write_text("".join(json.dumps({"id": f"{r['id']}/natural", "response": "false"}) + "\n" for r in rows))
    question = dict(QUESTIONS[0], labels=["false", "true"])
    result = litjudge.judge(str(data), protocol="rubric", judge=f"replay:{rec}", questions=[question],
                            columns=COLUMNS, out=tmp_path / "out", progress=False)
    row = result.tables["binary_agreement"].row(0, named=True)
    assert row["n"] == 12 and row["judge_positive_rate"] == 1.0 and row["human_positive_rate"] == 0.5


def test_yes_no_in_a_binary_human_column_is_refused_where_only_one_label_is_such_a_word(tmp_path):
    rows = [dict(r, natural_human="Yes") for r in stories()]
    rows[4]["natural_human"] = "no"
    data = write_csv(tmp_path / "stories.csv", rows)
    question = dict(QUESTIONS[0], labels=["Yes", "Maybe"])
    with pytest.raises(DataError) as exc:
        litjudge.judge(data, protocol="rubric", judge=recording(tmp_path / "rec.jsonl", rows), questions=[question],
                       columns=COLUMNS, out=tmp_path / "out", progress=False)
    one_line(exc, "item s04", "'no'", "none of ['Yes', 'Maybe']")
    assert "true/false" not in str(exc.value)


@pytest.mark.parametrize("cell", ["1e0", "1_0", "\uff13", "0x3"])
def test_a_points_human_cell_is_plain_digits_not_whatever_float_reads(tmp_path, cell):
    """float() reads "1_0" as ten, "1e0" as one and a full-width 3 as three: no rater wrote those."""
    rows = stories()
    rows[2]["vivid_human"] = cell
    data = write_csv(tmp_path / "stories.csv", rows)
    with pytest.raises(DataError) as exc:
        litjudge.judge(data, protocol="rubric", judge=recording(tmp_path / "rec.jsonl", rows), questions=QUESTIONS[1:2],
                       columns=COLUMNS, out=tmp_path / "out", progress=False)
    one_line(exc, "item s02", "'vivid_human'", "not a whole point from 1 to 5")


def test_a_points_human_cell_may_be_padded_signed_or_end_in_zero_decimals(tmp_path):
    rows = stories()
    for r, cell in zip(rows, [" 3", "+3", "3.0", "3.", 3, 3.0]):
        r["vivid_human"] = cell
    data = tmp_path / "stories.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = litjudge.judge(str(data), protocol="rubric", judge=recording(tmp_path / "rec.jsonl", rows),
                            questions=QUESTIONS[1:2], columns=COLUMNS, out=tmp_path / "out", progress=False)
    verdicts = result.tables["per_verdict"]
    assert verdicts["human"].head(6).to_list() == ["3"] * 6


def test_a_tie_answer_to_a_pairwise_question_is_half_credit(tmp_path):
    """A rubric's pairwise question with ties allowed: a judge right on every pair the humans did not
    tie, except "tie" on half of them, scored 0 on those; a tie is half credit (one rule, as the
    pairwise protocol's)."""
    from itertools import combinations

    rows = stories()
    answers, decided, k = [], 0, 0
    for g in sorted({r["prompt"] for r in rows}):
        for a, b in combinations([r for r in rows if r["prompt"] == g], 2):
            human = "a" if a["surprise_human"] > b["surprise_human"] else "b" if b["surprise_human"] > a["surprise_human"] \
                else "tie"
            decided += human != "tie"
            tie = human != "tie" and (k := k + 1) % 2 == 0
            for o in ("ab", "ba"):
                right = "A" if (human == "a") == (o == "ab") else "B"
                answers.append({"id": f"{a['id']}|{b['id']}/surprise/{o}", "response": "tie" if tie or human == "tie"
                                else right})
    rec = tmp_path / "rec.jsonl"
    rec.write_text("".join(json.dumps(x) + "\n" for x in answers))
    result = litjudge.judge(rows, protocol="rubric", judge=f"replay:{rec}", questions=[dict(QUESTIONS[2], tie=True)],
                            columns=COLUMNS, options={"pairs_from": "groups"}, out=tmp_path / "out", progress=False)
    acc = result.tables["pairwise_agreement"]
    ties = k // 2
    assert acc["n"].to_list() == [decided] * 2 + [2 * decided]
    assert acc["accuracy"].to_list() == pytest.approx([(decided - ties + 0.5 * ties) / decided] * 3)
