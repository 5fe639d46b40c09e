"""Run configs: TOML -> frozen, validated dataclasses at the edge. Unknown keys are errors
(with "did you mean"), wrong types are errors naming file and key; nothing is coerced silently."""
from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from .errors import ConfigError
from .paths import configs_dir, data_root
from .schema import FieldError, build
from .schema import check_field as _check

GENERATED = "generated"    # the dataset name of the items a run's [generate] stage wrote
MODES: tuple[str, ...] = ("label", "analyze", "distribution", "reward")   # reward: pooling models only
DTYPES = ("auto", "bfloat16", "float16", "float32")   # auto: by the hardware (engine/backends/hardware.py)


def valid_name(name: object) -> bool:
    """A run (or ensemble, or task) name: letters, digits, '-' and '_' only, so it is one folder
    under the outputs and never a path elsewhere (`../x`)."""
    return isinstance(name, str) and bool(name) and name.isascii() and name.replace("-", "").replace("_", "").isalnum()


def _finite(x: float) -> bool:
    return x == x and x not in (float("inf"), float("-inf"))


@dataclass(frozen=True)
class Sampling:
    """Decoding settings of a request. temperature 0 is greedy; the seed then cannot matter and is
    dropped from the key (normalised before hashing, so greedy repeats share one verdict)."""

    temperature: float = 0.0        # 0: greedy; at most 5
    top_p: float = 1.0              # nucleus mass in (0, 1]
    seed: int | None = 0            # >= 0; the engine seed of a re-ask adds 7919 x the attempt
    max_tokens: int | None = None   # None (or 0 in a config): derived from the verdict language

    def __post_init__(self) -> None:
        if self.max_tokens == 0:
            object.__setattr__(self, "max_tokens", None)
        _check(_finite(self.temperature) and 0.0 <= self.temperature <= 5.0, "temperature",
               f"must be in [0, 5], got {self.temperature}")
        _check(_finite(self.top_p) and 0.0 < self.top_p <= 1.0, "top_p", f"must be in (0, 1], got {self.top_p}")
        _check(self.seed is None or self.seed >= 0, "seed", f"must be >= 0, got {self.seed}")
        _check(self.max_tokens is None or self.max_tokens >= 1, "max_tokens",
               f"must be >= 1 (or 0 / absent: derived from the verdict language), got {self.max_tokens}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def key_fields(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "top_p": self.top_p if not self.greedy else 1.0,
                "seed": None if self.greedy else self.seed, "max_tokens": self.max_tokens}

    def engine_seed(self, attempt: int = 0) -> int | None:
        """THE seed rule every backend applies: none when greedy; a re-ask (attempt k) draws anew."""
        return None if self.greedy else (self.seed or 0) + 7919 * attempt


@dataclass(frozen=True)
class SamplingConfig(Sampling):
    """`[sampling]` of a run config: a request's decoding settings plus how many samples of each."""

    repeats: int = 1                # independent samples per request (needs temperature > 0 to differ)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check(self.repeats >= 1, "repeats", f"must be >= 1, got {self.repeats}")

    def for_repeat(self, repeat: int) -> Sampling:
        """The request-level settings of sample number `repeat` (seed + repeat)."""
        return Sampling(self.temperature, self.top_p, (self.seed or 0) + repeat, self.max_tokens)


