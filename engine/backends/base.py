"""What every backend takes and gives back. Backends only translate; the runner owns the rest."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator, Protocol, Sequence

from ..render import PromptRenderer
from ..requests import JudgeIdentity, JudgeRequest


@dataclass(frozen=True)
class Prepared:
    """A planned request, rendered for one judge: key, exact prompt text and its token ids."""

    key: str
    request: JudgeRequest
    prompt: str
    token_ids: tuple[int, ...]
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
    label_mass: float | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    error: str | None = None      # the backend could not produce an answer (stored as unparsed)
    finish_reason: str | None = None   # "stop", or "length" when cut at max_tokens


@dataclass
class Throughput:
    """Running counters the progress bar and the manifest read."""

    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    extra: dict[str, float] = field(default_factory=dict)

    def add(self, g: Generation) -> None:
        self.requests += 1
        self.prompt_tokens += g.prompt_tokens
        self.cached_tokens += g.cached_tokens
        self.output_tokens += g.output_tokens

    @property
    def cache_hit_rate(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


class WordTokenizer:
    """For backends without a local tokenizer (replay, APIs): whitespace words as token ids, so
    counts are estimates and shared leading words still sort together."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        import zlib

        return [zlib.crc32(w.encode()) for w in text.split()]


class Backend(Protocol):
    name: str

    def identity(self) -> JudgeIdentity: ...

    def tokenizer(self): ...

    def render(self, request: JudgeRequest) -> str: ...

    def encode(self, prompt: str) -> list[int]: ...

    def context_window(self) -> int: ...

    def generate(self, batch: Sequence[Prepared], on_done: Callable[[Generation], None] | None = None
                 ) -> Iterator[Generation]: ...

    def describe(self) -> dict: ...

    def close(self) -> None: ...


class LocalBackend:
    """What local-weights backends share: the judge's own prompt rendering and tokenizer."""

    name: str
    judge: "object"            # engine.models.ResolvedJudge
    renderer: PromptRenderer
    _max_len: int

    def identity(self) -> JudgeIdentity:
        return JudgeIdentity(self.judge.fingerprint, self.renderer.template_hash, self.name)

    def tokenizer(self):
        return self.renderer.tokenizer

    def render(self, request: JudgeRequest) -> str:
        return self.renderer.render(request.messages, request.prefill)

    def encode(self, prompt: str) -> list[int]:
        return self.renderer.encode(prompt)

    def context_window(self) -> int:
        return self._max_len
