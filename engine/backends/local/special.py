"""Judged text never becomes the judge's special tokens.

A local judge's prompt is its chat template's text with the messages' text in it. Only the special
tokens the TEMPLATE places are special: every character of the messages (stories, prompts,
references, generated text) and of the assistant prefill is tokenized as ordinary text, exactly as
Hugging Face tokenizes it with `split_special_tokens=True`, so a story holding `<|im_end|>` cannot
close its turn and write the verdict itself.

- "Special" is the tokenizer's own mark (an added token with `special`, what the Rust tokenizer's
  `encode_special_tokens` splits; a superset of transformers' `all_special_tokens`). Added tokens
  that are not special (Gemma's newline runs and HTML tags, Qwen's `<tool_call>`) are ordinary
  vocabulary: text holding them is tokenized into them by every Hugging Face pipeline, split or not,
  and no template marks a turn with one, so they stay as the tokenizer makes them.
- The cut is exact: the Rust tokenizer splits a text on its added tokens before anything else and
  tokenizes each segment between them on its own, so a prompt cut at the template's special tokens,
  each segment tokenized with special tokens split, joined with those tokens' ids, is the full
  tokenization with only the template's tokens special.
- Which tokens the template placed (`trace`): each special token's text in the messages is swapped
  for a nonce the text cannot know, the template rendered, the nonces located (they are the text's)
  and the text restored; the template's tokens are the others. This holds when a template trims or
  moves the text; the render must come back identical and the template's tokens must be those it
  places around placeholder messages, or the prompt is refused in one line (never guessed).
- A prompt whose messages hold no special token's text needs none of this: every special token in
  it is the template's (`Rendered` marks the others, which are rare), unless the template's text
  could join a message's edge into one (`joins`), which makes every prompt of that layout traced.
"""
from __future__ import annotations

import re
import secrets
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...core.errors import BackendUnavailable
from ...core.requests import IDS, Message

Span = tuple[int, int]


class Rendered(str):
    """A prompt whose judged text holds special tokens' text: `template` are the spans of the
    special tokens the template placed, the only ones tokenized as special. (A plain `str` from the
    renderer holds no judged special-token text: all its special tokens are the template's.)"""

    template: tuple[Span, ...]

    @classmethod
    def of(cls, text: str, template: Sequence[Span]) -> Rendered:
        out = cls(text)
        out.template = tuple(template)
        return out


def _trie(words: Sequence[str]) -> str:
    """A regex matching any of `words`, longest first at each position (what the tokenizer's
    added-token matcher finds): a trie, so a tokenizer's thousands of special tokens cost a few
    character tests per position, not one test per token."""
    root: dict = {}
    for w in words:
        node = root
        for c in w:
            node = node.setdefault(c, {})
        node[""] = {}

    def build(node: dict) -> str:
        ends = "" in node
        alts = [re.escape(c) + build(child) for c, child in sorted(node.items()) if c]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if ends else body

    return build(root)


