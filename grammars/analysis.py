"""Analysis-then-verdict form of any language: free text of bounded length, a fixed marker,
then the constrained verdict (`... reasoning ...\nVerdict: Yes`).

Only the tail after the LAST marker line counts, and it must be exactly in the inner language,
so verdict-like strings inside the analysis (or copied from a story) never change the verdict.
Local backends produce this form in two passes: the analysis (stopped at the marker, bounded by
`max_analysis_tokens`), then the verdict: a label set's label is the one most probable right
after `\n{marker}` with its space, as the tokenizer joins them (`:` ` Yes`), each label scored
whole (decoded token by token, a lone space token led to labels the model never writes there); a
listwise is constrained after `\n{marker} `.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from .errors import GrammarError
from .language import ParseResult, Unparsed, VerdictLanguage, empty_reason


@dataclass(frozen=True)
class Analyzed(VerdictLanguage):
    kind = "analyzed"
    inner: VerdictLanguage
    marker: str = "Verdict:"
    max_analysis_tokens: int = 256

    def __post_init__(self) -> None:
        if (wrong := marker_problem(self.marker)) is not None:
            raise GrammarError(f"analysis marker {wrong}")
        if self.max_analysis_tokens < 1:
            raise GrammarError("max_analysis_tokens must be >= 1")

    def spec(self) -> dict[str, Any]:
        spec = {"kind": self.kind, "inner": self.inner.spec(), "marker": self.marker,
                "max_analysis_tokens": self.max_analysis_tokens}
        if self.inner.labels():
            spec["decided"] = "by label probability"  # before 2026-12 decoded after a lone space: asked again
        return spec

    @staticmethod
    def tail_prefix_of(language: VerdictLanguage) -> str:
        """The separator of an analysis-form language (`language` must be one)."""
        if not isinstance(language, Analyzed):
            raise TypeError(f"not an analysis-form language: {language.kind}")
        return language.tail_prefix

    @property
    def tail_prefix(self) -> str:
        """What separates the analysis from the verdict in the text."""
        return f"\n{self.marker} "

    def regex(self) -> str:
        return r"[\s\S]*" + re.escape(self.tail_prefix) + "(?:" + self.inner.regex() + ")"

    def ebnf(self) -> str:
        inner = self.inner.ebnf().replace("root ::=", "verdict ::=", 1)
        return (f'root ::= analysis {_ebnf_str(self.tail_prefix)} verdict\n'
                f'analysis ::= [^\\n]* ("\\n" [^\\n]*)*\n{inner}')

    def split(self, text: str) -> tuple[str, str] | None:
        """(analysis, tail) at the last marker line, or None when there is no marker line."""
        idx = text.rfind(self.tail_prefix)
        if idx < 0:
            return None
        return text[:idx], text[idx + len(self.tail_prefix):]

    def parse(self, text: str) -> ParseResult:
        if (why := empty_reason(text)) is not None:
            return Unparsed(why, text or "")
        parts = self.split(text)
        if parts is None:
            return Unparsed(f"no '{self.marker}' line", text)
        result = self.inner.parse(parts[1])
        if isinstance(result, Unparsed):
            return Unparsed(f"after '{self.marker}': {result.reason}", text)
        return result

    def sample(self, rng: random.Random) -> tuple[str, Any]:
        words = ["plot", "[[A>>B]]", "Verdict: No", "voice", "Yes", "\n", "pacing", "B"]
        analysis = " ".join(rng.choice(words) for _ in range(rng.randint(0, 12)))
        tail, value = self.inner.sample(rng)
        return analysis + self.tail_prefix + tail, value

    def labels(self) -> tuple[str, ...] | None:
        return None

    def max_chars(self) -> int:
        return self.inner.max_chars() + len(self.tail_prefix)


def _ebnf_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def marker_problem(marker: str) -> str | None:
    """What is wrong with a marker, or None: one line of text without spaces around it (the verdict
    follows after one); where an option names one (reference-based Likert's), it is checked there."""
    if not marker.strip() or "\n" in marker or marker != marker.strip():
        return f"must be one line without spaces around it (the verdict follows after one), got {marker!r}"
    return None
