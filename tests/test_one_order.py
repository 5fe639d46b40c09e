"""A judge answered in one order only (its every answer in order ba unreadable): the means over a
pair's two orders have no value, and say why, where they were that order's alone. Measured before:
a judge saying "A" in order ab and nothing readable in ba got accuracy "mean of both" 0.80 [0.56,
0.95] (its ab accuracy, the headline a sweep ranks by) and text a's win rate 1.00, which is its
position bias. Every rate without anything to measure says so in its note. Through `litjudge.judge`
with recordings (no model is the point), the tables a user reads."""
from __future__ import annotations

import json

import polars as pl
import pytest

import litjudge
from litjudge.judges.metrics.proportion import ONE_ORDER
from tests.test_python_api import COLUMNS, VALUES, pairs
from tests.test_rubric import COLUMNS as RUBRIC_COLUMNS
from tests.test_rubric import QUESTIONS, recording, stories


def ab_only(folder, rows) -> str:
    """"A" (the text shown first) in order ab, an unreadable answer in ba."""
    path = folder / "ab_only.jsonl"
    path.write_text("".join(json.dumps({"id": f"{r['id']}/{o}", "response": "A" if o == "ab" else "I cannot say"})
                            + "\n" for r in rows for o in ("ab", "ba")))
    return f"replay:{path}"


def swept(tmp_path, data: list[dict], judges: list[str], more: str = ""):
    """A pairwise sweep over `judges` on `data` (the Python API's columns), ranked by accuracy."""
    rows = tmp_path / "pairs.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in data))
    columns = "".join(f'{k} = "{v}"\n' for k, v in COLUMNS.items())
    values = "".join(f'{k} = "{v}"\n' for k, v in VALUES["label"].items())
    config = tmp_path / "sweep.toml"
    config.write_text(f'name = "s"\nprotocol = "pairwise"\n[dataset]\npath = "{rows}"\n[dataset.columns]\n{columns}'
                      f'[dataset.values.label]\n{values}[matrix]\njudge = {json.dumps(judges)}\n'
                      f'[sweep]\nrank_by = "accuracy.accuracy"\n{more}')
    return litjudge.run(config, out=tmp_path / "out", progress=False)


def row(table: pl.DataFrame, column: str, value: str) -> dict:
    rows = table.filter(pl.col(column) == value).to_dicts()
    assert len(rows) == 1, (column, value, rows)
    return rows[0]


def test_a_pairwise_judge_answered_in_one_order_has_no_mean_of_both(tmp_path):
    data = [{**r, "story_1": r["story_1"] + " told at length"} for r in pairs(20)]      # text a the longer
    result = litjudge.judge(data, protocol="pairwise", judge=ab_only(tmp_path, data), columns=COLUMNS, values=VALUES,
                            out=tmp_path / "out", progress=False)
    acc, bias = result.tables["accuracy"], result.tables["bias"]
    ab = row(acc, "order", "ab")
    assert ab["n"] == 20 and abs(ab["accuracy"] - 13 / 20) < 1e-12            # 'first' wins 13 of the 20 pairs
    ba = row(acc, "order", "ba")
    assert ba["accuracy"] is None and ba["n"] == 0 and ba["ci_note"] == "no answer on a pair the humans did not tie"
    both = row(acc, "order", "mean of both")
    assert both["accuracy"] is None and both["ci_low"] is None and both["ci_note"] == ONE_ORDER, both
    combined = row(acc, "order", "combined (inconsistent; tie = 0.5)")        # each pair's one answer: ab's
    assert combined["accuracy"] is None and combined["ci_note"] == ONE_ORDER, combined
    won = row(bias, "metric", "text_a_win_rate")
    assert won["value"] is None and won["ci_note"] == ONE_ORDER and won["n"] == 20, won
    flips = row(bias, "metric", "swap_flip_rate")
    assert flips["value"] is None and flips["ci_note"] == "no pair has both orders answered", flips
    assert row(bias, "metric", "first_position_win_rate")["value"] == 1.0           # what it did say
    longer = row(bias, "metric", "longer_text_win_rate")        # its ab picks: the longer text shown first
    assert longer["value"] is None and longer["ci_note"] == ONE_ORDER, longer
    lc = result.tables["length_control"].to_dicts()[0]
    assert lc["lc_accuracy"] is None and lc["accuracy"] is None and lc["ci_note"] == ONE_ORDER, lc
    published = json.loads((result.run_dir / "results.json").read_text())["results"]
    assert [r["value"] for r in published if r["headline"]] == [None]


