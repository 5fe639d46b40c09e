"""`scale = "categorical"`: a rubric question with N unordered named categories, added as one
class (judges/scales/categorical.py). Its agreement tables equal scikit-learn's statistics, its
intervals cover a known truth at the smallest size each is printed for (10 texts of each category
the humans gave for kappa; 10 texts for accuracy), a sweep ranks by the interval the table prints,
and every hostile input is one line: no categories, the same category twice in any case, markup
or a line break in a category, a human value outside the categories; a judge's answer outside
them is unparsed, counted as such, and left out of the agreement."""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import cohen_kappa_score, confusion_matrix, recall_score

import litjudge
import litjudge.grammars as grammars
from litjudge.engine.app.report.rubric_panels import rubric_panels
from litjudge.engine.app.run import prepare, run
from litjudge.engine.core.config import load_config
from litjudge.engine.core.errors import ConfigError, DataError
from litjudge.judges.base import RankBy
from litjudge.judges.metrics.bootstrap import MIN_CLUSTERS
from tests.test_rubric_conformance import COVERAGE, MEAN_DRAWS, _covered, rubric, verdicts

GENRES = ["comedy", "tragedy", "romance"]
GENRE = {"id": "genre", "text": "Which genre is the story?", "scale": "categorical", "categories": GENRES,
         "human": "h"}
COLUMNS = {"item_id": "id", "text": "story", "group": "=all"}


def _judge(rng, human: np.ndarray, right: float = 0.7) -> np.ndarray:
    """Right with probability `right`, else one of the other two categories."""
    other = (human + rng.integers(1, 3, human.shape)) % 3
    return np.where(rng.random(human.shape) < right, human, other)


def _frame(human: np.ndarray, judge: np.ndarray, draws: int = 1, texts: int | None = None) -> pl.DataFrame:
    n = texts or len(human)
    return verdicts(np.repeat(np.arange(draws), n), np.tile(np.arange(n), draws), GENRE,
                    [GENRES[x] for x in judge], [GENRES[x] for x in human])


# -- equal to the reference implementations -------------------------------------------------------
def test_kappa_accuracy_and_shares_equal_scikit_learn():
    rng = np.random.default_rng(0)
    human = rng.integers(0, 3, 40)
    judge = _judge(rng, human)
    protocol, ctx = rubric(GENRE)
    t = protocol.tables(_frame(human, judge), ctx)
    row = t["categorical_agreement"].row(0, named=True)
    assert row["kappa"] == pytest.approx(cohen_kappa_score(human, judge))
    assert row["accuracy"] == pytest.approx(np.mean(human == judge))
    assert (row["categories"], row["n"], row["clusters"]) == (3, 40, 40)
    assert row["kappa_low"] < row["kappa"] < row["kappa_high"] and row["accuracy_low"] < row["accuracy_high"]
    shares = t["categorical_shares"].sort("category")
    matrix = confusion_matrix(human, judge, labels=[0, 1, 2])
    by = {r["category"]: r for r in shares.iter_rows(named=True)}
    for i, name in enumerate(GENRES):
        assert by[name]["human_share"] == pytest.approx(matrix[i].sum() / 40)
        assert by[name]["judge_share"] == pytest.approx(matrix[:, i].sum() / 40)
        assert by[name]["recall"] == pytest.approx(recall_score(human, judge, labels=[i], average=None)[0])
    head = t["agreement"].row(0, named=True)
    assert (head["scale"], head["metric"], head["agreement"]) == ("categorical", "kappa", row["kappa"])
    assert t["scores"]["mean_score"][0] is None and t["scores"]["verdicts"][0] == 40


