"""How litjudge wraps a function of vLLM's for a workaround (vllm_scan.py, vllm_tokenizer_pool.py,
vllm_gc.py): once per process, however many engines start, and not at all where vLLM has no such
function."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

MARK = "litjudge_wrapped"        # set on a wrapper, so that a second call leaves it be


def wrap_once(module: Any, name: str, wrap: Callable[[Any], Any]) -> None:
    """`module.name` replaced by `wrap(module.name)`, unless it is missing or already wrapped."""
    original = getattr(module, name, None)
    if original is None or getattr(original, MARK, False):
        return
    wrapped = wrap(original)
    setattr(wrapped, MARK, True)
    setattr(module, name, wrapped)
