"""What a hostile pass of the TTCW annotation queue found (2026-12-01), each held here (a real uvicorn server, the
console's commands): a page on another site undid an annotator's labels with a no-cors `text/plain`
POST and read the export through a name resolving to loopback; an import of some of a story's
tests left the story to a second annotator under `--per-item 1`; an export holding one person's two
answers to a story could not be imported back, and lost the order a pair was shown in; a CSV cell
past the csv module's limit was an internal error (a 400-digit point: tests/test_annotate_hostile.py); `--repeats` without
`--simulate` started the server silently, `--simulate` ignored `--export`, and `--export` before
any label started the queue with the default budget."""
from __future__ import annotations

import csv
import io
import json
import uuid

import pytest

from litjudge.engine.app.annotate.queue import build_queue
from tests.annotate_run import TESTS, InThread, fresh, run_fixture  # noqa: F401 (a fixture)
from tests.conftest import litjudge


def key() -> str:
    return "k" + uuid.uuid4().hex


def first_drawn(run):
    """The queue's first drawn cluster (a budget of 40, as the tests start it)."""
    q = build_queue(run, 40)
    return q.clusters[int(q.design.draws[0])]


def answer(c, annotator: str) -> dict:
    """The next story for `annotator`, answered Yes throughout; its /api/next item."""
    item = c.get("/api/next", params={"annotator": annotator}).json()
    body = {"annotator": annotator, "cluster": item["cluster"], "key": key(),
            "labels": {q["item"]: "Yes" for q in item["questions"]}}
    assert c.post("/api/label", json=body).json()["stored"] is True
    return item


def test_another_sites_page_can_neither_write_nor_read(run):
    with InThread(run, budget=40) as s, s.client() as c:
        answer(c, "erin")
        before = c.get("/api/export.jsonl").text
        undo = json.dumps({"annotator": "erin"})
        # what a no-cors fetch sends: a "simple" type, the attacker's origin
        r = c.post("/api/undo", content=undo, headers={"Content-Type": "text/plain"})
        assert r.status_code == 415 and r.text == "a submission is JSON: Content-Type: application/json\n", r.text
        for origin in ("http://evil.example", "http://127.0.0.2:9", "null"):
            for path in ("/api/undo", "/api/unskip", "/api/skip", "/api/label"):      # every write
                r = c.post(path, content=undo, headers={"Content-Type": "application/json", "Origin": origin})
                assert r.status_code == 403 and r.text.count("\n") == 1 and "another site" in r.text, (path, origin, r.text)
        r = c.post("/api/unskip", content=undo, headers={"Content-Type": "text/plain"})
        assert r.status_code == 415
        r = c.post("/api/undo", content=undo, headers={"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"})
        assert r.status_code == 403
        # a name of the attacker's that resolves to 127.0.0.1 (DNS rebinding): the Host says so
        r = c.get("/api/export.csv", headers={"Host": f"attacker.example:{s.port}"})
        assert r.status_code == 403 and "open the URL litjudge annotate printed" in r.text
        assert c.get("/api/export.jsonl").text == before and len(before.splitlines()) == TESTS
        # the page's own requests: its origin, by each name of loopback
        own = c.post("/api/undo", content=undo, headers={"Content-Type": "application/json",
                                                         "Origin": f"http://127.0.0.1:{s.port}"})
        assert own.status_code == 200 and own.json()["undone"]
        assert c.get("/api/info", headers={"Host": f"localhost:{s.port}"}).status_code == 200


def test_a_partial_import_holds_the_storys_place(run, tmp_path):
    """One of a story's tests imported for lab1 (a lab's sheet): with one annotator per story, the
    page no longer hands that story to anyone else, and gives it to lab1 to finish."""
    with InThread(run, budget=40):
        pass
    first = first_drawn(run)
    sheet = tmp_path / "partial.csv"
    sheet.write_text(f"annotator,item,label\nlab1,{first.questions[0].item},Yes\n")
    r = litjudge("annotate", str(run), "--import", str(sheet))
    assert r.returncode == 0 and "1 submissions stored" in r.stdout, r.stderr
    said = f"litjudge: unfinished story {first.cluster!r}: 1 of its {TESTS} items answered (by lab1): the estimates " \
           "read no draw from its first (draw 1) on until it is finished"
    assert said in r.stderr, r.stderr
    with InThread(run) as s, s.client() as c:
        assert c.get("/api/next", params={"annotator": "web"}).json()["cluster"] != first.cluster
        assert c.get("/api/next", params={"annotator": "lab1"}).json()["cluster"] == first.cluster


