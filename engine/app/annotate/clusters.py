"""What a person reads and answers in the annotation queue: a cluster (the unit paid for: a TTCW
story, a pair, a rubric text or pair, a listwise item) with its texts and questions, each question
with the answers it takes (what is stored, its caption, its hotkey, its score on the headline
quantity's scale), and the judges' side of a built queue (`Built`). One definition of an answer
serves the page (buttons and hotkeys), the API's refusals, the import and the estimate."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from litjudge.judges.metrics.draws_needed import Totals
from litjudge.judges.scales.base import fold

# Keys that are never an answer's: the page's moves (j/k), skip (s) and undo (u).
RESERVED_KEYS = ("j", "k", "s", "u")


@dataclass(frozen=True)
class Answer:
    value: str                      # what is stored as the label
    caption: str                    # what its button says
    key: str                        # its hotkey
    score: float                    # its value on the headline quantity's scale (NaN: none, a category)


@dataclass(frozen=True)
class Question:
    """One thing a person answers inside a cluster: a TTCW test, a pair's preference, a rubric
    question, a listwise item's category."""

    item: str                       # the item id the label is stored under
    text: str                       # the question as shown
    answers: tuple[Answer, ...] = ()
    counted: bool = True            # in the headline quantity (a rubric: its first question only)
    pairwise: bool = False          # its answers name the texts (a, b, tie): keys follow the order shown

    def allows(self, label: Any) -> bool:
        return any(a.value == label for a in self.answers)

    def canonical(self, label: Any) -> str | None:
        """The stored answer `label` means, None when it is none of this question's: an answer as
        stored, with spaces around it (a spreadsheet's cell), in another case or Unicode form where
        that names one answer (a category "Tragedy", as the run reads a human column; not a pair's
        a / b, whose capitals name positions, but its "Tie"), or on a point scale the same whole
        number written as a number or as 4.0 (a JSON number, a float column)."""
        if isinstance(label, bool) or not isinstance(label, (str, int, float)):
            return None
        text = label.strip() if isinstance(label, str) else label
        if isinstance(text, str) and self.allows(text):
            return text
        if isinstance(text, str) and (not self.pairwise or fold(text) == "tie"):
            same = [a.value for a in self.answers if fold(a.value) == fold(text)]
            if len(same) == 1:
                return same[0]
        if not all(a.value.isdigit() for a in self.answers):
            return None
        try:
            number = float(text)
        except (ValueError, OverflowError):          # a 400-digit integer is no float: no answer either
            return None
        whole = str(int(number)) if math.isfinite(number) and number == int(number) else ""
        return whole if self.allows(whole) else None

    def answer(self, label: str) -> Answer:
        return next(a for a in self.answers if a.value == label)

    def shown(self, order: str) -> dict[str, Any]:
        """The question as the page gets it: a pairwise question's answers in the order the texts
        were shown (key 1 the text shown first), then a tie."""
        answers = list(self.answers)
        if self.pairwise:
            texts = [self.answer(side) for side in order or "ab"]
            answers = [Answer(a.value, caption, key, a.score)
                       for a, caption, key in zip(texts, ("First text", "Second text"), ("1", "2"))]
            answers += [a for a in self.answers if a.value == "tie"]
        return {"item": self.item, "text": self.text,
                "answers": [{"value": a.value, "caption": a.caption, "key": a.key} for a in answers]}


@dataclass(frozen=True)
class Cluster:
    cluster: str
    title: str
    texts: tuple[tuple[str, str], ...]      # (heading, judged text) in the stored order (a pair: a, b)
    questions: tuple[Question, ...]
    context: str = ""                       # shown above the texts (a pair's writing prompt)


@dataclass(frozen=True)
class Built:
    """A protocol's part of a queue: its clusters and the judges' side of the estimate."""

    clusters: list[Cluster]
    judge_total: np.ndarray                 # (N,) the judges' total per cluster on the quantity's scale
    uncertainty: np.ndarray                 # (N,) the design's input
    source: str                             # where the uncertainty comes from
    quantity: str
    instructions: str
    bounds: tuple[float, float] = (0.0, 1.0)   # the quantity's range (a points mean: 1..N)
    decision: dict[str, str] = field(default_factory=dict)  # pairwise: the judges' decision per pair
    outside: str = ""                       # what the run judged that the queue never draws, and why
    totals: Totals | None = None            # each cluster's total under the judges' probabilities, on the
                                            # quantity's scale (`draws_needed.min_draws`); None: not known
    read_p: bool = False                    # the uncertainty read the judges' stored P(label)
    lacks: str = ""                         # what stored P(label) lacked, so the votes were read ("P(tie)")


def yes_no(yes: str = "Yes", no: str = "No") -> tuple[Answer, ...]:
    """A binary question's answers: the positive one (key y, score 1) first."""
    return Answer(yes, yes, "y", 1.0), Answer(no, no, "n", 0.0)


def points(anchors: tuple[str, ...] | list[str], first: int = 1) -> tuple[Answer, ...]:
    """An N-point scale (N <= 10): point k is key k (10 is 0), its caption 'k: anchor'."""
    return tuple(Answer(str(k), f"{k}: {a}" if a != str(k) else a, str(k % 10), float(k))
                 for k, a in enumerate(anchors, start=first))


def texts_ab(tie: bool) -> tuple[Answer, ...]:
    """A pairwise question's answers: text a (score 1), text b (0) and a tie (key t, 0.5)."""
    return (Answer("a", "Text a", "1", 1.0), Answer("b", "Text b", "2", 0.0),
            *((Answer("tie", "Tie", "t", 0.5),) if tie else ()))


def spread(dist: np.ndarray, scores: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, Totals]:
    """Per cluster (one headline item each; rows of `dist` in cluster order): the judges' expected
    score on the quantity's scale, its uncertainty, the standard deviation of the score under
    the judges' distribution over the answers (for two answers scored 1 and 0, sqrt(p(1 - p)),
    TTCW's and the pairwise queue's measure), and that distribution (`draws_needed.Totals`, which
    `min_draws` simulates). `scores` (K,) the answers' scores, or (n, K) each cluster's own (a pair's
    agreement with its decision)."""
    totals = Totals.answers(np.asarray(dist, dtype=float).reshape(n, np.shape(scores)[-1]), scores)
    return totals.mean, np.sqrt(np.clip(totals.moments[0], 0.0, None)), totals
