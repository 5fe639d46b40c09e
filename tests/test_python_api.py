"""`import litjudge` as a notebook user meets it: a DataFrame with their own column names in,
polars verdicts and tables out, the run reopened by `load`, and every mistake a LitjudgeError with
the console's one line. The judge is a recording (replay): no model is the point here; the live
path is the same `engine.app.run.run` the console drives and tests elsewhere."""
import json
import math
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
import warnings
from html import escape

import pandas as pd
import polars as pl
import pytest

import litjudge
from litjudge.engine.core.errors import ConfigError, DataError
from litjudge.engine.core.run_lock import RunLock
from tests.conftest import PROJECT_ROOT

COLUMNS = {"pair_id": "id", "prompt": "instruction", "text_a": "story_1", "text_b": "story_2", "label": "winner"}
VALUES = {"label": {"first": "a", "second": "b"}}


def pairs(n: int = 12) -> list[dict]:
    return [{"id": f"p{i:02d}", "instruction": "Write a story.", "story_1": f"the better story {i}",
             "story_2": f"the weaker story {i}", "winner": "first" if i % 3 else "second"} for i in range(n)]


def recording(folder, rows) -> str:
    """A judge that picks the first story shown: right on 'first' pairs in order ab, wrong in ba."""
    path = folder / "picks_first.jsonl"
    path.write_text("".join(json.dumps({"id": f"{r['id']}/{o}", "response": "A"}) + "\n"
                            for r in rows for o in ("ab", "ba")))
    return f"replay:{path}"


def judged(tmp_path, data, **kw):
    # the recording written only where no judge is given: rewritten while another thread's run read
    # it, a run planned with its checksum half-way and was refused (the replay backend's check)
    kw = {"protocol": "pairwise", "columns": COLUMNS, "values": VALUES, "out": tmp_path / "out", "progress": False,
          **kw}
    return litjudge.judge(data, **{"judge": kw.get("judge") or recording(tmp_path, pairs()), **kw})


SCRIPT = """
import json, sys
import pandas as pd, polars as pl
import litjudge
rows = json.loads(sys.argv[1]); judge = sys.argv[2]
cols = {"pair_id": "id", "prompt": "instruction", "text_a": "story_1", "text_b": "story_2", "label": "winner"}
values = {"label": {"first": "a", "second": "b"}}
out = {"where": litjudge.__file__}
for kind, frame in (("pandas", pd.DataFrame(rows)), ("polars", pl.DataFrame(rows))):
    r = litjudge.judge(frame, protocol="pairwise", judge=judge, columns=cols, values=values, name=kind, progress=False)
    again = litjudge.load(r.run_dir)
    out[kind] = {"verdicts": r.verdicts.height, "type": type(r.verdicts).__name__, "tables": sorted(r.tables),
                 "same": again.verdicts.equals(r.verdicts), "run_dir": str(r.run_dir)}
try:
    litjudge.judge(rows, protocol="pairwise", judge=judge, columns=dict(cols, text_b="story_B"), name="bad",
                   progress=False)
except litjudge.LitjudgeError as e:
    out["error"] = [type(e).__name__, str(e)]
print(json.dumps(out))
"""


def test_judge_a_dataframe_from_outside_the_checkout(tmp_path):
    """From a folder outside the checkout, with no PYTHONPATH: pandas and polars frames with the
    user's column names give polars verdicts (both orders per pair) and the protocol's tables,
    `load` reopens the same run, and a wrong column is one LitjudgeError naming it."""
    rows = pairs()
    judge = recording(tmp_path, rows)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT), json.dumps(rows), judge], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["where"].startswith(str(PROJECT_ROOT))              # the checkout's package, imported from elsewhere
    for kind in ("pandas", "polars"):
        got = out[kind]
        assert got["verdicts"] == 2 * len(rows) and got["type"] == "DataFrame" and got["same"], got
        assert {"accuracy", "bias", "per_verdict"} <= set(got["tables"])
        assert got["run_dir"] == str(tmp_path / "runs" / "out" / kind)
    kind, message = out["error"]
    assert kind == "DataError" and "'story_B'" in message and "text_b" in message and "\n" not in message
    assert not (tmp_path / "runs" / "out" / "bad").exists()         # a refusal leaves no folder