def test_an_export_with_two_answers_of_one_person_imports_back(run, finished, tmp_path):
    """Two tabs: one person answered a story twice (the later stands). The export holds both
    submissions, each with its key, the earlier marked `standing` false (its rows and the later
    ones may have one time: an import keeps the file's): imported into a fresh copy of the run,
    both are stored, the later standing, and the estimate is the same."""
    with InThread(run, budget=40) as s, s.client() as c:
        item = answer(c, "bob")
        again = {"annotator": "bob", "cluster": item["cluster"], "key": key(),
                 "labels": {q["item"]: "No" for q in item["questions"]}}
        assert c.post("/api/label", json=again).json()["stored"] is True
        answer(c, "bob")
        estimate = c.get("/api/estimate").json()
        exported = c.get("/api/export.csv").text
    file = tmp_path / "both.csv"
    file.write_text(exported)
    rows = list(csv.DictReader(io.StringIO(exported)))
    replaced = [r for r in rows if r["standing"] == "False"]
    assert {r["cluster"] for r in replaced} == {item["cluster"]} and {r["label"] for r in replaced} == {"Yes"}
    assert len(replaced) == len(item["questions"])
    standing = [(r["annotator"], r["item"]) for r in rows if r["standing"] == "True"]
    assert len(standing) == len(set(standing)) == len(rows) - len(replaced)
    other = fresh(finished, tmp_path / "other")
    r = litjudge("annotate", str(other), "--budget", "40", "--import", str(file))
    assert r.returncode == 0 and "3 submissions stored, 0 already there" in r.stdout, r.stderr
    with InThread(other) as s, s.client() as c:
        assert c.get("/api/estimate").json() == estimate
    r = litjudge("annotate", str(other), "--import", str(file))
    assert r.returncode == 0 and "0 submissions stored, 3 already there" in r.stdout, r.stderr


def test_an_unreadable_csv_is_one_line(run, tmp_path):
    with InThread(run, budget=40):
        pass
    item = first_drawn(run).questions[0].item
    big = tmp_path / "big.csv"            # a cell past the csv module's 128 KiB: read, as a data file's is
    big.write_text(f"annotator,item,label\nlab,{item},\"{'x' * 200_000}\"\n")
    r = litjudge("annotate", str(run), "--import", str(big))
    assert r.returncode == 2 and f"big.csv:2: label '{'x' * 40}' is not an answer" in r.stderr, r.stderr
    nul = tmp_path / "nul.csv"
    nul.write_text(f"annotator,item,label\nlab,{item},Yes\nlab,{item},\"N\0o\n")
    r = litjudge("annotate", str(run), "--import", str(nul))
    assert r.returncode == 2 and "nul.csv:3: cannot be read as CSV" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr


@pytest.mark.parametrize("args, line", [
    (["--repeats", "5"], "--repeats goes with --simulate COLUMN"),
    (["--target-width", "0.1"], "--target-width goes with --simulate COLUMN"),
    (["--simulate", "expert_pass", "--export", "x.csv"], "--simulate answers the queue from the run's own column"),
])
def test_options_of_another_mode_are_one_line(run, args, line):
    r = litjudge("annotate", str(run), *args, timeout=60)
    assert r.returncode == 2 and line in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not (run / "annotations.sqlite").exists()


def test_exporting_before_any_label_starts_nothing(run, tmp_path):
    r = litjudge("annotate", str(run), "--export", str(tmp_path / "x.csv"))
    assert r.returncode == 2 and "no labels to export" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not (run / "annotations.sqlite").exists() and not (tmp_path / "x.csv").exists()
    r = litjudge("annotate", str(run), "--budget", "30", "--export", str(tmp_path / "y.csv"))
    assert r.returncode == 2 and "no labels to export" in r.stderr


def test_an_undo_of_a_second_answer_says_the_first_stands(run):
    """Two tabs answered one story: undoing the later answer leaves the earlier standing, and the
    answer says so (the page said "shown again" and showed another story)."""
    with InThread(run, budget=40) as s, s.client() as c:
        item = answer(c, "tabs")
        again = {"annotator": "tabs", "cluster": item["cluster"], "key": key(),
                 "labels": {q["item"]: "No" for q in item["questions"]}}
        assert c.post("/api/label", json=again).json()["stored"] is True
        assert c.post("/api/undo", json={"annotator": "tabs"}).json() == {"undone": item["cluster"],
                                                                          "earlier_stands": True, "stands": "earlier",
                                                                          "answers": {}}     # the other tab's stand
        assert c.get("/api/next", params={"annotator": "tabs"}).json()["cluster"] != item["cluster"]
        assert c.post("/api/undo", json={"annotator": "tabs"}).json() == {
            "undone": item["cluster"], "earlier_stands": False, "stands": None,
            "answers": {q["item"]: "Yes" for q in item["questions"]}}        # the first tab's answers
        assert c.get("/api/next", params={"annotator": "tabs"}).json()["cluster"] == item["cluster"]


