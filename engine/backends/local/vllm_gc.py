"""vLLM's collector calls, kept to the engine's own objects.

vLLM freezes the whole heap once its engine is up (`freeze_gc_heap`), so that serving never walks
it, and as the engine shuts down it unfreezes that heap and runs two full collections to free the
model and its KV cache. In a process that has imported torch, transformers and vLLM the heap holds
some 735k objects before the engine adds its 80k, and each close spent 0.86 s of its 1.06 s
walking them (EPYC Zen 3, the default judge).

litjudge freezes the heap already, just before the engine starts (`vllm_backend.start_llm`).
`engine_collections_only` (once per process) keeps that freeze for the engine's life: vLLM's
freeze does nothing, and nor do its unfreezes, so its shutdown's collections walk what is not
frozen: the engine's objects and whatever came after them. A close then returns the earlier heap
to the collector (`gc.unfreeze`, which walks nothing), as vLLM's shutdown did: `close_engine`, the
one way a backend drops its engine."""
from __future__ import annotations

import gc
import importlib
import weakref
from types import ModuleType
from typing import Any

from .vllm_patch import wrap_once

# where vLLM 0.32 calls `gc.unfreeze()` (each module's own `gc`) and where it imported freeze_gc_heap
UNFREEZE = ("vllm.v1.engine.core", "vllm.v1.worker.gpu_worker", "vllm.distributed.parallel_state")
FREEZE = ("vllm.v1.engine.core", "vllm.v1.worker.gpu_worker")


class EngineCollector(ModuleType):
    """The `gc` module as vLLM's engine modules see it: everything as in `gc` but `unfreeze`."""

    def __getattr__(self, name: str) -> Any:
        return getattr(gc, name)

    @staticmethod
    def unfreeze() -> None:
        """Nothing: what is frozen is litjudge's to return (`close_engine`)."""


ENGINE_GC = EngineCollector("gc")


def _not_frozen() -> None:
    """vLLM's `freeze_gc_heap` in its place: the engine's objects stay with the collector."""


def engine_collections_only() -> None:
    """Install the module docstring's change (`vllm_patch.wrap_once`: once per process, and
    nothing in a vLLM without those modules or names)."""
    for name in UNFREEZE:
        if (module := _module(name)) is not None:
            wrap_once(module, "gc", lambda _: ENGINE_GC)
    for name in FREEZE:
        if (module := _module(name)) is not None:
            wrap_once(module, "freeze_gc_heap", lambda _: _not_frozen)


def close_engine(owner: Any, *also: str) -> None:
    """Drop `owner.llm` (and `owner`'s attributes `also`, which hold parts of it): the last
    reference shuts vLLM down, whose collections walk the engine's objects. Then the heap frozen at
    the start returns to the collector, and a full collection runs only when a reference cycle
    kept the engine alive (through anything, the heap frozen before it included)."""
    alive = weakref.ref(owner.llm)
    for name in (*also, "llm"):
        delattr(owner, name)
    gc.unfreeze()
    if alive() is not None:
        gc.collect()


def _module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
