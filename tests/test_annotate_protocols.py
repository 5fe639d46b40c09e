"""The annotation page's rubric, listwise and pairwise-with-ties queues over HTTP (a real uvicorn
server in a thread, replayed runs in a temporary folder): what each cluster shows and takes, the
answers accepted, an answer outside the question's scale refused in one line, the order of two
texts random and recorded, and the live estimate on the quantity's own scale equal to a
recomputation from the export."""
import json
import uuid

import numpy as np
import polars as pl
import pytest

from litjudge.engine.app.annotate.estimate import estimates
from litjudge.engine.app.annotate.queue import build_queue, tie_credit
from litjudge.engine.core.errors import ConfigError
from litjudge.judges.metrics import active
from tests.annotate_run import POINTS, InThread, fresh, judged, listwise_run, pairwise_run, rubric_run, with_p_text
from tests.test_cli_probe import cli, pairs_run


@pytest.fixture(scope="module")
def rubric(tmp_path_factory):
    return rubric_run(tmp_path_factory.mktemp("rb"), pairwise=True)


@pytest.fixture(scope="module")
def points_first(tmp_path_factory):
    return rubric_run(tmp_path_factory.mktemp("rbp"), first="points")


def post(c, item, labels, shown=None, annotator="ann"):
    return c.post("/api/label", json={"annotator": annotator, "cluster": item["cluster"], "labels": labels,
                                      "key": uuid.uuid4().hex, "shown": item["shown"] if shown is None else shown})


def one_line_400(r, start):
    assert r.status_code == 400 and r.text.startswith(start) and r.text.count("\n") == 1, r.text


def until_pair(c, annotator="ann", pair=True):
    """The next cluster of the kind asked for (a pair or a text), skipping the others."""
    for _ in range(80):
        item = c.get("/api/next", params={"annotator": annotator}).json()
        if (len(item["texts"]) == 2) == pair:
            return item
        c.post("/api/skip", json={"annotator": annotator, "cluster": item["cluster"], "key": uuid.uuid4().hex})
    raise AssertionError("no such cluster drawn")


def test_a_rubric_text_shows_every_question_on_its_scale_and_refuses_another(rubric, tmp_path):
    run = fresh(rubric, tmp_path)
    q = build_queue(run, 40)
    assert q.protocol == "rubric" and q.quantity == "natural: share Yes" and q.bounds == (0.0, 1.0)
    assert q.uncertainty_source == "the vote share across the run's judges"
    texts = [c for c in q.clusters if len(c.texts) == 1]
    pairs = [c for c in q.clusters if len(c.texts) == 2]
    assert len(texts) == 24 and len(pairs) == 6 * 6                # 6 groups of 4 texts: 6 pairs each
    # the first question is the headline: one item per text, none per pair (asked, stored, not estimated)
    assert q.size.tolist() == [1.0 if len(c.texts) == 1 else 0.0 for c in q.clusters]
    assert all(q.uncertainty[i] == 0 for i, c in enumerate(q.clusters) if len(c.texts) == 2)
    with InThread(run, budget=40) as s, s.client() as c:
        assert "first question (natural)" in c.get("/api/info").json()["instructions"]
        item = until_pair(c, pair=False)
        assert item["shown"] == "" and [x["item"] for x in item["questions"]] == [f"{item['cluster']}/natural",
                                                                                 f"{item['cluster']}/vivid"]
        natural, vivid = item["questions"]
        assert [(a["value"], a["key"]) for a in natural["answers"]] == [("Yes", "y"), ("No", "n")]
        assert [a["caption"] for a in vivid["answers"]] == [f"{k}: {p}" for k, p in enumerate(POINTS, 1)]
        assert [a["key"] for a in vivid["answers"]] == list("12345")
        good = {natural["item"]: "Yes", vivid["item"]: "4"}
        one_line_400(post(c, item, {**good, vivid["item"]: "6"}), "labels: '6' is not an answer of this protocol "
                                                                  "(1, 2, 3, 4, 5)")
        one_line_400(post(c, item, {**good, natural["item"]: "4"}), "labels: '4' is not an answer of this protocol "
                                                                    "(Yes, No)")
        one_line_400(post(c, item, good, shown="ab"), "shown: the order the texts were shown in")
        assert post(c, item, good).json() == {"stored": True, "duplicate": False}
        rows = [json.loads(x) for x in c.get("/api/export.jsonl").text.splitlines()]
    assert {(r["item"], r["label"]) for r in rows} == set(good.items())


