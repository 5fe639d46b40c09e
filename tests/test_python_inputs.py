"""`litjudge.judge()` takes your data as you see it and says what it cannot take, in Python's terms:
a Hugging Face `filter()` result, a pair_id kept in the pandas index, identifiers exactly as
written (never "None", "1.0" or a rounded 30-digit number; the same from the console), bytes as
text, one rule with the console for NaN, and a verdict column in the text's frame. Replayed
judges: no model is the point."""
from __future__ import annotations

import json
import math

import pandas as pd
import polars as pl
import pytest

import litjudge
from tests.test_cli_probe import PAIRS, cli, one_line, pairs_run
from tests.test_python_api import COLUMNS, VALUES, pairs, recording


def call(tmp_path, data, answers=None, **kw):
    rows = answers or pairs()
    kw = {"protocol": "pairwise", "judge": recording(tmp_path, rows), "columns": COLUMNS, "values": VALUES,
          "out": tmp_path / "out", "progress": False, **kw}
    return litjudge.judge(data, **kw)


def refused(tmp_path, data, *words, kind=litjudge.DataError, **kw) -> str:
    with pytest.raises(kind) as caught:
        call(tmp_path, data, **kw)
    message = str(caught.value)
    assert "\n" not in message and all(w in message for w in words), message
    return message


def test_a_filtered_hugging_face_dataset_is_its_selected_rows(tmp_path):
    import datasets

    ds = datasets.Dataset.from_list(pairs(3)).filter(lambda r: r["id"] == "p01")
    r = call(tmp_path, ds)
    assert set(r.verdicts["pair_id"]) == {"p01"} and r.verdicts.height == 2
    refused(tmp_path, datasets.DatasetDict({"train": ds}), "DatasetDict", "ds['train']")


def test_identifiers_are_kept_as_written(tmp_path):
    """pandas [1, 2, None]: the third row is refused by number (not the ids "1.0", "2.0", "None");
    whole floats are their digits; a null id is an error naming its row; ids beyond 64 bits stay
    exact and distinct."""
    rows = pairs(3)
    frame = pd.DataFrame([{**r, "id": i} for r, i in zip(rows, [1, 2, None], strict=True)])
    refused(tmp_path, frame, "row 3", "'pair_id' (column 'id')", "missing")
    whole = call(tmp_path, pd.DataFrame([{**r, "id": float(i)} for i, r in enumerate(rows, start=1)]),
                 answers=[{**r, "id": str(i)} for i, r in enumerate(rows, start=1)])
    assert sorted(set(whole.verdicts["pair_id"])) == ["1", "2", "3"]
    refused(tmp_path, [{**rows[0], "id": None}], "row 1", "'pair_id'", "null")
    big = [{**rows[0], "id": 18446744073709551616}, {**rows[1], "id": 123456789012345678901234567890},
           {**rows[2], "id": 123456789012345678901234567891}]
    r = call(tmp_path, big, answers=[{**b, "id": str(b["id"])} for b in big])
    assert set(r.verdicts["pair_id"]) == {str(b["id"]) for b in big}


