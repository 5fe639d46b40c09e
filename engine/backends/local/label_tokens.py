"""Which tokens a label is after a prompt, for the local engines' distribution mode.

The assistant turn is prefilled up to the decision point and the next token is read without a
constraint. When every label is one distinct token after the prompt, one forward step gives all
label logprobs (`logprob_token_ids`). Otherwise (e.g. `[[A>>B]]` vs `[[A>B]]` share their first
token) each label's tokens are read one prefix at a time and their logprobs summed (modes.label_logprobs).
Only engines that hold a tokenizer need this; API backends read label logprobs by text.
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

    @property
    def single_token(self) -> bool:
        firsts = [c[0] for c in self.continuations.values() if len(c) == 1]
        same_point = len(set(self.drop.values())) == 1
        return same_point and len(firsts) == len(self.continuations) and len(set(firsts)) == len(firsts)

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


def check_language(lt: LabelTokens) -> dict[str, object]:
    """Report, for a judge's labels at a decision point (PromptRenderer.label_tokens: the modes' own),
    whether they are single next tokens."""
    return {"single_token": lt.single_token,
            "labels": {k: list(v) for k, v in lt.continuations.items()},
            "method": "next-token logprobs" if lt.single_token else "next-token logprobs along each label's tokens"}