def test_tables_are_the_run_folders_and_a_repeat_generates_nothing(tmp_path):
    frame = pd.DataFrame(pairs())
    first = judged(tmp_path, frame)
    acc = first.tables["accuracy"]
    pooled = acc.filter(pl.col("order") == "mean of both").row(0, named=True)
    # picks the first shown: right in order ab on 'first' pairs (8 of 12), in order ba on 'second' ones (4)
    assert pooled["accuracy"] == pytest.approx((8 / 12 + 4 / 12) / 2)
    assert acc.equals(pl.read_parquet(first.run_dir / "tables" / "accuracy.parquet"))
    db = first.run_dir / "store.sqlite"
    before = sqlite3.connect(db).execute("SELECT key, raw FROM results ORDER BY key").fetchall()
    second = judged(tmp_path, frame)                                 # same rows, same name: all from the store
    after = sqlite3.connect(db).execute("SELECT key, raw FROM results ORDER BY key").fetchall()
    assert after == before and second.verdicts.equals(first.verdicts)
    m = second.manifest                                              # typed: fields, not keys
    assert (m.kind, m.protocol, m.verdicts.rows, m.unanswered) == ("run", "pairwise", 24, 0)
    assert [j["generated"] for j in m.judges] == [0] and m.judge_names == [second.verdicts["judge"][0]]
    html = first._repr_html_()
    assert "24 verdicts" in html and "accuracy" in html
    notes = {n for t in first.summary.values() if "ci_note" in t.columns for n in t["ci_note"].drop_nulls()}
    assert any(len(n) > 60 for n in notes), notes
    assert all(escape(n) in html for n in notes), [n for n in notes if escape(n) not in html]   # in full
    assert first.report().name == "report.html"


def test_missing_values_and_hugging_face_datasets(tmp_path):
    import datasets

    rows = pairs()
    frame = pd.DataFrame(rows)
    frame["rater_score"] = [float("nan")] + [4.0] * (len(rows) - 1)   # pandas' NaN is a missing value, not "nan"
    r = judged(tmp_path, frame, name="nan")
    written = [json.loads(line) for line in (r.run_dir / "input" / "data.jsonl").read_text().splitlines()]
    assert written[0]["rater_score"] is None and written[1]["rater_score"] == 4.0
    hf = judged(tmp_path, datasets.Dataset.from_list(rows), name="hf")
    assert hf.verdicts.height == 2 * len(rows)


@pytest.mark.parametrize(("data", "kw", "kind", "words"), [
    ("nope.jsonl", {}, "DataError", ["no such file"]),
    ([], {}, "DataError", ["no rows"]),
    ([{"id": "p0"}, "text"], {}, "DataError", ["row 2 is a str"]),
    ([{**pairs(1)[0], "story_1": math.inf}], {}, "DataError", ["data: row 1: field 'text_a' (column 'story_1')",
                                                             "should be text, got inf"]),
    (42, {}, "DataError", ["int is not data"]),
    (pd.DataFrame([["p0", "w", "a", "b", "first"]], columns=["id", "instruction", "story_1", "story_1", "winner"]), {},
     "DataError", ["two columns named 'story_1'"]),
    ([pairs(2)[0], {k: v for k, v in pairs(2)[1].items() if k != "id"}], {}, "DataError",
     ["row 2", "no column 'id' (your pair_id)"]),                       # never a made-up id for it
    (None, {"limt": 3}, "ConfigError", ["litjudge.judge(): limt: unknown key (did you mean 'limit'?)"]),
    (None, {"name": "../x"}, "ConfigError", ["name", "letters, digits"]),
    (None, {"protocol": "pairwize"}, "ConfigError", ["pairwize"]),
    (None, {"mode": "labels"}, "ConfigError", ["mode"]),
    (None, {"dataset": "ttcw"}, "ConfigError", ["give the rows as `data`"]),
    (None, {"judge": "replay:missing.jsonl"}, "JudgeNotFound", ["missing.jsonl"]),
    (None, {"columns": {"txt_a": "story_1"}}, "DataError", ["txt_a", "fields: pair_id"]),
])
def test_mistakes_raise_one_line_litjudge_errors(tmp_path, data, kw, kind, words):
    with pytest.raises(litjudge.LitjudgeError) as caught:
        judged(tmp_path, pairs() if data is None else data, **kw)
    message = str(caught.value)
    assert type(caught.value).__name__ == kind and "\n" not in message, message
    assert all(w in message for w in words), message
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())   # nothing left behind


def test_load_refuses_what_is_not_a_finished_run(tmp_path):
    with pytest.raises(litjudge.ConfigError, match="not a run folder"):
        litjudge.load(tmp_path / "nothing")
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "store.sqlite").write_bytes(b"")
    with pytest.raises(litjudge.StoreError, match="an interrupted run"):
        litjudge.load(tmp_path / "half")


