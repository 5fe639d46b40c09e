"""`litjudge check-labels` finds a judge's label tokens the way its verdict modes do: one function,
`PromptRenderer.label_tokens` (from the template's last special token on, the judged text's and the
labels' special-token text split, nothing added around it). It once tokenized the raw last 256
characters of the prompt with `renderer.encode`, where a label or prefill holding a special token's
text became that special token. Tokenizer only: no engine starts."""
from __future__ import annotations

import contextlib
import io

import pytest

import litjudge.grammars as g
from litjudge.engine.app.console.cli import main
from litjudge.engine.backends.local.label_tokens import check_language, label_reading
from litjudge.engine.backends.local.models import resolve_judge
from litjudge.engine.backends.local.render import load_renderer
from litjudge.engine.backends.local.special import Rendered
from litjudge.engine.core.requests import Message

PREFILL = "My verdict:<|im_end|>"


def full(renderer, prompt: str, label: str) -> list[int]:
    """The prompt and label tokenized whole, the label judged text (as a verdict is; a base model's
    plain layout is all judged text)."""
    if not renderer.chat:
        return renderer.encode(prompt + label)
    template = prompt.template if type(prompt) is Rendered else renderer.specials.spans(prompt)
    return renderer.encode(Rendered.of(prompt + label, template))


@pytest.mark.parametrize("name", ["smollm2-135m", "gemma3-270m"])
def test_the_label_tokens_are_the_modes_and_extend_the_prompt_exactly(name):
    judge = resolve_judge(name)
    renderer = load_renderer(judge.path, judge.chat)
    prompt = renderer.render([Message("user", "Judge this.")], PREFILL)
    ids = renderer.encode(prompt)
    labels = ["Yes", " No", "<|im_end|>", "<bos>", "[[A>B]]"]
    lt = renderer.label_tokens(prompt, labels)
    for label in labels:
        assert lt.extend(ids, label) == full(renderer, prompt, label), label
    report = check_language(lt, ids, False, renderer.tokenizer.eos_token_id)
    assert report["labels"] == {k: list(v) for k, v in lt.continuations.items()}
    special = set(renderer.specials.ids.values())
    assert not special & {i for c in lt.continuations.values() for i in c}     # a label is never a special token
    assert report["single_token"] is False and report["steps"] > 1
    assert report["method"] == f"{report['steps']} next-token steps, one per prefix the labels share"


def test_labels_of_one_token_each_where_one_starts_another_are_not_read_in_one_step():
    """"No" and "Not" are one distinct token each after "Verdict: " (SmolLM2), but "No" starts
    "Not", so each is read with the end token after it (P("No") held P("Not") else): three steps, as
    the modes read them. check-labels once said "single-token: yes" here (every label one token)."""
    judge = resolve_judge("smollm2-135m")
    renderer = load_renderer(judge.path, judge.chat)
    prompt = renderer.render([Message("user", "Judge this.")], "Verdict: ")
    ids, eos = renderer.encode(prompt), renderer.tokenizer.eos_token_id
    lang = g.categorical(["No", "Not"])
    lt = renderer.label_tokens(prompt, lang.labels())
    assert all(len(c) == 1 for c in lt.continuations.values()) and lang.prefixed
    reading = label_reading({x: tuple(lt.extend(ids, x)) for x in lang.labels()}, ids, lang.prefixed, eos)
    assert reading.steps == 3 and all(s[-1] == eos for s in reading.spelled.values())
    report = check_language(lt, ids, lang.prefixed, eos)
    assert report["single_token"] is False and report["steps"] == 3 and "end token" in str(report["method"])
    unended = check_language(lt, ids, False, eos)              # "Yes" and "No": one step
    assert unended["single_token"] is True and unended["method"] == "one next-token step"


def test_check_labels_prints_what_the_modes_find():
    judge = resolve_judge("smollm2-135m")
    renderer = load_renderer(judge.path, judge.chat)
    prompt = renderer.render([Message("user", "Judge this.")], PREFILL)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["check-labels", "smollm2-135m", "binary", "likert5", "score10", "--prefill", PREFILL]) == 0
    lines = out.getvalue().splitlines()
    ids, eos = renderer.encode(prompt), renderer.tokenizer.eos_token_id
    for line, (name, lang) in zip(lines, [("binary", g.binary()), ("likert5", g.likert(5)), ("score10", g.score(1, 10))],
                                  strict=True):
        lt = renderer.label_tokens(prompt, lang.labels())
        steps = label_reading({x: tuple(lt.extend(ids, x)) for x in lang.labels()}, ids, lang.prefixed, eos).steps
        assert line.startswith(name) and f"single-token: {'yes' if steps == 1 else 'no '}" in line, line
        assert ("one next-token step" if steps == 1 else f"{steps} next-token steps") in line, line


def test_a_label_set_of_ones_own_is_checked_and_a_bad_one_refused_in_one_line(capsys):
    """`--label` (repeated) checks a set of the user's own labels as the modes read them; a set the
    grammars refuse (a duplicate, a padded label) is one line, before any judge is loaded."""
    assert main(["check-labels", "smollm2-135m", "--prefill", "Verdict: ", "--label", "No", "--label", "Not"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith("labels ") and "3 next-token steps" in out[0] and "end token" in out[0]
    for bad, why in ((["A", "A"], "duplicate labels"), ([" x"], "non-empty and unpadded")):
        assert main(["check-labels", "no-such-judge", *[a for b in bad for a in ("--label", b)]]) != 0
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and why in err and "no-such-judge" not in err, err


def test_a_recorded_or_api_judge_is_told_check_labels_needs_a_local_model(capsys):
    """A hostile pass: `check-labels replay:cgpt` said "unknown judge ... not an alias, not an existing
    folder", of a judge `run` accepts; it says the command reads a local model's tokenizer."""
    for judge in ("replay:cgpt", "openai:gpt-4o"):
        assert main(["check-labels", judge, "binary"]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "reads a generative local model's tokenizer" in err and "unknown judge" not in err, err
        assert "(a recording or an API judge)" in err
    # a reward model was called "a recording or an API judge"
    assert main(["check-labels", "reward:smollm2-135m", "binary"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "a reward model: it scores texts and generates none" in err and "recording" not in err, err