@dataclass(frozen=True)
class EngineConfig:
    """`[engine]`: runtime settings of local engines. They change speed and memory, not outputs, so
    they stay out of keys, except dtype (part of the key when not bfloat16; "auto" is bfloat16 on a GPU
    or a CPU with bf16 instructions, float32 otherwise, and keyed as chosen). Unset (absent, or 0 in
    older configs) means vLLM's own default. Checked here against vLLM's limits, before any engine
    starts."""

    max_model_len: int | None = None        # context window; unset: the model's own, capped at 8192
    kv_cache_gib: float = 4.0               # CPU KV cache (VLLM_CPU_KVCACHE_SPACE), > 0
    gpu_memory_utilization: float = 0.85    # GPU share for weights + KV cache, in (0, 1]
    enforce_eager: bool = True              # False: torch.compile (faster steps, slower start)
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    block_size: int | None = None           # KV block in tokens, a multiple of 16 (CPU: of 32; default 128)
    tensor_parallel_size: int = 1           # GPUs per engine
    data_parallel_size: int = 1             # refused above 1: use [cluster] replicas
    dtype: str = "auto"
    # Per-judge overrides, e.g. [engine.judges."Qwen/Qwen2.5-72B-Instruct"] tensor_parallel_size = 4
    judges: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("max_model_len", "max_num_batched_tokens", "max_num_seqs", "block_size"):
            if getattr(self, name) == 0:
                object.__setattr__(self, name, None)
        _check(self.dtype in DTYPES, "dtype", f"must be one of {list(DTYPES)}, got {self.dtype!r}")
        _check(self.max_model_len is None or self.max_model_len >= 32, "max_model_len",
               f"must be >= 32 tokens, got {self.max_model_len}")
        _check(_finite(self.kv_cache_gib) and self.kv_cache_gib > 0, "kv_cache_gib", f"must be > 0, got {self.kv_cache_gib}")
        _check(_finite(self.gpu_memory_utilization) and 0 < self.gpu_memory_utilization <= 1, "gpu_memory_utilization",
               f"must be in (0, 1], got {self.gpu_memory_utilization}")
        for name in ("max_num_batched_tokens", "max_num_seqs"):
            value = getattr(self, name)
            _check(value is None or value >= 1, name, f"must be >= 1, got {value}")
        _check(self.block_size is None or (self.block_size > 0 and self.block_size % 16 == 0), "block_size",
               f"must be a positive multiple of 16 (vLLM's attention kernels), got {self.block_size}")
        _check(self.tensor_parallel_size >= 1, "tensor_parallel_size", f"must be >= 1, got {self.tensor_parallel_size}")
        _check(self.data_parallel_size == 1, "data_parallel_size",
               "vLLM refuses data parallelism in one process; set [cluster] replicas = N instead "
               "(N engines, each a Ray actor; on one node that is data parallelism)")

    def for_judge(self, judge: str, where: str = "config") -> EngineConfig:
        """These settings with the judge's own overrides applied (checked like any config table)."""
        table = self.judges.get(judge)
        if not table:
            return self
        base = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "judges"}
        return build(EngineConfig, {**base, **table}, where, prefix=f"engine.judges.{judge}.")


@dataclass(frozen=True)
class ApiConfig:
    """`[api]`: API judges (openai:, openai-compatible:, anthropic:). Keys come only from the environment."""

    concurrency: int = 8            # requests in flight, >= 1
    max_retries: int = 6            # per request, on 429 / 5xx / timeouts / connection errors
    backoff_s: float = 0.5          # first wait; doubles each retry, full jitter
    timeout_s: float = 60.0         # per attempt
    max_tokens_total: int = 0       # budget: prompt + completion tokens of the run (0: no cap)
    max_cost_usd: float = 0.0       # budget: estimated cost (0: no cap)
    price_in_per_mtok: float = 0.0  # USD per million prompt tokens (for the estimate)
    price_out_per_mtok: float = 0.0
    key_env: str = ""               # "": OPENAI_API_KEY or ANTHROPIC_API_KEY
    base_url: str = ""              # override the provider's endpoint (proxies, local test servers)
    structured: str = "auto"        # auto | vllm | json_schema | none (openai backends)
    # Provider batches (OpenAI Batch API, Anthropic Message Batches): about half the price, results
    # within 24 hours; submitted batches are recorded in the run's store, so a re-run polls them.
    batch: bool = False
    batch_poll_s: float = 30.0      # seconds between polls of the open batches
    batch_max_requests: int = 0     # requests per batch (0: the provider's limit)

    def __post_init__(self) -> None:
        _check(self.structured in ("auto", "vllm", "json_schema", "none"), "structured",
               f"must be auto, vllm, json_schema or none, got {self.structured!r}")
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
               or (":" in self.address and self.address.rsplit(":", 1)[1].isdigit()), "address",
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
    temperature: float = 0.7
    top_p: float = 1.0
    seed: int = 0
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
class MissingPolicy:
    """What agreement with humans does with a verdict the judge did not give (unparsed, or no
    answer recorded): `drop` it (n shrinks), count it as a `label` (the TTCW notebook counts a
    missing answer as "No"), or count it as `wrong`. Bias and label-distribution tables read only
    real answers whatever the policy."""

    kind: str = "drop"              # drop | label | wrong
    label: str | None = None        # for kind "label"

    @classmethod
    def parse(cls, text: str) -> MissingPolicy:
        kind, sep, label = text.partition(":")
        if kind in ("drop", "wrong") and not sep:
            return cls(kind)
        if kind == "label" and label.strip():
            return cls("label", label.strip())
        raise FieldError("missing", f'must be "drop", "wrong" or "label:LABEL" (e.g. "label:No"), got {text!r}')


