"""The small primitive a local engine offers the verdict modes: run one decoding step on a token
prompt and report it. Three kinds of step cover every mode:

- `Constrained`: decode exactly one string of a verdict language, or one of a list of choices;
- `FreeText`: decode freely up to `max_tokens` or a stop string (an analysis);
- `NextTokenLogprobs`: one unconstrained step, the log-probabilities of some candidate tokens (a
  label of several tokens is read one prefix at a time: the prefix cache serves each).

An engine (`StepEngine`) accepts steps and reports each result when it finishes; the modes
(`engine.core.modes`) decide which steps to take. Engines never know about modes.
"""
from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from litjudge.grammars.language import VerdictLanguage

from ...core.config import Sampling
from ...core.sampling import stream_seed


@dataclass(frozen=True)
class Prompt:
    """The prompt so far, as token ids (what engines run) and as text (what text-level
    constraint libraries read); both always describe the same string."""

    tokens: Sequence[int]                       # a tuple once made (a plan's packed ids become one here)
    text: str

    def __post_init__(self) -> None:
        if type(self.tokens) is not tuple:
            object.__setattr__(self, "tokens", tuple(self.tokens))

    def extend(self, tokens: Sequence[int], text: str) -> Prompt:
        return Prompt((*self.tokens, *tokens), self.text + text)


@dataclass(frozen=True)
class Decoding:
    """Sampling of one step: greedy unless temperature > 0; the seed follows `Sampling.engine_seed`."""

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None

    @classmethod
    def of(cls, sampling: Sampling, key: str) -> Decoding:
        """The decoding of the request whose content key is `key` (its seed its own: engine_seed)."""
        return cls(sampling.temperature, sampling.top_p if not sampling.greedy else 1.0, sampling.engine_seed(key))

    def step(self, n: int) -> Decoding:
        """The decoding of a request's n-th engine step (0: its first) with a random stream of its
        own: vLLM gives two requests of one seed the same numbers, so a list's slots (a request each)
        drew by the same noise, and an analysis's verdict by its analysis's."""
        return self if n == 0 or self.seed is None else replace(self, seed=stream_seed(self.seed, n))

    def pick(self, logprobs: dict[str, float]) -> str:
        """One answer of a closed set by its logprobs as this decoding samples: the most probable
        (the first of equals) when greedy, else drawn at the temperature within the top-p nucleus
        by the seed."""
        order = sorted(logprobs, key=lambda x: -logprobs[x])          # stable: the first of equals first
        if self.temperature == 0.0:
            return order[0]
        top = max(logprobs.values())
        if top == -math.inf:
            return order[0]
        weights = [math.exp((logprobs[x] - top) / self.temperature) for x in order]
        total, kept, mass = sum(weights), 0, 0.0
        while kept < len(order) and mass < self.top_p * total:
            mass, kept = mass + weights[kept], kept + 1
        return random.Random(self.seed).choices(order[:kept], weights[:kept])[0]


@dataclass(frozen=True)
class Constrained:
    prompt: Prompt
    max_tokens: int
    decoding: Decoding
    language: VerdictLanguage | None = None      # a finite label set or a grammar
    choices: tuple[str, ...] = ()                # or exactly one of these strings


@dataclass(frozen=True)
class FreeText:
    prompt: Prompt
    max_tokens: int
    decoding: Decoding
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class NextTokenLogprobs:
    prompt: Prompt
    token_ids: tuple[int, ...]


Step = Constrained | FreeText | NextTokenLogprobs


@dataclass(frozen=True)
class StepResult:
    text: str = ""
    token_ids: tuple[int, ...] = ()
    finish_reason: str | None = None             # "stop", or "length" when cut at max_tokens
    cached_tokens: int = 0                       # prompt tokens served from the prefix cache
    logprobs: dict[int, float] = field(default_factory=dict)   # NextTokenLogprobs: token id -> logprob


class StepEngine(Protocol):
    """A local engine as the modes see it."""

    def submit(self, step: Step) -> int:
        """Queue a step; returns its handle."""

    def poll(self) -> Iterator[tuple[int, StepResult]]:
        """Advance the engine; yield (handle, result) for the steps that finished."""
