"""What a verdict language is: a finite label set or a structured list, with one exact parser.

A language is declared once (see `labels.py`, `listwise.py`) and everything else derives from it:
the vLLM constraint, the outlines constraint, the JSON schema for API backends (`compile.py`),
the parser and the label-to-value map. Parsing is by full match, never by search, so text the
judge copied from a story cannot become a verdict.
"""
from __future__ import annotations

import hashlib
import json
import random
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass(frozen=True)
class Verdict:
    """A well-formed answer: the label text as emitted and the value it stands for."""

    label: str
    value: Any


@dataclass(frozen=True)
class Unparsed:
    """An answer that is not in the language. Never a verdict; counted and reported."""

    reason: str
    raw: str


ParseResult = Verdict | Unparsed


class VerdictLanguage(ABC):
    """Base of all verdict languages. Subclasses are frozen dataclasses."""

    kind: ClassVar[str]

    @abstractmethod
    def spec(self) -> dict[str, Any]:
        """Canonical JSON-able description; it goes into request keys and the store."""

    @abstractmethod
    def regex(self) -> str:
        """A regular expression that full-matches exactly the admitted strings (modulo checks
        a regex cannot express, such as listwise uniqueness, which `parse` adds)."""

    @abstractmethod
    def parse(self, text: str) -> ParseResult:
        """The exact reader: `Verdict` for an admitted string, else `Unparsed` with a reason."""

    @abstractmethod
    def sample(self, rng: random.Random) -> tuple[str, Any]:
        """A random admitted string and the value it must parse to (for property tests)."""

    def labels(self) -> tuple[str, ...] | None:
        """The finite set of complete answers, or None for structured languages."""
        return None

    @property
    def prefixed(self) -> bool:
        """Whether a label starts another ("1" and "10", "Good" and "Good+"): a label's probability
        is then of it and the end of the answer, else P("1") would hold P("10")."""
        texts = self.labels() or ()
        return any(a != b and b.startswith(a) for a in texts for b in texts)

    @abstractmethod
    def max_chars(self) -> int:
        """Length in characters of the longest admitted answer (bounds the token budget)."""

    def ebnf(self) -> str:
        """The language as an EBNF grammar (xgrammar / GBNF dialect) rooted at `root`."""
        return "root ::= " + " | ".join(json.dumps(label) for label in self.labels() or ())

    def fingerprint(self) -> str:
        body = json.dumps(self.spec(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(body.encode()).hexdigest()[:16]


def empty_reason(text: str) -> str | None:
    """Why an output is not even a candidate answer (empty text is never a verdict)."""
    if text is None or text.strip() == "":
        return "empty output"
    return None
