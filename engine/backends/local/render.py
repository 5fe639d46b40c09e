"""Turn messages into the exact prompt text a local judge sees, and that text into its token ids.

Chat judges always get their own chat template with the generation prompt added; base models
(no template, e.g. Gemma-3-270M) get a plain layout. The assistant prefill follows either way.
Only the special tokens the template places are special: the messages' and the prefill's text is
tokenized as ordinary text, whatever it holds (engine/backends/local/special.py); a base model's
plain layout places none, so all of its text is.
"""
from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.errors import BackendUnavailable
from ...core.requests import Message
from .file_tokenizer import file_tokenizer
from .label_tokens import LabelTokens, label_tokens
from .pieces import PieceEncoder
from .reuse import FolderReuse
from .special import Rendered, SpecialTokens, trace

PLAIN_LAYOUT_VERSION = "plain-v1"


def plain_layout(messages: Sequence[Message]) -> str:
    """The base-model layout: system and user text as paragraphs, then an answer cue."""
    parts = [m.content.strip() for m in messages if m.role in ("system", "user")]
    return "\n\n".join(parts) + "\n\nAnswer: "


SENTINEL = "\x00litjudge-content-{}\x00"
CHECKS = 3            # a layout's first renders are compared with the template's own before it is trusted
TAIL_CHARS = 256      # a label's tokens are found after at most this much of the prompt's end


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
        self._sentinels: dict[tuple, str] = {}        # each pattern rendered with placeholder messages
        self._plain: dict[tuple, bool] = {}           # its clean prompts need no tracing (see `_needs_trace`)
        self.specials = SpecialTokens.of(self.tokenizer)
        self.pieces = PieceEncoder(self.tokenizer, add_special_tokens=not self.chat, specials=self.specials)

    @property
    def template_hash(self) -> str:
        source = self.tokenizer.chat_template if self.chat else PLAIN_LAYOUT_VERSION
        return hashlib.sha256(str(source).encode()).hexdigest()[:16]

    def render(self, messages: Sequence[Message], prefill: str = "") -> str:
        """The prompt text; a `Rendered` (the same text, its template tokens marked) when the judged
        text holds a special token's text."""
        if not self.chat:
            return plain_layout(messages) + prefill
        # A conversation that ends with the assistant's turn is complete (a reward model scores it
        # as is); otherwise the judge's generation prompt follows.
        complete = bool(messages) and messages[-1].role == "assistant" and not prefill
        pattern = (tuple(m.role for m in messages), complete)
        layout = self._layouts.get(pattern, ([], 0))
        if layout is not None and layout[1] >= CHECKS:
            text = _fill(layout[0], messages)
        else:
            text = self._template(messages, complete)
            if layout is not None:
                self._learn(pattern, messages, complete, text)
        if self.specials.pattern is None or not self._needs_trace(pattern, messages, complete, prefill):
            return text + prefill
        return self._traced(pattern, messages, complete, text, prefill)

    def _needs_trace(self, pattern: tuple, messages: Sequence[Message], complete: bool, prefill: str) -> bool:
        """Whether a prompt's special tokens may not all be the template's: its judged text holds a
        special token's text, or the layout's parts could join a message's edge into one."""
        plain = self._plain.get(pattern)
        if plain is None:
            parts = _parts(self._sentinel(pattern, messages, complete), len(messages))
            plain = self._plain[pattern] = parts is not None and not self.specials.joins(parts)
        if not plain:
            return True
        in_text, first = self.specials.in_text, self.specials.firsts
        if len(first) == 1 and first not in prefill:      # one character test per message first (every prompt asks)
            for m in messages:
                if first in m.content:
                    break
            else:
                return False
        return in_text(prefill) or any(in_text(m.content) for m in messages)

    def _traced(self, pattern: tuple, messages: Sequence[Message], complete: bool, text: str, prefill: str) -> Rendered:
        """The prompt with the template's special tokens marked; they must be those the template
        places around placeholder messages (else the judged text joined the template's into one)."""
        spans = trace(self.specials, lambda ms: self._template(ms, complete), messages, text)
        around = self._sentinel(pattern, messages, complete)
        placed = [around[a:b] for a, b in self.specials.spans(around)]
        if [text[a:b] for a, b in spans] != placed:
            raise BackendUnavailable("the judge's chat template places special tokens that depend on the judged text "
                                     f"({len(spans)} here, {len(placed)} around placeholder messages), so litjudge "
                                     "cannot tell them from the text's own; judge with another model")
        return Rendered.of(text + prefill, spans)

    def _sentinel(self, pattern: tuple, messages: Sequence[Message], complete: bool) -> str:
        if pattern not in self._sentinels:
            self._sentinels[pattern] = self._template([Message(m.role, SENTINEL.format(i))
                                                       for i, m in enumerate(messages)], complete)
        return self._sentinels[pattern]

    def _template(self, messages: Sequence[Message], complete: bool) -> str:
        return self.tokenizer.apply_chat_template([{"role": m.role, "content": m.content} for m in messages],
                                                  tokenize=False, add_generation_prompt=not complete)

    def _learn(self, pattern: tuple, messages: Sequence[Message], complete: bool, text: str) -> None:
        """Trust the filled layout of `pattern` once it matched the template's own render CHECKS times."""
        parts, seen = self._layouts.get(pattern) or ([], 0)
        if not parts:
            parts = _parts(self._sentinel(pattern, messages, complete), len(messages)) or []
            if not parts:
                self._layouts[pattern] = None          # the template moves or drops a message: render in full
                return
        self._layouts[pattern] = (parts, seen + 1) if _fill(parts, messages) == text else None

    def encode(self, prompt: str) -> list[int]:
        """Token ids of one prompt made by `render` (see `encode_batch`)."""
        return list(self.encode_batch([prompt])[0])

    def encode_batch(self, prompts: list[str]) -> list[array]:
        """Token ids of prompts made by `render` (what a plan's chunk uses): each distinct piece
        tokenized once where the tokenizer's boundaries are known to compose; a prompt whose judged
        text holds a special token's text is cut at the template's own (`Rendered`)."""
        traced = [i for i, p in enumerate(prompts) if type(p) is Rendered]
        if not traced:
            return self.pieces.encode_batch(prompts)
        marked = set(traced)
        ids = dict(zip(traced, self.specials.cut([prompts[i] for i in traced],
                                                 [prompts[i].template for i in traced])))   # type: ignore[attr-defined]
        rest = [i for i in range(len(prompts)) if i not in marked]
        ids.update(zip(rest, self.pieces.encode_batch([prompts[i] for i in rest])))
        return [ids[i] for i in range(len(prompts))]

    def encode_text(self, text: str) -> list[int]:
        """Token ids of text that is all judged text (a prompt's end after `tail`, a label, an
        analysis): every special token's text split, and none added around it (a prompt's end is not
        its start: a BOS, or an EOS a tokenizer adds, belongs to the whole prompt's ids only)."""
        return self.specials.split([text], add_special_tokens=False)[0]

    def label_tokens(self, prompt: str, labels: Sequence[str]) -> LabelTokens:
        """Each label's tokens after `prompt`: the one way they are found (the distribution mode's
        labels, the analyze mode's verdict tail, `check-labels`), from the prompt's `tail` on."""
        return label_tokens(self.encode_text, self.tail(prompt), labels)

    def tail(self, prompt: str) -> str:
        """The end of a prompt from which its tokenization starts afresh: after the last special
        token the template placed (a segment the tokenizer tokenizes on its own), at most TAIL_CHARS
        (beyond that a label attaches as it does to the last TAIL_CHARS)."""
        start = max(0, len(prompt) - TAIL_CHARS)
        if not self.chat:
            return prompt[start:]
        if type(prompt) is Rendered:
            spans = list(prompt.template)
        else:
            reach = max(0, start - self.specials.longest)        # a token across the window's start counts
            spans = [(a + reach, b + reach) for a, b in self.specials.spans(prompt[reach:])]
        return prompt[max([start, *(self.specials.after(prompt, s) for s in spans)]):]


