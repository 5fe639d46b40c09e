"""`[ppi] labelled = "annotations:RUN"` (issue 55): a later run takes its human labels from the
annotation queue of RUN, each item the majority of its annotators, for exactly the annotated
items, and estimates with the queue's draw probabilities (the active estimator), not the uniform
PPI++ formula. End to end on replayed runs: the later run's `ppi` table, for the same judge,
equals the estimate the annotation page showed; a store of another dataset or protocol, an
answer outside the protocol's, an empty store and no store are refused in one line."""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import uuid

import polars as pl
import pytest

from litjudge.engine.app.annotate.annotations import majority
from litjudge.engine.app.annotate.queue_store import Options, open_queue
from litjudge.engine.app.run import prepare
from litjudge.engine.core.config import load_config
from litjudge.engine.core.errors import ConfigError
from tests.annotate_run import InThread, pairwise_run, ttcw_run
from tests.conftest import litjudge


def config(folder, name: str, ppi: str = "") -> str:
    """A one-judge config over the dataset of `ttcw_run(folder)` (its judge "one"), optionally with [ppi]."""
    text = re.sub(r'judge = \[.*\]', f'judge = "replay:{folder / "one.jsonl"}"', (folder / "r.toml").read_text())
    path = folder / f"{name}.toml"
    path.write_text(text.replace('name = "r"', f'name = "{name}"') + (f'[ppi]\nlabelled = "{ppi}"\n' if ppi else ""))
    return str(path)


def run(folder, name: str, ppi: str = ""):
    return litjudge("run", config(folder, name, ppi), "--quiet", env={"LITJUDGE_RUNS_DIR": str(folder / "runs")})


def answer(who: str, item: str) -> str:
    return "Yes" if int(hashlib.sha256(f"{who}|{item}".encode()).hexdigest(), 16) % 5 < 2 else "No"


@pytest.fixture(scope="module")
def annotated(tmp_path_factory):
    """A one-judge TTCW run annotated through the page, two annotators a story (they disagree on some
    items: ties), and the estimate the page showed."""
    folder = tmp_path_factory.mktemp("ppi-annotations")
    ttcw_run(folder, tests=4)
    assert run(folder, "a").returncode == 0
    with InThread(folder / "runs" / "a", budget=30, per_item=2) as s, s.client() as c:
        while True:
            items = {who: c.get("/api/next", params={"annotator": who}).json() for who in ("ann", "bob")}
            if all(i["done"] for i in items.values()):
                break
            for who, item in items.items():
                if not item["done"]:
                    c.post("/api/label", json={"annotator": who, "cluster": item["cluster"], "key": uuid.uuid4().hex,
                                               "labels": {q["item"]: answer(who, q["item"]) for q in item["questions"]}
                                               }).raise_for_status()
        page = c.get("/api/estimate").json()
    return folder, page