def test_an_undo_before_an_import_of_the_same_story_says_the_later_answer_stands(run, tmp_path):
    """A page answer, then an import of that person's answers to the same story: the undo takes back
    the page's answer, and the imported one, later, stands (the page said "your earlier answer
    stands", and the estimate did not move)."""
    from litjudge.engine.app.annotate.serve import import_labels

    with InThread(run, budget=40) as s, s.client() as c:
        item = answer(c, "lab")
        file = tmp_path / "later.csv"
        file.write_text("annotator,item,label\n" + "".join(f"lab,{q['item']},No\n" for q in item["questions"]))
        assert import_labels(s.app.queue, s.app.labels, file) == (1, 0)
        before = c.get("/api/estimate").json()
        assert c.post("/api/undo", json={"annotator": "lab"}).json() == {
            "undone": item["cluster"], "earlier_stands": False, "stands": "later", "answers": {}}
        assert c.get("/api/estimate").json() == before
        assert {r.label for r in s.app.labels.rows() if r.cluster == item["cluster"]} == {"No"}
        # an import of part of a story: the undo takes back the rest, says so, and offers only those answers
        # again (the page preselected the undone Yes over the standing imported No: helper-112)
        part = answer(c, "lab")
        file.write_text(f"annotator,item,label\nlab,{part['questions'][0]['item']},No\n")
        assert import_labels(s.app.queue, s.app.labels, file) == (1, 0)
        assert c.post("/api/undo", json={"annotator": "lab"}).json() == {
            "undone": part["cluster"], "earlier_stands": False, "stands": None,
            "answers": {q["item"]: "Yes" for q in part["questions"][1:]}}


def test_an_annotator_holds_one_story_at_a_time(run):
    """After an undo the page shows the undone story again; the story it showed before is free for
    the others at once (it stayed locked for the lock's 600 s, with one annotator per story). The
    undone story is theirs from the undo on: another annotator asking between the undo and their
    page's /api/next was handed it, while the page said it came back (helper-112)."""
    with InThread(run, budget=40) as s, s.client() as c:
        first = answer(c, "x")
        held = c.get("/api/next", params={"annotator": "x"}).json()["cluster"]
        assert c.post("/api/undo", json={"annotator": "x"}).json()["undone"] == first["cluster"]
        assert c.get("/api/next", params={"annotator": "y"}).json()["cluster"] == held     # before x's page asks
        assert c.get("/api/next", params={"annotator": "x"}).json()["cluster"] == first["cluster"]
        assert c.get("/api/next", params={"annotator": "z"}).json()["cluster"] not in (held, first["cluster"])
        # an undone skip alike; an undo whose earlier answer stands shows nothing again and locks nothing
        skipped = c.get("/api/next", params={"annotator": "w"}).json()["cluster"]
        assert c.post("/api/skip", json={"annotator": "w", "cluster": skipped, "key": key()}).json()["stored"]
        assert c.post("/api/undo", json={"annotator": "w"}).json()["undone"] == skipped
        assert skipped not in {c.get("/api/next", params={"annotator": a}).json()["cluster"] for a in ("v", "u")}
        assert c.get("/api/next", params={"annotator": "w"}).json()["cluster"] == skipped


def test_an_undone_skip_of_a_story_others_took_since_is_not_handed_back(run):
    """helper-114: the undo's lock went on a skipped story whatever had become of it, so another
    annotator's answer (or live lock) and the undoer's both stood under --per-item 1."""
    with InThread(run, budget=40) as s, s.client() as c:
        for other_answers in (True, False):
            x = c.get("/api/next", params={"annotator": "ann"}).json()["cluster"]
            assert c.post("/api/skip", json={"annotator": "ann", "cluster": x, "key": key()}).json()["stored"]
            if other_answers:
                assert answer(c, "bob")["cluster"] == x
            else:
                assert c.get("/api/next", params={"annotator": "cid"}).json()["cluster"] == x      # cid holds it
            assert c.post("/api/undo", json={"annotator": "ann"}).json()["undone"] == x
            assert c.get("/api/next", params={"annotator": "ann"}).json()["cluster"] != x
            items = next(cl for cl in s.app.queue.clusters if cl.cluster == x).questions
            r = c.post("/api/label", json={"annotator": "ann", "cluster": x, "key": key(),
                                           "labels": {q.item: "Yes" for q in items}})
            assert r.status_code == 409, r.text
        assert all(len({r["annotator"] for r in map(json.loads, c.get("/api/export.jsonl").text.splitlines())
                        if r["cluster"] == x}) <= 1 for x in {cl.cluster for cl in s.app.queue.clusters})


