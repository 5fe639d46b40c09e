"""Turn messages into the exact prompt text a local judge sees.

Chat judges always get their own chat template with the generation prompt added; base models
(no template, e.g. Gemma-3-270M) get a plain layout. The assistant prefill follows either way.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...core.requests import Message

PLAIN_LAYOUT_VERSION = "plain-v1"


def plain_layout(messages: Sequence[Message]) -> str:
    """The base-model layout: system and user text as paragraphs, then an answer cue."""
    parts = [m.content.strip() for m in messages if m.role in ("system", "user")]
    return "\n\n".join(parts) + "\n\nAnswer: "


@dataclass
class PromptRenderer:
    tokenizer: Any
    chat: bool

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
        text = self.tokenizer.apply_chat_template(
            [{"role": m.role, "content": m.content} for m in messages],
            tokenize=False, add_generation_prompt=not complete)
        return text + prefill

    def encode(self, text: str) -> list[int]:
        """Token ids of a rendered prompt (the template already placed any special tokens)."""
        ids = self.tokenizer.encode(text, add_special_tokens=not self.chat)
        return list(ids)


def load_renderer(path: str, chat: bool) -> PromptRenderer:
    from transformers import AutoTokenizer

    return PromptRenderer(AutoTokenizer.from_pretrained(path), chat)