def _parts(marked: str, n: int) -> list[str] | None:
    """A layout's text around its n placeholder messages, or None when the template moved or dropped one."""
    pieces, rest = [], marked
    for i in range(n):
        head, found, rest = rest.partition(SENTINEL.format(i))
        if not found:
            return None
        pieces.append(head)
    return [*pieces, rest]


def _fill(parts: list[str], messages: Sequence[Message]) -> str:
    """A learned layout filled: the text before each message, the message, and the layout's tail."""
    return "".join(p + m.content for p, m in zip(parts, messages)) + parts[-1]


def load_renderer(path: str, chat: bool) -> PromptRenderer:
    """The judge's renderer: its tokenizer read from its files where they say all (no transformers
    import, so a plan whose verdicts are stored stays light: engine/backends/local/file_tokenizer.py),
    else as transformers loads it (a folder's handed out again while free and unchanged: reuse.py)."""
    tokenizer = file_tokenizer(path)
    if tokenizer is not None:
        return PromptRenderer(tokenizer, chat)
    if not Path(path).is_dir():                  # a hub name: its files are the hub cache's to change
        return PromptRenderer(_transformers_tokenizer(path), chat)
    loaded, keep = _LOADED.take(Path(path), lambda: _transformers_tokenizer(path))
    return keep(PromptRenderer(loaded, chat))


_LOADED: FolderReuse[Any] = FolderReuse()        # each folder's tokenizer as transformers loads it (reuse.py)


def _transformers_tokenizer(path: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)
