"""Pairs without a human preference (two systems' stories, nobody has compared them yet) are
judged: the bias tables read every pair, agreement with humans only the labelled ones (exactly
the numbers of a run over those alone), and with no label at all the run says so and has no
accuracy table. Where the label looks meant but cannot be read, it is still one line; two items of
one text under a recording, answered once, are said. Replayed
judges: no model is the point."""
from __future__ import annotations

import json
import math

import polars as pl
import pytest

import litjudge
from litjudge.engine.core.errors import DataError
from litjudge.engine.data.pairs import load_pairs_jsonl
from tests.test_cli_probe import cli, one_line, pairs_run
from tests.test_python_api import COLUMNS, VALUES, pairs

RATES = ("accuracy", "n", "ci_low", "ci_high")


def answers(folder, rows) -> str:
    """A judge with some position bias: picks the first text shown, but the better one on even pairs."""
    path = folder / "answers.jsonl"
    path.write_text("".join(json.dumps({"id": f"{r['id']}/{o}", "response": "A" if i % 2 or o == "ab" else "B"}) + "\n"
                            for i, r in enumerate(rows) for o in ("ab", "ba")))
    return f"replay:{path}"


def judged(tmp_path, rows, name, **kw):
    return litjudge.judge(rows, protocol="pairwise", judge=answers(tmp_path, pairs(24)), columns=COLUMNS,
                          values=VALUES, out=tmp_path / name, progress=False, **kw)


