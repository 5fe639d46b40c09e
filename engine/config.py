"""Run configs: TOML -> frozen, validated dataclasses at the edge. Unknown keys are errors
(with "did you mean"), wrong types are errors naming file and key; nothing is coerced silently."""
from __future__ import annotations

import dataclasses
import difflib
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .requests import MODES


@dataclass(frozen=True)
class SamplingConfig:
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    repeats: int = 1            # independent samples per request (needs temperature > 0 to differ)
    max_tokens: int = 0         # 0: derived from the verdict language


@dataclass(frozen=True)
class EngineConfig:
    max_model_len: int = 0      # 0: the model's own, capped at 8192
    kv_cache_gib: float = 4.0
    gpu_memory_utilization: float = 0.85
    enforce_eager: bool = True
    max_num_batched_tokens: int = 0
    max_num_seqs: int = 0
    block_size: int = 0         # KV block, the prefix cache's granule (0: vLLM's default; CPU 128)
    tensor_parallel_size: int = 1   # GPUs per engine (multi-GPU boxes; untested here)
    data_parallel_size: int = 1     # engine replicas (multi-GPU boxes; untested here)
    dtype: str = "bfloat16"     # part of the judge's key when not bfloat16 (it changes outputs)
    # Per-judge overrides, e.g. [engine.judges."Qwen/Qwen2.5-72B-Instruct"] tensor_parallel_size = 4
    judges: dict[str, Any] = field(default_factory=dict)

    def for_judge(self, judge: str, where: str = "config") -> "EngineConfig":
        """These settings with the judge's own overrides applied (checked like any config table)."""
        table = self.judges.get(judge)
        if not table:
            return self
        base = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "judges"}
        return build(EngineConfig, {**base, **table}, where, prefix=f"engine.judges.{judge}.")

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {list(DTYPES)}, got {self.dtype!r}")


DTYPES = ("bfloat16", "float16", "float32")


@dataclass(frozen=True)
class ApiConfig:
    """API judges (openai:, openai-compatible:, anthropic:). Keys come only from the environment."""

    concurrency: int = 8            # requests in flight
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

    def __post_init__(self) -> None:
        if self.structured not in ("auto", "vllm", "json_schema", "none"):
            raise ValueError(f"structured must be auto, vllm, json_schema or none, got {self.structured!r}")
        if self.concurrency < 1 or self.max_retries < 0:
            raise ValueError("concurrency must be >= 1 and max_retries >= 0")


@dataclass(frozen=True)
class MissingPolicy:
    """What agreement with humans does with a verdict the judge did not give (unparsed, or no
    answer recorded): `drop` it (n shrinks), count it as a `label` (the TTCW notebook counts a
    missing answer as "No"), or count it as `wrong`. Bias and label-distribution tables read only
    real answers whatever the policy."""

    kind: str = "drop"              # drop | label | wrong
    label: str | None = None        # for kind "label"

    @classmethod
    def parse(cls, text: str) -> "MissingPolicy":
        kind, sep, label = text.partition(":")
        if kind in ("drop", "wrong") and not sep:
            return cls(kind)
        if kind == "label" and label.strip():
            return cls("label", label.strip())
        raise ValueError(f'must be "drop", "wrong" or "label:LABEL" (e.g. "label:No"), got {text!r}')


