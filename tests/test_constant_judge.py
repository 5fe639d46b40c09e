"""A constant judge is called out (issue 58, item 4): a judge giving one label to nearly every item,
or whose verdict follows the position a text is shown in, gets one line in the run's warnings (the
console prints them last), in `Result.problems()` and in the report, saying its agreement measures
the labels' balance, not the judge. One test per protocol, each judged by a recording answering one
label to every ask (built from the protocol's own requests: no model is the point)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import litjudge
from litjudge.engine.app.constant_judge import CONSTANT
from litjudge.engine.app.run import prepare
from litjudge.engine.core.config import load_config
from litjudge.grammars.labels import LabelSet
from litjudge.grammars.listwise import Listwise
from tests.conftest import PROJECT_ROOT, needs_data
from tests.test_cli_probe import cli, pairs_run
from tests.test_python_api import COLUMNS, VALUES, pairs


def answer(request, label: str | None) -> str:
    """The one answer of a constant judge: `label`, else the label set's first label; a listwise
    judge lists the items as shown, every one scored 3."""
    language = request.language
    inner = getattr(language, "inner", language)
    if isinstance(inner, Listwise):
        return "\n".join(f"{k}. {i} : 3" for k, i in enumerate(inner.ids, start=1))
    if label is not None:
        return label
    assert isinstance(inner, LabelSet), inner
    return inner.pairs[0][0]


def constant_recording(config: Path, folder: Path, label: str | None = None, **overrides) -> str:
    """A recording answering one label to every request `config` (with `overrides`) makes."""
    path = folder / "constant.jsonl"
    path.write_text(json.dumps({"id": "placeholder", "response": "x"}) + "\n")
    judge = f"replay:{path}"
    prep = prepare(load_config(config, judge=judge, **overrides))
    requests = [r for r in prep.protocol.build(prep.context(prep.specs[0])).requests]
    assert requests
    answers = {r.meta.item_id: answer(r, label) for r in reversed(requests)}   # one per id (a list's orders share it)
    path.write_text("".join(json.dumps({"id": k, "response": v}) + "\n" for k, v in answers.items()))
    return judge


def said(result, *words: str) -> list[str]:
    """The constant-judge lines of a result, each also in the manifest's warnings and the report."""
    lines = [p for p in result.problems() if CONSTANT in p]
    for line in lines:
        assert line in result.manifest.warnings
        assert all(w in line for w in words), line
    return lines


def reported(result) -> str:
    return Path(result.report()).read_text()


def test_pairwise_a_judge_answering_A_to_everything(tmp_path):
    """The default CPU judge's case: "A" to every ask, so the first shown always wins and every
    pair flips when swapped; one line says all three and what they mean, in problems(), the
    report and the console's last lines. A judge picking the same text in both orders is no
    constant judge."""
    with pytest.warns(litjudge.LitjudgeWarning, match="a constant judge"):
        r = litjudge.judge(pairs(), protocol="pairwise", judge=constant_recording_pairs(tmp_path, pairs()),
                           columns=COLUMNS, values=VALUES, out=tmp_path / "out", progress=False)
    lines = said(r, "answered 'A' to 100% of 24 verdicts", "swap_flip_rate 1.00", "first_position_win_rate 1.00")
    assert len(lines) == 1, r.problems()
    page = reported(r)
    assert "Warnings" in page and "answered &#x27;A&#x27; to 100% of 24 verdicts" in page
    consistent = tmp_path / "consistent.jsonl"              # text a in both orders: labels A and B, no flips
    consistent.write_text("".join(json.dumps({"id": f"{p['id']}/{o}", "response": "A" if o == "ab" else "B"}) + "\n"
                                  for p in pairs() for o in ("ab", "ba")))
    fine = litjudge.judge(pairs(), protocol="pairwise", judge=f"replay:{consistent}", columns=COLUMNS, values=VALUES,
                          out=tmp_path / "out", name="fine", progress=False)
    assert not said(fine) and "Warnings" not in reported(fine)
    # the console: the line is among the run's last lines, before "Results:"
    cfg = pairs_run(tmp_path / "cli", answers={f"p{i}/{o}": "A" for i in range(12) for o in ("ab", "ba")},
                    pairs=[{"pair_id": f"p{i}", "prompt": "Write.", "text_a": f"one {i}", "text_b": f"two {i}",
                            "label": "a"} for i in range(12)])
    run = cli("run", str(cfg), "--quiet", cwd=tmp_path / "cli")
    assert run.returncode == 0, run.stderr[-2000:]
    warned = [ln for ln in run.stderr.splitlines() if CONSTANT in ln]
    assert len(warned) == 1 and warned[0].startswith("litjudge: warning: ") and "'A' to 100% of 24" in warned[0]


