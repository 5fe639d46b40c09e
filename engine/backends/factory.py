"""Choosing and building backends: the one place a judge name becomes a backend (by the prefix
its registry entry declares, or the config's `backend`), resolved once into a `JudgeSpec`."""
from __future__ import annotations

import dataclasses
import importlib.util
from typing import TYPE_CHECKING, Any, cast

from ..core.backend import Backend, Capabilities, JudgeSpec
from ..core.config import ClusterConfig, EngineConfig, RunConfig
from ..core.console import say
from ..core.errors import BackendUnavailable, ConfigError, did_you_mean
from ..core.registry import BUILT_IN
from .registry import BACKENDS, PLAIN

if TYPE_CHECKING:                      # cluster.py imports Ray: imported when a run asks for replicas
    from .cluster import ClusterBackend


def backend_of(name: str, config: RunConfig) -> str:
    """The backend of judge `name`: the one whose prefix it carries, else the config's `backend`
    (checked even when every judge carries a prefix: a typo there must not pass unnoticed)."""
    if config.backend not in BACKENDS or (config.backend not in PLAIN and not BACKENDS.meta(config.backend).get("prefix")):
        raise ConfigError(f"unknown backend {config.backend!r}{did_you_mean(config.backend, PLAIN)}; plain judge names "
                          f"run on {' or '.join(PLAIN)}; others by prefix: {', '.join(prefixes())}",
                          where=config.source or "config", parameter="backend")
    for entry in BACKENDS.names():
        prefix = BACKENDS.meta(entry).get("prefix")
        if prefix and name.startswith(prefix):
            return entry
    if config.backend not in PLAIN:
        if config.backend in BACKENDS:
            prefix = BACKENDS.meta(config.backend).get("prefix")
            raise ConfigError(f"backend {config.backend!r} serves judges named {prefix}NAME; judge {name!r} has no "
                              f"such prefix", where=config.source or "config", parameter="judge")
        hint = did_you_mean(config.backend, PLAIN)
        raise ConfigError(f"unknown backend {config.backend!r}{hint}; plain judge names run on {' or '.join(PLAIN)}; "
                          f"others by prefix: {', '.join(prefixes())}",
                          where=config.source or "config", parameter="backend")
    return config.backend


_SPECS: dict[tuple, JudgeSpec] = {}


def prefixes() -> list[str]:
    return [p for n in BACKENDS.names() if (p := BACKENDS.meta(n).get("prefix"))]


def resolve(name: str, config: RunConfig) -> JudgeSpec:
    """Judge name + config -> its spec, its mode checked. Resolved once per process while what the
    name refers to is unchanged (weights are hashed here and nowhere else; a sweep's cells share the
    judge's spec)."""
    backend = backend_of(name, config)
    check_installed(backend)
    if config.cluster.enabled:
        check_installed("cluster")
    cls = BACKENDS.get(backend)
    check_mode(cls.capabilities, backend, name, config)
    prefix = BACKENDS.meta(backend).get("prefix", "")
    # the file or folder the name refers to, as it is now: a recording edited in place, or another
    # folder's file of the same relative name, is resolved again (its checksum, so its keys, change)
    key = (name, backend, config.data_root, repr(config.engine.for_judge(name, config.source or "config")),
           repr(config.api), cls.source_version(name, config, prefix))
    if key not in _SPECS:
        _SPECS[key] = dataclasses.replace(cls.resolve(name, config, prefix),
                                          capabilities=cls.capabilities)
    return _SPECS[key]


def check_installed(backend: str) -> None:
    """The backend's optional dependencies are importable, or one line with the install command,
    before any planning or loading (not minutes into a run)."""
    modules, extra = BACKENDS.meta(backend).get("needs", ((), ""))
    absent = [m for m in modules if importlib.util.find_spec(m) is None]
    if absent:
        how = "bash scripts/install.sh (make install)" if extra.endswith(".sh") else f"pip install 'litjudge[{extra}]'"
        raise BackendUnavailable(f"the {backend} backend needs {', '.join(absent)}, which is not installed: {how}")


def check_mode(caps: Capabilities, backend: str, name: str, config: RunConfig) -> None:
    if config.mode not in caps.modes:
        why = caps.notes.get(config.mode, "")
        raise ConfigError(f"judge {name!r} runs on the {backend} backend, which serves mode "
                          f"{' | '.join(sorted(caps.modes)) or 'none'}, not {config.mode!r}" + (f" ({why})" if why else ""),
                          where=config.source or "config", parameter="mode")
    if caps.recorded and config.sampling.repeats > 1:
        # every repeat would be served the one recorded answer: agreement across repeats read 1.0
        raise ConfigError(f"judge {name!r} is recorded: it holds one answer per item, which all "
                          f"{config.sampling.repeats} repeats would share; repeats need a judge that samples",
                          where=config.source or "config", parameter="sampling.repeats")


def create(spec: JudgeSpec, cluster: ClusterConfig | None = None):
    """Start the judge's backend for generation: one engine here, or (with `[cluster]` replicas or
    an address) replicas on a Ray cluster, each running this same backend. An API judge is never
    replicated (its requests are concurrent already, `api.concurrency`, and its budget is the
    invocation's: replicas each spent the whole cap and reported none of it), and says so."""
    if cluster is not None and cluster.enabled and spec.capabilities.remote:
        say(f"litjudge: note: {spec.name} runs at its provider: [cluster] replicas are for local engines, so its "
            "requests go from here (api.concurrency at a time), under the invocation's one budget")
    if cluster is None or not cluster.enabled or spec.capabilities.remote:
        return blamed(BACKENDS.get(spec.backend).create(spec), spec.backend)
    try:
        cls = cast("type[ClusterBackend]", BACKENDS.get("cluster"))   # the one entry taken with its [cluster] table
    except ImportError as exc:
        raise BackendUnavailable(f"[cluster] needs Ray: pip install 'litjudge[ray]' ({exc})") from None
    return cls(spec, cluster)


def blamed(backend: Backend, name: str) -> Backend:
    """A plugin backend whose `generate` fails (raises, or takes other arguments) is one line naming
    it and its distribution, as a plugin protocol's failure is (it was litjudge's "internal error ...
    a bug, please report it"); a built-in backend is returned as it is."""
    if BACKENDS.origin(name) == BUILT_IN:
        return backend
    inner = backend.generate

    def generate(batch):
        try:
            yield from inner(batch)
        except Exception as exc:
            said = BACKENDS.blame(name, "generate", exc)
            if said is None:                        # litjudge's own one-line error (a contract), said as it is
                raise
            raise said from exc
    backend.generate = generate                     # type: ignore[method-assign]
    return backend


def planner(spec: JudgeSpec):
    """An engine-free planner that keys requests exactly as the backend will."""
    return BACKENDS.get(spec.backend).plan(spec)


def backend_named(model: str) -> str:
    """The backend a judge name runs on, outside a judging run: no mode checked, nothing loaded."""
    return backend_of(model, RunConfig(name="local", protocol="-", dataset="-", judge=model))


def model_spec(model: str, backend: str = "vllm", **engine: Any) -> JudgeSpec:
    """The spec of a local model outside a judging run (generation, the benchmark)."""
    config = RunConfig(name="local", protocol="-", dataset="-", judge=model, backend=backend,
                       engine=EngineConfig(**engine))
    return resolve(model, config)
