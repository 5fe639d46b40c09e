"""Turn messages into the exact prompt text a local judge sees.

Chat judges always get their own chat template with the generation prompt added; base models
(no template, e.g. Gemma-3-270M) get a plain layout. The assistant prefill follows either way.
"""
from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...core.requests import Message
from .pieces import PieceEncoder

PLAIN_LAYOUT_VERSION = "plain-v1"


def plain_layout(messages: Sequence[Message]) -> str:
    """The base-model layout: system and user text as paragraphs, then an answer cue."""
    parts = [m.content.strip() for m in messages if m.role in ("system", "user")]
    return "\n\n".join(parts) + "\n\nAnswer: "


SENTINEL = "\x00litjudge-content-{}\x00"
CHECKS = 3            # a layout's first renders are compared with the template's own before it is trusted


@dataclass
class PromptRenderer:
    """A judge's prompt layout. Rendering a chat template (Jinja) costs ~50-100 us a prompt, which
    a million-request plan feels; so each message-role pattern is rendered once with placeholders
    and then filled, after its first CHECKS renders came out identical to the template's own (a
    template that transforms the text, by trimming it say, keeps being rendered in full)."""

    tokenizer: Any
    chat: bool

    def __post_init__(self) -> None:
        self._layouts: dict[tuple, tuple[list[str], int] | None] = {}
        self.pieces = PieceEncoder(self.tokenizer, add_special_tokens=not self.chat)

    @property
    def template_hash(self) -> str:
        source = self.tokenizer.chat_template if self.chat else PLAIN_LAYOUT_VERSION
        return hashlib.sha256(str(source).encode()).hexdigest()[:16]

    def render(self, messages: Sequence[Message], prefill: str = "") -> str:
        if not self.chat:
            return plain_layout(messages) + prefill
        # A conversation that ends with the assistant's turn is complete (a reward model scores it
        # as is); otherwise the judge's generation prompt follows.
        complete = bool(messages) and messages[-1].role == "assistant" and not prefill
        pattern = (tuple(m.role for m in messages), complete)
        layout = self._layouts.get(pattern, ([], 0))
        if layout is not None and layout[1] >= CHECKS:
            return _fill(layout[0], messages) + prefill
        text = self._template(messages, complete)
        if layout is not None:
            self._learn(pattern, messages, complete, text)
        return text + prefill

    def _template(self, messages: Sequence[Message], complete: bool) -> str:
        return self.tokenizer.apply_chat_template([{"role": m.role, "content": m.content} for m in messages],
                                                  tokenize=False, add_generation_prompt=not complete)

    def _learn(self, pattern: tuple, messages: Sequence[Message], complete: bool, text: str) -> None:
        """Trust the filled layout of `pattern` once it matched the template's own render CHECKS times."""
        parts, seen = self._layouts.get(pattern) or ([], 0)
        if not parts:
            marked = self._template([Message(m.role, SENTINEL.format(i)) for i, m in enumerate(messages)], complete)
            pieces, rest = [], marked
            for i in range(len(messages)):
                head, found, rest = rest.partition(SENTINEL.format(i))
                if not found:
                    self._layouts[pattern] = None          # the template moves or drops a message: render in full
                    return
                pieces.append(head)
            parts = [*pieces, rest]
        self._layouts[pattern] = (parts, seen + 1) if _fill(parts, messages) == text else None

    def encode(self, text: str) -> list[int]:
        """Token ids of a rendered prompt (the template already placed any special tokens)."""
        ids = self.tokenizer.encode(text, add_special_tokens=not self.chat)
        return list(ids)

    def encode_batch(self, texts: list[str]) -> list[array]:
        """Token ids of many prompts (what a plan's chunk uses): each distinct piece tokenized once,
        in one call of the fast tokenizer, where the tokenizer's boundaries are known to compose."""
        return self.pieces.encode_batch(texts)


def _fill(parts: list[str], messages: Sequence[Message]) -> str:
    """A learned layout filled: the text before each message, the message, and the layout's tail."""
    return "".join(p + m.content for p, m in zip(parts, messages)) + parts[-1]


def load_renderer(path: str, chat: bool) -> PromptRenderer:
    from transformers import AutoTokenizer

    return PromptRenderer(AutoTokenizer.from_pretrained(path), chat)
