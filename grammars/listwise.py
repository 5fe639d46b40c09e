"""The listwise language of the in-context ranking papers: N lines `position. id : score`.

Design (a context-free grammar cannot cheaply say "each id exactly once" for N up to 90):
- The grammar fixes the line count and the positions slot by slot (`1. `, `2. `, ... `N. `), lets
  each slot choose any of the N ids, and forces the scores to be non-increasing (the papers ask for
  the list sorted by score). It grows linearly: (hi-lo+1) rules per position.
- Uniqueness is checked by `parse`: a duplicated or missing id makes the answer `Unparsed` with the
  ids named. The runner then re-asks a bounded number of times and reports re-asks and failures.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from .errors import GrammarError
from .language import ParseResult, Unparsed, Verdict, VerdictLanguage, empty_reason

_ID = re.compile(r"[A-Za-z0-9_\-]+")


@dataclass(frozen=True)
class Listwise(VerdictLanguage):
    """Every id of `ids` exactly once, one per line, sorted by score (hi first)."""

    kind = "listwise"
    ids: tuple[str, ...]
    lo: int = 1
    hi: int = 5

    def __post_init__(self) -> None:
        if len(self.ids) < 2:
            raise GrammarError("a listwise verdict needs at least 2 item ids")
        if len(set(self.ids)) != len(self.ids):
            dup = sorted({i for i in self.ids if self.ids.count(i) > 1})
            raise GrammarError(f"duplicate item ids in listwise language: {dup}")
        bad = [i for i in self.ids if not _ID.fullmatch(i)]
        if bad:
            raise GrammarError(f"listwise ids must be letters, digits, '_' or '-': {bad}")
        if not (0 <= self.lo < self.hi <= 9):
            raise GrammarError(f"listwise scores must be single digits lo < hi, got {self.lo}..{self.hi}")

    def spec(self) -> dict[str, Any]:
        return {"kind": self.kind, "ids": list(self.ids), "lo": self.lo, "hi": self.hi}

    def max_chars(self) -> int:
        return len(f"{len(self.ids)}. {max(self.ids, key=len)} : {self.hi}\n") * len(self.ids)

    def _id_alt(self) -> str:
        return "(?:" + "|".join(re.escape(i) for i in sorted(self.ids, key=len, reverse=True)) + ")"

    def regex(self) -> str:
        line = "{pos}\\. " + self._id_alt() + f" : [{self.lo}-{self.hi}]"
        return "\\n".join(line.format(pos=p) for p in range(1, len(self.ids) + 1))

    def ebnf(self) -> str:
        n, scores = len(self.ids), range(self.hi, self.lo - 1, -1)
        rules = [f"root ::= p1s{self.hi}", "id ::= " + " | ".join(f'"{i}"' for i in self.ids)]
        for pos in range(1, n + 1):
            for cap in scores:
                alts = []
                for s in range(cap, self.lo - 1, -1):
                    tail = f' "\\n" p{pos + 1}s{s}' if pos < n else ""
                    alts.append(f'"{s}"{tail}')
                rules.append(f'p{pos}s{cap} ::= "{pos}. " id " : " ({" | ".join(alts)})')
        return "\n".join(rules)

    def parse(self, text: str) -> ParseResult:
        if (why := empty_reason(text)) is not None:
            return Unparsed(why, text or "")
        lines = text.split("\n")
        if len(lines) != len(self.ids):
            return Unparsed(f"expected {len(self.ids)} lines, got {len(lines)}", text)
        known, seen, last = set(self.ids), set(), self.hi
        ranking: list[tuple[str, int]] = []
        line_re = re.compile(r"(\d+)\. (" + _ID.pattern + r") : (\d)")
        for pos, line in enumerate(lines, start=1):
            m = line_re.fullmatch(line)
            if not m or int(m.group(1)) != pos:
                return Unparsed(f"line {pos} is not '{pos}. id : score': {line!r}", text)
            item, value = m.group(2), int(m.group(3))
            if item not in known:
                return Unparsed(f"line {pos}: unknown id {item!r}", text)
            if item in seen:
                missing = sorted(known - {r[0] for r in ranking} - {item})
                return Unparsed(f"duplicate id {item!r} at line {pos}; missing {missing}", text)
            if not (self.lo <= value <= last):
                return Unparsed(f"line {pos}: score {value} out of range or not sorted", text)
            seen.add(item)
            ranking.append((item, value))
            last = value
        return Verdict("listwise", tuple(ranking))

    def sample(self, rng: random.Random) -> tuple[str, Any]:
        order = list(self.ids)
        rng.shuffle(order)
        scores = sorted((rng.randint(self.lo, self.hi) for _ in order), reverse=True)
        ranking = tuple(zip(order, scores))
        return "\n".join(f"{p}. {i} : {s}" for p, (i, s) in enumerate(ranking, start=1)), ranking


def position_scores(ranking: tuple[tuple[str, int], ...]) -> dict[str, float]:
    """The papers' rank-position score (first listed N, last 1) on one scale whatever N: the share
    of the list's other items ranked below it, 1 for the first listed, 0 for the last. For lists
    of one size the same order (and Spearman, ICC) as N..1; pooled over lists of 7 and 12 items,
    N..1 scored the first of a list of 7 as the sixth of a list of 12."""
    n = len(ranking)
    return {item: (n - 1 - pos) / (n - 1) if n > 1 else 1.0 for pos, (item, _) in enumerate(ranking)}
