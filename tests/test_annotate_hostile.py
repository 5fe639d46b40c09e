"""A demanding user's attacks on the rubric queue that once got through: a JSON number or a
spreadsheet's "4.0" / " 4 " for a point, a CSV with a byte order mark or not in UTF-8, an
annotator name holding markup or a final newline, export cells a spreadsheet would run as a
formula, and a run folder whose verdicts changed under a started queue (its draws silently
redrawn). Each is stored canonically or refused in one line. So are the options of a queue (a NaN or
negative lock, a port past 65535), imports of texts the queue did not draw or of times that are not
times, a damaged verdicts file, and a K+1th annotator's answer to a text with its K answers."""
from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import polars as pl
import pytest

from litjudge.engine.app.annotate.export import records
from litjudge.engine.app.annotate.queue_store import Options, open_queue
from litjudge.engine.app.annotate.serve import export_labels, import_labels
from litjudge.engine.core.errors import ConfigError, DataError, StoreError
from tests.annotate_run import InThread, rubric_run
from tests.conftest import litjudge


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return rubric_run(tmp_path_factory.mktemp("hostile"), texts=12, first="points")


@pytest.fixture
def fresh(run, tmp_path):
    """A copy of the run without its store: each test starts its own queue."""
    return shutil.copytree(run, tmp_path / "rb", ignore=shutil.ignore_patterns("annotations.sqlite*"))


def test_a_point_as_a_number_is_stored_as_the_point_and_a_name_with_a_newline_is_refused(fresh):
    with InThread(fresh, budget=10) as s, s.client() as c:
        item = c.get("/api/next", params={"annotator": "ann"}).json()
        vivid, natural = (q["item"] for q in item["questions"])
        post = {"cluster": item["cluster"], "shown": item["shown"], "labels": {vivid: 4, natural: "Yes"}}
        r = c.post("/api/label", json={**post, "annotator": "ann\n", "key": uuid.uuid4().hex})
        assert r.status_code == 400 and r.text.startswith("annotator:") and r.text.count("\n") == 1
        r = c.post("/api/label", json={**post, "labels": {vivid: 4.5, natural: "Yes"}, "annotator": "ann",
                                       "key": uuid.uuid4().hex})
        assert r.status_code == 400 and r.text == "labels: 4.5 is not an answer of this protocol (1, 2, 3, 4, 5)\n"
        huge = c.post("/api/label", content=json.dumps({**post, "labels": {vivid: 10 ** 400, natural: "Yes"},
                                                        "annotator": "ann", "key": uuid.uuid4().hex}),
                      headers={"Content-Type": "application/json"})      # a 400-digit point was a 500
        assert huge.status_code == 400 and huge.text.startswith("labels: 1000") and huge.text.count("\n") == 1
        c.post("/api/label", json={**post, "annotator": "ann", "key": uuid.uuid4().hex}).raise_for_status()
        assert {(r.item, r.label) for r in s.app.labels.rows()} == {(vivid, "4"), (natural, "Yes")}
        # a phone's O’Brien is the laptop's O'Brien: one annotator, kept as the plain apostrophe
        theirs = c.get("/api/next", params={"annotator": "O\u2019Brien"}).json()
        assert c.get("/api/next", params={"annotator": "O'Brien"}).json()["cluster"] == theirs["cluster"]
        c.post("/api/label", json={"cluster": theirs["cluster"], "shown": theirs["shown"], "annotator": "O\u2019Brien",
                                   "key": uuid.uuid4().hex, "labels": {q["item"]: "Yes" if q["item"].endswith("natural")
                                                                        else 3 for q in theirs["questions"]}}
               ).raise_for_status()
        assert {r.annotator for r in s.app.labels.rows()} == {"ann", "O'Brien"}


def imported(fresh, name: str, data: bytes, per_item: int = 1) -> tuple[int, int] | str:
    """The file imported into the run's queue: a started one as it was, else a new one of the default
    budget (50 draws, every one of the 12 texts drawn: only a drawn text's labels are taken)."""
    queue, labels = open_queue(fresh, Options())
    try:
        (fresh / name).write_bytes(data)
        return import_labels(queue, labels, fresh / name, per_item)
    except DataError as e:
        assert "\n" not in str(e), str(e)
        return str(e)
    finally:
        labels.close()


