"""Which tokens a label is after a prompt, for the local engines' distribution mode.

The assistant turn is prefilled up to the decision point and the next token is read without a
constraint. When every label is one distinct token after the prompt, one forward step gives all
label logprobs (`logprob_token_ids`). Otherwise (e.g. `[[A>>B]]` vs `[[A>B]]` share their first
token) each label's tokens are read one prefix at a time and their logprobs summed (`LabelReading`,
which modes.label_logprobs reads and `litjudge check-labels` reports). Only engines that hold a
tokenizer need this; API backends read label logprobs by text.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class LabelTokens:
    """Each label's continuation after a prompt: drop the prompt's last `drop[label]` tokens
    (0, or 1 when the label merges with the prompt's final token, e.g. "Answer: " + "Yes"
    -> "Answer:" + " Yes"), then append `continuations[label]`."""

    continuations: dict[str, tuple[int, ...]]
    drop: dict[str, int]

    def extend(self, prompt_ids, label: str) -> list[int]:
        ids = list(prompt_ids)
        return ids[:len(ids) - self.drop[label]] + list(self.continuations[label])


def label_tokens(encode: Callable[[str], list[int]], tail: str, labels: Sequence[str]) -> LabelTokens:
    """Each label's continuation after a prompt, from `tail`, the prompt's end where its tokenization
    starts afresh (tokenization is local), with `encode` tokenizing judged text: PromptRenderer's
    `tail` and `encode_text`, through PromptRenderer.label_tokens (the one way)."""
    base = encode(tail)
    out: dict[str, tuple[int, ...]] = {}
    drop: dict[str, int] = {}
    for label in labels:
        full = encode(tail + label)
        common = 0
        while common < min(len(base), len(full)) and base[common] == full[common]:
            common += 1
        if common < len(base) - 1:
            raise ValueError(f"label {label!r} re-tokenizes the prompt tail; cannot score it as a continuation")
        out[label], drop[label] = tuple(full[common:]), len(base) - common
    return LabelTokens(out, drop)


@dataclass(frozen=True)
class LabelReading:
    """How the labels' logprobs are read after a prompt: each label's tokens (`spelled`: the prompt's
    with the label's, and the end token when a label starts another), all from one `point`, the
    first token where any label leaves the prompt ("Verdict: " + "Great" is ":" " Great" but + "7"
    is ":" " " "7", so "7" is P(" ") P("7"), not P("7") alone); `nexts` holds each prefix the labels
    share from there and the tokens read after it, one next-token step each."""

    spelled: dict[str, tuple[int, ...]]
    point: int
    nexts: dict[tuple[int, ...], tuple[int, ...]]

    @property
    def steps(self) -> int:
        return len(self.nexts)


def label_reading(answers: dict[str, tuple[int, ...]], prompt: Sequence[int], ended: bool, eos: int | None
                  ) -> LabelReading:
    """The reading of `answers` (each label's full token ids, LabelTokens.extend) after `prompt`,
    with the end token `eos` after each label when `ended` (a label starts another: "1", "10"; else
    P("1") would hold P("10"))."""
    end = (eos,) if ended and eos is not None else ()
    spelled = {x: tuple(ids) + end for x, ids in answers.items()}
    point = min(next((i for i, (a, b) in enumerate(zip(ids, prompt)) if a != b), min(len(prompt), len(ids)))
                for ids in spelled.values())
    nexts: dict[tuple[int, ...], set[int]] = {}
    for ids in spelled.values():
        for k in range(point, len(ids)):
            nexts.setdefault(ids[:k], set()).add(ids[k])
    return LabelReading(spelled, point, {at: tuple(sorted(t)) for at, t in nexts.items()})


def check_language(lt: LabelTokens, prompt_ids: Sequence[int], ended: bool, eos: int | None) -> dict[str, object]:
    """Report, for a judge's labels at a decision point (PromptRenderer.label_tokens: the modes' own),
    how distribution mode reads them (`label_reading`, as modes.label_logprobs does): in one
    next-token step, or one per prefix they share."""
    reading = label_reading({x: tuple(lt.extend(prompt_ids, x)) for x in lt.continuations}, prompt_ids, ended, eos)
    method = ("one next-token step" if reading.steps == 1
              else f"{reading.steps} next-token steps, one per prefix the labels share")
    if ended and eos is not None:
        method += " (each label then the end token: a label starts another)"
    return {"single_token": reading.steps == 1, "steps": reading.steps,
            "labels": {k: list(v) for k, v in lt.continuations.items()}, "method": method}
