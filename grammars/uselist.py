"""The answer language of a generation turn in the Alternate Uses Task: exactly `n` numbered lines
`k. use`, each use 1..`max_words` words separated by single spaces, a word being a letter then at
most `max_word_chars` - 1 letters, apostrophes or hyphens (no digits: a base model under the
constraint otherwise fills the slots with years and runs of digits).

The AUT prompts ask for "a list of 5 uses, 5 words long": a small model left free writes
preambles, sub-bullets, 12-word sentences or 3 items. Constrained to this language, every turn is
a list the study can use, so no turn is re-asked and every level holds exactly `n` uses. The
grammar is finite (no unbounded repetition), so the longest answer bounds the token budget.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from .errors import GrammarError
from .language import ParseResult, Unparsed, Verdict, VerdictLanguage, empty_reason

_FIRST, _REST = "A-Za-z", "A-Za-z'\\-"


@dataclass(frozen=True)
class UseList(VerdictLanguage):
    kind = "use_list"
    n: int = 5
    max_words: int = 5
    max_word_chars: int = 16

    def __post_init__(self) -> None:
        if not 1 <= self.n <= 9:
            raise GrammarError(f"a use list holds 1 to 9 lines, got {self.n}")
        if not (1 <= self.max_words <= 12 and 2 <= self.max_word_chars <= 32):
            raise GrammarError(f"uses have 1 to 12 words of 2 to 32 characters, got {self.max_words} words "
                               f"of {self.max_word_chars}")

    def spec(self) -> dict[str, Any]:
        return {"kind": self.kind, "n": self.n, "max_words": self.max_words, "max_word_chars": self.max_word_chars,
                "word": self._word()}      # the word's definition is part of every key

    def _word(self) -> str:
        return f"[{_FIRST}][{_REST}]{{0,{self.max_word_chars - 1}}}"

    def _line(self) -> str:
        return f"{self._word()}(?: {self._word()}){{0,{self.max_words - 1}}}"

    def regex(self) -> str:
        return "\\n".join(f"{k}\\. {self._line()}" for k in range(1, self.n + 1))

    def ebnf(self) -> str:
        def nested(first: str, more: str, count: int) -> str:      # first (more (more ...)?)? with `count` mores
            tail = ""
            for _ in range(count):
                tail = f" ({more}{tail})?"
            return first + tail
        lines = ' "\\n" '.join(f'"{k}. " use' for k in range(1, self.n + 1))
        return "\n".join([f"root ::= {lines}",
                          "use ::= " + nested("word", '" " word', self.max_words - 1),
                          "word ::= " + nested(f"[{_FIRST}]", f"[{_REST}]", self.max_word_chars - 1)])

    def max_chars(self) -> int:
        line = len(f"{self.n}. ") + self.max_words * (self.max_word_chars + 1)
        return self.n * line

    def parse(self, text: str) -> ParseResult:
        if (why := empty_reason(text)) is not None:
            return Unparsed(why, text or "")
        lines = text.split("\n")
        if len(lines) != self.n:
            return Unparsed(f"expected {self.n} numbered lines, got {len(lines)}", text)
        line_re = re.compile(r"(\d)\. (" + self._line() + ")")
        uses = []
        for k, line in enumerate(lines, start=1):
            m = line_re.fullmatch(line)
            if not m or int(m.group(1)) != k:
                return Unparsed(f"line {k} is not '{k}. ' and 1-{self.max_words} words: {line!r:.80}", text)
            uses.append(m.group(2))
        return Verdict("uses", tuple(uses))

    def sample(self, rng: random.Random) -> tuple[str, Any]:
        def word() -> str:
            first = rng.choice("abcdefghijklmnopqrstuvwxyzABCZ")
            return first + "".join(rng.choice("abcxyzQ'-") for _ in range(rng.randint(0, self.max_word_chars - 1)))
        uses = tuple(" ".join(word() for _ in range(rng.randint(1, self.max_words))) for _ in range(self.n))
        return "\n".join(f"{k}. {u}" for k, u in enumerate(uses, start=1)), uses