def test_a_sweep_ranks_the_one_order_judge_unranked_saying_why(tmp_path):
    """A sweep over a judge answering both orders and one answering one: the second is unranked
    with the one-order note, also where a post axis (`[sweep.post]`) is folded (its rows were rebuilt
    without their note: "a constant judge or one human answer" stood there)."""
    data = pairs(20)
    both = tmp_path / "both.jsonl"
    both.write_text("".join(json.dumps({"id": f"{r['id']}/{o}", "response": "A" if (i + (o == "ba")) % 3 else "B"})
                            + "\n" for i, r in enumerate(data) for o in ("ab", "ba")))
    result = swept(tmp_path, data, [f"replay:{both}", ab_only(tmp_path, data)],
                   '[sweep.post]\n"options.tie_rule" = ["inconsistent", "probability"]\n')
    ranking = result.tables["sweep_ranking"]
    assert ranking["rank"].to_list()[0] == 1 and ranking["rank"].to_list()[1] is None
    assert ranking["ci_note"].to_list()[1].startswith(ONE_ORDER), ranking.to_dicts()


def test_tied_labels_leave_accuracy_without_a_value_and_say_why(tmp_path):
    """Every labelled pair a human tie (the rest unlabelled): the warning counts the ties among the
    labelled pairs, and each accuracy row names why it has no value."""
    data = [{**r, "winner": "tie" if i < 10 else None} for i, r in enumerate(pairs(20))]
    values = {"label": {**VALUES["label"], "tie": "tie"}}
    path = tmp_path / "rec.jsonl"
    path.write_text("".join(json.dumps({"id": f"{r['id']}/{o}", "response": "A"}) + "\n" for r in data
                            for o in ("ab", "ba")))
    with_warnings = litjudge.judge(data, protocol="pairwise", judge=f"replay:{path}", columns=COLUMNS, values=values,
                                   out=tmp_path / "out", progress=False)
    notes = set(with_warnings.tables["accuracy"]["ci_note"])
    assert notes == {"the humans tied every labelled pair"}, notes
    said = " ".join(with_warnings.manifest.warnings)
    assert "10 of 20 pairs have no human label" in said and "10 of them tied by the humans" in said, said


def test_a_rubric_pairwise_question_answered_in_one_order_has_no_mean(tmp_path):
    rows = stories()
    judge = recording(tmp_path / "rec.jsonl", rows, pick=lambda order: "A" if order == "ab" else "Neither")
    result = litjudge.judge(rows, protocol="rubric", judge=judge, options={"questions": QUESTIONS},
                            columns=RUBRIC_COLUMNS, out=tmp_path / "out", progress=False)
    scores = result.tables["scores"].filter(pl.col("question") == "surprise").to_dicts()[0]
    assert scores["mean_score"] is None and scores["ci_note"] == ONE_ORDER, scores
    headline = result.tables["agreement"].filter(pl.col("question") == "surprise").to_dicts()[0]
    assert headline["agreement"] is None and ONE_ORDER in (headline["ci_note"] or ""), headline


def test_a_sweep_where_no_cell_has_a_value_lists_every_cell_unranked_with_why(tmp_path):
    """Every judge answered in one order only: no cell is ranked, and each is listed, unranked, with
    the reason its table gives (the ranking had no row: the CSV was one empty line, then a header
    alone, and nothing said why), in columns of the ranking's types."""
    data = pairs(20)
    with pytest.warns(litjudge.LitjudgeWarning, match="accuracy.accuracy is undefined in every cell"):
        result = swept(tmp_path, data, [ab_only(tmp_path, data)])
    said = json.loads((result.run_dir / "results.json").read_text())["warnings"]    # kept, not only printed
    assert any("undefined in every cell" in w for w in said), said
    assert "1 cells, 40 requests" in result._repr_html_()                         # a sweep's size (was "0 verdicts")
    ranking = result.tables["sweep_ranking"]
    assert ranking.height == 1 and ranking["rank"].is_null().all() and ranking["value"].is_null().all()
    assert ranking.schema["rank"] == pl.Int64 and ranking.schema["value"] == pl.Float64
    assert ranking["ci_note"][0] == f"{ONE_ORDER}: unranked", ranking["ci_note"][0]
    lines = (result.run_dir / "sweep_ranking.csv").read_text().splitlines()
    assert len(lines) == 2 and lines[0].startswith("rank,"), lines