# -- coverage of a known truth -----------------------------------------------------------------------
@pytest.mark.parametrize("counts", [(10, 10, 10), (10, 30, 10)])
def test_kappa_and_accuracy_intervals_cover_with_ten_texts_of_each_category(counts):
    big = np.random.default_rng(9).choice(3, 2_000_000, p=np.asarray(counts) / sum(counts))
    pred = _judge(np.random.default_rng(8), big)
    truth = {"kappa": cohen_kappa_score(big, pred), "accuracy": np.mean(big == pred)}
    human = np.tile(np.repeat(np.arange(3), counts), MEAN_DRAWS)
    judge = _judge(np.random.default_rng(1), human)
    protocol, ctx = rubric(GENRE)
    table = protocol.tables(_frame(human, judge, MEAN_DRAWS, sum(counts)), ctx)["categorical_agreement"]
    assert table.height == MEAN_DRAWS
    for metric, value in truth.items():
        assert _covered(table, metric, value) >= COVERAGE, (metric, _covered(table, metric, value))


@pytest.mark.parametrize("right", [0.7, 0.95])
def test_the_accuracy_interval_covers_at_ten_texts(right):
    """10 texts of any categories (kappa's interval withheld): accuracy's interval still covers."""
    n = MIN_CLUSTERS
    rng = np.random.default_rng(int(right * 100))
    human = rng.integers(0, 3, n * MEAN_DRAWS)
    judge = _judge(rng, human, right)
    protocol, ctx = rubric(GENRE)
    table = protocol.tables(_frame(human, judge, MEAN_DRAWS, n), ctx)["categorical_agreement"]
    assert table.height == MEAN_DRAWS and table["kappa_low"].is_null().all()
    assert _covered(table, "accuracy", right) >= COVERAGE, _covered(table, "accuracy", right)


def test_no_kappa_interval_with_fewer_than_ten_texts_of_a_category_the_humans_gave():
    protocol, ctx = rubric(GENRE)
    human = np.repeat([0, 1], [MIN_CLUSTERS - 1, 30])            # romance never given: not needed
    row = protocol.tables(_frame(human, _judge(np.random.default_rng(2), human)), ctx)["categorical_agreement"].row(
        0, named=True)
    assert row["kappa"] is not None and row["kappa_low"] is None and row["accuracy_low"] is not None
    assert row["ci_note"] == ("kappa: too few texts of each human answer (comedy: 9, tragedy: 30; an interval needs "
                              "10 of each): no interval")
    human = np.zeros(30, int)
    row = protocol.tables(_frame(human, _judge(np.random.default_rng(2), human)), ctx)["categorical_agreement"].row(
        0, named=True)
    assert row["kappa_low"] is None and row["ci_note"] == "kappa: the humans gave one category only (comedy): no interval"


def test_a_sweep_ranks_by_the_interval_the_table_prints():
    rng = np.random.default_rng(12)
    human = np.repeat(np.arange(3), 12)
    protocol, ctx = rubric(GENRE)
    tables = protocol.tables(_frame(human, _judge(rng, human)), ctx)
    row = tables["categorical_agreement"].row(0, named=True)
    for table, metric in (("categorical_agreement", "kappa"), ("categorical_agreement", "accuracy"),
                          ("agreement", "agreement")):
        rank = RankBy(f"{table}.{metric}", "question=genre")
        got = protocol.rank_units(tables, "d0", rank, ctx.options).interval()
        name = "kappa" if table == "agreement" else metric
        assert got == pytest.approx((row[f"{name}_low"], row[f"{name}_high"]), abs=1e-9), (table, metric)
    assert protocol.rank_group(RankBy("categorical_agreement.kappa"), ctx.options) == "question=genre"


# -- through litjudge.judge: a recording, a human column, the report --------------------------------
def stories(n: int = 12) -> list[dict]:
    return [{"id": f"s{i:02d}", "story": f"Story {i}: " + "the kettle sang. " * (1 + i % 3),
             "genre_human": [" Comedy", "TRAGEDY", "romance "][i % 3]} for i in range(n)]


