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

A new piece is then tokenized word by word (`Words`): the Rust tokenizer spends four fifths of its
time in its regex engine (Oniguruma, with offsets), so the same pre-tokenizer pattern is run by the
`regex` module, and each distinct pre-token goes once through the tokenizer's own BPE model (its
merges, cache and options untouched). Exact wherever both regex engines split alike: pieces with an
added token's text, a character unassigned in this Python's Unicode database (the engines' databases
differ in age), text NFC would change, or a split that does not cover the piece are tokenized on
their own, cut at their special tokens (engine/backends/local/special.py).

These are the prompts of chat judges whose judged text holds no special token's text (a renderer's
plain `str`): every special token in them is the template's. The renderer cuts the others at the
template's tokens itself, and a base model's layout (special tokens added around the prompt) is all
judged text: there every special token's text is split.
"""
from __future__ import annotations

import functools
import json
import re
import sys
import unicodedata
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import regex

from ...core.requests import IDS, joined
from .special import SpecialTokens


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
GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"   # ByteLevel(use_regex)
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
    steps = _steps(spec)
    kinds = {s.get("type") for s in steps}
    byte_level = [s for s in steps if s.get("type") == "ByteLevel"]
    splits = [s for s in steps if s.get("type") == "Split"]
    if len(byte_level) == 1 and not byte_level[0].get("add_prefix_space"):
        if byte_level[0].get("use_regex", True) and kinds <= {"ByteLevel", "Digits"}:
            added = _added_texts(spec)
            cut = rf"\n(?!{added})(?=\S)" if added else r"\n(?=\S)"
            return Cut(re.compile(cut), before=True), "pieces (GPT-2 regex: cut before a newline)"
        if (not byte_level[0].get("use_regex", True) and len(splits) == 1 and kinds <= {"Split", "ByteLevel", "Digits"}
                and QWEN_RUN in splits[0].get("pattern", {}).get("Regex", "")
                and splits[0].get("behavior") == "Isolated"):
            return CUT_AFTER_NEWLINE, "pieces (Qwen2/Llama-3 regex: cut after a newline)"
    return None, f"pre-tokenizer {'+'.join(str(s.get('type')) for s in steps)}"


def _byte_level_chars() -> str:
    """GPT-2's printable stand-in for each byte (ByteLevel), as a str.translate table's source."""
    kept = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    moved = iter(range(256, 512))
    return "".join(chr(b) if b in kept else chr(next(moved)) for b in range(256))


BYTE_LEVEL = str.maketrans(dict(enumerate(_byte_level_chars())))


def byte_level(text: str) -> str:
    """`text` as a ByteLevel pre-tokenizer hands it to the model: each of its UTF-8 bytes as that
    byte's stand-in, one character per byte (so the form of a join is the join of the forms)."""
    return text.encode().decode("latin-1").translate(BYTE_LEVEL)


@functools.cache
def _unassigned() -> re.Pattern:
    """Characters this Python's Unicode database does not assign (and surrogates): the regex engines'
    databases differ in age, so a piece holding one is tokenized whole (built once: ~0.3 s)."""
    ranges, start = [], None
    for c in range(sys.maxunicode + 1):
        missing = unicodedata.category(chr(c)) in ("Cn", "Cs")
        if missing and start is None:
            start = c
        elif not missing and start is not None:
            ranges.append((start, c - 1))
            start = None
    if start is not None:
        ranges.append((start, sys.maxunicode))
    return re.compile("[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges) + "]")


class _WordIds(dict):
    """A word's ids (packed) from the tokenizer's own model, computed the first time it is looked up."""

    def __init__(self, model: Any):
        super().__init__()
        self.model = model

    def __missing__(self, word: str) -> bytes:
        tokens = self.model.tokenize(byte_level(word))
        ids = self[word] = array(IDS, [t.id for t in tokens]).tobytes()
        return ids


@dataclass
class Words:
    """A piece tokenized word by word: the pre-tokenizer's regex run here, each distinct pre-token
    through the tokenizer's model once (see the module's docstring for when this is exact)."""

    pattern: regex.Pattern
    added: re.Pattern | None            # any added token's text
    nfc: bool
    ids: _WordIds
    MAX_WORDS = 1_000_000               # distinct words kept (then emptied)

    def encode(self, piece: str) -> bytes | None:
        """The piece's ids (packed), or None where it must be tokenized whole."""
        if not piece.isascii():
            if _unassigned().search(piece) or (self.nfc and not unicodedata.is_normalized("NFC", piece)):
                return None
        if self.added is not None and self.added.search(piece):
            return None
        words = self.pattern.findall(piece)
        if len("".join(words)) != len(piece):
            return None
        if len(self.ids) > self.MAX_WORDS:
            self.ids.clear()
        return b"".join(map(self.ids.__getitem__, words))


