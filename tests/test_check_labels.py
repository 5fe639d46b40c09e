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
from litjudge.engine.backends.local.label_tokens import check_language
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
    report = check_language(lt)
    assert report["labels"] == {k: list(v) for k, v in lt.continuations.items()}
    special = set(renderer.specials.ids.values())
    assert not special & {i for c in lt.continuations.values() for i in c}     # a label is never a special token
    assert report["single_token"] is False and report["method"] == "next-token logprobs along each label's tokens"


def test_check_labels_prints_what_the_modes_find():
    judge = resolve_judge("smollm2-135m")
    renderer = load_renderer(judge.path, judge.chat)
    prompt = renderer.render([Message("user", "Judge this.")], PREFILL)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["check-labels", "smollm2-135m", "binary", "likert5", "score10", "--prefill", PREFILL]) == 0
    lines = out.getvalue().splitlines()
    for line, (name, lang) in zip(lines, [("binary", g.binary()), ("likert5", g.likert(5)), ("score10", g.score(1, 10))],
                                  strict=True):
        single = renderer.label_tokens(prompt, lang.labels()).single_token
        assert line.startswith(name) and f"single-token: {'yes' if single else 'no '}" in line, line