def test_a_folder_in_use_is_refused_and_left_as_it_was(tmp_path):
    """Another run holding the folder: judge() refuses before writing anything into it."""
    folder = tmp_path / "out" / "busy"
    lock = RunLock(folder)
    try:
        with pytest.raises(litjudge.ConfigError, match="in use by another run in this process"):
            judged(tmp_path, pairs(), name="busy")
    finally:
        lock.release()
    assert sorted(p.name for p in folder.iterdir()) == [".lock"]


def test_ctrl_c_loses_nothing_and_a_second_call_finishes(tmp_path):
    """A KeyboardInterrupt (real SIGINT, raised by the runner's fault hook after 5 stored verdicts):
    the 5 stay stored unchanged and the same call again completes the run."""
    rows = pairs()
    judge = recording(tmp_path, rows)
    script = textwrap.dedent("""
        import json, sys, litjudge
        cols = {"pair_id": "id", "prompt": "instruction", "text_a": "story_1", "text_b": "story_2", "label": "winner"}
        try:
            litjudge.judge(json.loads(sys.argv[1]), protocol="pairwise", judge=sys.argv[2], columns=cols,
                           values={"label": {"first": "a", "second": "b"}}, name="ctrl-c", progress=False)
            print("finished")
        except KeyboardInterrupt:
            print("interrupted")
    """)
    args = [sys.executable, "-c", script, json.dumps(rows), judge]
    r = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "LITJUDGE_FAULT_KILL_AFTER": "5", "LITJUDGE_FAULT_SIGNAL": "INT"})
    assert r.stdout.strip() == "interrupted", r.stdout + r.stderr[-2000:]
    db = tmp_path / "runs" / "out" / "ctrl-c" / "store.sqlite"
    kept = sqlite3.connect(db).execute("SELECT key, raw FROM results").fetchall()
    assert len(kept) >= 5
    r = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.stdout.strip() == "finished", r.stderr[-2000:]
    final = dict(sqlite3.connect(db).execute("SELECT key, raw FROM results").fetchall())
    assert len(final) == 2 * len(rows) and all(final[k] == raw for k, raw in kept)


def test_run_takes_a_config_file_or_a_dict_and_overrides(tmp_path):
    rows = pairs()
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps({"pair_id": r["id"], "prompt": r["instruction"],
                                                              "text_a": r["story_1"], "text_b": r["story_2"],
                                                              "label": "a"}) + "\n" for r in rows))
    table = {"name": "from-dict", "protocol": "pairwise", "judge": recording(tmp_path, rows),
             "dataset": {"loader": "pairs_jsonl", "path": str(tmp_path / "pairs.jsonl")}}
    r = litjudge.run(table, out=tmp_path / "out", limit=3, progress=False)
    assert r.kind == "run" and r.verdicts.height == 6 and r.run_dir == tmp_path / "out" / "from-dict"
    sweep = litjudge.run({**table, "name": "swept", "sweep": {"post": {"options.tie_rule": ["inconsistent"]}}}, out=tmp_path / "out",
                         progress=False)
    assert sweep.kind == "sweep" and sweep.tables["sweep_ranking"].height >= 1
    assert litjudge.load(sweep.run_dir).kind == "sweep"
    # a dict's values as TOML holds them (a hostile pass: each was turned into text): a numpy number
    # is its number, bytes are one line naming the key
    import numpy as np
    r = litjudge.run({**table, "name": "np", "limit": np.int64(2)}, out=tmp_path / "out", progress=False)
    assert r.verdicts.height == 4
    with pytest.raises(ConfigError, match=r"options.note: bytes is no config value .*got b'Is it good\?'"):
        litjudge.run({**table, "name": "b", "options": {"note": b"Is it good?"}}, out=tmp_path / "out", progress=False)
    with pytest.raises(litjudge.ConfigError, match="run config not found"):
        litjudge.run(tmp_path / "missing.toml")
    with pytest.raises(litjudge.ConfigError, match=r"litjudge.run\(dict\): protocl: unknown key"):
        litjudge.run({**table, "protocl": "x"}, out=tmp_path / "out")