def test_a_later_run_uses_the_annotations_with_the_queues_draw_probabilities(annotated):
    folder, page = annotated
    r = run(folder, "b", "annotations:runs/a")
    assert r.returncode == 0, r.stderr[-3000:]
    out = folder / "runs" / "b"
    table = pl.read_parquet(out / "tables" / "ppi.parquet")
    pooled = table.filter((pl.col("view") == "all") & (pl.col("test") == "all")).row(0, named=True)
    assert page["labelled_draws"] == 30 and page["active"]["low"] is not None
    assert set(table["quantity"]) == {"annotators' pass rate"}          # not the experts': the queue's people
    # the same judge as the annotated run's: the table is the page's estimate (the active estimator;
    # two annotators an item, so the majority with a tie at 0.5 is their mean, as on the page)
    for column, (name, field) in {"ppi": ("active", "value"), "ppi_low": ("active", "low"),
                                  "ppi_high": ("active", "high"), "lambda": ("active", "lam"),
                                  "human_only": ("human", "value"), "human_low": ("human", "low"),
                                  "human_high": ("human", "high")}.items():
        assert abs(pooled[column] - page[name][field]) <= 1e-9, (column, pooled[column], page[name][field])
    assert pooled["clusters"] == page["active"]["clusters_read"] and pooled["all_labels"] is not None
    chosen = pl.read_parquet(out / "tables" / "ppi_labelled.parquet")["story_id"].to_list()
    assert len(chosen) == pooled["clusters"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["ppi"]["labelled"] == "annotations:runs/a" and "annotated items" in manifest["ppi"]["choice"]
    # per test: estimates too, from the same draws
    assert table.filter(pl.col("test") != "all").height == 4 and table["ppi_low"].null_count() == 0


def test_majority_of_annotators_and_a_tie():
    assert majority([1.0, 1.0, 0.0]) == 1.0 and majority([0.0, 0.0, 1.0]) == 0.0
    assert majority([1.0, 0.0]) == 0.5 and majority([1.0]) == 1.0


def refused(path: str) -> str:
    with pytest.raises(ConfigError) as e:
        prepare(load_config(path))
    assert "\n" not in str(e.value), str(e.value)
    return str(e.value)


def test_a_bad_store_is_refused_in_one_line(annotated, tmp_path):
    folder, _ = annotated
    bare = shutil.copytree(folder / "runs" / "a", tmp_path / "bare", ignore=shutil.ignore_patterns("annotations.sqlite*"))
    assert "no annotation store in" in refused(config(folder, "c1", f"annotations:{bare}"))
    queue, labels = open_queue(bare, Options(budget=30))                 # a started queue, no label yet
    labels.close()
    assert "holds no label yet" in refused(config(folder, "c2", f"annotations:{bare}"))
    queue, labels = open_queue(bare, Options())
    cluster = queue.clusters[int(queue.design.draws[0])]
    labels.submit("k" * 12, "eve", cluster.cluster, {q.item: "Maybe" for q in cluster.questions}, source="import")
    labels.close()
    assert "with 'Maybe', not an answer of protocol ttcw (Yes, No)" in refused(config(folder, "c3", f"annotations:{bare}"))
    pairs = pairwise_run(tmp_path / "pw")
    queue, labels = open_queue(pairs, Options(budget=10))
    labels.close()
    assert "are of a pairwise run; this run's protocol is ttcw" in refused(config(folder, "c4", f"annotations:{pairs}"))


def test_a_store_of_another_dataset_is_refused_in_one_line(annotated, tmp_path):
    folder, _ = annotated
    other = ttcw_run(tmp_path / "other", tests=4, prefix="t")               # stories t00, t01, ...
    with InThread(other, budget=10) as s, s.client() as c:
        item = c.get("/api/next", params={"annotator": "ann"}).json()
        c.post("/api/label", json={"annotator": "ann", "cluster": item["cluster"], "key": uuid.uuid4().hex,
                                   "labels": {q["item"]: "Yes" for q in item["questions"]}}).raise_for_status()
    r = run(folder, "d", f"annotations:{other}")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    line = [x for x in r.stderr.splitlines() if "annotations of" in x]
    assert len(line) == 1 and "of which this run does not judge (e.g. 't00_GPT4')" in line[0], r.stderr


def test_a_view_beyond_the_queue_says_so_and_its_all_labels_is_the_queues_population():
    """A later run judging stories the queue never drew (its `all` view: 48 stories; the queue: the
    36 judgeable) printed estimates of the 36 beside an all_labels of the 48 (0.339 against 0.149)."""
    from litjudge.judges.ppi_annotated import Annotated
    from litjudge.judges.ppi_tables import _annotated
    stories = [f"s{i}" for i in range(12)]
    queue = stories[:10]
    rows = [{"view": "all", "judge": "j", "test": t, "story_id": s, "item_id": f"{s}/{tt}", "_f": 0.5,
             "_y": None, "_h": float(s in queue), "_lab": False}
            for s in stories for tt in ("1", "2") for t in (tt, "all")]
    items = pl.DataFrame(rows, schema_overrides={"_y": pl.Float64})
    human = {f"{s}/{t}": 1.0 for s in queue for t in ("1", "2")}
    items = items.with_columns(pl.col("item_id").replace_strict(human, default=None, return_dtype=pl.Float64).alias("_y"))
    annotated = Annotated("runs/a", "ttcw", tuple(queue), tuple([0.1] * 10), tuple(range(10)), human)
    table, _ = _annotated(items, annotated, "test", "story_id", "item_id", "rate")
    pooled = table.filter(pl.col("test") == "all").row(0, named=True)
    assert pooled["all_labels"] == 1.0                     # the queue's 10 stories, not 10 of 12
    assert pooled["ci_note"].endswith("over the annotation queue's 10 clusters, not this view's 2 others (the queue "
                                      "never drew them)")


def test_a_queue_that_left_out_unanswered_tests_is_read_whole_by_a_later_run(tmp_path):
    """An audit: where the annotated run's judge left a test of a story unanswered, the queue does
    not ask it, but the later run kept its row; the story never counted as labelled, so the table
    read 1 draw of 30 (0.071, no interval, where the page showed 0.199 from all 30). The later run
    now reads the items the queue asked: the page's estimate, with a note of what it left out."""
    ttcw_run(tmp_path, tests=4)
    one = tmp_path / "one.jsonl"
    kept = [line for line in one.read_text().splitlines() if not re.search(r'"story_s0[01]_GPT4_test4"', line)]
    assert len(kept) == len(one.read_text().splitlines()) - 2
    one.write_text("\n".join(kept) + "\n")
    assert run(tmp_path, "a").returncode == 0
    with InThread(tmp_path / "runs" / "a", budget=20) as s, s.client() as c:
        while not (item := c.get("/api/next", params={"annotator": "ann"}).json())["done"]:
            assert all(not q["item"].endswith(("s00_GPT4_test4", "s01_GPT4_test4")) for q in item["questions"])
            c.post("/api/label", json={"annotator": "ann", "cluster": item["cluster"], "key": uuid.uuid4().hex,
                                       "labels": {q["item"]: answer("ann", q["item"]) for q in item["questions"]}
                                       }).raise_for_status()
        page = c.get("/api/estimate").json()
    r = run(tmp_path, "b", "annotations:runs/a")
    assert r.returncode == 0, r.stderr[-3000:]
    pooled = pl.read_parquet(tmp_path / "runs" / "b" / "tables" / "ppi.parquet").filter(
        (pl.col("view") == "all") & (pl.col("test") == "all")).row(0, named=True)
    assert page["labelled_draws"] == 20 and pooled["clusters"] == page["active"]["clusters_read"]
    for column, (name, field) in {"ppi": ("active", "value"), "ppi_low": ("active", "low"),
                                  "human_only": ("human", "value"), "human_high": ("human", "high")}.items():
        assert abs(pooled[column] - page[name][field]) <= 1e-9, (column, pooled[column], page[name][field])
    assert "without 2 items of the queue's clusters that it did not ask" in pooled["ci_note"], pooled["ci_note"]


def test_labels_past_a_draw_not_labelled_whole_are_held_back_and_said(annotated, tmp_path):
    """A new user labelled draw 18 of a queue whose draw 16 nobody had finished: the later run's
    table silently read 12 stories, not 13. The design reads no draw past the first not labelled
    whole, so the held-back labels stay out; the run now warns, naming one of them and the draw to
    label, and every row's ci_note says the same (each test's estimate reads the same draws)."""
    import sqlite3

    folder, page = annotated
    copy = shutil.copytree(folder / "runs" / "a", tmp_path / "a")
    queue, labels = open_queue(copy, Options())
    labels.close()
    draws = [queue.clusters[int(c)].cluster for c in queue.design.draws]
    gap = draws[4]
    later = sorted(set(draws[5:]) - set(draws[:5]))
    assert later, "the fixture's queue reads clusters after its fifth draw"
    with sqlite3.connect(copy / "annotations.sqlite") as db:
        db.execute("UPDATE submissions SET undone = 1 WHERE cluster = ?", (gap,))
    r = run(folder, "held", f"annotations:{copy}")
    assert r.returncode == 0, r.stderr[-3000:]
    said = [line for line in (r.stdout + r.stderr).splitlines() if "not read" in line]
    assert len(said) == 1 and f"{len(later)} labelled clusters (e.g. {later[0]!r}) not read" in said[0], said
    assert f"up to draw 5 ({gap!r}), the first not labelled whole; label it to read them" in said[0], said
    table = pl.read_parquet(folder / "runs" / "held" / "tables" / "ppi.parquet")
    pooled = table.filter((pl.col("view") == "all") & (pl.col("test") == "all")).row(0, named=True)
    assert pooled["clusters"] == len(set(draws[:4])) and "not read" in pooled["ci_note"], pooled
    assert table["ci_note"].fill_null("").str.contains(f"up to draw 5 ({gap!r})", literal=True).all()