def test_a_rubric_pair_in_a_random_recorded_order_with_a_tie(rubric, tmp_path):
    run = fresh(rubric, tmp_path)
    with InThread(run, budget=200) as s, s.client() as c:
        seen: set[str] = set()
        for i in range(24):                            # until both orders were drawn, eight pairs at least
            if i >= 8 and len(seen) == 2:              # (the order is drawn per person and pair from the seed)
                break
            item = until_pair(c)
            assert item["shown"] in ("ab", "ba") and [t["id"] for t in item["texts"]] == list(item["shown"])
            (surprise,) = item["questions"]
            assert [(a["value"], a["key"], a["caption"]) for a in surprise["answers"]] == [
                (item["shown"][0], "1", "First text"), (item["shown"][1], "2", "Second text"), ("tie", "t", "Tie")]
            one_line_400(post(c, item, {surprise["item"]: "Yes"}), "labels: 'Yes' is not an answer of this protocol "
                                                                     "(a, b, tie)")
            one_line_400(post(c, item, {surprise["item"]: "a"}, shown=""), "shown:")
            # a hostile pass: the other order was stored, and exported as the order it was shown in
            other = "ba" if item["shown"] == "ab" else "ab"
            one_line_400(post(c, item, {surprise["item"]: "a"}, shown=other),
                         f"shown: this pair was shown to 'ann' as '{item['shown']}' (/api/next), not '{other}'")
            assert post(c, item, {surprise["item"]: ["a", "tie"][i % 2]}).json()["stored"]
            seen.add(item["shown"])
        rows = [json.loads(x) for x in c.get("/api/export.jsonl").text.splitlines()]
    assert seen == {"ab", "ba"} and {r["shown"] for r in rows} == seen and {r["label"] for r in rows} == {"a", "tie"}


def test_a_points_headline_is_estimated_on_its_scale(points_first, tmp_path):
    run = fresh(points_first, tmp_path)
    q = build_queue(run, 30)
    assert q.quantity == "vivid: mean score (1-5)" and q.bounds == (1.0, 5.0)
    # the judges' total: the mean of the two judges' points on each text
    k = int(q.clusters[0].cluster[1:])
    assert q.judge_total[0] == pytest.approx(np.mean([1 + (k * 2 + b) % 5 for b in (0, 1)]))
    drawn = list(dict.fromkeys(q.design.draws.tolist()))
    with InThread(run, budget=30) as s, s.client() as c:
        for _ in drawn:
            item = c.get("/api/next", params={"annotator": "ann"}).json()
            k = int(item["cluster"][1:])
            assert post(c, item, {x["item"]: (str(1 + (k * 3) % 5) if x["item"].endswith("vivid") else "No")
                                  for x in item["questions"]}).json()["stored"]
        page = c.get("/api/estimate").json()
        exported = [json.loads(x) for x in c.get("/api/export.jsonl").text.splitlines()]
    assert page.pop("stale") is None                          # the server's own: the verdicts as it started
    assert page["labelled_draws"] == 30 and page["bounds"] == [1.0, 5.0] and estimates(q, exported) == page
    human = {q.index(r["cluster"]): float(r["label"]) for r in exported if r["item"].endswith("/vivid")}
    e = active.estimate(q.design, q.judge_total, q.size, human, 30, bounds=(1.0, 5.0))
    assert 1.0 < page["active"]["value"] == pytest.approx(e.value) and page["active"]["high"] <= 5.0
    # the estimator is not a 0/1 one: on points rescaled to [0, 1] it gives the same estimate, rescaled
    unit = active.estimate(q.design, (q.judge_total - q.size) / 4, q.size, {c_: (y - 1) / 4 for c_, y in human.items()},
                           30)
    for field in ("value", "low", "high"):
        assert getattr(e, field) == pytest.approx(1 + 4 * getattr(unit, field), abs=1e-9), field
    assert e.half_width == pytest.approx(4 * unit.half_width) and e.lam == pytest.approx(unit.lam)


