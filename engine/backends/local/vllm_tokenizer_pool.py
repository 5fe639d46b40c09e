"""A start-up cost of vLLM 0.32 with transformers 5: each engine's renderer makes a pool of deep
copies of the judge's tokenizer at once (`vllm.tokenizers.hf.maybe_make_thread_pool`,
renderer_num_workers + 1 of them, so that no two threads share a Rust tokenizer). A copy of Gemma 3's
took 2.3 s of CPU (Xeon, one core): 1.4 s its Rust tokenizer (serialized and read back), 0.9 s the
vocabulary and merges the tokenizer was built from (`_vocab`, `_merges`: 262,144 entries and 514,906
merges, kept by transformers 5 beside the Rust tokenizer), two copies 4.2 s of an engine's 10.7 s start.

`shared_tokenizer_tables` wraps the pool (once per process) so that
- the pool starts with one member, the engine's own tokenizer (a plain copy of it, sharing its Rust
  tokenizer): litjudge drives an engine from one thread (the runner plans on a live engine's
  tokenizer in that thread, never beside it), so the renderer's warm-up and the runner's own calls
  borrow that member and no copy is made. The pool started empty before, and the warm-up's borrow
  (vLLM renders a chat through the template once) made a deep copy at every start of a judge with
  a chat template: a Qwen2.5-Coder 0.5B engine started in 3.4-4.1 s now, 4.4-5.7 s before (EPYC
  Zen 3, two processes of two starts each way); SmolLM2's copy was 0.13 s; Gemma 3, with no template,
  borrowed nothing. Some 14 s of the suite's CPU (py-spy);
- a thread that borrows while that member is out gets a deep copy of its own, as vLLM makes it, so
  two threads still never share a Rust tokenizer through the pool;
- a copy shares those two tables, which nothing changes once the tokenizer is built (everything
  else of it, the Rust tokenizer included, is copied as before). The renderer pools a copy of the
  cached tokenizer (`copy.copy`), so the tables are marked shared on that copy only."""
from __future__ import annotations

import copy
import sys
from typing import Any

from .vllm_patch import wrap_once

TABLES = ("_vocab", "_merges")       # what transformers 5's tokenizers keep of their construction


class SharedDict(dict):
    """A dict that a deep copy shares instead of copying (read-only data)."""

    def __deepcopy__(self, memo: dict) -> SharedDict:
        return self


class SharedList(list):
    """A list that a deep copy shares instead of copying (read-only data)."""

    def __deepcopy__(self, memo: dict) -> SharedList:
        return self


def share_tables(tokenizer: Any) -> None:
    """Mark `tokenizer`'s construction tables as shared by its deep copies (a plain dict or list only)."""
    attrs = getattr(tokenizer, "__dict__", None)
    if not isinstance(attrs, dict):
        return
    for name in TABLES:
        value = attrs.get(name)
        if type(value) is dict:
            attrs[name] = SharedDict(value)
        elif type(value) is list:
            attrs[name] = SharedList(value)


def shared_tokenizer_tables() -> None:
    """Wrap vLLM's tokenizer pool as the module says; nothing where vLLM has no such pool."""
    try:
        from vllm.renderers import hf
    except ImportError:
        return
    wrap_once(hf, "maybe_make_thread_pool", _own_tokenizer_first)


class _FirstMemberPlain:
    """Stands in for module `copy` in vLLM's tokenizer module while a pool is made: the member the
    pool starts with is a plain copy of the engine's tokenizer."""

    copy = staticmethod(copy.copy)

    @staticmethod
    def deepcopy(x: Any, memo: Any = None) -> Any:
        return copy.copy(x)


def _own_tokenizer_first(pool: Any) -> Any:
    module: Any = sys.modules[pool.__module__]   # where the pool's code finds `copy` (vllm.tokenizers.hf)

    def pooled(tokenizer: Any, copies: int = 1) -> Any:
        share_tables(tokenizer)
        module.copy = _FirstMemberPlain
        try:
            return pool(tokenizer, 1)            # its one member: the engine's own tokenizer
        finally:
            module.copy = copy                   # later copies are deep ones
    return pooled