def test_import_reads_points_as_a_spreadsheet_writes_them_a_bom_and_refuses_other_encodings(fresh):
    rows = "annotator,item,label\nann,t00/vivid, 4 \nann,t01/vivid,4.0\nann,t02/natural, No\n"
    assert imported(fresh, "a.csv", ("\ufeff" + rows).encode()) == (3, 0)
    lines = [{"annotator": "bob", "item": "t03/vivid", "label": 2.0}, {"annotator": "bob", "item": "t04/vivid", "label": 3}]
    assert imported(fresh, "b.jsonl", ("\ufeff" + "".join(json.dumps(x) + "\n" for x in lines)).encode()) == (2, 0)
    queue, labels = open_queue(fresh, Options())
    got = {(r.annotator, r.item, r.label) for r in labels.rows()}
    labels.close()
    assert got == {("ann", "t00/vivid", "4"), ("ann", "t01/vivid", "4"), ("ann", "t02/natural", "No"),
                   ("bob", "t03/vivid", "2"), ("bob", "t04/vivid", "3")}
    assert imported(fresh, "c.csv", "annotator,item,label\nJosé,t05/vivid,3\n".encode("latin-1")).endswith(
        "c.csv:2: not UTF-8 text (byte 3 of this line)")
    assert imported(fresh, "d.csv", b"annotator,item,label\nann,t05/vivid,4.5\n").endswith(
        "label '4.5' is not an answer of this protocol (1, 2, 3, 4, 5)")
    # a new user's files: other column names, semicolons, two label columns (the last one was read)
    assert imported(fresh, "g.csv", b"rater,story,answer\nann,t05/vivid,4\n").endswith(
        "g.csv:1: no 'annotator' column: the header holds 'rater', 'story', 'answer'; an import's columns are "
        "annotator, item, label (time optional)")
    assert "the header is one column, 'annotator;item;label': the file looks ';'-separated" in \
        imported(fresh, "h.csv", b"annotator;item;label\nann;t05/vivid;4\n")
    assert imported(fresh, "i.csv", b"annotator,item,label,label\nann,t05/vivid,4,2\n").endswith(
        "i.csv:1: the header names column 'label' twice: rename one")
    assert imported(fresh, "j.csv", b"annotator,item,label,,\nann,t05/vivid,4,,\n") == (1, 0)   # a sheet's empty columns
    row = b'{"annotator": "ann", "item": "t06/vivid", "label": "4", "label": "2"}\n'   # the last was read, unsaid
    assert imported(fresh, "k.jsonl", row).endswith("k.jsonl:1: key 'label' is named twice in the row: keep one")


def test_import_reads_a_spreadsheets_empty_rows_as_blank_and_names_each_rows_own_line(fresh):
    """As a data file is read: `,,` (a spreadsheet's empty row) was refused as "no annotator", and
    after a blank line an error named the row's place among the rows read, not its line."""
    rows = "annotator,item,label\nann,t00/vivid,4\n,,\n\nann,t01/vivid,4\n"
    assert imported(fresh, "a.csv", rows.encode()) == (2, 0)
    bad = "annotator,item,label\n\n,,\nbob,t02/vivid,4\nbob,t03/vivid,9\n"
    assert imported(fresh, "b.csv", bad.encode()).endswith("b.csv:5: label '9' is not an answer of this protocol "
                                                            "(1, 2, 3, 4, 5)")
    lines = '\n{"annotator": "eve", "item": "t04/vivid", "label": "4"}\n\n{"annotator": "eve", "item": "nope", "label": "4"}\n'
    assert imported(fresh, "c.jsonl", lines.encode()).endswith("c.jsonl:4: item 'nope' is not an item of this run's queue")
    assert imported(fresh, "d.csv", "annotator,item,label\nann,t05/vivid,3\nJosé,t06/vivid,3\n".encode("latin-1")
                    ).endswith("d.csv:3: not UTF-8 text (byte 3 of this line)")


@pytest.mark.parametrize("name", ["<b>x</b>", "ann\nbob", "=HYPERLINK(\"http://x\")"])
def test_import_refuses_an_annotator_the_page_would_refuse(fresh, name):
    data = json.dumps({"annotator": name, "item": "t00/vivid", "label": "3"}) + "\n"
    assert "annotator " in imported(fresh, "e.jsonl", data.encode()) and "a name of 1-64 letters" in \
        imported(fresh, "e.jsonl", data.encode())


