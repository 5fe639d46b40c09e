"""The TTCW dataset's own reading of free-form judge responses, for replaying recorded judges:
a response that starts with "yes" (case-insensitive, after leading whitespace) is Yes, any other
non-empty response is No. It is deliberately lenient because that is the published rule; it is
used only for replay, never for constrained local judges. Empty text is never a verdict."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from .language import ParseResult, Unparsed, Verdict, VerdictLanguage, empty_reason


@dataclass(frozen=True)
class UpstreamYesNo(VerdictLanguage):
    kind = "upstream_yes_no"

    def spec(self) -> dict[str, Any]:
        return {"kind": self.kind}

    def regex(self) -> str:
        return r"[\s\S]*\S[\s\S]*"

    def parse(self, text: str) -> ParseResult:
        if (why := empty_reason(text)) is not None:
            return Unparsed(why, text or "")
        return Verdict("Yes", 1) if text.lstrip().lower().startswith("yes") else Verdict("No", 0)

    def max_chars(self) -> int:
        return 2048   # free-form recorded text; only replayed, never generated

    def sample(self, rng: random.Random) -> tuple[str, Any]:
        yes = rng.random() < 0.5
        return ("Yes, because " if yes else "No. The story ") + "x" * rng.randint(0, 5), int(yes)