def test_annotators_agreement_is_on_the_estimates_question_alone(points_first, tmp_path):
    """Two annotators of every text, agreeing on each vivid point and never on the yes/no question
    after it: the page's alpha is the headline's (perfect, over its items), where it pooled both
    questions' unlike labels into one (a new user's try)."""
    from litjudge.judges.metrics.agreement import krippendorff_alpha

    run = fresh(points_first, tmp_path)
    with InThread(run, budget=6, per_item=2) as s, s.client() as c:
        for who in ("ann", "bob"):
            while not (item := c.get("/api/next", params={"annotator": who}).json())["done"]:
                k = int(item["cluster"][1:])
                post(c, item, {x["item"]: (str(1 + k % 5) if x["item"].endswith("vivid") else
                                           "Yes" if who == "ann" else "No") for x in item["questions"]},
                     annotator=who).raise_for_status()
        agreement = c.get("/api/estimate").json()["agreement"]
        texts = {json.loads(x)["cluster"] for x in c.get("/api/export.jsonl").text.splitlines()}
    assert len(texts) > 2 and agreement == {"krippendorff_alpha": 1.0, "items": len(texts), "level": "nominal",
                                            "low": None, "high": None, "clusters": len(texts),
                                            "note": "fewer than 10 units answered by two or more: no interval"}
    pooled = [["Yes", "No"]] * len(texts) + [[str(1 + int(t[1:]) % 5)] * 2 for t in texts]
    assert krippendorff_alpha(pooled).value < 0.5           # what it printed, both questions pooled


@pytest.mark.parametrize("column, said", [("distribution", ""), ("analysis_distribution", " read after their analysis")])
def test_a_rubric_reads_the_judges_distribution_over_the_points(points_first, tmp_path, column, said):
    """Distribution mode's P(label), or analyze mode's read after the analysis: the same reading."""
    run = fresh(points_first, tmp_path)
    v = pl.read_parquet(run / "verdicts.parquet")
    p = [{"1": 0.1, "2": 0.2, "3": 0.4, "4": 0.2, "5": 0.1} if q == "vivid" else {"Yes": 0.7, "No": 0.3}
         for q in v["question"]]
    v.with_columns(pl.Series(column, p)).write_parquet(run / "verdicts.parquet")
    q = build_queue(run, 30)
    assert q.uncertainty_source == "the judges' P(label)" + said
    assert q.judge_total == pytest.approx(np.full(len(q.clusters), 3.0))
    assert q.uncertainty == pytest.approx(np.full(len(q.clusters), np.sqrt(0.1 * 4 + 0.2 * 1 + 0 + 0.2 * 1 + 0.1 * 4)))