@dataclass(frozen=True)
class RunConfig:
    """A run: which protocol on which dataset with which judges, how, and where its data lives."""

    name: str                   # the output folder's name: letters, digits, '-' and '_'
    protocol: str = ""          # required, unless [[tasks]] name one per task
    dataset: str | dict[str, Any] = ""   # a card name, a card file's path, or an inline [dataset] table
    judge: str | list[str] = "smollm2-135m"   # one judge or several (distinct), run one after another
    backend: str = "vllm"       # the backend of judges named without a prefix (vllm, transformers)
    mode: str = "label"
    limit: int | None = None    # the first N items (stories, pairs, groups); absent: all
    truncation: str = "error"   # "error" or "skip" for prompts over the context window
    reasks: int = 2             # bounded re-asks of answers the exact parser rejects (listwise)
    missing: str = "drop"       # missing-answer policy: "drop", "wrong" or "label:LABEL" (see MissingPolicy)
    data_root: str = ""         # "" = default (../shared/datasets or LITJUDGE_DATA_ROOT)
    options: dict[str, Any] = field(default_factory=dict)   # protocol options, checked by the protocol
    sampling: SamplingConfig = SamplingConfig()
    engine: EngineConfig = EngineConfig()
    api: ApiConfig = ApiConfig()
    cluster: ClusterConfig = ClusterConfig()
    generate: GenerateConfig = GenerateConfig()   # a generation stage whose items the tasks judge
    # Several tasks in one run: [[tasks]] tables, each `name` plus any of TASK_KEYS (protocol, dataset,
    # options...); the rest (judges, engine, cluster) is shared, so each judge's engine starts once.
    tasks: list[dict[str, Any]] = field(default_factory=list)
    source: str = ""            # the file it came from

    def __post_init__(self) -> None:
        where = self.source or "config"
        for judge in self.engine.judges:
            self.engine.for_judge(judge, where)
        _check(valid_name(self.name), "name", f"use letters, digits, '-' and '_' only, got {self.name!r}")
        _check(self.mode in MODES, "mode", f"must be one of {list(MODES)}, got {self.mode!r}")
        MissingPolicy.parse(self.missing)
        _check(self.truncation in ("error", "skip"), "truncation", f"must be 'error' or 'skip', got {self.truncation!r}")
        _check(self.limit is None or self.limit >= 1, "limit",
               f"must be >= 1 (leave it out to judge every item), got {self.limit}")
        _check(self.reasks >= 0, "reasks", f"must be >= 0, got {self.reasks}")
        if not self.tasks and not self.generate.enabled:
            _check(bool(self.protocol), "protocol", "missing required key (or list [[tasks]])")
            _check(bool(self.dataset), "dataset", "missing required key (or list [[tasks]])")
        if self.generate.enabled:
            given = [("dataset", self.dataset)] + [(f"tasks.{t.get('name')}.dataset", t.get("dataset")) for t in self.tasks]
            for key, ds in given:
                _check(not ds or (isinstance(ds, dict) and ds.get("name") == GENERATED), key,
                       "a run with [generate] judges the items it generates: leave `dataset` out")
        for task in self.tasks:
            self._task(task)                     # every task validated now, not after hours of inference
        names = self.judges
        _check(bool(names), "judge", "names no judge (give one name, or a list of names)")
        _check(all(n.strip() == n and n for n in names), "judge", f"judge names must be non-empty, got {names}")
        dup = sorted({n for n in names if names.count(n) > 1})
        _check(not dup, "judge", f"lists {dup} more than once: each judge's verdicts would be counted twice")

    def task_configs(self) -> list[tuple[str, RunConfig]]:
        """(task name, its full config) for each task; one unnamed task when there are no [[tasks]]."""
        return [(t["name"], self._task(t)) for t in self.tasks] if self.tasks else [("", self)]

    def _task(self, task: dict[str, Any]) -> RunConfig:
        where = self.source or "config"
        name = task.get("name")
        if not valid_name(name):
            raise ConfigError(f"each task needs a name of letters, digits, '-' and '_', got {name!r}", where=where,
                              key="tasks")
        names = [t.get("name") for t in self.tasks]
        if names.count(name) > 1:
            raise ConfigError(f"task name {name!r} is used twice", where=where, key="tasks")
        unknown = [k for k in task if k not in TASK_KEYS and k != "name"]
        if unknown:
            raise ConfigError(f"a task may set {', '.join(TASK_KEYS)}; {unknown[0]!r} is shared by every task "
                              "(set it at the top of the config)" if unknown[0] in RUN_KEYS else
                              f"unknown key (known: {', '.join(TASK_KEYS)})", where=where,
                              key=f"tasks.{name}.{unknown[0]}")
        base = {k: getattr(self, k) for k in RUN_KEYS if k not in ("tasks", "source")}
        table = {k: _as_table(v) for k, v in base.items()}
        table.update({k: v for k, v in task.items() if k != "name"})
        return build(RunConfig, table, f"{where} (task {name})", source=f"{where} (task {name})")

    @property
    def judges(self) -> list[str]:
        return [self.judge] if isinstance(self.judge, str) else list(self.judge)

    @property
    def missing_policy(self) -> MissingPolicy:
        return MissingPolicy.parse(self.missing)

    @property
    def data_root_path(self) -> Path:
        """The data root this run reads: its own `data_root`, else the default (`paths.data_root`)."""
        return Path(self.data_root) if self.data_root else data_root()


