"""Run configs: TOML -> frozen, validated dataclasses at the edge. Unknown keys are errors
(with "did you mean"), wrong types are errors naming file and key; nothing is coerced silently."""
from __future__ import annotations

import copy
import dataclasses
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from .errors import ConfigError, did_you_mean
from .manifest import config_dict
from .paths import configs_dir, data_root
from .sampling import Sampling, SamplingConfig  # noqa: F401  (Sampling re-exported: every config table from one module)
from .schema import FieldError, build, check_choices
from .schema import check_field as _check
from .schema import finite as _finite
from .settings import ApiConfig, ClusterConfig, GenerateConfig, PPIConfig

GENERATED = "generated"    # the dataset name of the items a run's [generate] stage wrote
# The closed sets of the run config: the loader, a table built in Python and the reference read them.
Mode = Literal["label", "analyze", "distribution", "reward"]    # reward: pooling models only
Dtype = Literal["auto", "bfloat16", "float16", "float32"]       # auto: by the hardware (engine/backends/hardware.py)
Truncation = Literal["error", "skip"]                           # skip: leave too-long prompts out, reported
MODES: tuple[Mode, ...] = get_args(Mode)
DTYPES: tuple[Dtype, ...] = get_args(Dtype)


def valid_name(name: object) -> bool:
    """A run (or ensemble, or task) name: letters, digits, '-' and '_' only, so it is one folder
    under the outputs and never a path elsewhere (`../x`)."""
    return isinstance(name, str) and bool(name) and name.isascii() and name.replace("-", "").replace("_", "").isalnum()


@dataclass(frozen=True)
class EngineConfig:
    """`[engine]`: runtime settings of local engines. They change speed and memory, not outputs, so
    they stay out of keys, except dtype (part of the key when not bfloat16; "auto" is bfloat16 on a GPU
    or a CPU with fast bf16 instructions, float32 otherwise (engine/backends/hardware.py), and keyed as
    chosen). Unset (absent, or 0 in older configs) means vLLM's own default. Checked here against
    vLLM's limits, before any engine starts."""

    max_model_len: int | None = None        # context window; unset: the model's own, capped at 8192
    kv_cache_gib: float = 4.0               # CPU KV cache of this engine, > 0 (VLLM_CPU_KVCACHE_SPACE, if set, overrides it)
    gpu_memory_utilization: float = 0.85    # GPU share for weights + KV cache, in (0, 1]
    enforce_eager: bool = True              # False: torch.compile (faster steps, slower start)
    max_num_batched_tokens: int | None = None   # tokens per engine step (the batch budget); unset: vLLM's
    max_num_seqs: int | None = None         # sequences per engine step; unset: vLLM's
    block_size: int | None = None           # KV block in tokens, a multiple of 16 (CPU: of 32, default 32)
    tensor_parallel_size: int = 1           # GPUs per engine
    data_parallel_size: int = 1             # refused above 1: use [cluster] replicas
    dtype: Dtype = "auto"                   # auto: bfloat16 on a GPU, AMX or AMD's AVX-512 BF16, else float32
    # Per-judge overrides, e.g. [engine.judges."Qwen/Qwen2.5-72B-Instruct"] tensor_parallel_size = 4
    judges: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_choices(self)
        for name in ("max_model_len", "max_num_batched_tokens", "max_num_seqs", "block_size"):
            if getattr(self, name) == 0:
                object.__setattr__(self, name, None)
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
    mode: Mode = "label"        # how a verdict is read: the label, analysis then label, label probabilities, a reward model
    limit: int | None = None    # the first N items (stories, pairs, groups); absent: all
    truncation: Truncation = "error"   # for prompts over the context window
    reasks: int = 2             # bounded re-asks of answers the exact parser rejects (listwise)
    missing: str = "drop"       # missing-answer policy: "drop", "wrong" or "label:LABEL" (see MissingPolicy)
    data_root: str = ""         # "" = default (../shared/datasets or LITJUDGE_DATA_ROOT)
    options: dict[str, Any] = field(default_factory=dict)   # protocol options, checked by the protocol
    template: str = ""          # your own prompt template: inline text or a file's path (judges/templates.py)
    sampling: SamplingConfig = SamplingConfig()
    engine: EngineConfig = EngineConfig()
    api: ApiConfig = ApiConfig()
    cluster: ClusterConfig = ClusterConfig()
    generate: GenerateConfig = GenerateConfig()   # a generation stage whose items the tasks judge
    ppi: PPIConfig = PPIConfig()                  # prediction-powered estimates from a few human labels
    # Several tasks in one run: [[tasks]] tables, each `name` plus any of TASK_KEYS (protocol, dataset,
    # options...); the rest (judges, engine, cluster) is shared, so each judge's engine starts once.
    tasks: list[dict[str, Any]] = field(default_factory=list)
    source: str = ""            # the file it came from

    def __post_init__(self) -> None:
        check_choices(self)
        where = self.source or "config"
        for judge in self.engine.judges:
            self.engine.for_judge(judge, where)
        _check(valid_name(self.name), "name", f"use letters, digits, '-' and '_' only, got {self.name!r}")
        MissingPolicy.parse(self.missing)
        _check(self.limit is None or self.limit >= 1, "limit",
               f"must be >= 1 (leave it out to judge every item), got {self.limit}")
        _check(self.reasks >= 0, "reasks", f"must be >= 0, got {self.reasks}")
        _check(self.mode != "distribution" or self.sampling.repeats == 1, "sampling.repeats",
               f"{self.sampling.repeats} repeats in {self.mode} mode are one reading {self.sampling.repeats} times "
               "(it reads probabilities, it samples nothing), counted as independent verdicts (calibration too): "
               "leave repeats at 1")
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
                              parameter="tasks")
        names = [t.get("name") for t in self.tasks]
        if names.count(name) > 1:
            raise ConfigError(f"task name {name!r} is used twice", where=where, parameter="tasks")
        unknown = [k for k in task if k not in TASK_KEYS and k != "name"]
        if unknown:
            raise ConfigError(f"a task may set {', '.join(TASK_KEYS)}; {unknown[0]!r} is shared by every task "
                              "(set it at the top of the config)" if unknown[0] in RUN_KEYS else
                              f"unknown key (known: {', '.join(TASK_KEYS)})", where=where,
                              parameter=f"tasks.{name}.{unknown[0]}")
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


