"""Judge requests and THE content key.

A request's key hashes exactly what determines the judge's output: the judge fingerprint (weights
checksum or hub revision) and its chat-template hash, the messages and assistant prefill, the
verdict language, the verdict mode, and the sampling settings. Metadata (protocol, item ids,
order, repeat) is not in the key: two protocols or two orders that ask the very same question
share one verdict. Runtime settings (batch size, KV-cache size, threads) are not in the key.
"""
from __future__ import annotations

import functools
import hashlib
import json
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from litjudge.grammars.language import VerdictLanguage

from .config import Mode, Sampling
from .schema import check_choices

KEY_VERSION = 1


@dataclass(frozen=True)
class Message:
    role: Literal["system", "user", "assistant"]
    content: str


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
        check_choices(self)
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


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _canonical_texts(rows: list[list[str]]) -> str:
    """`_canonical` of lists of strings, 5x faster: orjson writes strings exactly as json.dumps with
    ensure_ascii=False (a property test checks arbitrary text); numbers and dicts stay with json."""
    return orjson.dumps(rows).decode()


def _canonical_text(text: str) -> str:
    """`_canonical` of one string, by orjson (the same bytes, as `_canonical_texts`)."""
    return orjson.dumps(text).decode()


@functools.lru_cache(maxsize=4096)
def _part(obj: VerdictLanguage | Sampling | JudgeIdentity) -> str:
    """The canonical JSON of a key part shared by many requests (frozen, so cacheable)."""
    if isinstance(obj, VerdictLanguage):
        return _canonical(obj.spec())
    if isinstance(obj, Sampling):
        return _canonical(obj.key_fields())
    return _canonical([obj.fingerprint, obj.template_hash, obj.backend_family])


def content_key(request: JudgeRequest, judge: JudgeIdentity) -> str:
    """The ONLY place a request key is computed (store, planner, replay and CLI all call it).

    sha256 of the canonical JSON (sorted keys, no spaces) of {k, judge, messages, prefill, language,
    mode, sampling, attempt}, and for a recorded judge the item id: a recording answers by item, so
    two items of the same texts are two requests (one key served the second item the first one's
    recording, within a run and from the store of an earlier one). The parts many requests share
    are encoded once (`_part`), and the text is exactly `json.dumps(body, sort_keys=True,
    separators=(",", ":"), ensure_ascii=False)`."""
    item = f'"item":{_canonical_text(request.meta.item_id)},' if judge.backend_family == "replay" else ""
    text = (f'{{"attempt":{request.attempt},{item}"judge":{_part(judge)},"k":{KEY_VERSION},'
            f'"language":{_part(request.language)},'
            f'"messages":{_canonical_texts([[m.role, m.content] for m in request.messages])},'
            f'"mode":{_canonical_text(request.mode)},"prefill":{_canonical_text(request.prefill)},'
            f'"sampling":{_part(request.sampling)}}}')
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


IDS = "I"     # token ids packed 4 bytes each (array('I')): vocabularies and the word tokenizer's crc32s fit


def packed(ids: Sequence[int]) -> array:
    """A prompt's token ids as a plan keeps them: packed, compared and sliced as memory (a million
    prompts of 200 ids as tuples of Python ints cost the planner seconds to build, sort and send)."""
    return ids if type(ids) is array else array(IDS, ids)


def joined(parts: Iterable[bytes]) -> array:
    """A prompt's packed ids from its parts' packed ids (pieces, lines), joined as memory."""
    ids = array(IDS)
    ids.frombytes(b"".join(parts))
    return ids


@dataclass(frozen=True)
class Prepared:
    """A planned request, rendered for one judge: key, exact prompt text and its token ids."""

    key: str
    request: JudgeRequest
    prompt: str
    token_ids: array                # packed (`packed`); an engine's step makes them a tuple
    max_tokens: int

    @property
    def prompt_tokens(self) -> int:
        return len(self.token_ids)


@dataclass(frozen=True)
class Generation:
    """What a backend produced for one key. `raw` is the verdict text to parse (for analyze mode:
    analysis + marker + constrained tail). Distribution mode fills `distribution` instead."""

    key: str
    raw: str
    analysis: str | None = None
    distribution: dict[str, float] | None = None
    label_mass: float | None = None      # the labels' total probability where they were read (either mode)
    # Analyze mode: each label's probability right after the analysis and the marker (normalised over
    # the labels, at temperature 1), from which the label was picked (at the run's temperature and
    # top-p). Not `distribution`: that one decides the label.
    analysis_distribution: dict[str, float] | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    error: str | None = None           # the backend could not produce an answer (stored as unparsed)
    # The answer could not be obtained this time (connection, timeout, 5xx, 429 after the retries):
    # not a verdict, so not stored; the run reports it unanswered and a re-run asks again.
    retryable: bool = False
    finish_reason: str | None = None   # "stop", or "length" when cut at max_tokens