def test_a_judge_whose_answers_often_fail_to_parse_is_a_warning_naming_what_it_said(tmp_path):
    """Ties off, a judge answering "Tie" to 4 of 12 asks: accuracy is over the 8 it answered, and
    the run says so (before, only a smaller n showed it)."""
    rows = pairs(6)
    rec = tmp_path / "ties.jsonl"
    rec.write_text("".join(json.dumps({"id": f"{r['id']}/{o}", "response": "Tie" if k < 2 else "A"}) + "\n"
                           for k, r in enumerate(rows) for o in ("ab", "ba")))
    with pytest.warns(litjudge.LitjudgeWarning, match=r"4 of 12 answers \(33%\) could not be read"):
        r = judged(tmp_path, rows, judge=f"replay:{rec}")
    said = [p for p in r.problems() if "could not be read" in p]
    assert len(said) == 1 and "4 of 12 answers (33%)" in said[0] and "most often 'Tie' (4)" in said[0], r.problems()
    assert said[0] in r.manifest.warnings
    assert "the agreement tables leave them out" in said[0]
    clean = judged(tmp_path, pairs(6), name="clean")             # every answer read: nothing said
    assert not [p for p in clean.problems() if "could not be read" in p]
    # under another missing-answer policy the line says what the tables did with them (they counted)
    with pytest.warns(litjudge.LitjudgeWarning, match="could not be read"):
        counted = judged(tmp_path, rows, judge=f"replay:{rec}", name="as-b", missing="label:B")
    said = [p for p in counted.problems() if "could not be read" in p]
    assert """the agreement tables count each as 'B' (missing = "label:B")""" in said[0], said
    # a label with padding is no label, and the line shows what was said as it was said (stripped,
    # "A " read as the label it failed to be)
    rec.write_text(rec.read_text().replace('"Tie"', '"A "'))
    with pytest.warns(litjudge.LitjudgeWarning, match="most often 'A ' \\(4\\)"):
        judged(tmp_path, rows, judge=f"replay:{rec}", name="padded")


def test_a_recording_that_lacks_some_ids_says_so_not_an_empty_answer(tmp_path):
    """Ids a recording has no response for were reported as answers "most often ''": the line says
    they had no answer, and why, with each row's reason in the verdicts."""
    rows = pairs(6)
    rec = tmp_path / "partial.jsonl"
    rec.write_text("".join(json.dumps({"id": f"{r['id']}/{o}", "response": "A"}) + "\n"
                           for r in rows[:4] for o in ("ab", "ba")))
    with pytest.warns(litjudge.LitjudgeWarning, match=r"4 of 12 answers \(33%\) could not be read as a verdict, most "
                      r"often no answer: the recording has no response for this id \(4\)"):
        r = judged(tmp_path, rows, judge=f"replay:{rec}")
    gone = r.verdicts.filter(pl.col("status") == "unparsed")
    assert gone["reason"].to_list() == ["the recording has no response for this id"] * 4
    # some of its ids are the data's: the rest may be what a --limit left out, not a typo: not said
    assert not [p for p in r.problems() if "is an item of the run" in p]


def test_a_recording_keyed_by_other_ids_says_why_and_which_id_was_asked(tmp_path):
    """Pairs without a pair_id column are named by their line (`line1`, ...): a recording keyed by
    the rows' own `id` matches none. The warning says why no answer was read and which id was
    asked, and the annotation page refuses in one line that says the verdicts were unread (it
    said the run had no verdict on an item with text)."""
    rows = pairs(12)
    columns = {k: v for k, v in COLUMNS.items() if k != "pair_id"}
    with pytest.warns(litjudge.LitjudgeWarning) as said:
        r = judged(tmp_path, rows, columns=columns)
    lines = [str(w.message) for w in said]
    assert "the pairs are named by their line (line1, ...), not by your column 'id': name it the pairs' id with " \
           "columns={'pair_id': 'id'} ([dataset.columns] pair_id = \"id\")" in lines, lines
    assert any(line.endswith("none of its 24 answers could be read as a verdict, most often no answer: the recording "
                             "has no response for this id (24) (the first: item 'line1/ab')") for line in lines), lines
    assert any(line.endswith("none of its recording's 24 ids is an item of the run (e.g. 'p00/ab', where the run asked "
                             "e.g. 'line1/ab'): are its ids the data's?") for line in lines), lines
    with pytest.raises(litjudge.ConfigError, match=r"none of the run's 24 verdicts could be read \(its warnings say "
                       r"why\): nothing to annotate"):
        litjudge.annotate(r)



