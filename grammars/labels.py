"""Finite-label verdict languages: binary, symmetric pairwise Likert, preference, score, categories.

Each is a `LabelSet`: an ordered mapping from the exact label text to its value. The factories
below are the only place the protocols' label texts are written down.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from .errors import GrammarError
from .language import ParseResult, Unparsed, Verdict, VerdictLanguage, empty_reason


@dataclass(frozen=True)
class LabelSet(VerdictLanguage):
    """A closed set of labels, each mapped to a value. The answer is exactly one label."""

    kind = "labels"
    name: str
    pairs: tuple[tuple[str, Any], ...]

    def __post_init__(self) -> None:
        texts = [label for label, _ in self.pairs]
        if not texts:
            raise GrammarError(f"verdict language {self.name!r}: empty label set")
        if len(set(texts)) != len(texts):
            raise GrammarError(f"verdict language {self.name!r}: duplicate labels in {texts}")
        if any(t != t.strip() or t == "" for t in texts):
            raise GrammarError(f"verdict language {self.name!r}: labels must be non-empty and unpadded: {texts}")

    def spec(self) -> dict[str, Any]:
        spec = {"kind": self.kind, "name": self.name, "pairs": [[k, v] for k, v in self.pairs]}
        if self.prefixed:
            spec["scored"] = "to the end"     # stored before 2026-12: P("1") held P("10"), asked again
        return spec

    def labels(self) -> tuple[str, ...]:
        return tuple(label for label, _ in self.pairs)

    def max_chars(self) -> int:
        return max(len(label) for label in self.labels())

    def value_of(self, label: str) -> Any:
        return dict(self.pairs)[label]

    def regex(self) -> str:
        # Longest first so that alternation never stops at a label that prefixes another.
        return "(?:" + "|".join(re.escape(t) for t in sorted(self.labels(), key=len, reverse=True)) + ")"

    def parse(self, text: str) -> ParseResult:
        if (why := empty_reason(text)) is not None:
            return Unparsed(why, text or "")
        table = dict(self.pairs)
        if text in table:
            return Verdict(text, table[text])
        return Unparsed(f"not one of {list(self.labels())}", text)

    def sample(self, rng: random.Random) -> tuple[str, Any]:
        label, value = rng.choice(self.pairs)
        return label, value


def binary(yes: str = "Yes", no: str = "No") -> LabelSet:
    """The TTCW test answer: Yes (1, the test passes) or No (0)."""
    return LabelSet("binary", ((yes, 1), (no, 0)))


_LIKERT_ARROWS = {3: (1,), 5: (2, 1), 7: (3, 2, 1)}


def likert(points: int = 5, a: str = "A", b: str = "B") -> LabelSet:
    """Symmetric pairwise Likert: `[[A>>B]]` (+2, A much better) ... `[[A=B]]` (0) ... `[[B>>A]]` (-2).

    The value is always "how much better the first-named item (a) is". 3 points use `>` only;
    7 points add `>>>` for the extremes (+3/-3). `a`/`b` may be any item codes (A/B, 1/2, ...).
    """
    if points not in _LIKERT_ARROWS:
        raise GrammarError(f"likert scale must have 3, 5 or 7 points, got {points}")
    if not a or not b or a == b or any(c in a + b for c in "[]<>= "):
        raise GrammarError(f"likert item codes must be distinct and free of brackets/arrows/spaces: {a!r}, {b!r}")
    pairs: list[tuple[str, int]] = [(f"[[{a}{'>' * n}{b}]]", n) for n in _LIKERT_ARROWS[points]]
    pairs.append((f"[[{a}={b}]]", 0))
    pairs += [(f"[[{b}{'>' * n}{a}]]", -n) for n in reversed(_LIKERT_ARROWS[points])]
    return LabelSet(f"likert{points}", tuple(pairs))


def preference(a: str = "A", b: str = "B", tie: str | None = None) -> LabelSet:
    """Pairwise preference: `A` (value "a") or `B` ("b"), optionally a tie label ("tie")."""
    pairs: list[tuple[str, str]] = [(a, "a"), (b, "b")]
    if tie:
        pairs.append((tie, "tie"))
    return LabelSet("preference", tuple(pairs))


def score(lo: int = 1, hi: int = 5) -> LabelSet:
    """An absolute integer score lo..hi."""
    if not (0 <= lo < hi <= 100):
        raise GrammarError(f"score range must satisfy 0 <= lo < hi <= 100, got {lo}..{hi}")
    return LabelSet(f"score{lo}-{hi}", tuple((str(v), v) for v in range(lo, hi + 1)))


def categorical(labels: list[str] | tuple[str, ...], name: str = "categorical") -> LabelSet:
    """A configured category set, listed from best to worst; the value is the category itself,
    its ordinal rank is `len(labels) - 1 - index` (see `ordinal`)."""
    return LabelSet(name, tuple((label, label) for label in labels))


def ordinal(language: LabelSet, label: str) -> int:
    """Ordinal rank of a categorical label: the first-listed (best) category ranks highest."""
    names = language.labels()
    return len(names) - 1 - names.index(label)