def test_a_pairwise_queue_draws_by_p_text_and_those_stored_before_reopen_as_they_were_drawn(tmp_path):
    """A pair's uncertainty is read from its verdicts' P(text) over both orders where stored (here
    after an analysis; P(A) of order ba is text b's): pair i P(text a) 0.9 or 0.5, so sqrt(p (1 - p))
    0.3 or 0.5, where the picks say 0 for the pairs both orders agree on. A queue stored before it
    read P(text) (its design has no `pairs_by`) reopens as it was drawn, by the picks; one stored before
    it drew by the agreement with the decision, by the answer's spread."""
    import hashlib

    from litjudge.engine.app.annotate.labels import open_labels, stored_design
    from litjudge.engine.app.annotate.queue_store import Options, open_queue

    run = pairwise_run(tmp_path / "pw")
    v = pl.read_parquet(run / "verdicts.parquet")
    even = v["pair_id"].str.slice(1).cast(pl.Int64) % 2 == 0
    p_a = pl.when(even).then(pl.when(pl.col("order") == "ab").then(0.9).otherwise(0.1)).otherwise(0.6)
    v = v.with_columns(pl.struct(p_a.alias("A"), (1 - p_a).alias("B")).alias("analysis_distribution"))
    v.write_parquet(run / "verdicts.parquet")
    new, old = build_queue(run, 20), build_queue(run, 20, pairs_by="picks")
    scored = build_queue(run, 20, pairs_by="probability")
    assert new.uncertainty_source == "the judges' P(text) over both orders read after their analysis"
    # the picks of the two orders split on pairs i % 3 != 0: the judges' decision is a tie, which a
    # person's a or b agrees with by half either way, so those pairs' agreement has no spread
    assert new.uncertainty == pytest.approx([0.0 if int(c.cluster[1:]) % 3 else 0.3 if int(c.cluster[1:]) % 2 == 0
                                             else 0.5 for c in new.clusters])
    assert scored.uncertainty == pytest.approx([0.3 if int(c.cluster[1:]) % 2 == 0 else 0.5 for c in new.clusters])
    assert old.uncertainty_source == "the disagreement between the two orders"
    assert old.uncertainty == pytest.approx([0.0 if int(c.cluster[1:]) % 3 == 0 else 0.5 for c in old.clusters])
    ids = "\n".join(c.cluster for c in old.clusters)
    open_labels(run, (c.cluster for c in old.clusters), old.design.probability, old.design.draws,
                {"budget": 20, "floor": 0.2, "seed": 0, "protocol": "pairwise", "floor_by": "size",
                 "clusters": hashlib.sha256(ids.encode()).hexdigest()[:16]}).close()   # as the store was written
    q, labels = open_queue(run, Options())
    labels.close()
    assert np.array_equal(q.design.draws, old.design.draws) and "pairs_by" not in stored_design(run)
    again = fresh(run, tmp_path / "new")
    (again / "annotations.sqlite").unlink()
    q, labels = open_queue(again, Options(budget=20))
    labels.close()
    assert stored_design(again)["pairs_by"] == "agreement"
    assert np.allclose(q.design.probability, new.design.probability)
    # a queue stored between the two (its design says "probability") reopens as it was drawn
    (again / "annotations.sqlite").unlink()
    open_labels(again, (c.cluster for c in scored.clusters), scored.design.probability, scored.design.draws,
                {"budget": 20, "floor": 0.2, "seed": 0, "protocol": "pairwise", "floor_by": "size",
                 "pairs_by": "probability", "clusters": hashlib.sha256(ids.encode()).hexdigest()[:16]}).close()
    q, labels = open_queue(again, Options())
    labels.close()
    assert np.array_equal(q.design.draws, scored.design.draws) and stored_design(again)["pairs_by"] == "probability"


def test_a_categorical_question_offers_its_categories_and_cannot_be_the_headline(tmp_path):
    """A categorical question is asked with its categories (keys 1, 2, 3), and no other answer is
    taken; it was offered as 'Text a / Text b'. First, where the page estimates its mean, it is
    refused in one line: categories have no number (its headline read 'win rate of text a')."""
    from tests.annotate_run import GENRES

    run = rubric_run(tmp_path / "rb", texts=8, genre=True)
    with InThread(run, budget=8) as s, s.client() as c:
        item = c.get("/api/next", params={"annotator": "ann"}).json()
        genre = next(q for q in item["questions"] if q["item"].endswith("/genre"))
        assert [(a["value"], a["caption"], a["key"]) for a in genre["answers"]] == \
            [(g, g, str(k)) for k, g in enumerate(GENRES, start=1)]
        labels = {q["item"]: q["answers"][0]["value"] for q in item["questions"]}
        one_line_400(post(c, item, {**labels, genre["item"]: "a"}), "labels: 'a' is not an answer of this protocol ")
        assert post(c, item, {**labels, genre["item"]: " Science FICTION"}).status_code == 200     # as the run reads it
    from litjudge.engine.app.annotate.export import records
    from litjudge.engine.app.annotate.queue_store import Options, open_queue

    queue, stored = open_queue(run, Options())
    exported = {r["item"]: (r["score"], r["label"]) for r in records(queue, stored)}
    stored.close()
    assert exported[genre["item"]] == (None, GENRES[2]) and len(exported) == len(labels)   # a category has no number
    with pytest.raises(ConfigError, match=r"^the annotation page estimates the first question's mean, and 'genre' is "
                                          r"categorical: its answers have no number\. Put a binary, points or pairwise"):
        build_queue(rubric_run(tmp_path / "first", texts=8, first="genre"), 8)