def test_a_recording_missing_some_ids_says_which_and_its_ids_the_run_did_not_ask(tmp_path):
    """A recording whose p03/ba is misspelt (p03/bA): one unparsed verdict of 24, under the 10% a
    warning took, and the misspelt id never named (a new user's try); a --limit's unasked ids
    alone are not said."""
    path = tmp_path / "rec.jsonl"
    path.write_text("".join(json.dumps({"id": f"{r['id']}/{'bA' if (r['id'], o) == ('p03', 'ba') else o}",
                                        "response": "A"}) + "\n" for r in pairs() for o in ("ab", "ba")))
    with pytest.warns(litjudge.LitjudgeWarning) as said:
        litjudge.judge(pairs(), protocol="pairwise", judge=f"replay:{path}", columns=COLUMNS, values=VALUES,
                       out=tmp_path / "out", progress=False)
    assert f"replay:{path}: its recording has no response for 1 of the 24 items asked (e.g. 'p03/ba'; each an " \
           "unparsed verdict), and holds 1 id the run did not ask (e.g. 'p03/bA'): a misspelt id?" in \
           [str(w.message) for w in said]
    path.write_text("".join(json.dumps({"id": f"{r['id']}/{o}", "response": "A"}) + "\n" for r in pairs() for o in ("ab", "ba")))
    with warnings.catch_warnings():
        warnings.simplefilter("error", litjudge.LitjudgeWarning)
        litjudge.judge(pairs(), protocol="pairwise", judge=f"replay:{path}", columns=COLUMNS, values=VALUES,
                       out=tmp_path / "limited", progress=False, limit=4)


def test_a_result_with_nothing_parsed_warns_as_the_console_exits_4(tmp_path):
    rows = pairs(4)
    noise = tmp_path / "noise.jsonl"
    noise.write_text("".join(json.dumps({"id": f"{r['id']}/{o}", "response": "maybe"}) + "\n"
                             for r in rows for o in ("ab", "ba")))
    with pytest.warns(litjudge.LitjudgeWarning, match=r"no verdict of replay:.*noise.jsonl could be read \(all 8 unparsed\)"):
        r = judged(tmp_path, rows, judge=f"replay:{noise}")
    assert r.verdicts["status"].to_list() == ["unparsed"] * 8
    assert "could be read" in r._repr_html_()