def judged(tmp_path, rows, answers, question=None):
    data = tmp_path / "stories.jsonl"                       # JSON keeps a value's type (true is no text)
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "rec.jsonl").write_text("".join(json.dumps({"id": f"{r['id']}/genre", "response": a}) + "\n"
                                                for r, a in zip(rows, answers)))
    question = question or {**GENRE, "human": "genre_human"}
    return litjudge.judge(str(data), protocol="rubric", judge=f"replay:{tmp_path / 'rec.jsonl'}", questions=[question],
                          columns=COLUMNS, out=tmp_path / "out", progress=False)


def test_humans_in_any_case_and_judge_answers_outside_the_categories_unparsed(tmp_path):
    rows = stories()
    answers = [GENRES[i % 3] for i in range(12)]
    answers[1], answers[2] = "musical", "Tragedy"           # no category; a category in another case
    result = judged(tmp_path, rows, answers)
    t = result.tables
    assert result.manifest.verdicts.unparsed == 2 and t["scores"]["unparsed"][0] == 2
    per = t["per_verdict"]
    assert per["human"].to_list() == [GENRES[i % 3] for i in range(12)]         # " Comedy" -> comedy ...
    assert per.filter(pl.col("answer").is_null())["item_id"].to_list() == ["s01/genre", "s02/genre"]
    row = t["categorical_agreement"].row(0, named=True)
    assert (row["n"], row["accuracy"], row["kappa"]) == (10, 1.0, 1.0)           # the unparsed two left out
    shares = dict(zip(t["label_distribution"]["label"], t["label_distribution"]["share"]))
    assert shares["unparsed"] == pytest.approx(2 / 12)
    panels = {p.title: p for p in rubric_panels(t)}
    mine = panels["Categories: the judge beside the humans"]
    assert [name for name, _ in mine.tables] == ["categorical_shares"] and len(mine.figures) == 1
    ticks = [x.get_text() for x in mine.figures[0][1].axes[0].get_xticklabels()]
    assert ticks == [f"genre: {g}" for g in GENRES]
    assert "categorical_agreement" in [name for name, _ in panels["Agreement with the humans"].tables]


def test_category_names_with_dollar_signs_are_drawn_as_written(tmp_path):
    """A category named "$^^$" (legal: rubric.md forbids only the grammar's own characters) crashed
    the report (matplotlib read it as maths); "x_$y$" was drawn as a subscript. Drawn as written,
    and the setting is the report's own: matplotlib's is as it was after it."""
    import matplotlib


    names = ["$^^$", "x_$y$", "plain"]
    rows = [{**r, "genre_human": names[i % 3]} for i, r in enumerate(stories())]
    result = judged(tmp_path, rows, [names[i % 3] for i in range(12)],
                    {**GENRE, "categories": names, "human": "genre_human"})
    assert result.tables["categorical_agreement"]["accuracy"][0] == 1.0
    page = result.report(tmp_path / "report")
    assert page.is_file() and matplotlib.rcParams["text.parse_math"] is True
    with matplotlib.pyplot.rc_context({"text.parse_math": False}):          # as the report draws them
        mine = {p.title: p for p in rubric_panels(result.tables)}["Categories: the judge beside the humans"]
        assert [x.get_text() for x in mine.figures[0][1].axes[0].get_xticklabels()] == [f"genre: {g}" for g in names]


def test_a_judge_under_vllm_answers_only_category_names(tiny, runs_dir):
    """Constrained decoding under vLLM: every verdict is one of the names, in label and in
    distribution mode (P(answer) from the names' probabilities; no expected score: no number).
    The session's tiny random judge: left to itself it would say anything."""
    table = {"name": "genre", "protocol": "rubric", "dataset": "ttcw-demo", "judge": tiny.spec.name,
             "options": {"questions": [{**GENRE, "human": ""}]}}
    for mode in ("label", "distribution"):
        outcome = run(load_config("genre", table, mode=mode), progress=False, backends={tiny.spec.name: tiny},
                      run_dir=runs_dir / mode)
        v = outcome.tables["per_verdict"]
        assert outcome.manifest.verdicts.unparsed == 0 and v.height == 3 and set(v["answer"]) <= set(GENRES)
        assert outcome.tables["scores"]["mean_score"][0] is None
    assert ((v["p_answer"] > 0) & (v["p_answer"] <= 1)).all() and v["expected"].is_null().all()