def test_a_listwise_item_takes_the_datas_categories(tmp_path):
    run = listwise_run(tmp_path / "lw")
    q = build_queue(run, 20)
    assert q.protocol == "listwise" and q.quantity == "mean category rank (1 = Bad ... 3 = Good)"
    assert q.bounds == (1.0, 3.0) and len(q.clusters) == 24 and q.size.tolist() == [1.0] * 24
    assert ((q.judge_total >= 1) & (q.judge_total <= 3)).all()
    with InThread(run, budget=20) as s, s.client() as c:
        item = c.get("/api/next", params={"annotator": "ann"}).json()
        (question,) = item["questions"]
        assert [(a["value"], a["key"]) for a in question["answers"]] == [("Bad", "1"), ("Medium", "2"), ("Good", "3")]
        assert item["texts"][0]["heading"].startswith("Use of g") and item["shown"] == ""
        one_line_400(post(c, item, {question["item"]: "Great"}), "labels: 'Great' is not an answer of this protocol "
                                                                 "(Bad, Medium, Good)")
        assert post(c, item, {question["item"]: "Good"}).json()["stored"]
        est = c.get("/api/estimate").json()
    assert est["quantity"] == q.quantity and est["clusters_labelled"] == 1
    assert q.score(item["cluster"], "Good", question["item"]) == 3.0


def test_a_listwise_item_without_categories_is_scored_on_the_judges_scale(tmp_path):
    q = build_queue(listwise_run(tmp_path / "lw", groups=2, categories=False), 10)
    assert q.quantity == "mean score (1-5)" and q.bounds == (1.0, 5.0)
    assert [a.key for a in q.clusters[0].questions[0].answers] == list("12345")


def test_a_pairwise_queue_of_several_judges_says_it_reads_all_of_their_verdicts(tmp_path):
    """Three judges' six verdicts per pair give its uncertainty; the line said "the disagreement
    between the two orders" as if one judge's (helper-113)."""
    from tests.annotate_run import judged

    run = pairwise_run(tmp_path / "pw")
    folder = tmp_path / "pw"
    lines = (folder / "answers.jsonl").read_text().splitlines()
    for j in (1, 2):        # the others answer B where the first answered A on every j-th line
        (folder / f"answers{j}.jsonl").write_text("".join(
            (x.replace('"A"', '"B"') if n % (j + 1) == 0 else x) + "\n" for n, x in enumerate(lines)))
    cfg = folder / "three.toml"
    cfg.write_text((folder / "p.toml").read_text().replace('name = "p"', 'name = "three"').replace(
        f'judge = "replay:{folder / "answers.jsonl"}"',
        "judge = [" + ", ".join(f'"replay:{folder / n}"' for n in ("answers.jsonl", "answers1.jsonl", "answers2.jsonl"))
        + "]"))
    assert build_queue(run, 12).uncertainty_source.startswith("the disagreement between the two orders -")
    q = build_queue(judged(cfg), 12)
    assert q.uncertainty_source.startswith("the disagreement among the 3 judges' verdicts in both orders"), \
        q.uncertainty_source