def test_a_recording_edited_or_of_another_folder_is_read_anew(tmp_path):
    """One process, two calls: a judge's spec (its recording's checksum, so every key) follows the
    file the name refers to now, not the first one this process resolved under that name."""
    rows = pairs()
    picks = {"A": tmp_path / "a", "B": tmp_path / "b"}
    for said, folder in picks.items():
        folder.mkdir()
        (folder / "rec.jsonl").write_text("".join(json.dumps({"id": f"{r['id']}/{o}", "response": said}) + "\n"
                                                  for r in rows for o in ("ab", "ba")))
        (folder / "c.toml").write_text('name = "same"\nprotocol = "pairwise"\njudge = "replay:rec.jsonl"\n'
                                       f'[dataset]\npath = "{tmp_path / "pairs.jsonl"}"\n[dataset.columns]\n'
                                       'pair_id = "id"\nprompt = "instruction"\ntext_a = "story_1"\n'
                                       'text_b = "story_2"\nlabel = "winner"\n'
                                       '[dataset.values.label]\nfirst = "a"\nsecond = "b"\n')
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    said = {}
    for kind, folder in picks.items():          # the same relative name in two folders
        r = litjudge.run(folder / "c.toml", out=tmp_path / f"out-{kind}", cache=False, progress=False)
        said[kind] = set(r.verdicts["raw"].to_list())
    assert said == {"A": {"A"}, "B": {"B"}}
    # the same call again after the recording was edited in place, to the same size and with its
    # modification time put back: the new answers, new keys (the file's change time shows the write)
    first = litjudge.judge(rows, protocol="pairwise", judge=f"replay:{picks['A'] / 'rec.jsonl'}", columns=COLUMNS,
                           values=VALUES, out=tmp_path / "edited", cache=False, progress=False)
    st = (picks["A"] / "rec.jsonl").stat()
    (picks["A"] / "rec.jsonl").write_text((picks["B"] / "rec.jsonl").read_text())
    os.utime(picks["A"] / "rec.jsonl", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (picks["A"] / "rec.jsonl").stat().st_size == st.st_size
    again = litjudge.judge(rows, protocol="pairwise", judge=f"replay:{picks['A'] / 'rec.jsonl'}", columns=COLUMNS,
                           values=VALUES, out=tmp_path / "edited", cache=False, progress=False)
    assert set(first.verdicts["raw"].to_list()) == {"A"} and set(again.verdicts["raw"].to_list()) == {"B"}
    assert first.manifest.judges[0]["sha256"] != again.manifest.judges[0]["sha256"]


def test_a_recording_edited_after_the_run_planned_with_it_is_refused_not_stored_under_its_old_checksum(tmp_path):
    """A sweep resolves every judge (the recording's checksum goes into every key) before it runs
    the first; a recording edited while earlier judges ran was answered from its new text under the
    old checksum, and a later run of the old text reused those answers. The backend reads the file
    the run planned with, or refuses in one line."""
    from litjudge.engine.backends.replay import ReplayBackend
    from litjudge.engine.core.config import RunConfig

    rec = tmp_path / "rec.jsonl"
    rec.write_text(json.dumps({"id": "p00/ab", "response": "A"}) + "\n")
    spec = ReplayBackend.resolve(f"replay:{rec}", RunConfig("t", protocol="pairwise", dataset="pairs-generic"))
    assert ReplayBackend(spec).records == {"p00/ab": "A"}
    rec.write_text(json.dumps({"id": "p00/ab", "response": "B"}) + "\n")
    with pytest.raises(litjudge.DataError, match=r"rec.jsonl: the recording changed after the run planned with it "
                       r"\(sha256 [0-9a-f]{16} then, [0-9a-f]{16} now\): nothing of it was stored; run again"):
        ReplayBackend(spec)


def test_judging_a_folder_again_under_its_annotation_queue_says_what_becomes_of_the_queue(tmp_path):
    """A run judged again into a folder whose annotation queue was drawn from its old verdicts was
    replaced without a word; the queue's page was refused only at its next start (one running kept
    the old queue). The run now says so as it writes its verdicts (`stale_queue`); a re-run that
    changes no verdict says nothing."""
    from litjudge.engine.app.annotate.labels import stale_queue
    from litjudge.engine.app.annotate.queue_store import Options, open_queue

    rows = pairs()
    first = judged(tmp_path, rows, name="queued")
    _, labels = open_queue(first.run_dir, Options(budget=5))             # a started queue
    labels.close()
    def said(run_dir):
        return stale_queue(run_dir, pl.read_parquet(run_dir / "verdicts.parquet"))

    assert said(judged(tmp_path, rows, name="queued").run_dir) is None
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps({"id": f"{r['id']}/{o}", "response": "B"}) + "\n"
                             for r in rows for o in ("ab", "ba")))
    again = judged(tmp_path, rows, name="queued", judge=f"replay:{other}", overwrite=True)
    assert again.run_dir == first.run_dir and said(again.run_dir) == (
        f"litjudge: warning: {first.run_dir} holds an annotation queue drawn from other verdicts than this run's: its "
        "page is refused from its next start (one running now keeps the old queue); `litjudge annotate "
        f"{first.run_dir} --export FILE` still writes its labels")


def test_the_category_order_is_a_keyword_and_reaches_the_loader(tmp_path):
    """`category_order=` is the config's `[dataset] category_order`: a category outside it is the
    loader's one line, and a string where a list belongs is refused at the edge."""
    rows = [{"obj": "brick", "id": f"u{k}", "use": f"use {k}", "tert": t} for k, t in enumerate(["low", "high"])]
    cols = {"group": "obj", "item_id": "id", "text": "use", "category": "tert"}
    with pytest.raises(litjudge.LitjudgeError) as caught:
        litjudge.judge(rows, protocol="listwise", columns=cols, category_order=["low", "mid"], out=tmp_path, progress=False)
    assert "category 'high' is not one of ['low', 'mid']" in str(caught.value), caught.value
    with pytest.raises(litjudge.LitjudgeError) as caught:
        litjudge.judge(rows, protocol="listwise", columns=cols, category_order="low", out=tmp_path, progress=False)
    assert "category_order" in str(caught.value) and "worst first" in str(caught.value)