def test_export_csv_cells_a_spreadsheet_would_run_are_guarded_and_read_back(fresh):
    rows = "annotator,item,label,time\n@ann,t00/vivid,4,2026-01-01\n+bob,t00/vivid,2,2026-01-01\n-eve,t01/vivid,1,2026-01-01\n"
    assert imported(fresh, "f.csv", rows.encode(), per_item=2) == (3, 0)
    # an apostrophe in a name (a new user's "Siobhán O'Brien" was refused), read back as it was; first,
    # where the export's guard puts one, it is no name
    obrien = "annotator,item,label\nSiobhán O'Brien,t02/vivid,3\n"
    assert imported(fresh, "o.csv", obrien.encode(), per_item=2) == (1, 0)
    # one person, one name: a phone's typographic apostrophe and decomposed accent are the same annotator
    again = "annotator,item,label\nSiobha\u0301n O\u2019Brien,t02/vivid,3\n"
    assert imported(fresh, "o2.csv", again.encode(), per_item=2) == (0, 1)
    assert "an apostrophe not first" in imported(fresh, "p.csv", b"annotator,item,label\n'ann,t03/vivid,3\n")
    queue, labels = open_queue(fresh, Options())
    try:
        export_labels(queue, labels, fresh / "out.csv")
        export_labels(queue, labels, fresh / "out.jsonl")
        assert import_labels(queue, labels, fresh / "out.csv") == (0, 4)        # read back: the same labels
    finally:
        labels.close()
    cells = [line.split(",")[0] for line in (fresh / "out.csv").read_text().splitlines()[1:]]
    assert cells == ["'@ann", "'+bob", "'-eve", "Siobhán O'Brien"]
    assert [json.loads(x)["annotator"] for x in (fresh / "out.jsonl").read_text().splitlines()] == \
        ["@ann", "+bob", "-eve", "Siobhán O'Brien"]


def test_a_started_queue_whose_run_was_judged_again_is_refused_not_redrawn(fresh):
    """...and its labels, the people's, are still exported (from the store: the fields the run's
    judges gave are empty); the export refused them, and only sqlite reached them."""
    queue, labels = open_queue(fresh, Options(budget=10))
    cluster = queue.clusters[int(queue.design.draws[0])]
    labels.submit("k-before-rejudging", "ann", cluster.cluster, {q.item: "Yes" if q.item.endswith("natural") else "4"
                                                                 for q in cluster.questions})
    before = records(queue, labels)
    labels.close()
    verdicts = pl.read_parquet(fresh / "verdicts.parquet")           # the same items, other verdicts
    verdicts.with_columns(pl.when(pl.col("question") == "vivid").then(pl.lit("3")).otherwise(pl.col("label"))
                          .alias("label")).write_parquet(fresh / "verdicts.parquet")
    with pytest.raises(ConfigError) as e:
        open_queue(fresh, Options())
    assert "the run's verdicts changed since its annotation queue was drawn" in str(e.value)
    assert "\n" not in str(e.value)
    r = litjudge("annotate", str(fresh), "--export", str(fresh / "kept.jsonl"))
    assert r.returncode == 0 and "Exported 2 labels" in r.stdout, r.stderr
    assert f"litjudge: warning: {fresh}: the run's verdicts changed" in r.stderr and r.stderr.count(str(fresh)) == 1, \
        r.stderr
    kept = [json.loads(x) for x in (fresh / "kept.jsonl").read_text().splitlines()]
    own = ("annotator", "time", "cluster", "item", "label", "draw", "probability", "times_drawn", "key", "source",
           "shown", "draws")
    assert [{k: x[k] for k in own} for x in kept] == [{k: x[k] for k in own} for x in before]
    assert all(x["score"] is None and x["judge_total"] is None for x in kept)