def test_a_pairwise_tie_is_answered_and_counted_half(tmp_path):
    run = pairwise_run(tmp_path / "pw", tie=True)
    q = build_queue(run, 20)
    assert q.quantity == "judge accuracy (a tie half)" and q.decision["p04"] == "tie"
    assert [tie_credit(x, "a") for x in ("a", "b", "tie")] == [1.0, 0.0, 0.5] and tie_credit("tie", "tie") == 1.0
    without_tie = build_queue(with_p_text(fresh(run, tmp_path)), 20)      # P(A), P(B) stored, no P(tie): the picks
    assert without_tie.uncertainty_source.startswith("the disagreement between the two orders")  # said P(text)
    # nothing to draw by: told what its stored probabilities lack, not to run a local judge in distribution mode
    # as if it had none (helper-112)
    assert without_tie.uncertainty_source.endswith(
        ": P(tie) stored beside the judges' other probabilities (they hold none, so their picks were read; a local "
        "judge in distribution mode stores every answer's), more judges or sampled repeats give the queue an "
        "uncertainty to draw by"), without_tie.uncertainty_source
    assert np.array_equal(without_tie.uncertainty, q.uncertainty)
    with InThread(run, budget=20) as s, s.client() as c:
        info = c.get("/api/info").json()
        assert "Tie (t)" in info["instructions"] and info["unit"] == ["pair", "pairs"]    # its page said "story"
        assert info["clusters_in_run"] == 16 and info["clusters"] == len(set(q.design.draws.tolist()))
        item = c.get("/api/next", params={"annotator": "ann"}).json()
        assert [a["key"] for a in item["questions"][0]["answers"]] == ["1", "2", "t"]
        assert post(c, item, {item["cluster"]: "tie"}).json()["stored"]
        (row,) = [json.loads(x) for x in c.get("/api/export.jsonl").text.splitlines()]
    assert row["label"] == "tie" and q.score(row["cluster"], "tie") == tie_credit("tie", q.decision[row["cluster"]])
    plain = pairwise_run(tmp_path / "plain")                        # no tie option: a tie is refused
    with InThread(plain, budget=20) as s, s.client() as c:
        item = c.get("/api/next", params={"annotator": "ann"}).json()
        assert [a["key"] for a in item["questions"][0]["answers"]] == ["1", "2"]
        one_line_400(post(c, item, {item["cluster"]: "tie"}), "labels: 'tie' is not an answer of this protocol (a, b)")


def test_the_queues_read_the_text_a_verdict_picked_not_the_position_it_named(tmp_path):
    """A stored pairwise verdict names a position (A: the text shown first). A judge preferring text
    a in both orders answers A, then B: it is sure and its decision is a; a judge answering A in
    both orders flips with the order: unsure, a judge total of one half, its decision a tie (as the
    run's accuracy table combines its orders). The pairwise queue and a rubric's pairwise question
    read them so (both had read the position as the text, so the
    flipping judge looked sure and the consistent one split). The pairwise queue's uncertainty is of
    a person's agreement with the decision: none for either (a tie is agreed with by half whatever
    the person picks); the rubric's question estimates text a's win rate, unsure where it flips."""
    rows = [{"pair_id": f"p{i}", "prompt": "Write.", "text_a": f"one {i}", "text_b": f"two {i}", "label": "a"}
            for i in range(8)]
    sure = {f"p{i}/{o}": "A" if (o == "ab") == (i < 4) else "B" for i in range(8) for o in ("ab", "ba")}
    flips = {f"p{i}/{o}": "A" for i in range(8) for o in ("ab", "ba")}
    for name, answers, decision, total in (("sure", sure, ["a"] * 4 + ["b"] * 4, [1.0] * 8),
                                           ("flips", flips, ["tie"] * 8, [0.5] * 8)):
        q = build_queue(judged(pairs_run(tmp_path / name, name="p", pairs=rows, answers=answers)), 20)
        assert [q.decision[c.cluster] for c in q.clusters] == decision, name
        assert q.judge_total.tolist() == total and not q.uncertainty.any(), name
        folder = tmp_path / f"rubric-{name}"
        folder.mkdir()
        (folder / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in rows))
        (folder / "answers.jsonl").write_text("".join(json.dumps({"id": k.replace("/", "/better/"), "response": v}) + "\n"
                                                      for k, v in answers.items()))
        (folder / "r.toml").write_text(
            f'name = "r"\nprotocol = "rubric"\njudge = "replay:{folder / "answers.jsonl"}"\n[dataset]\n'
            'loader = "pairs_jsonl"\npath = "pairs.jsonl"\n[options]\npairs_from = "data"\n[[options.questions]]\n'
            'id = "better"\ntext = "Which is better?"\nscale = "pairwise"\n')
        r = build_queue(judged(folder / "r.toml"), 20)
        wins = [1.0] * 4 + [0.0] * 4 if name == "sure" else [0.5] * 8       # text a's win rate per pair
        assert r.judge_total.tolist() == wins and (r.uncertainty > 0).all() == (name == "flips"), name