@dataclass(frozen=True)
class RunConfig:
    name: str
    protocol: str
    dataset: str
    judge: str | list[str] = "smollm2-135m"   # one judge or several, run one after another
    backend: str = "vllm"
    mode: str = "label"
    limit: int = 0              # items (stories, pairs, groups); 0 = all
    truncation: str = "error"   # "error" or "skip" for prompts over the context window
    reasks: int = 2             # bounded re-asks of answers the exact parser rejects (listwise)
    missing: str = "drop"       # missing-answer policy: "drop", "wrong" or "label:LABEL" (see MissingPolicy)
    data_root: str = ""         # "" = default (../shared/datasets or LITJUDGE_DATA_ROOT)
    options: dict[str, Any] = field(default_factory=dict)   # protocol options, checked by the protocol
    sampling: SamplingConfig = SamplingConfig()
    engine: EngineConfig = EngineConfig()
    api: ApiConfig = ApiConfig()
    source: str = ""            # the file it came from

    def __post_init__(self) -> None:
        where = self.source or "config"
        for judge in self.engine.judges:
            self.engine.for_judge(judge, where)
        if self.mode not in MODES:
            raise ConfigError(f"must be one of {list(MODES)}, got {self.mode!r}", where=where, key="mode")
        try:
            MissingPolicy.parse(self.missing)
        except ValueError as exc:
            raise ConfigError(str(exc), where=where, key="missing") from None
        if self.truncation not in ("error", "skip"):
            raise ConfigError(f"must be 'error' or 'skip', got {self.truncation!r}", where=where, key="truncation")
        if self.limit < 0 or self.reasks < 0 or self.sampling.repeats < 1:
            raise ConfigError("limit and reasks must be >= 0 and sampling.repeats >= 1", where=where)
        if not (0 <= self.sampling.temperature <= 5):
            raise ConfigError(f"must be in [0, 5], got {self.sampling.temperature}", where=where,
                              key="sampling.temperature")
        if not self.name.replace("-", "").replace("_", "").isalnum():
            raise ConfigError(f"use letters, digits, '-' and '_' only, got {self.name!r}", where=where, key="name")

    @property
    def missing_policy(self) -> MissingPolicy:
        return MissingPolicy.parse(self.missing)


def _check_type(value: Any, annotation: Any, where: str, key: str) -> Any:
    origin = typing.get_origin(annotation)
    if annotation is Any:
        return value
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            try:
                return _check_type(value, arg, where, key)
            except ConfigError:
                continue
        raise ConfigError(f"expected {annotation}, got {type(value).__name__} {value!r}", where=where, key=key)
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise ConfigError(f"expected a list, got {type(value).__name__} {value!r}", where=where, key=key)
        (inner, *_) = typing.get_args(annotation) or (Any,)
        items = [_check_type(v, inner, where, f"{key}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"expected a table, got {type(value).__name__}", where=where, key=key)
        return value
    if annotation is type(None):
        if value is not None:
            raise ConfigError("expected nothing", where=where, key=key)
        return value
    if isinstance(annotation, type):
        if dataclasses.is_dataclass(annotation):
            if not isinstance(value, dict):
                raise ConfigError(f"expected a table, got {type(value).__name__}", where=where, key=key)
            return build(annotation, value, where, prefix=f"{key}.")
        if not isinstance(value, annotation) or (annotation is int and isinstance(value, bool)):
            raise ConfigError(f"expected {annotation.__name__}, got {type(value).__name__} {value!r}",
                              where=where, key=key)
    return value


def build(cls: type, table: dict[str, Any], where: str, prefix: str = "", **extra: Any):
    """Build dataclass `cls` from a TOML table: unknown keys and wrong types fail, naming the key."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if f.init and f.name not in extra]
    unknown = [k for k in table if k not in names]
    if unknown:
        k = unknown[0]
        close = difflib.get_close_matches(k, names, n=1)
        hint = f" (did you mean {prefix + close[0]!r}?)" if close else f" (known: {', '.join(names)})"
        raise ConfigError(f"unknown key{hint}", where=where, key=prefix + k)
    kwargs = {k: _check_type(v, hints[k], where, prefix + k) for k, v in table.items()}
    required = [f.name for f in dataclasses.fields(cls)
                if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                and f.name not in kwargs and f.name not in extra]
    if required:
        raise ConfigError("missing required key", where=where, key=prefix + required[0])
    try:
        return cls(**kwargs, **extra)
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc), where=where, key=prefix.rstrip(".") or None) from None


def load_config(path: str | Path, **overrides: Any) -> RunConfig:
    path = Path(path)
    if not path.exists():
        raise ConfigError("run config not found", where=str(path))
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", where=str(path)) from None
    except UnicodeDecodeError:
        raise ConfigError("not UTF-8 text", where=str(path)) from None
    for k, v in overrides.items():
        if v is not None:
            table[k] = v
    return build(RunConfig, table, str(path), source=str(path))