def test_a_run_judged_again_under_its_running_page_is_said_on_the_page(fresh):
    """A new user's try: the run judged again while its page was served; the page went on taking
    labels and showing estimates of the old verdicts, unsaid. It says so now; labels are kept."""
    with InThread(fresh, budget=10) as s, s.client() as c:
        assert c.get("/api/estimate").json()["stale"] is None
        verdicts = pl.read_parquet(fresh / "verdicts.parquet")       # as a run writes them: replaced whole
        verdicts.write_parquet(fresh / "new.parquet")                 # the same verdicts written again: no news
        (fresh / "new.parquet").replace(fresh / "verdicts.parquet")
        assert c.get("/api/estimate").json()["stale"] is None
        verdicts.with_columns(pl.when(pl.col("question") == "vivid").then(pl.lit("3")).otherwise(pl.col("label"))
                              .alias("label")).write_parquet(fresh / "new.parquet")
        (fresh / "new.parquet").replace(fresh / "verdicts.parquet")
        assert c.get("/api/estimate").json()["stale"].startswith("The run was judged again since this page started")
        (fresh / "verdicts.parquet").write_bytes(b"garbage")
        assert c.get("/api/estimate").json()["stale"].startswith("The run's verdicts.parquet can no longer be read")
        item = c.get("/api/next", params={"annotator": "ann"}).json()
        assert c.post("/api/label", json={"annotator": "ann", "cluster": item["cluster"], "key": uuid.uuid4().hex,
                                          "labels": {q["item"]: q["answers"][0]["value"] for q in item["questions"]}}
                      ).json()["stored"]


def test_a_queue_whose_run_was_judged_again_with_the_same_draws_is_refused_too(fresh):
    """Judged again by another judge (new content keys) whose answers leave the draws and their
    probabilities as they were (a uniform draw, say): the queue was served, its judges' totals the
    new judge's. What the judges said is part of what a queue was drawn from."""
    queue, labels = open_queue(fresh, Options(budget=10))
    labels.close()
    verdicts = pl.read_parquet(fresh / "verdicts.parquet")
    verdicts.with_columns(pl.col("key") + "-another-judge").write_parquet(fresh / "verdicts.parquet")
    with pytest.raises(ConfigError, match="the run's verdicts changed since its annotation queue was drawn"):
        open_queue(fresh, Options())


def test_a_queue_whose_run_was_judged_again_on_other_items_still_exports(fresh):
    """A hostile pass: judged again on fewer texts, the queue's clusters differ, which was refused
    as a setting ("start it with the same settings", which no setting fixes), and the export the
    run's own warning promised refused too."""
    queue, labels = open_queue(fresh, Options(budget=10))
    cluster = queue.clusters[int(queue.design.draws[0])]
    labels.submit("k-before-rejudging", "ann", cluster.cluster, {q.item: "Yes" if q.item.endswith("natural") else "4"
                                                                 for q in cluster.questions})
    labels.close()
    verdicts = pl.read_parquet(fresh / "verdicts.parquet")
    other = next(c.cluster for c in queue.clusters if c.cluster != cluster.cluster)
    verdicts.filter(~pl.col("item_id").str.starts_with(other)).write_parquet(fresh / "verdicts.parquet")
    with pytest.raises(ConfigError, match="the run's clusters changed since its annotation queue was drawn"):
        open_queue(fresh, Options())
    r = litjudge("annotate", str(fresh), "--export", str(fresh / "kept.csv"))
    assert r.returncode == 0 and "Exported 2 labels" in r.stdout and "from the store alone" in r.stdout, r.stderr
    assert "clusters changed" in r.stderr and "same settings" not in r.stderr


def test_labels_from_the_page_exported_and_imported_back_are_stored_once(fresh):
    """An export carries each submission's key: importing it back (CSV or JSONL) is the same
    submission, not a second one (it once was, keyed by content and a time the store had changed)."""
    with InThread(fresh, budget=10) as s, s.client() as c:
        for annotator in ("ann", "bob"):
            item = c.get("/api/next", params={"annotator": annotator}).json()
            vivid, natural = (q["item"] for q in item["questions"])
            c.post("/api/label", json={"cluster": item["cluster"], "shown": item["shown"], "annotator": annotator,
                                       "labels": {vivid: "4", natural: "Yes"}, "key": uuid.uuid4().hex}).raise_for_status()
    queue, labels = open_queue(fresh, Options(budget=10))
    try:
        before = labels.rows()
        export_labels(queue, labels, fresh / "out.csv")
        export_labels(queue, labels, fresh / "out.jsonl")
        assert import_labels(queue, labels, fresh / "out.csv") == (0, 2)
        assert import_labels(queue, labels, fresh / "out.jsonl") == (0, 2)
        assert labels.rows() == before
    finally:
        labels.close()


