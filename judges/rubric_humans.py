"""A rubric question's human answer, read from its column as the humans meant it, or one line.

A value of None is missing (an empty CSV cell, JSON null, a NaN float from pandas): that text or
pair is left out of the agreement. Anything else must be an answer in the question's terms, and
what is not is refused naming the item and column, never guessed: a "nan" text (a CSV cell is text;
only an empty one is missing, as engine/data/readers.read_csv says) compared as a number would tie
every pair it is in; JSON true is no point on a scale.
"""
from __future__ import annotations

import math
from typing import Any

from litjudge.engine.core.errors import DataError

TRUE, FALSE = ("true", "yes", "1", "1.0"), ("false", "no", "0", "0.0")


def text_human(q: Any, value: Any, item: str) -> str | None:
    """The humans' answer in the question's terms: a binary label, a point 1..N as text."""
    if value is None:
        return None
    if q.scale == "binary":
        text = str(value).strip().lower()
        labels = {lab.lower(): lab for lab in q.labels}
        if text in labels:
            return labels[text]
        if isinstance(value, bool) or text in TRUE + FALSE:
            return q.labels[0] if (value is True or text in TRUE) else q.labels[1]
        raise DataError(f"question {q.id!r}: column {q.human!r} holds {value!r:.40}, which is none of "
                        f"{list(q.labels)} (nor true/false, 1/0)", path=f"item {item}")
    point = _number(value)
    if not math.isfinite(point) or point != round(point) or not 1 <= point <= len(q.points):
        raise DataError(f"question {q.id!r}: column {q.human!r} holds {value!r:.40}, not a whole point from 1 to "
                        f"{len(q.points)}", path=f"item {item}")
    return str(int(point))


def pair_human(q: Any, value: Any, pair: str) -> str | None:
    """A pair's human preference from its column: a, b or tie (any case)."""
    if value is None:
        return None
    text = str(value).strip().lower()
    if text not in ("a", "b", "tie"):
        raise DataError(f"question {q.id!r}: column {q.human!r} holds {value!r:.40}, not a, b or tie",
                        path=f"pair {pair}")
    return text


def items_human(q: Any, x: Any, y: Any, a: str, b: str) -> str | None:
    """Two texts' preference from their human column: the higher value wins; equal values tie."""
    if x is None or y is None:
        return None
    fx, fy = _number(x), _number(y)
    for value, number, item in ((x, fx, a), (y, fy, b)):
        if not math.isfinite(number):
            raise DataError(f"question {q.id!r}: a pairwise question over items compares their {q.human!r} values, "
                            f"and this one holds {value!r:.30}, not a finite number (leave the cell empty for no answer)",
                            path=f"item {item}")
    return "a" if fx > fy else "b" if fy > fx else "tie"


def _number(value: Any) -> float:
    """A finite or non-finite float; NaN for what is no number (true/false are no numbers here)."""
    if isinstance(value, bool):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
