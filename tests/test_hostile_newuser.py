"""A demanding new user's tests of the newest features (rubric, templates, export, PPI++, the
Python surface), written from the docstrings and `litjudge --help` before reading their own tests.

Numbers are checked by hand (or against scikit-learn, scipy and ppi-python) on tiny datasets whose
answers a replayed judge (`replay:FILE.jsonl`) controls; no model runs here."""
from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import litjudge
from litjudge.engine.core.errors import DataError
from tests.conftest import DATA, needs_data
from tests.conftest import litjudge as cli
from tests.test_ppi_crosscheck import ppi_python_mean


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# -- a rubric whose every number is known ----------------------------------------------------
HB = ["Yes"] * 6 + ["No"] * 6                       # humans, binary
JB = ["Yes"] * 4 + ["No"] * 2 + ["Yes"] + ["No"] * 5   # judge: TP 4, FN 2, FP 1, TN 5
HP = [1, 2, 3, 1, 2, 3, 1, 2, 3, 3, 2, 1]            # humans, 3 points
JP = [1, 2, 2, 1, 3, 3, 2, 2, 3, 1, 2, 1]            # judge, 3 points


def _hand_rubric(tmp_path: Path):
    rows = [{"item_id": f"t{i:02d}", "text": f"story {i}", "group": f"g{i // 4}", "hb": HB[i], "hp": HP[i]}
            for i in range(12)]
    answers = [{"id": f"t{i:02d}/clear", "response": JB[i]} for i in range(12)]
    answers += [{"id": f"t{i:02d}/img", "response": str(JP[i])} for i in range(12)]
    right_ab = []
    for g in range(3):
        for a, b in itertools.combinations(range(4 * g, 4 * g + 4), 2):
            human = None if HP[a] == HP[b] else ("a" if HP[a] > HP[b] else "b")
            pid = f"t{a:02d}|t{b:02d}"
            answers.append({"id": f"{pid}/end/ab", "response": "A"})                     # always the first shown
            answers.append({"id": f"{pid}/end/ba", "response": "A" if human == "b" else "B"})  # always right
            if human:
                right_ab.append(human == "a")
    judge = f"replay:{_jsonl(tmp_path / 'answers.jsonl', answers)}"
    questions = [{"id": "clear", "text": "Is it clear?", "scale": "binary", "human": "hb"},
                 {"id": "img", "text": "How vivid?", "scale": "points", "points": ["a", "b", "c"], "human": "hp"},
                 {"id": "end", "text": "Which ending?", "scale": "pairwise", "human": "hp"}]
    result = litjudge.judge(rows, protocol="rubric", judge=judge, questions=questions, out=tmp_path / "runs",
                            cache=False, progress=False)
    return result, right_ab


def test_rubric_tables_match_a_hand_computed_answer(tmp_path):
    from scipy.stats import spearmanr
    from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score

    result, right_ab = _hand_rubric(tmp_path)
    binary = result.tables["binary_agreement"].row(0, named=True)
    assert binary["kappa"] == pytest.approx(0.5) == pytest.approx(cohen_kappa_score(HB, JB))
    assert binary["balanced_accuracy"] == pytest.approx(0.75) == pytest.approx(balanced_accuracy_score(HB, JB))
    assert (binary["judge_positive_rate"], binary["human_positive_rate"]) == pytest.approx((5 / 12, 0.5))
    points = result.tables["points_agreement"].row(0, named=True)
    hp, jp = np.array(HP), np.array(JP)
    assert points["qwk"] == pytest.approx(cohen_kappa_score(HP, JP, weights="quadratic"))
    assert points["spearman"] == pytest.approx(spearmanr(HP, JP)[0])
    assert (points["exact"], points["within_one"], points["mean_difference"]) == pytest.approx(
        (np.mean(hp == jp), np.mean(abs(hp - jp) <= 1), np.mean(jp - hp)))
    pairwise = {r["order"]: r for r in result.tables["pairwise_agreement"].iter_rows(named=True)}
    assert pairwise["ab"]["accuracy"] == pytest.approx(np.mean(right_ab)) and pairwise["ba"]["accuracy"] == 1.0
    assert pairwise["mean of both"]["accuracy"] == pytest.approx((np.mean(right_ab) + 1) / 2)
    scores = {r["question"]: r for r in result.tables["scores"].iter_rows(named=True)}
    assert scores["clear"]["mean_score"] == pytest.approx(5 / 12) and scores["img"]["mean_score"] == pytest.approx(jp.mean())
    consistency = {r["metric"]: r["value"] for r in result.tables["consistency"].iter_rows(named=True)}
    human_b = sum(not r for r in right_ab)                       # ba answers "A" (text b) exactly there
    assert consistency["swap_flip_rate"] == pytest.approx(human_b / 18)
    assert consistency["first_position_win_rate"] == pytest.approx((18 + human_b) / 36)