@dataclass
class SpecialTokens:
    """A tokenizer's special tokens: found in text, and text tokenized with them split or cut."""

    tokenizer: Any
    ids: dict[str, int] = field(default_factory=dict)
    strips: dict[str, tuple[bool, bool]] = field(default_factory=dict)   # lstrip, rstrip
    pattern: re.Pattern | None = None
    firsts: str = ""
    longest: int = 0

    @classmethod
    def of(cls, tokenizer: Any) -> SpecialTokens:
        backend = getattr(tokenizer, "backend_tokenizer", None)
        added = backend.get_added_tokens_decoder() if backend is not None else \
            getattr(tokenizer, "added_tokens_decoder", None) or {}
        special = {i: t for i, t in added.items() if getattr(t, "special", False) and t.content}
        out = cls(tokenizer, {t.content: i for i, t in special.items()},
                  {t.content: (t.lstrip, t.rstrip) for t in special.values() if t.lstrip or t.rstrip})
        if out.ids:
            out.pattern = re.compile(_trie(list(out.ids)))
            out.firsts = "".join(sorted({t[0] for t in out.ids}))
            out.longest = max(map(len, out.ids))
        return out

    def in_text(self, text: str) -> bool:
        """Whether `text` holds a special token's text (a character test first: most texts hold none)."""
        return any(c in text for c in self.firsts) and self.pattern is not None and self.pattern.search(text) is not None

    def spans(self, text: str) -> list[Span]:
        return [m.span() for m in self.pattern.finditer(text)] if self.pattern is not None else []

    def after(self, text: str, span: Span) -> int:
        """Where the text after a special token starts (past the spaces it strips on its right)."""
        end = span[1]
        if self.strips.get(text[span[0]:end], (False, False))[1]:
            while end < len(text) and text[end].isspace():
                end += 1
        return end

    def joins(self, parts: Sequence[str]) -> bool:
        """Whether a template part could join a message's edge into a special token's text: a part
        that ends with the start of one, or begins with the end of one."""
        return any(p.endswith(t[:k]) or p.startswith(t[k:]) for t in self.ids for k in range(1, len(t)) for p in parts)

    def split(self, texts: list[str], add_special_tokens: bool) -> list[list[int]]:
        """Each text tokenized with every special token's text as ordinary text."""
        return self.tokenize(texts, add_special_tokens, split=True)

    def tokenize(self, texts: list[str], add_special_tokens: bool, split: bool) -> list[list[int]]:
        """Each text tokenized in one batch, special tokens split or recognised as asked, whatever
        state the tokenizer was left in (transformers leaves `split_special_tokens=True` set on it
        after such a call). The Rust tokenizer's `encode_special_tokens` is set for this call only:
        a renderer's tokenizer is used by one thread at a time (engine/core/runner.py). It is called
        directly where the transformers wrapper would only add offsets and conversions (2x the time),
        i.e. when no truncation or padding is set on it (the wrapper switches those off every call)."""
        if not texts:
            return []
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is None or backend.truncation is not None or backend.padding is not None:
            return self.tokenizer(texts, add_special_tokens=add_special_tokens, split_special_tokens=split)["input_ids"]
        before = backend.encode_special_tokens
        backend.encode_special_tokens = split
        try:
            encode = getattr(backend, "encode_batch_fast", None) or backend.encode_batch     # (no offsets: faster)
            return [e.ids for e in encode(texts, add_special_tokens=add_special_tokens)]
        finally:
            backend.encode_special_tokens = before

    def cut(self, texts: Sequence[str], spans: Sequence[Sequence[Span]]) -> list[array]:
        """Each text's ids with only `spans` special (each text's own, in order): the segments
        between them tokenized in one batch with special tokens split (see the module)."""
        segments: list[str] = []
        plans: list[list[int | str]] = []
        for text, marks in zip(texts, spans, strict=True):
            plan: list[int | str] = []
            at = 0
            for a, b in marks:
                token, b = text[a:b], self.after(text, (a, b))          # the token takes the spaces it strips
                while self.strips.get(token, (False, False))[0] and a > at and text[a - 1].isspace():
                    a -= 1
                if a > at:
                    plan.append(len(segments))
                    segments.append(text[at:a])
                plan.append(token)
                at = b
            if at < len(text):
                plan.append(len(segments))
                segments.append(text[at:])
            plans.append(plan)
        tokenized = self.split(segments, add_special_tokens=False)
        return [array(IDS, [i for step in plan for i in ((self.ids[step],) if isinstance(step, str) else tokenized[step])])
                for plan in plans]


def trace(specials: SpecialTokens, template: Callable[[list[Message]], str], messages: Sequence[Message],
          text: str) -> list[Span]:
    """The spans of the special tokens `template` placed in `text` (its render of `messages`): each
    special token's text in the messages swapped for a nonce, rendered, located, restored (see the
    module)."""
    nonce = "\ue000" + secrets.token_hex(8)
    while any(nonce in m.content for m in messages):
        nonce = "\ue000" + secrets.token_hex(8)
    found: list[str] = []

    def hide(m: re.Match) -> str:
        found.append(m.group())
        return f"{nonce}{len(found) - 1}\ue001"

    assert specials.pattern is not None, "traced only where the tokenizer has special tokens"
    rendered = template([Message(m.role, specials.pattern.sub(hide, m.content)) for m in messages])
    restored, judged, at, size = [], [], 0, 0
    for m in re.finditer(re.escape(nonce) + r"(\d+)\ue001", rendered):
        restored.append(rendered[at:m.start()])
        size += m.start() - at
        token = found[int(m.group(1))]
        restored.append(token)
        judged.append((size, size + len(token)))
        size, at = size + len(token), m.end()
    restored.append(rendered[at:])
    if "".join(restored) != text:
        raise BackendUnavailable("the judge's chat template changes the text it is given in a way litjudge cannot "
                                 "trace, so it cannot tell the template's special tokens from the judged text's; "
                                 "judge with another model")
    return [s for s in specials.spans(text) if not any(a < s[1] and s[0] < b for a, b in judged)]