def test_the_console_keeps_identifiers_too(tmp_path):
    big = [{**p, "pair_id": n} for p, n in zip(PAIRS, [18446744073709551616, 10**29 + 1, 10**29 + 2, 7], strict=True)]
    answers = {f"{p['pair_id']}/{o}": "A" for p in big for o in ("ab", "ba")}
    cfg = pairs_run(tmp_path / "big", name="big", pairs=big, answers=answers)
    r = cli("run", str(cfg), "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    got = set(pl.read_parquet(tmp_path / "runs" / "out" / "big" / "verdicts.parquet")["pair_id"])
    assert got == {"18446744073709551616", str(10**29 + 1), str(10**29 + 2), "7"}
    null = pairs_run(tmp_path / "null", name="null", pairs=[PAIRS[0], {**PAIRS[1], "pair_id": None}])
    one_line(cli("run", str(null), "--quiet", cwd=tmp_path), "pairs.jsonl:2", "'pair_id'", "null")


def test_a_pair_id_in_the_pandas_index_is_used(tmp_path):
    frame = pd.DataFrame(pairs(4)).set_index("id")
    r = call(tmp_path, frame)
    assert set(r.verdicts["pair_id"]) == {"p00", "p01", "p02", "p03"}


def test_mapping_mistakes_are_one_line_in_python_terms(tmp_path):
    refused(tmp_path, pairs(2), "values", "'lable'", "did you mean 'label'", values={"lable": {"first": "a"}})
    refused(tmp_path, pairs(2), 'values={"label": {"first": "a"}}', values={"label": {"second": "b"}})
    message = refused(tmp_path, pairs(2), "other way round", 'columns={"text_a": "story_1"}',
                      columns={**{k: v for k, v in COLUMNS.items() if k != "text_a"}, "story_1": "text_a"})
    assert "[dataset" not in message


def test_text_is_text(tmp_path):
    """bytes are decoded as UTF-8 (not judged as "b'...'"), or refused naming the row and column; a
    lone surrogate and MultiIndex columns are one line each."""
    rows = [{**r, "story_1": r["story_1"].encode()} for r in pairs(2)]
    r = call(tmp_path, rows)
    prompts = [json.loads(line)["prompt"] for line in (r.run_dir / "log.jsonl").read_text().splitlines()]
    assert all("b'" not in p for p in prompts) and any("the better story 0" in p for p in prompts)
    refused(tmp_path, [pairs(1)[0], {**pairs(2)[1], "story_2": b"\xff\xfe"}], "row 2", "'story_2'", "not UTF-8")
    refused(tmp_path, [pairs(1)[0], {**pairs(2)[1], "story_2": "bad \ud800 text"}], "row 2", "'story_2'",
            "lone surrogate")
    frame = pd.DataFrame(pairs(2))
    frame.columns = pd.MultiIndex.from_tuples([("x", c) for c in frame.columns])
    refused(tmp_path, frame, "MultiIndex", "('x', 'story_1')")


def test_nan_is_one_rule_from_python_and_the_console(tmp_path):
    """NaN in a column the protocol does not read is no error from either side; in one it reads,
    both name the field, the column and the 1-based row."""
    rows = [{**r, "unused": math.nan} for r in pairs(2)]
    assert call(tmp_path, rows).verdicts.height == 4
    refused(tmp_path, [pairs(1)[0], {**pairs(2)[1], "story_2": math.nan}], "row 2", "'text_b' (column 'story_2')")
    folder = tmp_path / "cli"
    cfg = pairs_run(folder, name="nan")
    lines = (folder / "pairs.jsonl").read_text().splitlines()
    (folder / "pairs.jsonl").write_text("\n".join([lines[0][:-1] + ', "unused": NaN}', *lines[1:]]) + "\n")
    assert cli("run", str(cfg), "--quiet", cwd=tmp_path).returncode == 0
    (folder / "pairs.jsonl").write_text("\n".join([lines[0], lines[1].replace('"text_b": "two 1 words"',
                                                                               '"text_b": NaN'), *lines[2:]]) + "\n")
    one_line(cli("run", str(cfg), "--quiet", "--overwrite", cwd=tmp_path), "pairs.jsonl:2", "'text_b'")


def test_typed_configs_generated_now_and_the_verdict_in_the_texts_frame(tmp_path):
    """litjudge.EngineConfig and SamplingConfig are taken as the tables they stand for; the manifest counts
    what this call generated; `answer` is the text picked, in the text's frame (as `human`), so
    answer == human agrees with the accuracy table where `value == human` did not."""
    r = call(tmp_path, pairs(), engine=litjudge.EngineConfig(max_model_len=1024),
             sampling=litjudge.SamplingConfig(max_tokens=4))
    assert r.manifest.raw["config"]["engine"]["max_model_len"] == 1024
    assert r.manifest.raw["config"]["sampling"]["max_tokens"] == 4
    assert r.manifest.generated_now == r.verdicts.height == 24
    v = r.verdicts
    assert v.filter(pl.col("order") == "ab")["answer"].unique().to_list() == ["a"]     # picks the first shown
    assert v.filter(pl.col("order") == "ba")["answer"].unique().to_list() == ["b"]
    pooled = r.tables["accuracy"].filter(pl.col("order") == "mean of both")["accuracy"][0]
    assert (v["answer"] == v["human"]).mean() == pytest.approx(pooled)
    assert (v["value"] == v["human"]).mean() != pytest.approx(pooled)


def test_load_returns_an_absolute_run_dir_like_judge(tmp_path, monkeypatch):
    r = call(tmp_path, pairs(2))
    monkeypatch.chdir(tmp_path)
    again = litjudge.load(r.run_dir.relative_to(tmp_path))
    assert again.run_dir.is_absolute() and again.run_dir == r.run_dir