def test_a_key_reused_for_other_answers_is_refused_not_dropped(fresh):
    """A retry repeats its submission; a key sent again with other answers (a client bug, or an
    exported file edited and imported back) was answered "duplicate" and the new answers dropped."""
    with InThread(fresh, budget=10) as s, s.client() as c:
        item = c.get("/api/next", params={"annotator": "ann"}).json()
        vivid, natural = (q["item"] for q in item["questions"])
        post = {"cluster": item["cluster"], "shown": item["shown"], "annotator": "ann", "key": uuid.uuid4().hex}
        c.post("/api/label", json={**post, "labels": {vivid: "4", natural: "Yes"}}).raise_for_status()
        assert c.post("/api/label", json={**post, "labels": {vivid: "4", natural: "Yes"}}).json()["duplicate"]
        r = c.post("/api/label", json={**post, "labels": {vivid: "2", natural: "Yes"}})
        assert r.status_code == 409 and "stored before with other content" in r.text and r.text.count("\n") == 1
        r = c.post("/api/skip", json={**post})
        assert r.status_code == 409
    queue, labels = open_queue(fresh, Options(budget=10))
    try:
        export_labels(queue, labels, fresh / "out.csv")
    finally:
        labels.close()
    edited = (fresh / "out.csv").read_text().replace(f"{vivid},4,", f"{vivid},2,")
    assert edited != (fresh / "out.csv").read_text()
    message = imported(fresh, "edited.csv", edited.encode())
    assert isinstance(message, str) and "remove its key column" in message, message


@pytest.mark.parametrize("options,said", [
    ({"lock_seconds": float("nan")}, "--lock must be a number of seconds > 0, got nan"),
    ({"lock_seconds": -5.0}, "--lock must be a number of seconds > 0, got -5.0"),
    ({"port": 99999}, "--port must be a port from 0 to 65535 (0: a free one), got 99999"),
    ({"budget": "5"}, "--budget must be a whole number from 1 to 1,000,000, got '5'"),
    ({"budget": True}, "--budget must be a whole number from 1 to 1,000,000, got True"),
    ({"budget": 10**12}, "--budget must be a whole number from 1 to 1,000,000, got 1000000000000"),  # 7.28 TiB asked
    ({"floor": float("nan")}, "--floor must be a number in (0, 1], got nan"),
    ({"seed": -2}, "--seed must be a whole number >= 0, got -2"),
    ({"per_item": 0}, "--per-item must be a whole number >= 1, got 0")])
def test_a_wrong_option_is_one_line_naming_it_for_the_console_and_for_python(options, said):
    """A NaN lock failed every request with a bare 500 (NOT NULL on the lock's expiry), a negative
    one turned the locks off, a port past 65535 or a negative seed were internal errors."""
    with pytest.raises(ConfigError) as e:
        Options(**options)
    assert str(e.value) == said
    keyword = {"lock_seconds": "lock_seconds", "per_item": "per_item"}.get(next(iter(options)), next(iter(options)))
    assert str(e.value.in_python()).startswith(f"{keyword} must be ")


def test_the_python_call_names_a_wrong_option_and_a_bad_annotator_in_one_line(fresh):
    import litjudge
    with pytest.raises(ConfigError, match=r"^annotate\(\) has no option 'lock'; its options: budget, .*lock_seconds, new_token$"):
        litjudge.annotate(fresh, lock=3)
    with pytest.raises(ConfigError, match=r"^annotator must be a name of 1-64 letters"):
        litjudge.annotate(fresh, annotator='x"><script>')
    with pytest.raises(ConfigError, match=r"^port must be a port from 0 to 65535"):
        litjudge.annotate(fresh, port=70000)
    # a hostile pass: no run at all was a TypeError of pathlib's; numpy's numbers failed when stored
    for run in (None, 5, [str(fresh)]):
        with pytest.raises(ConfigError, match=r"annotate takes a finished run \(a Result, or its folder"):
            litjudge.annotate(run)
    import numpy as np
    litjudge.annotate(fresh, budget=np.int64(5), floor=np.float32(0.25)).stop()
    again = litjudge.annotate(fresh, budget=5, floor=0.25)             # the stored settings: the same numbers
    again.stop()
    assert (again.queue.protocol, len(again.queue.design.draws)) == ("rubric", 5)