def test_points_human_column_with_a_word_is_one_line_naming_it(tmp_path):
    """A human score "x" in a points question's column was an internal error (round(nan))."""
    rows = [{"item_id": f"t{i}", "text": f"story {i}", "group": "g", "hs": ["1", "x", "2", "inf"][i]} for i in range(4)]
    judge = f"replay:{_jsonl(tmp_path / 'a.jsonl', [{'id': f't{i}/q', 'response': '2'} for i in range(4)])}"
    q = {"id": "q", "text": "Good?", "scale": "points", "points": ["a", "b", "c"], "human": "hs"}
    with pytest.raises(DataError, match=r"item t1: question 'q': column 'hs' holds 'x'"):
        litjudge.judge(rows, protocol="rubric", judge=judge, questions=[q], out=tmp_path / "runs", cache=False,
                       progress=False)
    rows[1]["hs"] = "3"
    with pytest.raises(DataError, match=r"item t3: question 'q': column 'hs' holds 'inf'"):
        litjudge.judge(rows, protocol="rubric", judge=judge, questions=[q], out=tmp_path / "runs", cache=False,
                       progress=False, overwrite=True)


# -- PPI++: the per-test rows are ppi-python's, on the stories the seed picks ----------------------
@needs_data
def test_ppi_table_per_test_rows_match_ppi_python_on_the_drawn_stories(tmp_path):
    r = cli("run", "ttcw-replay-ppi", "--out", str(tmp_path), "--no-cache", "--quiet", "--data-root", str(DATA))
    assert r.returncode == 0, r.stderr
    tables = tmp_path / "ttcw-replay-ppi" / "tables"
    items, ppi = pl.read_parquet(tables / "per_item.parquet"), pl.read_parquet(tables / "ppi.parquet")
    pool = sorted(items.filter(pl.col("expert_pass").is_not_null())["story_id"].unique().to_list())
    take = max(1, math.floor(0.2 * len(pool) + 0.5))
    picked = [pool[i] for i in np.random.default_rng(1).choice(len(pool), size=take, replace=False)]
    for judge in ("replay:gpt4", "replay:claude3-opus"):
        for test in (1, 7, 14):
            g = items.filter((pl.col("judge") == judge) & (pl.col("test") == test))
            lab, unl = g.filter(pl.col("story_id").is_in(picked)), g.filter(~pl.col("story_id").is_in(picked))
            y, f = lab["expert_pass"].cast(float).to_numpy(), lab["judge_pass"].cast(float).to_numpy()
            fu = unl["judge_pass"].cast(float).to_numpy()
            expected = ppi_python_mean(y, f, fu) if f.var() > 0 else y.mean()
            row = ppi.filter((pl.col("judge") == judge) & (pl.col("test") == str(test))
                             & (pl.col("view") == "all")).row(0, named=True)
            assert row["human_only"] == pytest.approx(y.mean())
            assert row["ppi"] == pytest.approx(min(max(expected, 0.0), 1.0), abs=1e-6)
            assert row["all_labels"] == pytest.approx(g["expert_pass"].cast(float).mean())


# -- export -------------------------------------------------------------------------------------
def _small_run(tmp_path: Path):
    rows = [{"item_id": f"t{i}", "text": f"story {i}", "group": "g", "h": "Yes" if i % 2 else "No"} for i in range(4)]
    judge = f"replay:{_jsonl(tmp_path / 'a.jsonl', [{'id': f't{i}/q', 'response': 'Yes'} for i in range(4)])}"
    return litjudge.judge(rows, protocol="rubric", judge=judge, questions=[{"id": "q", "text": "Good?", "human": "h"}],
                          out=tmp_path / "runs", name="small", cache=False, progress=False)


