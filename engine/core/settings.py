"""The settings tables of a run config beyond what it judges and how it samples: `[api]` (API
judges), `[cluster]` (replicas on Ray), `[generate]` (a generation stage before judging) and `[ppi]`
(prediction-powered estimates from a few human labels).
Frozen dataclasses validated at the edge like the rest of the config (`config.py` holds the run
config itself and imports these)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from .sampling import Sampling
from .schema import check_choices
from .schema import check_field as _check
from .schema import finite as _finite


@dataclass(frozen=True)
class ApiConfig:
    """`[api]`: API judges (openai:, openai-compatible:, anthropic:). Keys come only from the environment."""

    concurrency: int = 8            # requests in flight, >= 1
    max_retries: int = 6            # per request, on 429 / 5xx / timeouts / connection errors
    backoff_s: float = 0.5          # first wait; doubles each retry, full jitter
    timeout_s: float = 60.0         # per attempt, whole (online; a batch's transfers: per wait for bytes)
    max_tokens_total: int = 0       # budget: prompt + completion tokens of the run (0: no cap)
    max_cost_usd: float = 0.0       # budget: estimated cost (0: no cap)
    price_in_per_mtok: float = 0.0  # USD per million prompt tokens (for the estimate)
    price_out_per_mtok: float = 0.0 # USD per million completion tokens (for the estimate)
    key_env: str = ""               # "": OPENAI_API_KEY or ANTHROPIC_API_KEY
    base_url: str = ""              # override the provider's endpoint (proxies, local test servers)
    structured: Literal["auto", "vllm", "json_schema", "none"] = "auto"   # openai backends: how answers are constrained
    # Provider batches (OpenAI Batch API, Anthropic Message Batches): about half the price, results
    # within 24 hours; submitted batches are recorded in the run's store, so a re-run polls them.
    batch: bool = False
    batch_poll_s: float = 30.0      # seconds between polls of the open batches
    batch_max_requests: int = 0     # requests per batch (0: the provider's limit)

    def __post_init__(self) -> None:
        check_choices(self)
        _check(self.concurrency >= 1, "concurrency", f"must be >= 1, got {self.concurrency}")
        _check(self.max_retries >= 0, "max_retries", f"must be >= 0, got {self.max_retries}")
        for name in ("backoff_s", "max_cost_usd", "price_in_per_mtok", "price_out_per_mtok"):
            value = getattr(self, name)
            _check(_finite(value) and value >= 0, name, f"must be >= 0, got {value}")
        _check(_finite(self.timeout_s) and self.timeout_s > 0, "timeout_s", f"must be > 0, got {self.timeout_s}")
        _check(self.max_tokens_total >= 0, "max_tokens_total", f"must be >= 0, got {self.max_tokens_total}")
        _check(_finite(self.batch_poll_s) and self.batch_poll_s > 0, "batch_poll_s",
               f"must be > 0, got {self.batch_poll_s}")
        _check(self.batch_max_requests >= 0, "batch_max_requests", f"must be >= 0, got {self.batch_max_requests}")


@dataclass(frozen=True)
class ClusterConfig:
    """`[cluster]`: run a judge on several engines (replicas), each a Ray actor. Off by default:
    one engine in this process. On one node N replicas are data parallelism; across nodes, Ray
    places them where the resources are."""

    replicas: int = 1               # engines; > 1 starts Ray (address "local" unless set)
    gpus_per_replica: int = 0       # 0: CPU engines; k > 0: k GPUs each (k > 1: tensor parallel inside it)
    cpus_per_replica: float = 1.0   # Ray CPUs each replica reserves (on CPU, the cores its engine may bind)
    address: str = ""               # "": Ray only when replicas > 1, then "local"; "local": start Ray here;
                                    # "auto": join the running cluster; "ray://HOST:PORT" or "HOST:PORT": that one
    local_cpus: int = 0             # "local": CPUs Ray may use (0: all)
    chunk_requests: int = 64        # requests per dispatch to a replica (whole prefix groups)

    def __post_init__(self) -> None:
        _check(self.replicas >= 1, "replicas", f"must be >= 1, got {self.replicas}")
        _check(self.gpus_per_replica >= 0, "gpus_per_replica", f"must be >= 0, got {self.gpus_per_replica}")
        _check(_finite(self.cpus_per_replica) and self.cpus_per_replica > 0, "cpus_per_replica",
               f"must be > 0, got {self.cpus_per_replica}")
        _check(self.address in ("", "local", "auto") or self.address.startswith("ray://")
               or (":" in self.address and self.address.rsplit(":", 1)[1].isascii()
                   and self.address.rsplit(":", 1)[1].isdigit()), "address",
               f'must be "local", "auto", "ray://HOST:PORT" or "HOST:PORT", got {self.address!r}')
        _check(self.local_cpus >= 0, "local_cpus", f"must be >= 0, got {self.local_cpus}")
        _check(self.chunk_requests >= 1, "chunk_requests", f"must be >= 1, got {self.chunk_requests}")

    @property
    def enabled(self) -> bool:
        return self.replicas > 1 or self.address != ""


@dataclass(frozen=True)
class GenerateConfig:
    """`[generate]`: a generation stage before judging. The generators (judge names: aliases, model
    folders, hub ids) write the items with a generation protocol; the items become the dataset of
    the run's judging tasks (`source` = generator, `category` = level). Turns are requests like
    verdicts: keyed by content, stored, resumed, deduplicated."""

    protocol: str = "aut"           # the generation protocol (judges/generation.py)
    generators: list[str] = field(default_factory=list)    # empty: no generation stage
    objects: list[str] = field(default_factory=list)       # AUT objects; `--limit N`: the first N
    levels: list[str] = field(default_factory=lambda: ["common", "creative", "highly_creative"])  # worst first
    uses: int = 5                   # uses per turn (a numbered list, constrained)
    max_words: int = 5              # words per use, at most
    followups: int = 4              # forceful follow-up turns after the highly creative prompt (0..4)
    temperature: float = 0.7        # sampling of the generated turns
    top_p: float = 1.0              # nucleus mass of the generated turns
    seed: int = 0                   # the generators' seed
    phrases: dict[str, str] = field(default_factory=dict)  # object -> how the prompt names it ("soap": "a bar of soap")

    def __post_init__(self) -> None:
        _check(len(set(self.generators)) == len(self.generators), "generators",
               f"lists a generator twice: {self.generators}")
        _check(not self.generators or bool(self.objects), "objects", "list the objects to generate uses for")
        _check(len(set(self.objects)) == len(self.objects), "objects", f"lists an object twice: {self.objects}")
        _check(bool(self.levels) and len(set(self.levels)) == len(self.levels), "levels",
               f"must list distinct levels, got {self.levels}")
        _check(1 <= self.uses <= 9, "uses", f"must be in 1..9, got {self.uses}")
        _check(1 <= self.max_words <= 12, "max_words", f"must be in 1..12, got {self.max_words}")
        _check(0 <= self.followups <= 4, "followups", f"must be in 0..4 (the paper's four follow-ups), got {self.followups}")
        self.sampling()                                         # the same range checks as [sampling]
        unknown = [k for k in self.phrases if k not in self.objects]
        _check(not unknown, "phrases", f"names objects not in `objects`: {unknown}")

    @property
    def enabled(self) -> bool:
        return bool(self.generators)

    def sampling(self) -> Sampling:
        return Sampling(self.temperature, self.top_p, self.seed)


@dataclass(frozen=True)
class PPIConfig:
    """`[ppi]`: prediction-powered estimates of the quantity the humans measure (judges/ppi_tables.py):
    the judge scores every item, and the human labels of the `labelled` items only are used; every
    other item's label is hidden from the estimator (replayed data keeps them, so a run can show how
    close the estimate comes). Off unless `labelled` is set. Aggregation only: no request changes."""

    required_when_written: ClassVar[tuple[str, ...]] = ("labelled",)     # an empty [ppi] is refused (schema.build)

    labelled: float | str = ""      # a share in (0, 1): that share of the clusters with human labels, drawn
                                    # with `seed`; "column:NAME": the items whose boolean field NAME is
                                    # true; "all": every item the data holds a human label for;
                                    # "annotations:RUN": the labels of `litjudge annotate RUN`'s queue
    seed: int = 0                   # the draw of a share

    def __post_init__(self) -> None:
        if isinstance(self.labelled, float):
            _check(_finite(self.labelled) and 0 < self.labelled < 1, "labelled",
                   f"a share of the clusters must be in (0, 1), got {self.labelled}"
                   + ('; every item the data holds a human label for is labelled = "all"' if self.labelled >= 1 else ""))
        else:
            _check(self.labelled in ("", "all") or bool(self.column or self.annotations), "labelled",
                   f'must be a share in (0, 1), "column:NAME", "annotations:RUN_FOLDER" or "all", got {self.labelled!r}')
        _check(self.share is not None or self.seed == 0, "seed", "[ppi] seed draws a share: set labelled = SHARE too"
               if not self.enabled else f"[ppi] seed draws a share, and labelled = {self.labelled!r} draws none "
               "(accepted and recorded, it changed nothing): remove it, or set labelled = SHARE")
        _check(self.seed >= 0, "seed", f"must be >= 0, got {self.seed}")

    @property
    def enabled(self) -> bool:
        return self.labelled != ""

    @property
    def share(self) -> float | None:
        return self.labelled if isinstance(self.labelled, float) else None

    @property
    def column(self) -> str:
        """The boolean field marking labelled items ("" unless labelled = "column:NAME")."""
        text = self.labelled if isinstance(self.labelled, str) else ""
        return text.partition(":")[2].strip() if text.startswith("column:") else ""

    @property
    def annotations(self) -> str:
        """The annotated run folder whose queue's labels are used ("" unless labelled = "annotations:RUN")."""
        text = self.labelled if isinstance(self.labelled, str) else ""
        return text.partition(":")[2].strip() if text.startswith("annotations:") else ""

    def describe(self) -> str:
        """The choice in words, for the manifest and the console."""
        if self.annotations:
            return f"the annotated items of {self.annotations} (their queue's draws and probabilities)"
        if self.share is not None:
            return f"a seeded random {self.share:g} of the clusters (seed {self.seed})"
        return f"the items whose field {self.column!r} is true" if self.column else "every item with a human label"