def test_the_judge_is_constrained_to_the_category_names():
    prep = prepare(load_config("r", {"name": "r", "protocol": "rubric", "dataset": "ttcw-demo", "judge": "smollm2-135m",
                                     "options": {"questions": [{**GENRE, "human": ""}]}}))
    asked = list(prep.protocol.build(prep.context(prep.specs[0])).requests)
    assert asked and all(r.language.labels() == tuple(GENRES) for r in asked)
    assert asked[0].messages[-1].content.endswith("Answer comedy, tragedy or romance only.")
    assert asked[0].language.parse("comedy").value == "comedy"
    assert isinstance(asked[0].language.parse("Comedy"), grammars.Unparsed)


# -- hostile input: one line each -------------------------------------------------------------------
@pytest.mark.parametrize("question, words", [
    ({**GENRE, "categories": []}, "a categorical scale names its categories (categories = [...], at least 2), got []"),
    ({**GENRE, "categories": ["comedy"]}, "at least 2), got ['comedy']"),
    ({**GENRE, "categories": ["comedy", "Tragedy", "COMEDY"]}, "category names must differ in more than case, spacing, "
                                                               "invisible characters or Unicode form, got ['COMEDY', "
                                                               "'comedy']"),
    ({**GENRE, "categories": ["sci fi", "sci  fi"]}, "got ['sci  fi', 'sci fi']"),
    ({**GENRE, "categories": ["comedy", "comedy\u200b"]}, "got ['comedy', 'comedy\\u200b']"),
    ({**GENRE, "categories": ["Caf\u00e9", "Cafe\u0301"]}, "spacing, invisible characters or Unicode form"),
    ({**GENRE, "categories": ["comedy", "<b>tragedy</b>"]}, "category '<b>tragedy</b>' is not a plain"),
    ({**GENRE, "categories": ["comedy", "<|im_end|>"]}, "category '<|im_end|>' is not a plain"),
    ({**GENRE, "categories": ["comedy", "dark\ncomedy"]}, "category 'dark\\ncomedy' is not a plain"),
    ({**GENRE, "categories": ["comedy", " tragedy"]}, "category ' tragedy' is not a plain, unpadded name"),
    ({**GENRE, "categories": ["comedy", "Unparsed"]}, "'unparsed' names a verdict with no answer"),
    ({**GENRE, "scale": "binary"}, "categories name a categorical question's answers; set scale = \"categorical\""),
    ({**GENRE, "scale": "categorcal"}, "scale must be one of ['binary', 'points', 'pairwise', 'categorical'], got "
                                       "'categorcal' (did you mean 'categorical'?)"),
    ({**GENRE, "labels": ["A", "B"]}, "labels name a binary question's answers (this one is categorical)"),
])
def test_a_hostile_question_is_one_line(question, words):
    table = {"name": "r", "protocol": "rubric", "dataset": "ttcw-demo", "judge": "smollm2-135m",
             "options": {"questions": [question]}}
    with pytest.raises(ConfigError) as exc:
        prepare(load_config("r", table))
    assert words in str(exc.value) and "\n" not in str(exc.value), str(exc.value)


@pytest.mark.parametrize("value", ["musical", "comedy\nromance", True])
def test_a_human_value_outside_the_categories_is_one_line(tmp_path, value):
    rows = stories()
    rows[4]["genre_human"] = value
    with pytest.raises(DataError) as exc:
        judged(tmp_path, rows, [GENRES[i % 3] for i in range(12)])
    text = str(exc.value)
    assert "\n" not in text and "item s04" in text and "'genre_human'" in text and repr(value)[:20] in text
    assert "which is none of ['comedy', 'tragedy', 'romance'] (in any case)" in text