def test_a_run_of_a_relative_config_is_annotated_from_any_folder(tmp_path):
    """`cd project && litjudge run p.toml` (an inline dataset path relative to the config), then the
    queue from elsewhere: its config's data is found from the run folder (it was looked for from
    the working folder: 'the [dataset] path does not exist'); the report is as before."""
    folder = tmp_path / "project"
    pairs_run(folder)
    assert cli("run", "p.toml", "--quiet", cwd=folder).returncode == 0
    run = folder / "runs" / "out" / "p"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = cli("annotate", str(run), "--simulate", "human", "--repeats", "5", "--budget", "10", cwd=elsewhere)
    assert r.returncode == 0 and "Simulated queue of" in r.stdout, r.stderr[-2000:]
    assert len(build_queue(run, 10).clusters) == 4


def test_draws_that_hold_no_item_of_the_estimate_wait_for_one_and_the_estimate_goes_on(rubric, tmp_path):
    """A hostile pass: a rubric of texts and pairs whose first two draws were pairs (the headline
    question asks none of a pair's items) made /api/estimate a 500 (ZeroDivisionError) from the
    second label on, and the page kept showing "1 labelled draw" however many were labelled.
    Such a prefix has no value yet, said; the estimate goes on once a text is drawn."""
    run = fresh(rubric, tmp_path)
    q = build_queue(run, 40, seed=0)
    seed = next(s for s in range(200) if all(len(q.clusters[i].texts) == 2
                                              for i in build_queue(run, 40, seed=s).design.draws[:2]))
    q = build_queue(run, 40, seed=seed)
    first_text = next(k for k, i in enumerate(q.design.draws.tolist()) if len(q.clusters[i].texts) == 1)
    with InThread(run, budget=40, seed=seed) as s, s.client() as c:
        for k in range(first_text + 1):
            item = c.get("/api/next", params={"annotator": "ann"}).json()
            labels = {x["item"]: x["answers"][0]["value"] for x in item["questions"]}
            assert post(c, item, labels).json()["stored"]
            r = c.get("/api/estimate")
            assert r.status_code == 200, r.text[-2000:]
            shown = r.json()
            assert shown["labelled_draws"] == k + 1, shown
            if k < first_text:
                assert shown["active"]["value"] is None and "holds an item" in shown["active"]["note"], shown
        assert shown["active"]["value"] is not None, shown