def test_a_pair_without_a_label_reads_as_not_known(tmp_path):
    path = tmp_path / "pairs.jsonl"
    rows = [{"pair_id": "p1", "prompt": "p", "text_a": "x", "text_b": "y"},
            {"pair_id": "p2", "prompt": "p", "text_a": "x", "text_b": "y", "label": None},
            {"pair_id": "p3", "prompt": "p", "text_a": "x", "text_b": "y", "label": "  "},
            {"pair_id": "p4", "prompt": "p", "text_a": "x", "text_b": "y", "label": float("nan")},
            {"pair_id": "p5", "prompt": "p", "text_a": "x", "text_b": "y", "label": " Tie"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [p.label for p in load_pairs_jsonl(path)] == [None, None, None, None, "tie"]
    for row, says in (({"label": 1}, ":1: field 'label' should be text (a, b or tie), got 1"),
                      ({"label": "maybe"}, ":1: field 'label' must be one of ['a', 'b', 'tie'] (any case), got 'maybe'"),
                      ({" label": "a"}, ":1: missing field 'label'")):      # a header's spaces, not an unlabelled pair
        path.write_text(json.dumps({"prompt": "p", "text_a": "x", "text_b": "y", **row}) + "\n")
        with pytest.raises(DataError) as err:
            load_pairs_jsonl(path)
        assert says in str(err.value) and "\n" not in str(err.value), str(err.value)
    assert "surrounding spaces" in str(err.value)


def test_agreement_reads_the_labelled_pairs_exactly_and_bias_every_pair(tmp_path):
    rows = pairs(24)
    unlabelled = [{**r, "winner": None} if i % 4 == 0 else r for i, r in enumerate(rows)]
    with pytest.warns(litjudge.LitjudgeWarning, match="6 of 24 pairs have no human label: accuracy, length control"):
        mixed = judged(tmp_path, unlabelled, "mixed")
    alone = judged(tmp_path, [r for i, r in enumerate(rows) if i % 4], "alone")
    assert mixed.tables["accuracy"].select(RATES).rows() == alone.tables["accuracy"].select(RATES).rows()
    assert mixed.tables["accuracy"]["n"].to_list()[:2] == [18, 18]
    lc = ("n", "accuracy", "lc_accuracy", "ci_low", "ci_high")
    assert mixed.tables["length_control"].select(lc).rows() == alone.tables["length_control"].select(lc).rows()
    bias = {r["metric"]: r for r in mixed.tables["bias"].iter_rows(named=True)}
    assert bias["swap_flip_rate"]["n"] == 24 and bias["first_position_win_rate"]["n"] == 48
    assert bias["swap_flip_rate"]["value"] == 0.5            # odd pairs flip with the order, even ones do not
    per_pair = {r["pair_id"]: r["human"] for r in mixed.tables["pairs"].iter_rows(named=True)}
    assert [per_pair[f"p{i:02d}"] for i in (0, 1, 3, 4)] == [None, "a", "b", None]


def test_pairs_the_humans_tied_are_said_when_every_pair_is_labelled(tmp_path):
    """A new user's 7 of 24 pairs tied: accuracy's n was 17, unsaid (ties were said only beside
    unlabelled pairs)."""
    rows = [{**r, "winner": "tie"} if i % 4 == 0 else r for i, r in enumerate(pairs(24))]
    with pytest.warns(litjudge.LitjudgeWarning, match="6 of 24 pairs were tied by the humans, which agreement leaves "
                                                      "out: accuracy, length control and calibration read the 18 others"):
        tied = judged(tmp_path, rows, "tied")
    assert tied.tables["accuracy"]["n"].to_list()[:2] == [18, 18]


def test_missing_wrong_puts_no_wrong_text_on_an_unlabelled_pair(tmp_path):
    rows = [{**r, "winner": None} if i < 2 else r for i, r in enumerate(pairs(6))]
    path = tmp_path / "silent.jsonl"              # p00 and p02 unanswered in order ba
    path.write_text("".join(json.dumps({"id": f"{r['id']}/{o}", "response": "A" if o == "ab" or i % 2 else "?"}) + "\n"
                            for i, r in enumerate(rows) for o in ("ab", "ba")))
    with pytest.warns(litjudge.LitjudgeWarning):
        r = litjudge.judge(rows, protocol="pairwise", judge=f"replay:{path}", columns=COLUMNS, values=VALUES,
                           out=tmp_path / "wrong", progress=False, missing="wrong")
    picks = {(v["pair_id"], v["order"]): v["pick"] for v in r.tables["per_verdict"].iter_rows(named=True)}
    assert picks[("p00", "ba")] is None                    # no label: no text is the wrong one
    assert picks[("p02", "ba")] == "b"                     # labelled a: the wrong text is b
    assert r.tables["accuracy"].filter(pl.col("order") == "ba")["n"].item() == 4


def test_pairs_without_any_label_are_judged_and_say_so(tmp_path):
    """From the console, as a new user runs two systems' stories: exit 0, the bias tables and the
    report, a warning naming what is not computed, no accuracy table and a headline note; the
    annotation queue's simulation needs the human column and says so in one line."""
    rows = [{"pair_id": f"p{i}", "prompt": "Write.", "text_a": f"one {i}", "text_b": f"two {i} more words"}
            for i in range(6)]
    cfg = pairs_run(tmp_path, pairs=rows)
    r = cli("run", str(cfg), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "no pair has a human label" in r.stderr and "no accuracy, length-control or calibration table" in r.stderr
    run = tmp_path / "runs" / "out" / "p"
    tables = sorted(p.name for p in (run / "tables").glob("*.csv"))
    assert "bias.csv" in tables and "accuracy.csv" not in tables and "length_control.csv" not in tables, tables
    results = json.loads((run / "results.json").read_text())
    assert results["results"] == [] and "no headline value" in results["headline"]["note"]
    assert any("no pair has a human label" in w for w in results["warnings"])
    assert cli("report", str(run), cwd=tmp_path).returncode == 0
    page = (run / "report" / "report.html").read_text()
    assert "Bias panel" in page and "Accuracy against the human preference" not in page
    bias = {b["metric"]: b for b in _csv(run / "tables" / "bias.csv")}
    assert math.isclose(float(bias["first_position_win_rate"]["value"]), 1.0) and bias["swap_flip_rate"]["n"] == "6"
    one_line(cli("annotate", str(run), "--simulate", "human", cwd=tmp_path), "column 'human' has no answer for item")


def _csv(path):
    import csv

    with path.open() as fh:
        return list(csv.DictReader(fh))


def test_two_items_of_one_text_under_a_recording_each_read_their_own(tmp_path):
    """A recording answers by item id. x2, asking what x1 asked, was answered with x1's recording
    (one request: a key was the texts alone), first silently (x2's recorded flips read as
    agreement), then with a warning; and a later run whose data renamed x1 to x2 read x1's stored
    verdict as x2's, silently (a hostile pass). A recorded judge's key now holds the item id: each
    item reads its own recording, in one run and from the store of an earlier one."""
    rows = [{"pair_id": p, "prompt": "Rain", "text_a": "Rain fell on the tin roof.", "text_b": "It rained.", "label": "a"}
            for p in ("x1", "x2")]
    answers = {"x1/ab": "A", "x1/ba": "B", "x2/ab": "B", "x2/ba": "A"}
    cfg = pairs_run(tmp_path, pairs=rows, answers=answers)
    r = cli("run", str(cfg), cwd=tmp_path)
    assert r.returncode == 0 and "earlier item" not in r.stderr, r.stderr[-2000:]
    verdicts = _csv(tmp_path / "runs" / "out" / "p" / "tables" / "per_verdict.csv")
    assert {f"{v['pair_id']}/{v['order']}": v["label"] for v in verdicts} == answers
    manifest = json.loads((tmp_path / "runs" / "out" / "p" / "manifest.json").read_text())
    assert manifest["judges"][0]["plan"]["distinct_requests"] == 4
    # the data renamed: x1's texts now under x2 alone, the same recording; the store holds x1's verdicts
    (tmp_path / "pairs.jsonl").write_text(json.dumps({**rows[0], "pair_id": "x2"}) + "\n")
    r = cli("run", str(cfg), "--overwrite", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    verdicts = _csv(tmp_path / "runs" / "out" / "p" / "tables" / "per_verdict.csv")
    assert {f"{v['pair_id']}/{v['order']}": v["label"] for v in verdicts} == {"x2/ab": "B", "x2/ba": "A"}


def test_a_sweep_over_partly_labelled_pairs_says_what_its_cells_read(tmp_path):
    """A sweep ranks on each cell's labelled pairs; the cells' warnings (a run prints them) were
    dropped: now on the console, in the sweep's manifest and in its results.json."""
    rows = [{"pair_id": f"p{i}", "prompt": "Write.", "text_a": f"one {i}", "text_b": f"two {i} more",
             **({"label": "ab"[i % 2]} if i % 3 else {})} for i in range(12)]
    cfg = pairs_run(tmp_path, pairs=rows)
    (tmp_path / "b.jsonl").write_text("".join(json.dumps({"id": f"p{i}/{o}", "response": "B"}) + "\n"
                                              for i in range(12) for o in ("ab", "ba")))
    text = cfg.read_text().replace(f'judge = "replay:{tmp_path / "answers.jsonl"}"\n', "")
    sweep = tmp_path / "s.toml"
    sweep.write_text(text.replace('name = "p"', 'name = "s"') + "\n[matrix]\njudge = "
                     f'["replay:{tmp_path / "answers.jsonl"}", "replay:{tmp_path / "b.jsonl"}"]\n'
                     '[sweep]\nrank_by = "accuracy.accuracy"\n')
    r = cli("run", str(sweep), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    said = [ln for ln in r.stderr.splitlines() if "4 of 12 pairs have no human label" in ln]
    assert len(said) == 2 and all(ln.startswith("litjudge: warning: cell ") for ln in said), r.stderr[-2000:]
    folder = tmp_path / "runs" / "out" / "s"
    for name in ("manifest.json", "results.json"):
        assert sum("4 of 12 pairs" in w for w in json.loads((folder / name).read_text())["warnings"]) == 2, name
    unlabelled = tmp_path / "none"
    rows = [{k: v for k, v in r.items() if k != "label"} for r in rows]
    text = pairs_run(unlabelled, pairs=rows).read_text().replace(f'judge = "replay:{unlabelled / "answers.jsonl"}"\n', "")
    (unlabelled / "s.toml").write_text(text.replace('name = "p"', 'name = "s"') + "\n[matrix]\njudge = "
                                       f'["replay:{unlabelled / "answers.jsonl"}", "replay:{tmp_path / "b.jsonl"}"]\n'
                                       '[sweep]\nrank_by = "accuracy.accuracy"\n')
    r = cli("run", str(unlabelled / "s.toml"), cwd=unlabelled)
    assert r.returncode == 0 and "no cell has a value of accuracy.accuracy" in r.stderr, r.stderr[-2000:]
    assert "best first" not in r.stdout, r.stdout                # no ranking's header over unranked cells
    assert "No cell ranked by accuracy.accuracy" in r.stdout and "unranked where: " in r.stdout, r.stdout
    listed = pl.read_csv(unlabelled / "runs" / "out" / "s" / "sweep_ranking.csv")
    assert listed.height == 2 and listed["rank"].is_null().all() and listed["ci_note"].is_not_null().all(), listed
