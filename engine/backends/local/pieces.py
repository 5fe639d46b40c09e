"""Each distinct piece of text tokenized once.

A plan's prompts are templates filled with a few texts, and the same text comes back many times:
both orders of a pair, 14 tests per TTCW story, every prompt variant and judge of a sweep. So a
prompt is cut into pieces at boundaries where the judge's tokenizer is known to cut anyway, each
distinct piece is tokenized once (kept by content), and a prompt's ids are its pieces' ids joined.

Exactness (vLLM receives these ids, so they must be the full tokenization's, id for id) rests on
the pre-tokenizer: a byte-level BPE merges only inside the pre-tokens its regex cuts, so ids join
exactly wherever every piece's pre-tokens are the full text's. Two regex families are known here,
each with a boundary proven for it (and property-tested, tests/test_pieces.py):
- GPT-2's (`\\s+(?!\\S)|\\s+`; SmolLM2): cut BEFORE a newline that precedes a non-space character
  other than an added token (the regex backs a whitespace run off its last character when a word
  follows, so that newline is a pre-token of its own, and the run before it ends at the text's end
  in the left piece as well; an added token ends the segment the regex sees, so no backing off
  happens before one: the property test found `\\n\\n<|im_start|>`).
- Qwen2 / Llama 3's (`\\s*[\\r\\n]+` before `\\s+(?!\\S)`): cut AFTER a newline that precedes a
  non-space character (a newline run is one pre-token that no neighbour can join, and no
  alternative looks behind).
Any other tokenizer (SentencePiece, a normalizer other than NFC, added tokens that strip spaces,
special tokens added around the text) is tokenized whole, and the plan's figures say so. The first
prompts of every encoder are also tokenized whole and compared: one difference switches it to
whole prompts for good (said in the figures), and the checked chunk is tokenized whole.
"""
from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any


@dataclass(frozen=True)
class Cut:
    """Where prompts are cut: at each match of `newline` (a pattern that starts with the newline
    itself, so the regex engine scans for it: 2.4x faster than a zero-width split), before it or
    after it."""

    newline: re.Pattern
    before: bool

    def split(self, text: str) -> list[str]:
        pieces, last = [], 0
        for m in self.newline.finditer(text):
            at = m.start() if self.before else m.end()
            pieces.append(text[last:at])
            last = at
        pieces.append(text[last:])
        return pieces


CUT_AFTER_NEWLINE = Cut(re.compile(r"\n(?=\S)"), before=False)     # Qwen2 / Llama 3's
QWEN_RUN = r"\s*[\r\n]+"
CHECKED_PROMPTS = 32          # prompts tokenized both ways before the pieces are trusted
MAX_PIECES = 400_000          # distinct pieces kept (then the store is emptied; a chunk's texts recur within it)