def test_a_refused_first_import_starts_no_queue(run, tmp_path):
    """A file refused whole (a label that is no answer) left the queue started with the default
    budget, so the next --budget was refused too: a refused first import leaves no store."""
    item = first_drawn(run).questions[0].item
    bad = tmp_path / "bad.csv"
    bad.write_text(f"annotator,item,label\nlab,{item},Maybe\n")
    r = litjudge("annotate", str(run), "--import", str(bad))
    assert r.returncode == 2 and "label 'Maybe' is not an answer" in r.stderr, r.stderr
    assert not list(run.glob("annotations.sqlite*"))
    bad.write_text(f"annotator,item,label\nlab,{item},Yes\n")
    r = litjudge("annotate", str(run), "--budget", "40", "--import", str(bad))
    assert r.returncode == 0 and "1 submissions stored" in r.stdout, r.stderr


def test_an_export_that_starts_a_queue_is_drawn_with_its_settings_or_refused(run, tmp_path):
    """A new user's pass: an export imported into a copy of the run without its queue started the
    queue silently with the default budget (its own --budget refused from then on). The import now
    says which settings it starts the queue with, and an export whose stories this queue would draw
    elsewhere (another --seed here) is refused whole in one line, leaving no store."""
    import shutil

    with InThread(run, budget=40) as s, s.client() as c:
        answer(c, "erin")
    out = tmp_path / "labels.csv"
    assert litjudge("annotate", str(run), "--export", str(out)).returncode == 0
    copy = tmp_path / "copy"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("annotations.sqlite*"))
    r = litjudge("annotate", str(copy), "--seed", "7", "--import", str(out))
    assert r.returncode == 2 and "by the queue this file comes from" in r.stderr and "--seed it had" in r.stderr, r.stderr
    # the draws read as positions, and the budget the file implies (the export holds no settings: helper-113)
    assert "was drawn at draw 0, 23, 29 by the queue this file comes from, and by this queue at draw " in r.stderr
    assert "with the --budget (at least 30: the file's draws reach draw 29, counted from 0), --floor and --seed it " \
        "had" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not list(copy.glob("annotations.sqlite*"))
    r = litjudge("annotate", str(copy), "--budget", "40", "--import", str(out))
    assert r.returncode == 0 and "Started the annotation queue" in r.stdout, r.stderr
    assert "--budget 40 --floor 0.2 --seed 0 (fixed from now on" in r.stdout
    assert "1 submissions stored" in r.stdout


def test_an_export_drawn_with_another_floor_starts_no_queue(tmp_path):
    """A hostile pass: another --floor barely moves a queue's draw positions, so an export imported
    with one started the queue at settings its own never had. The rows' draw probabilities show it
    (a pairwise queue, drawn by its judge's P(text): unequal probabilities)."""
    import shutil

    from tests.annotate_run import pairwise_run, with_p_text

    run = with_p_text(pairwise_run(tmp_path / "p"))
    assert len(set(build_queue(run, 20).design.probability.round(9).tolist())) > 1
    with InThread(run, budget=20) as s, s.client() as c:
        item = c.get("/api/next", params={"annotator": "erin"}).json()
        c.post("/api/label", json={"annotator": "erin", "cluster": item["cluster"], "key": key(),
                                   "labels": {item["cluster"]: "a"}, "shown": item["shown"]}).raise_for_status()
    out = tmp_path / "labels.jsonl"
    assert litjudge("annotate", str(run), "--export", str(out)).returncode == 0
    copy = tmp_path / "copy"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("annotations.sqlite*"))
    r = litjudge("annotate", str(copy), "--budget", "20", "--floor", "0.9", "--import", str(out))
    assert r.returncode == 2 and "--floor and --seed it had" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not list(copy.glob("annotations.sqlite*"))
    r = litjudge("annotate", str(copy), "--budget", "20", "--import", str(out))
    assert r.returncode == 0 and "1 submissions stored" in r.stdout, r.stderr
