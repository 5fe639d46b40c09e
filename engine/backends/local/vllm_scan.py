"""A workaround for the CPU build of vLLM (0.32): as an engine starts, it rebinds its Triton
kernels to C++ fallbacks by scanning every loaded module's namespace and reading `vars(value)` of
each value, which it takes to be a dict. llvmlite's `binding.ffi.lib` (loaded with numba: by
ppi-python, umap, librosa, ...) answers any attribute, `__dict__` included, with a C function
wrapper, so the scan fails with "'_lib_fn_wrapper' object has no attribute 'get'" and the engine
never starts: importing such a library before `litjudge.judge()` in a notebook was enough.

`tolerant_kernel_scan` wraps vLLM's scan (once per process) so that it runs with the modules it
cannot read set aside in `sys.modules` for its duration: the scan imports nothing and rebinds
only vLLM's own kernels, which no such module holds."""
from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

from .vllm_patch import wrap_once


def unscannable(module: ModuleType) -> bool:
    """Whether vLLM's scan fails on `module`: a value whose `vars()` is no mapping (or raises)."""
    namespace = getattr(module, "__dict__", None)
    if not namespace:
        return False
    for value in list(namespace.values()):
        try:
            if hasattr(value, "__dict__") and not hasattr(vars(value), "get"):
                return True
        except Exception:  # noqa: BLE001  (anything that raises here raises in vLLM's scan too)
            return True
    return False


def tolerant_kernel_scan() -> None:
    """Wrap vLLM's kernel scan as the module says; nothing where the CPU build has no such scan."""
    try:
        from vllm.triton_utils import dispatcher
    except ImportError:
        return
    wrap_once(dispatcher, "_rebind_kernels", _tolerant)


def _tolerant(scan: Any) -> Any:
    def tolerant(overrides: Any) -> Any:
        aside = {name: m for name, m in list(sys.modules.items()) if m is not None and unscannable(m)}
        for name in aside:
            del sys.modules[name]
        try:
            return scan(overrides)
        finally:
            sys.modules.update(aside)
    return tolerant