def test_number_categories_read_a_float_column_and_category_order_is_said_to_be_ignored(tmp_path):
    """Categories "1", "2", "3" from a column of numbers with an empty cell (pandas holds 2.0): the
    whole numbers name their categories, as a points question reads them (it was refused: 'holds
    2.0, which is none of'); 2.5 is still refused. `category_order` does not order a categorical
    question (its `categories` do): a warning says so."""
    import pandas as pd

    from litjudge import LitjudgeWarning

    levels = ["1", "2", "3"]
    rows = [{"id": f"s{i:02d}", "story": f"Story {i}.", "h": None if i == 5 else float(1 + i % 3)} for i in range(12)]
    (tmp_path / "rec.jsonl").write_text("".join(json.dumps({"id": f"{r['id']}/level", "response": levels[i % 3]}) + "\n"
                                                for i, r in enumerate(rows)))
    question = {"id": "level", "text": "Which level?", "scale": "categorical", "categories": levels, "human": "h"}
    frame = pd.DataFrame(rows)
    assert frame["h"].dtype == float
    with pytest.warns(LitjudgeWarning) as caught:
        result = litjudge.judge(frame, protocol="rubric", judge=f"replay:{tmp_path / 'rec.jsonl'}", questions=[question],
                                columns=COLUMNS, out=tmp_path / "out", progress=False, category_order=["3", "2", "1"])
    per = result.tables["per_verdict"]
    assert per["human"].to_list() == [None if i == 5 else levels[i % 3] for i in range(12)]
    assert result.tables["categorical_agreement"].row(0, named=True)["accuracy"] == 1.0
    said = [str(w.message) for w in caught if "category_order" in str(w.message)]
    assert len(said) == 1 and "categorical question lists its own" in said[0] and "\n" not in said[0], said
    frame.loc[3, "h"] = 2.5
    with pytest.raises(DataError) as exc:
        litjudge.judge(frame, protocol="rubric", judge=f"replay:{tmp_path / 'rec.jsonl'}", questions=[question],
                       columns=COLUMNS, out=tmp_path / "out2", progress=False)
    assert "holds 2.5, which is none of" in str(exc.value)


def test_a_human_answer_in_another_unicode_form_is_the_category_as_on_the_annotation_page():
    """A hostile pass: the annotation page read a decomposed `comédie` as the category, while a run
    refused the same text in a human column (case folded, Unicode form not). One rule (`fold`)."""
    from litjudge.engine.app.annotate.clusters import Answer, Question
    from litjudge.judges.scales import scale as scale_named

    composed, decomposed = "Com\u00e9die", "COME\u0301DIE"
    q = SimpleNamespace(id="genre", human="genre", categories=(composed, "drame"))
    assert scale_named("categorical").human(q, decomposed, "s1") == composed
    binary = SimpleNamespace(id="ok", human="ok", labels=("Oui\u0301", "Non"))
    assert scale_named("binary").human(binary, "OUI\u0301", "s1") == "Oui\u0301"
    greek = SimpleNamespace(id="time", human="time", categories=("\u03a0\u03a1\u03a9\u0399\u0308\u0301", "night"))
    for written in ("\u03c0\u03c1\u03c9\u03b9\u0308\u0301", "\u03c0\u03c1\u03c9\u0390"):  # casefolded NFC was not NFC
        assert scale_named("categorical").human(greek, written, "s1") == greek.categories[0]
    asked = Question("s1/genre", "Genre?", (Answer(composed, composed, "1", float("nan")), Answer("drame", "drame", "2", float("nan"))))
    assert asked.canonical(decomposed) == composed
    nan = float("nan")
    pair = Question("p1", "Which?", (Answer("a", "a", "1", 1.0), Answer("b", "b", "2", 0.0), Answer("tie", "tie", "t", nan)),
                    pairwise=True)
    assert [pair.canonical(x) for x in ("TIE", " Tie ", "A", "b")] == ["tie", "tie", None, "b"]  # A: a position
