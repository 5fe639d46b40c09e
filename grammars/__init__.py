"""Verdict languages: defined once, compiled per backend (`compile.py`), each with an exact parser.

Config names -> factories:
    binary                      Yes / No
    likert(points, a, b)        [[A>>B]] ... [[B>>A]] (3, 5 or 7 points)
    preference(a, b, tie)       A / B (/ tie)
    score(lo, hi)               integers lo..hi
    categorical(labels)         a configured label set, best first
    listwise(ids, lo, hi)       N lines `position. id : score`, every id once, sorted by score
    UseList(n, max_words)       N lines `k. use` of 1..max_words words (a generation turn of the AUT study)
Any of them in analysis form: Analyzed(language, marker="Verdict:").
RewardScore(): a reward model's real-valued score per text (pooling models, no decoding).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .analysis import Analyzed
from .errors import GrammarError
from .labels import LabelSet, binary, categorical, likert, ordinal, preference, score
from .language import ParseResult, Unparsed, Verdict, VerdictLanguage
from .listwise import Listwise, position_scores
from .reward import RewardScore
from .upstream import UpstreamYesNo
from .uselist import UseList

__all__ = ["Analyzed", "LabelSet", "Listwise", "RewardScore", "ParseResult", "Unparsed", "Verdict", "VerdictLanguage",
           "UpstreamYesNo", "UseList", "binary", "categorical", "likert", "ordinal", "preference", "score",
           "position_scores", "language_from_spec", "LANGUAGES", "GrammarError"]


# Every language kind, by the `kind` its spec records: how a stored spec becomes a language again
# (`litjudge reparse`). A new language is one module plus one line here.
LANGUAGES: dict[str, Callable[[dict[str, Any]], VerdictLanguage]] = {
    "labels": lambda spec: LabelSet(spec["name"], tuple((k, v) for k, v in spec["pairs"])),
    "listwise": lambda spec: Listwise(tuple(spec["ids"]), spec["lo"], spec["hi"]),
    "reward": lambda spec: RewardScore(),
    "upstream_yes_no": lambda spec: UpstreamYesNo(),
    "use_list": lambda spec: UseList(spec["n"], spec["max_words"], spec["max_word_chars"]),
    "analyzed": lambda spec: Analyzed(language_from_spec(spec["inner"]), spec["marker"], spec["max_analysis_tokens"]),
}


def language_from_spec(spec: dict[str, Any]) -> VerdictLanguage:
    """Rebuild a language from its stored spec."""
    kind = spec.get("kind")
    if kind not in LANGUAGES:
        raise GrammarError(f"unknown verdict language kind {kind!r} (known: {', '.join(sorted(LANGUAGES))})")
    return LANGUAGES[kind](spec)