def test_a_pair_decided_a_tie_is_skewed_by_its_agreement_not_its_answer(tmp_path):
    """A pair's total is a person's agreement with the judges' decision (`tie_credit`): a pair the
    judges' picks split between a and b is decided a tie, and a person's a or b agrees with it by half
    either way. `min_draws` reads the agreement's spread and third moment, enumerated here from the
    picks: 0 for such a pair (an audit: read as the answer's score, Cochran's rule asked 10-18 draws
    where 78-112 were needed, the interval covering 0.90), and the design draws by it too."""
    from litjudge.judges.metrics.draws_needed import Totals, min_draws
    from litjudge.judges.metrics.uncertainty import cochran_draws
    from litjudge.judges.pairwise import Pairwise

    run = pairwise_run(tmp_path / "pw", pairs=30, tie=True)
    q = build_queue(run, 40)
    picks = Pairwise().text_answers(pl.read_parquet(run / "verdicts.parquet"))
    var, third = [], []
    for c in q.clusters:
        said = picks.filter(pl.col("pair_id") == c.cluster)["answer"].to_list()
        agree = np.array([tie_credit(s, q.decision[c.cluster]) for s in said])
        var.append(float(np.mean((agree - agree.mean()) ** 2)))
        third.append(float(np.mean((agree - agree.mean()) ** 3)))
    decided = [q.decision[c.cluster] for c in q.clusters]
    assert decided.count("tie") >= 10 and {"a", "tie"} <= set(decided)
    assert q.uncertainty == pytest.approx(np.sqrt(var)) and not q.uncertainty[np.array(decided) == "tie"].any()
    assert q.min_draws == min_draws(q.design.probability, q.judge_total, q.size, None) == active.MIN
    assert cochran_draws(q.design.probability, np.sqrt(var), np.array(third)) == active.MIN
    # P(text) stored (after an analysis): text a 0.98 or 0.7, so the agreement of a pair decided a is
    # skewed, and a tie-decided pair's is not; read as the answer's score, the rule asked far fewer
    run = pairwise_run(tmp_path / "p", pairs=60)
    v = pl.read_parquet(run / "verdicts.parquet")
    share = pl.when(v["pair_id"].str.slice(1).cast(pl.Int64) % 7 == 0).then(0.7).otherwise(0.98)
    p_a = pl.when(pl.col("order") == "ab").then(share).otherwise(1 - share)
    v.with_columns(pl.struct(p_a.alias("A"), (1 - p_a).alias("B")).alias("analysis_distribution")).write_parquet(
        run / "verdicts.parquet")
    q = build_queue(run, 40)
    text_a = np.array([0.7 if int(c.cluster[1:]) % 7 == 0 else 0.98 for c in q.clusters])
    agree = np.array([[tie_credit(x, q.decision[c.cluster]) for x in ("a", "b")] for c in q.clusters])
    dist = np.c_[text_a, 1 - text_a]
    mean = (dist * agree).sum(axis=1, keepdims=True)
    var, third = ((dist * (agree - mean) ** k).sum(axis=1) for k in (2, 3))
    score_third = text_a * (1 - text_a) * (1 - 2 * text_a)
    rule = cochran_draws(q.design.probability, np.sqrt(var), third)
    assert rule > 100 and cochran_draws(q.design.probability, np.sqrt(text_a * (1 - text_a)), score_third) < rule / 2
    assert q.min_draws == min_draws(q.design.probability, q.judge_total, q.size, Totals.answers(dist, agree)) <= rule


def test_one_judges_pairs_whose_orders_split_are_said_to_be_ties_not_to_agree(tmp_path):
    """One replayed judge answering the position on two thirds of the pairs: each pair's agreement is
    sure (a split pair is decided a tie, half credit whatever a person answers), so the draws follow
    size. The queue said "no item's answers differ" of a judge whose orders differed (a scale pass,
    100,000 random pairs)."""
    q = build_queue(pairwise_run(tmp_path / "pw"), 10)
    assert not q.uncertainty.any() and set(q.decision.values()) == {"a", "tie"}, q.decision
    assert ("0 for every cluster (every pair's picks agree, or split evenly and decide a tie, which earns half "
            "credit whatever a person answers)") in q.uncertainty_source, q.uncertainty_source
    sure = build_queue(with_p_text(pairwise_run(tmp_path / "sure"), text_a=lambda i: 1.0), 10)
    assert not sure.uncertainty.any() and sure.uncertainty_source.startswith("the judges' P(text)")
    # a run that stores P(text) is not told to read them with a local judge (a hostile pass)
    assert sure.uncertainty_source.endswith("(every pair is decided a tie, which earns half credit whatever a person "
                                            "answers, or its judges are sure of it), so the draws follow cluster size "
                                            "alone, as uniform PPI++'s would: more judges or sampled repeats give the "
                                            "queue an uncertainty to draw by"), sure.uncertainty_source