def test_an_import_of_a_text_not_drawn_or_a_time_that_is_not_one_is_refused(fresh):
    queue, labels = open_queue(fresh, Options(budget=10))            # draws 8 of the 12 texts
    drawn, texts = set(labels.first_draw), sorted({c.cluster for c in queue.clusters})
    labels.close()
    missed = next(t for t in texts if t not in drawn)
    took = next(t for t in texts if t in drawn)
    said = imported(fresh, "u.csv", f"annotator,item,label\nann,{missed}/vivid,4\n".encode())
    assert isinstance(said, str) and said.endswith(f"u.csv:2: item '{missed}/vivid' (of '{missed}') was not drawn by "
                                                   "this queue (only drawn items' labels enter the estimate)"), said
    said = imported(fresh, "t.csv", f"annotator,item,label,time\nann,{took}/vivid,4,yesterday\n".encode())
    assert isinstance(said, str) and "t.csv:2: time 'yesterday' is not an ISO 8601 time" in said, said
    assert imported(fresh, "e.csv", b"annotator,item,label\n") == f"{fresh / 'e.csv'}: no rows to import (columns: " \
        "annotator, item, label; time optional)"
    assert imported(fresh, "e.csv", b"a,b\n").endswith("e.csv:1: no 'annotator' column: the header holds 'a', 'b'; an "
                                                       "import's columns are annotator, item, label (time optional)")
    assert imported(fresh, "ok.csv", f"annotator,item,label,time\nann,{took}/vivid,4,2026-11-30T10:00:00+0000\n"
                    .encode()) == (1, 0)


def test_a_damaged_verdicts_file_is_one_line_naming_the_repair(fresh):
    (fresh / "verdicts.parquet").write_bytes(b"garbage")
    with pytest.raises(StoreError, match=r"verdicts.parquet: unreadable \(ComputeError\); `litjudge reparse .*` rebuilds"):
        open_queue(fresh, Options(budget=10))


def test_a_text_with_its_k_answers_takes_no_more(fresh):
    """--per-item 1: once ann answered a text, bob's answer to it was stored (only a live lock was
    checked), and after the queue said done a third annotator's moved the estimate."""
    with InThread(fresh, budget=10) as s, s.client() as c:
        item = c.get("/api/next", params={"annotator": "ann"}).json()
        vivid, natural = (q["item"] for q in item["questions"])
        post = {"cluster": item["cluster"], "shown": item["shown"], "labels": {vivid: "4", natural: "Yes"}}
        c.post("/api/label", json={**post, "annotator": "ann", "key": uuid.uuid4().hex}).raise_for_status()
        r = c.post("/api/label", json={**post, "annotator": "bob", "key": uuid.uuid4().hex})
        assert r.status_code == 409 and r.text == (f"cluster {item['cluster']!r} has been answered by its 1 annotator "
                                                   "(the queue's annotators per item): ask for the next one (/api/next)\n")
        again = c.post("/api/label", json={**post, "annotator": "ann", "key": uuid.uuid4().hex})
        assert again.status_code == 200                                   # her own text: still hers to answer
        assert {r.annotator for r in s.app.labels.rows()} == {"ann"}


def test_the_printed_url_encodes_the_annotators_name():
    from litjudge.engine.app.annotate.serve import url_of
    assert url_of("127.0.0.1", 8765, None, "Ann Lee+1") == "http://127.0.0.1:8765/?annotator=Ann+Lee%2B1"
    assert url_of("::1", 80, "t/k", None) == "http://[::1]:80/?token=t%2Fk"