TASK_KEYS = ("protocol", "dataset", "mode", "limit", "truncation", "reasks", "missing", "options", "template",
             "sampling")
RUN_KEYS = ("name", "protocol", "dataset", "judge", "backend", "mode", "limit", "truncation", "reasks", "missing",
            "data_root", "options", "template", "sampling", "engine", "api", "cluster", "generate", "ppi", "tasks", "source")


def _as_table(value: Any) -> Any:
    """A config value back as the TOML table it came from (for building a task's config)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _as_table(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


# What a config's `source` adds after its file's path: a task's "FILE (task NAME)", a sweep cell's
# "FILE (cell {...})" (errors name them); its relative paths start from the file's folder all the same.
SOURCE_PART = re.compile(r" \((?:task|cell) .*\Z", re.S)


def source_file(source: str) -> Path | None:
    """The config file a run config's `source` names (None for a config without a file)."""
    return Path(SOURCE_PART.sub("", source)).expanduser() if source else None


def whole_source(source: str) -> str:
    """`source` with its file's whole path, for a run's manifest: the run folder read later from
    another working folder (annotate, reparse) finds the data and template paths its config gave
    relative to the file. Messages keep the path as the user gave it."""
    path = source_file(source)
    if path is None or not path.is_file():
        return source
    return str(path.resolve()) + source[len(SOURCE_PART.sub("", source)):]


def manifest_config(config: Any) -> dict[str, Any]:
    """A run config as its manifest records it: its `source` with the file's whole path
    (`whole_source`), so the run folder is read again from any working folder."""
    out = config_dict(config)
    if out.get("source"):
        out["source"] = whole_source(out["source"])
    return out


def source_folder(source: str) -> Path:
    """The folder a config's relative paths start from: its file's, else the working folder (a
    task's and a sweep cell's too: their dataset and template paths were read from the cwd)."""
    path = source_file(source)
    return path.resolve().parent if path is not None and path.is_file() else Path.cwd()


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
        other = {".yaml": "YAML", ".yml": "YAML", ".json": "JSON"}.get(path.suffix.lower())
        written = f" (a {other} file: a run config is TOML, `key = value` lines; runs/demo.toml is one)" if other else ""
        raise ConfigError(f"not valid TOML{written}: {exc}", where=str(path)) from None
    except UnicodeDecodeError:
        raise ConfigError("not UTF-8 text", where=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot be read ({exc.strerror})", where=str(path)) from None


# the keys that make a file another kind than a run (config_kind), also named to a run's misspelt key
SWEEP_KEYS, ENSEMBLE_KEYS = ("matrix", "sweep"), ("runs", "cascade", "jury")
OTHER_KINDS = {**dict.fromkeys(SWEEP_KEYS, "a sweep's"), **dict.fromkeys(ENSEMBLE_KEYS, "an ensemble's")}


def config_kind(table: dict[str, Any]) -> str:
    """What a config file is: a sweep ([matrix] / [sweep]), an ensemble ([[runs]], [cascade] or
    [jury]: keys no run config has, so the ensemble's schema says what is missing, where a run's
    said "jury: unknown key"), or a run; the commands read a file once and branch on this."""
    if any(k in table for k in SWEEP_KEYS):
        return "sweep"
    if any(k in table for k in ENSEMBLE_KEYS):
        return "ensemble"
    return "run"


def load_config(path: str | Path, table: dict[str, Any] | None = None, **overrides: Any) -> RunConfig:
    """A run config from its file (or from its table, already read), with command-line overrides."""
    path = config_path(path)
    table = copy.deepcopy(table) if table is not None else read_toml(path)
    named = judges_named(table)                   # before a --judge override replaces them
    config = build(RunConfig, apply_overrides(table, overrides), str(path), elsewhere=OTHER_KINDS, source=str(path))
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
            raise ConfigError(f"names no judge of this run{did_you_mean(name, judges)}"
                              + f"; the judges are {', '.join(dict.fromkeys(judges))}", where=where,
                              parameter=f"engine.judges.{name}")


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
