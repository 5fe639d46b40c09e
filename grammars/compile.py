"""Compile a verdict language for each backend. The only code that knows backend constraint APIs.

- vLLM: `StructuredOutputsParams(choice=...)` for label sets, `grammar=` (EBNF) for listwise.
  xgrammar (vLLM's default) serves both; lm-format-enforcer is never selected (it returns empty
  text on current vLLM).
- outlines (transformers backend): a regex output type (label sets, listwise without the sorted-
  score rule, which the exact parser still enforces).
- API backends: a JSON schema for structured-output requests.
"""
from __future__ import annotations

from typing import Any

from .analysis import Analyzed
from .language import VerdictLanguage


def _constrained(language: VerdictLanguage) -> VerdictLanguage:
    # Analysis form is generated in two passes; only the verdict tail is constrained.
    return language.inner if isinstance(language, Analyzed) else language


def vllm_structured_fields(language: VerdictLanguage) -> dict[str, Any]:
    """vLLM's structured-output fields for a verdict: a choice of labels, else the EBNF grammar.
    Offline they become StructuredOutputsParams; a `vllm serve` takes them as `structured_outputs`."""
    lang = _constrained(language)
    labels = lang.labels()
    return {"choice": list(labels)} if labels else {"grammar": lang.ebnf()}


def vllm_constraint(language: VerdictLanguage):
    from vllm.sampling_params import StructuredOutputsParams

    return StructuredOutputsParams(**vllm_structured_fields(language))


def outlines_output_type(language: VerdictLanguage):
    from outlines.types import Regex

    return Regex(_constrained(language).regex())


def json_schema(language: VerdictLanguage) -> dict[str, Any]:
    """The verdict wrapped as {"verdict": ...} for API structured outputs."""
    lang = _constrained(language)
    labels = lang.labels()
    verdict: dict[str, Any] = {"type": "string", "enum": list(labels)} if labels else \
        {"type": "string", "pattern": "^" + lang.regex() + "$"}
    props: dict[str, Any] = {"verdict": verdict}
    if isinstance(language, Analyzed):
        props = {"analysis": {"type": "string"}, **props}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def max_verdict_tokens(language: VerdictLanguage) -> int:
    """Enough tokens for the longest admitted verdict under ANY tokenization: a constrained
    decoder may spell a label with more tokens than its canonical encoding (one per character
    at worst), so the bound is in characters, plus room for the end-of-sequence token."""
    return _constrained(language).max_chars() + 2


def slot_lines(lang, position: int, remaining, cap: int) -> list[str]:
    """Listwise slot-by-slot decoding: every line allowed at `position`, given the ids not yet
    listed and the last score (scores are non-increasing). Longest ids first."""
    last = position == len(lang.ids)
    ids = sorted(remaining, key=len, reverse=True)
    return [f"{position}. {i} : {s}" + ("" if last else "\n") for i in ids for s in range(cap, lang.lo - 1, -1)]