TASK_KEYS = ("protocol", "dataset", "mode", "limit", "truncation", "reasks", "missing", "options", "sampling")
RUN_KEYS = ("name", "protocol", "dataset", "judge", "backend", "mode", "limit", "truncation", "reasks", "missing",
            "data_root", "options", "sampling", "engine", "api", "cluster", "generate", "tasks", "source")


def _as_table(value: Any) -> Any:
    """A config value back as the TOML table it came from (for building a task's config)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _as_table(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


def config_path(name: str | Path) -> Path:
    """A config file's path, or a committed config by name (`litjudge run demo`: runs/demo.toml,
    shipped with the package)."""
    path = Path(name)
    if path.exists() or len(path.parts) > 1:
        return path
    shipped = configs_dir() / (path.name if path.suffix == ".toml" else f"{path.name}.toml")
    return shipped if shipped.exists() else path


def read_toml(path: str | Path) -> dict[str, Any]:
    """A config file's table, or one line saying why it cannot be read."""
    path = config_path(path)
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in configs_dir().glob("*.toml")))
        raise ConfigError(f"run config not found (a file, or a committed config: {known})", where=str(path))
    if path.is_dir():
        raise ConfigError("is a folder, not a run config (give the .toml file)", where=str(path))
    try:
        # utf-8-sig: a byte-order mark (Windows editors write one) is not part of the TOML
        return tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", where=str(path)) from None
    except UnicodeDecodeError:
        raise ConfigError("not UTF-8 text", where=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot be read ({exc.strerror})", where=str(path)) from None


def load_config(path: str | Path, **overrides: Any) -> RunConfig:
    path = config_path(path)
    table = read_toml(path)
    named = judges_named(table)                   # before a --judge override replaces them
    config = build(RunConfig, apply_overrides(table, overrides), str(path), source=str(path))
    check_engine_judges(config.engine, named + config.judges, str(path))
    return config


def judges_named(table: dict[str, Any]) -> list[str]:
    """The judge names a config table gives (`judge`, one or a list), for checks made before it is built."""
    judge = table.get("judge", [])
    return [judge] if isinstance(judge, str) else [j for j in judge if isinstance(j, str)] if isinstance(judge, list) else []


def check_engine_judges(engine: EngineConfig, judges: list[str], where: str) -> None:
    """`[engine.judges."NAME"]` must name a judge of the run: a typo would leave its settings unused."""
    for name in engine.judges:
        if name not in judges:
            close = difflib.get_close_matches(name, judges, n=1)
            raise ConfigError("names no judge of this run" + (f" (did you mean {close[0]!r}?)" if close else "")
                              + f"; the judges are {', '.join(dict.fromkeys(judges))}", where=where,
                              key=f"engine.judges.{name}")


def apply_overrides(table: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Command-line settings over a config table: a value replaces the key, a table (e.g. `cluster`)
    is merged key by key; None means "not given"."""
    for k, v in overrides.items():
        if isinstance(v, dict) and isinstance(table.get(k), dict):
            table[k] = {**table[k], **{a: b for a, b in v.items() if b is not None}}
        elif isinstance(v, dict):
            if any(b is not None for b in v.values()):
                table[k] = {a: b for a, b in v.items() if b is not None}
        elif v is not None:
            table[k] = v
    return table
