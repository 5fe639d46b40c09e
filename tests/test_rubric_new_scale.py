"""A new scale is one class in one file (issue #59): a file written here, outside litjudge, holding
one `Scale` subclass decorated `@SCALES.register`, is imported on its own, and a rubric question on
it runs end to end on a replayed judge: its own key (`moods = [...]`, at the question's level, as
`categories`) is read by the loader and refused on a question of another scale; its agreement table
is declared, written and in the report with no other file edited."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

import litjudge
from litjudge.engine.app.config_reference import explain
from litjudge.engine.app.report.rubric_panels import rubric_panels
from litjudge.engine.app.run import prepare
from litjudge.engine.core.config import load_config
from litjudge.engine.core.errors import ConfigError
from litjudge.judges import PROTOCOLS
from litjudge.judges.scales import SCALES, names
from tests.test_plugins import distribution

TOY = '''
"""`scale = "mood"`: one of the question's `moods` (default calm, tense); accuracy against the humans."""
from typing import Any

import polars as pl

import litjudge.grammars as grammars
from litjudge.engine.core.errors import DataError
from litjudge.judges.metrics.estimates import Units
from litjudge.judges.scales import SCALES, Scale, Setting
from litjudge.judges.scales.base import rate_row, with_ci


@SCALES.register
class Mood(Scale):
    name = "mood"
    settings = {"moods": Setting(tuple[str, ...], ("calm", "tense"), "the moods a text may have",
                                 'moods name a mood question\\'s answers; set scale = "mood"')}
    metrics = ("accuracy",)
    headline = "accuracy"
    score = ""

    def schemas(self):
        return {self.table: {"judge": pl.Utf8, "question": pl.Utf8, **with_ci(self.metrics), "n": pl.Int64,
                             "ci_note": pl.Utf8}}

    def check(self, q: Any) -> None:
        if len(set(q.moods)) < 2:
            raise ValueError(f"question {q.id!r}: a mood scale names two moods or more, got {list(q.moods)}")

    def language(self, q: Any) -> grammars.LabelSet:
        return grammars.categorical(list(q.moods))

    def human(self, q: Any, value: Any, unit: str) -> str | None:
        if value is None:
            return None
        if value not in q.moods:
            raise DataError(f"question {q.id!r}: {value!r} is no mood", path=unit)
        return value

    def scored(self, q, answer, p):
        return pl.lit(None, pl.Float64), pl.lit(None, pl.Float64)

    def agreement(self, labelled, q, resamples):
        r = rate_row("accuracy", labelled, pl.col("answer") == pl.col("human"))
        return {self.table: [{"accuracy": r["value"], "accuracy_low": r["ci_low"], "accuracy_high": r["ci_high"],
                              "n": r["n"], "ci_note": r["ci_note"]}]}

    def rank_units(self, rows, q, metric, where, resamples):
        return Units.rate(rows["cluster"].to_list(), (rows["answer"] == rows["human"]).cast(float).to_list())
'''


@pytest.fixture
def mood(tmp_path):
    """The toy scale's file, imported by itself (nothing of litjudge's is edited); unregistered after."""
    path = tmp_path / "mood_scale.py"
    path.write_text(textwrap.dedent(TOY))
    spec = importlib.util.spec_from_file_location("mood_scale", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["mood_scale"] = module
    spec.loader.exec_module(module)
    yield module.Mood
    SCALES.remove("mood")
    sys.modules.pop("mood_scale", None)


QUESTION = {"id": "tone", "text": "Which mood is the story in?", "scale": "mood", "moods": ["calm", "tense", "eerie"],
            "human": "mood_human"}
MOODS = ["calm", "tense", "eerie"]


def test_a_scale_in_a_file_of_its_own_runs_end_to_end(mood, tmp_path):
    assert names()[-1] == "mood" and names()[:4] == ["binary", "points", "pairwise", "categorical"]
    rows = [{"id": f"s{i:02d}", "story": f"Story {i}: the door creaked.", "mood_human": MOODS[i % 3]} for i in range(12)]
    data = tmp_path / "stories.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    answers = [MOODS[i % 3] if i % 4 else MOODS[(i + 1) % 3] for i in range(12)]      # 9 of 12 right
    (tmp_path / "rec.jsonl").write_text("".join(json.dumps({"id": f"{r['id']}/tone", "response": a}) + "\n"
                                                for r, a in zip(rows, answers)))
    result = litjudge.judge(str(data), protocol="rubric", judge=f"replay:{tmp_path / 'rec.jsonl'}",
                            questions=[QUESTION], columns={"item_id": "id", "text": "story", "group": "=all"},
                            out=tmp_path / "out", progress=False)
    t = result.tables
    assert t["per_verdict"]["answer"].to_list() == answers
    assert t["mood_agreement"]["accuracy"].to_list() == [pytest.approx(0.75)]
    assert t["agreement"].select("scale", "metric", "agreement").row(0) == ("mood", "accuracy", pytest.approx(0.75))
    assert "mood_agreement" in PROTOCOLS.get("rubric").declared.tables
    assert "mood_agreement" in [name for name, _ in
                                {p.title: p for p in rubric_panels(t)}["Agreement with the humans"].tables]
    assert explain("options.questions[].moods")[0].doc == "mood: the moods a text may have"


@pytest.mark.parametrize("question, words", [
    ({**QUESTION, "moods": ["calm"]}, "question 'tone': a mood scale names two moods or more, got ['calm']"),
    ({**QUESTION, "scale": "binary"}, "question 'tone': moods name a mood question's answers; set scale = \"mood\""),
    ({**QUESTION, "categories": ["a", "b"]}, "categories name a categorical question's answers"),
    ({**QUESTION, "mods": ["a", "b"]}, "options.questions[0].mods: unknown key (did you mean 'options.questions[0].moods'"),
    ({**QUESTION, "moods": "calm"}, "options.questions[0].moods: expected a list"),
])
def test_its_own_key_is_checked_as_the_built_in_scales_are(mood, question, words):
    table = {"name": "r", "protocol": "rubric", "dataset": "ttcw-demo", "judge": "smollm2-135m",
             "options": {"questions": [question]}}
    with pytest.raises(ConfigError) as exc:
        prepare(load_config("r", table))
    assert words in str(exc.value) and "\n" not in str(exc.value), str(exc.value)


def test_without_its_file_the_scale_and_its_key_are_unknown():
    table = {"name": "r", "protocol": "rubric", "dataset": "ttcw-demo", "judge": "smollm2-135m",
             "options": {"questions": [{**QUESTION, "human": ""}]}}
    with pytest.raises(ConfigError, match="unknown key"):
        prepare(load_config("r", table))
    assert "mood" not in names() and "mood_agreement" not in PROTOCOLS.get("rubric").declared.tables


def test_a_plugin_s_scale_is_the_same_file_declared_by_entry_point(tmp_path):
    """The same file, installed as a distribution declaring it in group `litjudge.scales`: usable by
    name in a fresh process (entry points are read once per process), its origin the plugin's."""
    distribution(tmp_path, "mood-plugin", "0.1.0", {"litjudge.scales": {"mood": "mood_scale:Mood"}},
                 {"mood_scale": TOY})
    script = textwrap.dedent(f"""
        from litjudge.engine.app.run import prepare
        from litjudge.engine.core.config import load_config
        from litjudge.judges import PROTOCOLS
        from litjudge.judges.scales import SCALES, names
        table = {{"name": "r", "protocol": "rubric", "dataset": "ttcw-demo", "judge": "smollm2-135m",
                  "options": {{"questions": [{{**{QUESTION!r}, "human": ""}}]}}}}
        prep = prepare(load_config("r", table))
        asked = list(prep.protocol.build(prep.context(prep.specs[0])).requests)
        print(names()[-1], SCALES.origin("mood"), "mood_agreement" in PROTOCOLS.get("rubric").declared.tables,
              asked[0].language.labels())
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)}, cwd=tmp_path)   # the session's settings
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "mood mood-plugin 0.1.0 True ('calm', 'tense', 'eerie')"