def words_of(backend: Any, spec: dict[str, Any]) -> Words | None:
    """Words for the two known shapes (ByteLevel with GPT-2's regex; one isolating Split regex and a
    ByteLevel without it), or None."""
    steps = _steps(spec)
    kinds = [s.get("type") for s in steps]
    if kinds == ["ByteLevel"] and steps[0].get("use_regex", True) and not steps[0].get("add_prefix_space"):
        pattern = GPT2_PATTERN
    elif (kinds == ["Split", "ByteLevel"] and steps[0].get("behavior") == "Isolated" and not steps[0].get("invert")
          and "Regex" in steps[0].get("pattern", {}) and not steps[1].get("use_regex", True)
          and not steps[1].get("add_prefix_space")):
        pattern = steps[0]["pattern"]["Regex"]
    else:
        return None
    try:
        compiled = regex.compile(pattern)
    except regex.error:
        return None
    added = _added_texts(spec)
    return Words(compiled, re.compile(added) if added else None, spec.get("normalizer") is not None,
                 _WordIds(backend.model))


def _steps(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The pre-tokenizer's steps in order (one, or those of a Sequence)."""
    pre = spec.get("pre_tokenizer") or {}
    return pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]


def _added_texts(spec: dict[str, Any]) -> str:
    """A pattern matching any added token's text ('' when there is none)."""
    return "|".join(re.escape(t["content"]) for t in spec.get("added_tokens", []) if t.get("content"))


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
    words: Words | None = field(default=None, repr=False)
    specials: SpecialTokens | None = field(default=None, repr=False)
    _known: dict[str, bytes] = field(default_factory=dict, repr=False)        # a piece's ids, packed

    def __post_init__(self) -> None:
        if self.specials is None:
            self.specials = SpecialTokens.of(self.tokenizer)
        self.cut, self.how = boundary_of(self.tokenizer, self.add_special_tokens)
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        self.words = words_of(backend, _parts(backend)) if self.cut is not None else None
        if self.words is not None:
            self.how += ", word by word"

    def whole(self, texts: list[str]) -> list[array]:
        """Each text tokenized in full, in one batch, packed (special tokens recognised: every one in
        these prompts is the template's). A base model's layout is all judged text: there they are split."""
        assert self.specials is not None
        return [array(IDS, x) for x in self.specials.tokenize(texts, self.add_special_tokens, split=self.add_special_tokens)]

    def encode_batch(self, texts: list[str]) -> list[array]:
        """Each prompt's ids, packed (see engine.core.requests.packed)."""
        if self.cut is None or not texts:
            return self.whole(texts)
        split = self.cut.split
        parts = [split(t) for t in texts]
        known = self._known
        if len(known) > MAX_PIECES:
            known.clear()
        new = list({p: None for ps in parts for p in ps if p not in known})
        known.update(self._tokenized(new))
        self.pieces += sum(map(len, parts))
        self.tokenized += len(new)
        get = known.__getitem__
        ids = [joined(map(get, ps)) for ps in parts]
        if self.checked < CHECKED_PROMPTS:
            ids = self._check(texts, ids)
        return ids

    def _tokenized(self, pieces: list[str]) -> Iterator[tuple[str, bytes]]:
        """Each new piece with its ids: word by word where that is exact, the rest in one batch, each
        cut at its special tokens (the template's: see the module) and split between them."""
        whole = pieces
        if self.words is not None:
            encode, whole = self.words.encode, []
            for piece in pieces:
                ids = encode(piece)
                if ids is None:
                    whole.append(piece)
                else:
                    yield piece, ids
        assert self.specials is not None
        cut = self.specials.cut(whole, [self.specials.spans(p) for p in whole])
        yield from ((piece, ids.tobytes()) for piece, ids in zip(whole, cut))

    def _check(self, texts: list[str], ids: list[array]) -> list[array]:
        """The first prompts both ways; one difference and the pieces are never used again."""
        n = min(len(texts), CHECKED_PROMPTS - self.checked)
        self.checked += n
        if self.whole(texts[:n]) == ids[:n]:
            return ids
        self.cut, self.words = None, None
        self.how = "whole prompts (a checked prompt's pieces differed from its full tokenization)"
        self._known.clear()
        return self.whole(texts)

    def figures(self) -> dict[str, Any]:
        return {"tokenization": self.how, "pieces": self.pieces, "pieces_tokenized": self.tokenized}
