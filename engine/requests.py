"""Judge requests and THE content key.

A request's key hashes exactly what determines the judge's output: the judge fingerprint (weights
checksum or hub revision) and its chat-template hash, the messages and assistant prefill, the
verdict language, the verdict mode, and the sampling settings. Metadata (protocol, item ids,
order, repeat) is not in the key: two protocols or two orders that ask the very same question
share one verdict. Runtime settings (batch size, KV-cache size, threads) are not in the key.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal

from grammars.language import VerdictLanguage

KEY_VERSION = 1
Mode = Literal["label", "analyze", "distribution"]
MODES: tuple[str, ...] = ("label", "analyze", "distribution", "reward")   # reward: pooling models only


@dataclass(frozen=True)
class Message:
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class Sampling:
    """Decoding settings. temperature 0 is greedy; the seed then cannot matter and is dropped
    from the key (normalised before hashing, so greedy repeats share one verdict)."""

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = 0
    max_tokens: int | None = None   # None: derived from the verdict language

    def __post_init__(self) -> None:
        if not (0.0 <= self.temperature <= 5.0):
            raise ValueError(f"temperature must be in [0, 5], got {self.temperature}")
        if not (0.0 < self.top_p <= 1.0):
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def key_fields(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "top_p": self.top_p if not self.greedy else 1.0,
                "seed": None if self.greedy else self.seed, "max_tokens": self.max_tokens}


@dataclass(frozen=True)
class RequestMeta:
    """Where a request comes from. Not part of the key."""

    protocol: str
    item_id: str
    fields: tuple[tuple[str, Any], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"protocol": self.protocol, "item_id": self.item_id, **dict(self.fields)}


@dataclass(frozen=True)
class JudgeRequest:
    messages: tuple[Message, ...]
    language: VerdictLanguage
    mode: Mode
    sampling: Sampling
    meta: RequestMeta
    prefill: str = ""          # assistant-turn text placed before the verdict (the decision point)
    attempt: int = 0           # re-ask index for answers that failed the parser (listwise)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        last = self.messages[-1].role if self.messages else None
        if self.mode == "reward":
            if last != "assistant":
                raise ValueError("a reward request scores a finished conversation: it must end with the assistant's text")
        elif last != "user":
            raise ValueError("a judge request's messages must end with a user message")


@dataclass(frozen=True)
class JudgeIdentity:
    """What identifies the judge in keys: weights fingerprint and chat-template hash."""

    fingerprint: str
    template_hash: str
    backend_family: str = "vllm"    # backends differ numerically, so they never share a key


def content_key(request: JudgeRequest, judge: JudgeIdentity) -> str:
    """The ONLY place a request key is computed (store, planner, replay and CLI all call it)."""
    body = {
        "k": KEY_VERSION,
        "judge": [judge.fingerprint, judge.template_hash, judge.backend_family],
        "messages": [[m.role, m.content] for m in request.messages],
        "prefill": request.prefill,
        "language": request.language.spec(),
        "mode": request.mode,
        "sampling": request.sampling.key_fields(),
        "attempt": request.attempt,
    }
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