def boundary_of(tokenizer: Any, add_special_tokens: bool) -> tuple[Cut | None, str]:
    """The cut proven for this tokenizer's pre-tokenizer, or None with the reason it is tokenized whole."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None, "not a fast (Rust) tokenizer"
    spec = _parts(backend)
    refused = _refusal(spec, add_special_tokens)
    if refused:
        return None, refused
    pre = spec.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
    kinds = {s.get("type") for s in steps}
    byte_level = [s for s in steps if s.get("type") == "ByteLevel"]
    splits = [s for s in steps if s.get("type") == "Split"]
    if len(byte_level) == 1 and not byte_level[0].get("add_prefix_space"):
        if byte_level[0].get("use_regex", True) and kinds <= {"ByteLevel", "Digits"}:
            added = "|".join(re.escape(t["content"]) for t in spec.get("added_tokens", []) if t.get("content"))
            cut = rf"\n(?!{added})(?=\S)" if added else r"\n(?=\S)"
            return Cut(re.compile(cut), before=True), "pieces (GPT-2 regex: cut before a newline)"
        if (not byte_level[0].get("use_regex", True) and len(splits) == 1 and kinds <= {"Split", "ByteLevel", "Digits"}
                and QWEN_RUN in splits[0].get("pattern", {}).get("Regex", "")
                and splits[0].get("behavior") == "Isolated"):
            return CUT_AFTER_NEWLINE, "pieces (Qwen2/Llama-3 regex: cut after a newline)"
    return None, f"pre-tokenizer {'+'.join(str(s.get('type')) for s in steps)}"


def _parts(backend: Any) -> dict[str, Any]:
    """The parts of the tokenizer's JSON that decide its boundaries (the model's kind, normalizer,
    pre-tokenizer, added tokens), read from each part alone: the whole JSON carries the vocabulary
    and merges too (0.75 s for Qwen2.5's, at every renderer's start; this, 0.1 ms)."""
    def state(part: Any) -> Any:
        return json.loads(part.__getstate__()) if part is not None else None
    return {"model": {"type": type(backend.model).__name__}, "normalizer": state(backend.normalizer),
            "pre_tokenizer": state(backend.pre_tokenizer),
            "added_tokens": [{"content": t.content, "lstrip": t.lstrip, "rstrip": t.rstrip}
                             for t in backend.get_added_tokens_decoder().values()]}


def _refusal(spec: dict, add_special_tokens: bool) -> str:
    """Why a tokenizer's boundaries are not known here ('' when they may be)."""
    model, normalizer = spec.get("model", {}).get("type"), spec.get("normalizer")
    if model != "BPE":
        return f"a {model} model, not byte-level BPE"
    if normalizer is not None and normalizer.get("type") != "NFC":
        return f"normalizer {normalizer.get('type')}"
    if any(t.get("lstrip") or t.get("rstrip") for t in spec.get("added_tokens", [])):
        return "added tokens that strip the spaces beside them"
    if add_special_tokens:
        return "special tokens added around the prompt (a base model's layout)"
    return ""


@dataclass
class PieceEncoder:
    """Token ids of many prompts, each distinct piece tokenized once (see the module's docstring)."""

    tokenizer: Any
    add_special_tokens: bool
    cut: Cut | None = None
    how: str = ""
    checked: int = 0
    pieces: int = 0                 # pieces seen in all prompts
    tokenized: int = 0              # of which tokenized (first seen while kept)
    _known: dict[str, tuple[int, ...]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.cut, self.how = boundary_of(self.tokenizer, self.add_special_tokens)

    def whole(self, texts: list[str]) -> list[Sequence[int]]:
        """Each text tokenized in full, in one batch. The Rust tokenizer is called directly where the
        transformers wrapper would only add offsets and conversions (2x the time here), i.e. when no
        truncation or padding is set on it (the wrapper switches those off on every call)."""
        if not texts:
            return []
        backend: Any = getattr(self.tokenizer, "backend_tokenizer", None)
        fast = getattr(backend, "encode_batch_fast", None)
        if fast is None or backend.truncation is not None or backend.padding is not None:
            return self.tokenizer(texts, add_special_tokens=self.add_special_tokens)["input_ids"]
        return [e.ids for e in fast(texts, add_special_tokens=self.add_special_tokens)]

    def encode_batch(self, texts: list[str]) -> list[Sequence[int]]:
        if self.cut is None or not texts:
            return self.whole(texts)
        split = self.cut.split
        parts = [split(t) for t in texts]
        known = self._known
        if len(known) > MAX_PIECES:
            known.clear()
        new = list({p: None for ps in parts for p in ps if p not in known})
        known.update(zip(new, map(tuple, self.whole(new))))
        self.pieces += sum(map(len, parts))
        self.tokenized += len(new)
        get, join = known.__getitem__, chain.from_iterable
        ids: list[Sequence[int]] = [tuple(join(map(get, ps))) for ps in parts]
        if self.checked < CHECKED_PROMPTS:
            ids = self._check(texts, ids)
        return ids

    def _check(self, texts: list[str], ids: list[Sequence[int]]) -> list[Sequence[int]]:
        """The first prompts both ways; one difference and the pieces are never used again."""
        n = min(len(texts), CHECKED_PROMPTS - self.checked)
        self.checked += n
        if [list(x) for x in self.whole(texts[:n])] == [list(x) for x in ids[:n]]:
            return ids
        self.cut, self.how = None, "whole prompts (a checked prompt's pieces differed from its full tokenization)"
        self._known.clear()
        return self.whole(texts)

    def figures(self) -> dict[str, Any]:
        return {"tokenization": self.how, "pieces": self.pieces, "pieces_tokenized": self.tokenized}