def test_a_tie_verdict_is_half_credit_in_each_order_as_in_the_combined_verdict(tmp_path):
    """With ties allowed, a judge answering "tie" in both orders to half the pairs and right on the
    rest scored 0.5 in each order and their mean (a tie no credit) but 0.75 combined: one rule now,
    a tie half credit (docs/statistics.md, Ties), in the table and in what a sweep ranks."""
    from litjudge.judges.base import RankBy
    from litjudge.judges.pairwise import Pairwise, PairwiseOptions

    rows = pairs(12)
    rec = tmp_path / "ties.jsonl"
    right = {"first": {"ab": "A", "ba": "B"}, "second": {"ab": "B", "ba": "A"}}
    rec.write_text("".join(json.dumps({"id": f"{r['id']}/{o}", "response": "tie" if k % 2 else right[r["winner"]][o]})
                           + "\n" for k, r in enumerate(rows) for o in ("ab", "ba")))
    r = judged(tmp_path, rows, judge=f"replay:{rec}", options={"tie": True})
    acc = dict(zip(r.tables["accuracy"]["order"].to_list(), r.tables["accuracy"]["accuracy"].to_list()))
    assert acc["ab"] == acc["ba"] == acc["mean of both"] == 0.75, acc
    assert [v for k, v in acc.items() if k.startswith("combined")] == [0.75], acc
    units = Pairwise().rank_units(r.tables, r.verdicts["judge"][0], RankBy("accuracy.accuracy"),
                                  PairwiseOptions(tie=True))
    assert units is not None and units.value() == 0.75


def test_an_overwrite_refused_for_a_bad_row_leaves_the_folder_as_it_was(tmp_path):
    """A hostile pass: `overwrite=True` with a bad label on row 6 raised, but had replaced the
    folder's input rows first, beside tables made from the old ones (`load()` read them together).
    The folder keeps its rows; the same call without the bad row then replaces it."""
    first = judged(tmp_path, pd.DataFrame(pairs()), name="victim")
    before = (first.run_dir / "input" / "data.jsonl").read_bytes()
    bad = pairs()
    bad[5]["winner"] = "maybe"
    with pytest.raises(DataError, match="maybe"):
        judged(tmp_path, pd.DataFrame(bad), name="victim", overwrite=True)
    assert (first.run_dir / "input" / "data.jsonl").read_bytes() == before
    assert litjudge.load(first.run_dir).tables["accuracy"].equals(first.tables["accuracy"])
    again = judged(tmp_path, pd.DataFrame(pairs(10)), name="victim", overwrite=True)
    assert again.verdicts.height == 20
    after = (again.run_dir / "input" / "data.jsonl").read_bytes()
    # refused for another reason than its rows (a judge not found, an option), or stopped: the same
    for wrong, error in ((dict(judge=f"replay:{tmp_path / 'gone.jsonl'}"), litjudge.JudgeNotFound),
                         (dict(mode="distribution"), ConfigError)):
        with pytest.raises(error):
            judged(tmp_path, pd.DataFrame(pairs(4)), name="victim", overwrite=True, **wrong)
        assert (again.run_dir / "input" / "data.jsonl").read_bytes() == after
        assert litjudge.load(again.run_dir).verdicts.equals(again.verdicts)


def test_an_overwrite_killed_before_its_outputs_keeps_the_judged_rows(tmp_path):
    """A hostile pass: `overwrite=True` killed mid-run (SIGTERM or kill -9: no handler runs) left the
    new rows, never judged, in input/data.jsonl beside the old run's manifest and tables, and
    `load()` read them together. The replaced rows are kept beside them until the outputs are
    written; `load()` (or the next `judge()`) puts them back."""
    first = judged(tmp_path, pd.DataFrame(pairs()), name="victim")
    rows_file = first.run_dir / "input" / "data.jsonl"
    before = rows_file.read_bytes()
    script = textwrap.dedent("""
        import json, sys, litjudge
        cols = {"pair_id": "id", "prompt": "instruction", "text_a": "story_1", "text_b": "story_2", "label": "winner"}
        litjudge.judge(json.loads(sys.argv[1]), protocol="pairwise", judge=sys.argv[2], columns=cols, out=sys.argv[3],
                       values={"label": {"first": "a", "second": "b"}}, name="victim", overwrite=True, progress=False)
        print("finished")
    """)
    more = pairs(20)
    r = subprocess.run([sys.executable, "-c", script, json.dumps(more), recording(tmp_path / "out", more),
                        str(tmp_path / "out")], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "LITJUDGE_FAULT_KILL_AFTER": "1"})
    assert r.returncode == -9 and "finished" not in r.stdout, r.stderr[-2000:]
    assert rows_file.read_bytes() != before                      # the state the kill left
    again = litjudge.load(first.run_dir)
    assert rows_file.read_bytes() == before and not (rows_file.parent / ".data.jsonl.previous").exists()
    assert again.verdicts.equals(first.verdicts) and again.problems() == first.problems()
    # a finished overwrite leaves no journal; the next load finds nothing to put back
    done = judged(tmp_path, pd.DataFrame(more), name="victim", judge=recording(tmp_path / "out", more), overwrite=True)
    assert done.verdicts.height == 40 and sorted(p.name for p in rows_file.parent.iterdir()) == ["data.jsonl"]
    assert litjudge.load(done.run_dir).verdicts.equals(done.verdicts)


