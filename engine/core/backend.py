"""What a backend is, seen from the core: a judge resolved once into a `JudgeSpec`, the
`Capabilities` a backend declares (checked at config time), and the `Backend` protocol the planner
and the runner call. Implementations live in `engine.backends`, one file each, one registry line."""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from .config import ApiConfig, EngineConfig
from .requests import Generation, JudgeIdentity, JudgeRequest, Prepared


@dataclass(frozen=True)
class Capabilities:
    """What a backend can honour; a run asking for more fails at config time with one line."""

    modes: frozenset[str]                     # verdict modes it serves
    generates: bool = True                    # False: it only plans (the tokenizer-only planner)
    notes: dict[str, str] = field(default_factory=dict)   # mode -> why it is missing, for the error
    recorded: bool = False                    # it serves recorded answers by item id (no prompt reaches a model)


@dataclass(frozen=True)
class JudgeSpec:
    """A judge resolved at the edge, once: which backend runs it, what it loads, what identifies it.
    Weights are hashed here and nowhere else; every later stage reads this record."""

    name: str                       # as the user wrote it
    backend: str                    # the registry name of the backend that runs it
    target: str                     # what the backend loads: model folder, hub id, API model, recording
    fingerprint: str                # weights checksum, "hub:repo@revision", API model, recording checksum
    family: str                     # the backend family in request keys (backends differ numerically)
    chat: bool = True               # prompts go through the judge's chat template
    engine: EngineConfig = EngineConfig()   # this judge's engine settings (overrides applied)
    api: ApiConfig = ApiConfig()
    details: tuple[tuple[str, Any], ...] = ()   # backend-specific facts (API provider and endpoint...)
    # what its backend can honour, resolved with it (so no later stage looks the backend up by name)
    capabilities: Capabilities = Capabilities(frozenset())

    def detail(self, key: str, default: Any = None) -> Any:
        return dict(self.details).get(key, default)


class Planner(Protocol):
    """Renders, tokenizes and keys requests exactly as its judge's backend will. A planner may also
    offer `encode_batch(prompts)`, a sequence of ids per prompt (one call for a chunk; the planner
    uses it when present, `encode` per prompt otherwise), and `tokenization()`, how it tokenized
    (each distinct piece once, or whole prompts and why), for the plan's figures."""

    name: str

    def identity(self) -> JudgeIdentity: ...

    def render(self, request: JudgeRequest) -> str: ...

    def encode(self, prompt: str) -> list[int]: ...

    def context_window(self) -> int: ...

    def describe(self) -> dict: ...

    def close(self) -> None: ...


class Backend(Planner, Protocol):
    """A planner that also generates: yields one Generation per prepared request as each finishes."""

    capabilities: ClassVar[Capabilities]

    def generate(self, batch: Sequence[Prepared]) -> Iterator[Generation]: ...
