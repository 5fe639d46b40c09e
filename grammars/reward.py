"""A reward model's verdict: one real number per text (a sequence-classification head's logit).
It is produced by a pooling model, not decoded, so it has no constraint; the exact parser reads
the stored number back (a non-finite or missing score is never a verdict)."""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from .language import ParseResult, Unparsed, Verdict, VerdictLanguage, empty_reason


@dataclass(frozen=True)
class RewardScore(VerdictLanguage):
    kind = "reward"

    def spec(self) -> dict[str, Any]:
        return {"kind": self.kind}

    def regex(self) -> str:
        return r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?"

    def parse(self, text: str) -> ParseResult:
        if (why := empty_reason(text)) is not None:
            return Unparsed(why, text or "")
        try:
            value = float(text)
        except ValueError:
            return Unparsed(f"not a number: {text[:40]!r}", text)
        if not math.isfinite(value):
            return Unparsed(f"not a finite number: {text!r}", text)
        return Verdict(text, value)

    def sample(self, rng: random.Random) -> tuple[str, Any]:
        text = f"{rng.uniform(-10, 10):.6f}"
        return text, float(text)

    def max_chars(self) -> int:
        return 32
