"""What a backend is, seen from the core: a judge resolved once into a `JudgeSpec`, the
`Capabilities` a backend declares (checked at config time), and the `Backend` base class holding
the whole contract the planner and the runner call. Implementations live in `engine.backends`, one
file each, one registry line."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .config import ApiConfig, EngineConfig, RunConfig
from .errors import ContractError
from .registry import Named
from .requests import Generation, JudgeIdentity, JudgeRequest, Prepared
from .session import Spend
from .store import Store


@dataclass(frozen=True)
class Capabilities:
    """What a backend can honour; a run asking for more fails at config time with one line."""

    modes: frozenset[str]                     # verdict modes it serves
    generates: bool = True                    # False: it only plans (the tokenizer-only planner)
    notes: dict[str, str] = field(default_factory=dict)   # mode -> why it is missing, for the error
    recorded: bool = False                    # it serves recorded answers by item id (no prompt reaches a model)
    # its model runs at a provider: [cluster] replicas would be more clients, not more engines, each
    # with its own budget (a cap was spent once per replica); such a judge runs unreplicated
    remote: bool = False


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


class Backend(Named, ABC):
    """THE backend contract, whole: every backend subclasses this (the registry refuses a class that
    does not, or that leaves an abstract method out, when it loads), so the planner and the runner
    call every method directly and never ask whether a backend has one.

    - The factory (class methods): `resolve(name, config, prefix)` -> the judge's JudgeSpec, once,
      at the edge (again only where `source_version`, what the name refers to, changed);
      `create(spec)` starts it for generation; `plan(spec)` gives an engine-free planner that keys
      requests exactly as the started backend will (the backend itself where starting costs
      nothing). `name` is its registry name; `capabilities` what it can honour, checked before
      anything runs.
    - Planning: `identity` (what keys its requests), `render`, `encode` (and `encode_batch`, one
      call for a chunk), `context_window`, `tokenization` (how it tokenized, for the plan's figures).
    - Generation: `generate` yields one Generation per prepared request as each finishes.
    - Optional capabilities, no-ops unless a backend has them: `cost` (what tokens cost, for the
      plan), `attach` (the run's store, where provider batches are recorded, and the invocation's
      API spend, which budget caps hold for), `progress_note`
      (a line for the progress bar), `describe` (for the manifest), `close` (release the engine)."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("name", "capabilities")
    name: ClassVar[str]
    capabilities: ClassVar[Capabilities]

    @classmethod
    def registered_name(cls) -> str:
        """Its registry name; a concrete backend also says what it can honour."""
        unset = [attribute for attribute in cls.REQUIRED if attribute not in dir(cls)]
        if unset:
            raise ContractError(f"backend class {cls.__module__}.{cls.__qualname__} does not set {', '.join(unset)} "
                                "(its registry name and a Capabilities)")
        return cls.name

    # -- the factory ----------------------------------------------------------------------------
    @classmethod
    @abstractmethod
    def resolve(cls, name: str, config: RunConfig, prefix: str = "") -> JudgeSpec:
        """Judge `name` (its registry prefix, if any, included) -> its spec, resolved once."""

    @classmethod
    def source_version(cls, name: str, config: RunConfig, prefix: str = "") -> tuple[Any, ...]:
        """What `name` refers to right now, cheaply (a file's or folder's resolved path, size and
        modification time): a process resolves a judge once and reuses its spec only while this is
        unchanged. () for a name that always means the same thing (an alias, a pinned model id)."""
        return ()

    @classmethod
    def create(cls, spec: JudgeSpec) -> Backend:
        """The backend started for generation."""
        return cls(spec)  # type: ignore[call-arg]

    @classmethod
    def plan(cls, spec: JudgeSpec) -> Backend:
        """An engine-free planner that keys requests exactly as `create(spec)` will."""
        return cls.create(spec)

    @classmethod
    def cost(cls, spec: JudgeSpec, prompt_tokens: float, output_tokens: float) -> float | None:
        """Estimated US dollars for these tokens (an API's prices); None: not billed per token."""
        return None

    # -- planning -------------------------------------------------------------------------------
    @abstractmethod
    def identity(self) -> JudgeIdentity:
        """What identifies the judge in every request key (weights, template, backend family)."""

    @abstractmethod
    def render(self, request: JudgeRequest) -> str:
        """The prompt text exactly as the judge will read it."""

    @abstractmethod
    def encode(self, prompt: str) -> Sequence[int]:
        """A rendered prompt's token ids (estimates where the judge's tokenizer is not at hand)."""

    @abstractmethod
    def context_window(self) -> int:
        """Tokens a prompt plus its verdict budget may take."""

    def encode_batch(self, prompts: list[str]) -> Sequence[Sequence[int]]:
        """The ids of each prompt of a chunk (a backend with a faster way overrides this)."""
        return [self.encode(prompt) for prompt in prompts]

    def tokenization(self) -> dict[str, Any]:
        """How the plan's prompts were tokenized (each distinct piece once, or whole and why); {}: no figures."""
        return {}

    # -- generation -----------------------------------------------------------------------------
    @abstractmethod
    def generate(self, batch: Sequence[Prepared]) -> Iterator[Generation]:
        """One Generation per prepared request, yielded as each finishes (any order)."""

    # -- optional capabilities: no-ops unless a backend has them -----------------------------------
    def attach(self, store: Store, spend: Spend) -> None:
        """What the invocation lends the backend, handed over before `generate`: the run's store
        (provider batches are recorded in it) and the invocation's API spend (`Session.spend`, what
        the budget caps hold for across all of its judges)."""

    def salvaged(self) -> list[Generation]:
        """After `generate` was stopped (Ctrl-C, an error): the answers it had received but not yet yielded
        (an API's paid replies), for the runner to store; [] for a backend that keeps none."""
        return []

    def progress_note(self) -> str:
        """A short line for the progress bar (replicas, open provider batches); "" for none."""
        return ""

    def describe(self) -> dict[str, Any]:
        """What the manifest records of this backend."""
        return {"backend": self.name}

    def close(self) -> None:
        """Release the engine (memory, connections); the backend is not used again."""


# An engine-free backend, as `Backend.plan(spec)` gives it: what the planner calls.
Planner = Backend