def test_export_again_into_a_clone_of_the_hub_repo_keeps_its_git_and_files(tmp_path):
    """`export --to DIR` after an earlier export replaced the whole folder: a clone's .git and the
    user's own files beside the card were deleted."""
    run = _small_run(tmp_path)
    hub = tmp_path / "hub"
    assert cli("export", str(run.run_dir), "--to", str(hub)).returncode == 0
    (hub / ".git").mkdir()
    (hub / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (hub / ".gitattributes").write_text("*.parquet filter=lfs\n")
    r = cli("export", str(run.run_dir), "--to", str(hub), "--prompts")    # data/ replaced: the card lists what it holds
    assert r.returncode == 0, r.stderr
    assert (hub / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert (hub / ".gitattributes").exists()
    assert "prompt" in pl.read_parquet(hub / "data" / "verdicts.parquet").columns


def test_export_to_the_current_folder(tmp_path):
    """`litjudge export RUN --to .` was an internal error (Path('.').with_name)."""
    run = _small_run(tmp_path)
    here = tmp_path / "here"
    here.mkdir()
    r = subprocess.run([sys.executable, "-m", "litjudge", "export", str(run.run_dir), "--to", "."], cwd=here,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (here / "README.md").exists() and (here / "data" / "verdicts.parquet").exists()


def test_an_item_id_with_a_bar_cannot_name_two_asks_of_a_pairwise_rubric(tmp_path):
    """Text 't0|t1/end' asked question 'ab' had the item id of pair (t0, t1) asked 'end' in order
    ab: two asks, one id (a replayed judge served one the other's answer; tables keyed by id mix)."""
    rows = [{"item_id": "t0", "text": "A", "group": "g", "h": 1}, {"item_id": "t1", "text": "B", "group": "g", "h": 2},
            {"item_id": "t0|t1/end", "text": "C", "group": "h", "h": 1}]
    judge = f"replay:{_jsonl(tmp_path / 'a.jsonl', [{'id': 't0|t1/end/ab', 'response': 'A'}])}"
    questions = [{"id": "ab", "text": "Good?"}, {"id": "end", "text": "Which?", "scale": "pairwise", "human": "h"}]
    with pytest.raises(DataError, match=r"item t0\|t1/end: item id 't0\|t1/end' holds '\|'"):
        litjudge.judge(rows, protocol="rubric", judge=judge, questions=questions, out=tmp_path / "runs", cache=False,
                       progress=False)


def test_binary_labels_differing_only_in_case_are_refused(tmp_path):
    """Labels ["Good", "good"]: the humans' "Good" (matched case-insensitively) was read as "good",
    the negative answer, and the tables said the humans never answered the positive one."""
    from litjudge.engine.core.errors import ConfigError

    rows = [{"item_id": f"t{i}", "text": f"s{i}", "group": "g", "h": "Good"} for i in range(2)]
    judge = f"replay:{_jsonl(tmp_path / 'a.jsonl', [{'id': f't{i}/q', 'response': 'Good'} for i in range(2)])}"
    with pytest.raises(ConfigError, match="label names must differ in more than case"):
        litjudge.judge(rows, protocol="rubric", judge=judge, out=tmp_path / "runs", cache=False, progress=False,
                       questions=[{"id": "q", "text": "G?", "labels": ["Good", "good"], "human": "h"}])


def test_a_negative_ppi_seed_is_one_line(tmp_path):
    """[ppi] seed = -1 was an internal error (numpy's default_rng refuses it)."""
    config = tmp_path / "c.toml"
    config.write_text((Path(__file__).parents[1] / "runs" / "ttcw-replay-ppi.toml").read_text()
                      .replace("seed = 1", "seed = -1"))
    r = cli("run", str(config), "--out", str(tmp_path / "runs"), "--no-cache", "--quiet", "--data-root", str(DATA))
    assert r.returncode == 2 and r.stderr.strip() == f"litjudge: error: {config}: ppi.seed: must be >= 0, got -1", r.stderr


def test_export_below_a_file_says_so(tmp_path):
    """--to FILE/sub advised `--out (or LITJUDGE_RUNS_DIR)`, options export does not have."""
    run = _small_run(tmp_path)
    (tmp_path / "afile").write_text("x")
    r = cli("export", str(run.run_dir), "--to", str(tmp_path / "afile" / "sub"))
    assert r.returncode == 2 and r.stderr.strip() == (f"litjudge: error: {tmp_path / 'afile' / 'sub'}: {tmp_path / 'afile'} "
                                                      "is a file, not a folder: give --to a folder's path"), r.stderr


def test_a_pairwise_question_over_items_says_how_to_pair_them(tmp_path):
    rows = [{"item_id": f"t{i}", "text": f"s{i}", "group": "g"} for i in range(3)]
    config = tmp_path / "c.toml"
    _jsonl(tmp_path / "d.jsonl", rows)
    config.write_text(f'name = "p"\nprotocol = "rubric"\njudge = "replay:{tmp_path}/a.jsonl"\n[dataset]\n'
                      f'loader = "rated_items_jsonl"\npath = "{tmp_path}/d.jsonl"\n'
                      '[[options.questions]]\nid = "q"\ntext = "Which?"\nscale = "pairwise"\n')
    r = cli("run", str(config), "--out", str(tmp_path / "runs"), "--no-cache", "--quiet")
    assert r.returncode == 2 and "pairs_from" in r.stderr, r.stderr
