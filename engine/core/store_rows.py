"""A stored verdict (`ResultRow`) and its row in the store's results table: its columns, encoded
and decoded (JSON for the language spec, the value and the distributions)."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

RESULT_COLUMNS = ("key", "judge", "backend", "mode", "language", "status", "label", "value", "reason", "raw",
                  "analysis", "distribution", "label_mass", "prompt_tokens", "cached_tokens", "output_tokens",
                  "created", "failure", "cut", "analysis_distribution")


@dataclass(frozen=True)
class ResultRow:
    key: str
    judge: str
    backend: str
    mode: str
    language: dict[str, Any]
    status: str
    label: str | None
    value: Any
    reason: str | None
    raw: str
    analysis: str | None = None
    distribution: dict[str, float] | None = None
    label_mass: float | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    output_tokens: int | None = None
    created: float = 0.0
    failure: str | None = None      # the backend's error where it gave no answer
    cut: bool = False               # the output was cut at max_tokens
    analysis_distribution: dict[str, float] | None = None    # analyze mode: P(label) after the analysis


_SPEC_JSON: dict[int, tuple[dict, str]] = {}      # id -> (the spec dict, kept alive; its JSON)


def spec_json(spec: dict[str, Any]) -> str:
    """A language spec's JSON, encoded once per spec object (a run stores the same one many times)."""
    hit = _SPEC_JSON.get(id(spec))
    if hit is None or hit[0] is not spec:
        if len(_SPEC_JSON) > 10_000:
            _SPEC_JSON.clear()
        hit = _SPEC_JSON[id(spec)] = (spec, json.dumps(spec, sort_keys=True))
    return hit[1]


def encode_row(r: ResultRow) -> tuple:
    """A result as the results table's row."""
    return (r.key, r.judge, r.backend, r.mode, spec_json(r.language), r.status, r.label,
            json.dumps(r.value), r.reason, r.raw, r.analysis,
            json.dumps(r.distribution) if r.distribution is not None else None, r.label_mass,
            r.prompt_tokens, r.cached_tokens, r.output_tokens, r.created or time.time(), r.failure, int(r.cut),
            json.dumps(r.analysis_distribution) if r.analysis_distribution is not None else None)


def decode_row(row: tuple) -> ResultRow:
    """A results table row as the result it stores."""
    d = dict(zip(RESULT_COLUMNS, row))
    d["language"] = json.loads(d["language"])
    d["value"] = json.loads(d["value"]) if d["value"] is not None else None
    for name in ("distribution", "analysis_distribution"):
        d[name] = json.loads(d[name]) if d[name] else None
    d["cut"] = bool(d["cut"])
    return ResultRow(**d)