def test_an_import_gives_a_text_no_more_annotators_than_the_page_would(fresh):
    """--per-item 1: ann's answer to a text stands; a file giving it bob's too was stored (the page
    answers 409), and moved the estimate. Refused whole, nothing stored; --per-item 2 takes it; a
    file of two annotators of one text is refused on its own."""
    queue, labels = open_queue(fresh, Options(budget=10))
    took = next(t for t in sorted({c.cluster for c in queue.clusters}) if t in set(labels.first_draw))
    other = next(t for t in labels.first_draw if t != took)
    labels.close()
    assert imported(fresh, "ann.csv", f"annotator,item,label\nann,{took}/vivid,4\n".encode()) == (1, 0)
    said = imported(fresh, "bob.csv", f"annotator,item,label\nbob,{other}/vivid,3\nbob,{took}/vivid,2\n".encode())
    assert isinstance(said, str) and said.endswith(
        f"bob.csv: cluster '{took}' would have 2 annotators (ann, bob), and the queue takes 1 per item, as the page "
        "does (--per-item: the last given, else 1): import with --per-item 2 for more; nothing was imported"), said
    queue, labels = open_queue(fresh, Options(budget=10))
    try:
        assert {r.annotator for r in labels.rows()} == {"ann"}                # bob's first row not stored either
        assert import_labels(queue, labels, fresh / "bob.csv", per_item=2) == (2, 0)
    finally:
        labels.close()
    two = imported(fresh, "two.csv", f"annotator,item,label\ncy,{other}/natural,Yes\ndee,{other}/natural,No\n".encode())
    assert isinstance(two, str) and "would have 3 annotators (bob, cy, dee)" in two, two


def test_an_import_counts_a_story_the_page_is_showing_someone(fresh):
    """xavier has the story on the page (a live lock); an import gave yolanda an answer to it, and
    xavier's submit was stored too: two annotators on a queue of one per item."""
    queue, labels = open_queue(fresh, Options(budget=10))
    try:
        items_of = {c.cluster: tuple(q.item for q in c.questions) for c in queue.clusters}
        held = labels.next_cluster("xavier", items_of, 1, 60.0)
        item = items_of[held][0]
        (fresh / "y.csv").write_text(f"annotator,item,label\nyolanda,{item},4\n")
        with pytest.raises(DataError, match=f"cluster '{held}' would have 2 annotators \\(xavier, yolanda; xavier "
                                            "holding it, shown on their page, until the lock runs out\\), and the queue takes 1 per item"):
            import_labels(queue, labels, fresh / "y.csv")
        assert labels.rows() == []
    finally:
        labels.close()


def test_an_import_answering_one_item_twice_differently_is_refused(fresh):
    """bob,ITEM,4 then bob,ITEM,2: the last row stood, silently. The same answer twice is one."""
    queue, labels = open_queue(fresh, Options(budget=10))
    took = next(t for t in sorted({c.cluster for c in queue.clusters}) if t in set(labels.first_draw))
    labels.close()
    said = imported(fresh, "twice.csv", f"annotator,item,label\nbob,{took}/vivid,4\nbob,{took}/vivid,2\n".encode())
    assert isinstance(said, str) and said.endswith(
        f"twice.csv:3: 'bob' answers item '{took}/vivid' twice ('4', then '2'): keep one row per annotator and "
        "item (an export's rows whose standing is false were replaced later: drop them)"), said
    assert imported(fresh, "same.csv", f"annotator,item,label\nbob,{took}/vivid,4\nbob,{took}/vivid,4\n".encode()) \
        == (1, 0)


def test_a_folder_here_that_holds_no_run_does_not_hide_the_run_of_that_name(tmp_path, monkeypatch):
    """`litjudge annotate demo` beside a folder `demo` of notes was refused as "not a finished run
    folder", with the run of that name in the runs folder unsaid; `annotate ""` read the current folder."""
    from litjudge.engine.core.paths import run_folder

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LITJUDGE_RUNS_DIR", str(tmp_path / "runs"))
    (tmp_path / "demo").mkdir()
    (tmp_path / "runs" / "demo").mkdir(parents=True)
    (tmp_path / "runs" / "demo" / "manifest.json").write_text("{}")
    assert run_folder("demo") == tmp_path / "runs" / "demo"
    assert run_folder("./demo") == Path("./demo")                      # a path is taken as given
    (tmp_path / "demo" / "manifest.json").write_text("{}")             # a run here is the one meant
    assert run_folder("demo") == Path("demo")
    for empty in ("", " "):
        with pytest.raises(ConfigError, match=r"^no run given \(an empty argument\): give the folder"):
            run_folder(empty)