def test_pairwise_a_judge_following_the_position_but_not_one_label_is_called_positional(tmp_path):
    """Right in order ab, wrong in ba: it answers A and B alike (no one label), yet every verdict
    flips when the texts swap. It was called "a constant judge ... the labels' balance"; it is
    said to follow the position shown."""
    rows = pairs()
    human = {r["id"]: VALUES["label"][r["winner"]] for r in rows}
    path = tmp_path / "positional.jsonl"
    path.write_text("".join(json.dumps({"id": f"{r['id']}/{o}", "response": "A" if human[r["id"]] == "a" else "B"})
                            + "\n" for r in rows for o in ("ab", "ba")))
    with pytest.warns(litjudge.LitjudgeWarning, match="a positional judge"):
        r = litjudge.judge(rows, protocol="pairwise", judge=f"replay:{path}", columns=COLUMNS, values=VALUES,
                           out=tmp_path / "out", progress=False)
    lines = [p for p in r.problems() if "swap_flip_rate 1.00" in p]
    assert len(lines) == 1 and "a positional judge" in lines[0] and CONSTANT not in lines[0], r.problems()
    acc = dict(zip(r.tables["accuracy"]["order"].to_list(), r.tables["accuracy"]["accuracy"].to_list()))
    assert (acc["ab"], acc["ba"]) == (1.0, 0.0)


def constant_recording_pairs(folder: Path, rows: list[dict]) -> str:
    path = folder / "all_a.jsonl"
    path.write_text("".join(json.dumps({"id": f"{r['id']}/{o}", "response": "A"}) + "\n"
                            for r in rows for o in ("ab", "ba")))
    return f"replay:{path}"


def test_rubric_a_constant_judge_per_question(tmp_path):
    """Yes to every story, 3 to every vividness question and A to every pair: one line per question."""
    from tests.test_rubric import COLUMNS as RUBRIC_COLUMNS
    from tests.test_rubric import QUESTIONS, recording, stories

    rows = stories()
    with pytest.warns(litjudge.LitjudgeWarning, match="a constant judge"):
        r = litjudge.judge(rows, protocol="rubric", judge=recording(tmp_path / "rec.jsonl", rows), questions=QUESTIONS,
                           columns=RUBRIC_COLUMNS, out=tmp_path / "out", progress=False)
    lines = said(r)
    assert len(lines) == 3, lines
    by_q = {q: [ln for ln in lines if f"(question {q!r})" in ln] for q in ("natural", "vivid", "surprise")}
    assert "answered 'Yes' to 100% of 12" in by_q["natural"][0] and "answered '3' to 100% of 12" in by_q["vivid"][0]
    assert "first_position_win_rate 1.00" in by_q["surprise"][0] and "swap_flip_rate 1.00" in by_q["surprise"][0]
    assert "(question &#x27;vivid&#x27;)" in reported(r)


def constant_run(folder: Path, name: str, label: str | None = None, **overrides):
    """runs/NAME.toml (with `overrides`) judged by a constant recording: the run warns it is constant."""
    config = PROJECT_ROOT / "runs" / f"{name}.toml"
    judge = constant_recording(config, folder, label, **overrides)
    with pytest.warns(litjudge.LitjudgeWarning, match="a constant judge"):
        return litjudge.run(config, judge=judge, out=folder / "out", progress=False, **overrides)


@needs_data
def test_ttcw_a_judge_answering_no_to_every_test(tmp_path):
    r = constant_run(tmp_path, "ttcw-replay", "No", limit=2)
    assert len(said(r, "answered 'No' to 100% of")) == 1


@needs_data
def test_classification_a_judge_answering_one_category(tmp_path):
    r = constant_run(tmp_path, "classification-aut", mode="label", limit=4)
    assert len(said(r, "answered 'Good' to 100% of")) == 1


@needs_data
def test_listwise_a_judge_scoring_every_item_alike(tmp_path):
    r = constant_run(tmp_path, "listwise-aut-comprehensive", limit=2)     # (a recording cannot serve PSC's orders)
    assert len(said(r, "answered '3' to 100% of 24 listed items")) == 1


@needs_data
def test_reference_likert_a_judge_answering_one_point(tmp_path):
    r = constant_run(tmp_path, "reference-likert-confederacy", limit=2)
    assert len(said(r, "answered '[[A>>B]]' to 100% of", "first_position_win_rate 1.00", "swap_flip_rate 1.00")) == 1