def test_a_category_order_with_no_order_to_trust_is_refused():
    """A set's order changes between processes (spearman_category read -0.91 for +0.91), a dict
    ignores its values, a generator was used up by the check: a list or a tuple only."""
    rows = [{"item_id": f"i{k}", "group": "g", "text": f"t{k}", "category": "low"} for k in range(3)]
    for protocol, said in ((["listwise"], "protocol: expected a protocol's name"),
                           (" listwise", "unknown protocol ' listwise' (did you mean 'listwise'?)")):
        with pytest.raises(ConfigError, match=re.escape(said)):         # not a TypeError, nor blamed on `name`
            litjudge.judge(rows, protocol=protocol, judge="replay:x.jsonl", progress=False)
    for order in ({"low", "high"}, {"high": 2, "low": 1}, (c for c in ["low", "high"]), 5):
        with pytest.raises(ConfigError, match="category_order: expected a list of your category names"):
            litjudge.judge(rows, protocol="listwise", judge="replay:x.jsonl", category_order=order, progress=False)
    # a category named twice has two ranks (a hostile pass: accepted and recorded as given)
    with pytest.raises(ConfigError, match="category_order: 'low' is named twice; name each category once"):
        litjudge.judge(rows, protocol="listwise", judge="replay:x.jsonl", category_order=["low", "high", "low"],
                       progress=False)


def test_a_missing_field_lists_the_columns_as_the_user_named_them(tmp_path):
    """A hostile pass: the message listed the row after its renaming ('item_id, text, prompt'),
    names the user never wrote; it lists the user's ('id, story, prompt')."""
    items = pl.DataFrame({"id": ["i1", "i2"], "story": ["A tale.", "Another."], "prompt": ["Write."] * 2})
    (tmp_path / "rec.jsonl").write_text('{"id": "i1/good", "response": "Yes"}\n')
    with pytest.raises(DataError) as refused:
        litjudge.judge(items, protocol="rubric", judge=f"replay:{tmp_path / 'rec.jsonl'}",
                       columns={"item_id": "id", "text": "story"},
                       options={"questions": [{"id": "good", "text": "Is it good?", "scale": "binary"}]},
                       out=tmp_path / "out", progress=False)
    assert "missing field 'group'" in str(refused.value) and "(the row's columns: id, story, prompt)" in str(refused.value)


def test_threads_judging_into_one_folder_are_told_another_thread_holds_it(tmp_path):
    """A hostile pass: of 4 threads calling judge() with the same rows into one folder, some were
    told the folder was one of the user's (caught between another's mkdir of input/ and its
    rename) or held by "another litjudge process (pid unknown)". Each now either runs or is told
    another run of this process holds the folder."""
    import threading

    frame = pd.DataFrame(pairs())
    judge = recording(tmp_path, pairs())             # written once: the threads race for the folder, not the file
    for attempt in range(6):
        said: list[str] = []

        def one(said=said, attempt=attempt) -> None:
            try:
                judged(tmp_path, frame, name=f"race{attempt}", judge=judge)
                said.append("ran")
            except ConfigError as e:
                said.append(str(e))

        threads = [threading.Thread(target=one) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert "ran" in said and all(s == "ran" or "in use by another run in this process" in s for s in said), said


def test_an_empty_path_a_recording_that_is_no_file_and_a_column_that_is_no_name_are_one_line():
    """A hostile pass: "" read the working folder as arrow, "replay:/tmp" and "replay:" were looked
    up as recorded TTCW judges, columns={"label": 3} did not say what it got."""
    from litjudge.engine.core.errors import JudgeNotFound

    rows = [{"pair_id": "p", "prompt": "w", "text_a": "a", "text_b": "b"}]
    with pytest.raises(ConfigError, match=r"data: an empty path"):
        litjudge.judge("", protocol="pairwise", progress=False)
    for judge in ("replay:/tmp", "replay:"):
        with pytest.raises(JudgeNotFound, match=r"replay:NAME names a recorded TTCW judge, replay:FILE.jsonl a file"):
            litjudge.judge(rows, protocol="pairwise", judge=judge, progress=False)
    with pytest.raises(ConfigError, match=r"columns: expected a dict of field -> your column name.*got \{'label': 3\}"):
        litjudge.judge(rows, protocol="pairwise", columns={"label": 3}, progress=False)
