"""A start-up cost of vLLM 0.32 with transformers 5: each engine's renderer makes a pool of deep
copies of the judge's tokenizer at once (`vllm.tokenizers.hf.maybe_make_thread_pool`,
renderer_num_workers + 1 of them, so that no two threads share a Rust tokenizer). A copy of Gemma 3's
took 2.3 s of CPU (Xeon, one core): 1.4 s its Rust tokenizer (serialized and read back), 0.9 s the
vocabulary and merges the tokenizer was built from (`_vocab`, `_merges`: 262,144 entries and 514,906
merges, kept by transformers 5 beside the Rust tokenizer), two copies 4.2 s of an engine's 10.7 s start.

`shared_tokenizer_tables` wraps the pool (once per process) so that
- the pool starts empty: its own code makes a copy when a thread borrows one and none is free, so
  a thread still never shares a Rust tokenizer, and litjudge's engines, which hand vLLM token ids,
  make none (a Gemma 3 start 6.8 s in place of 10.7);
- a copy shares those two tables, which nothing changes once the tokenizer is built (everything
  else of it, the Rust tokenizer included, is copied as before). The renderer pools a copy of the
  cached tokenizer (`copy.copy`), so the tables are marked shared on that copy only."""
from __future__ import annotations

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
    wrap_once(hf, "maybe_make_thread_pool", _empty_pool)


def _empty_pool(pool: Any) -> Any:
    def pooled(tokenizer: Any, copies: int = 1) -> Any:
        share_tables(tokenizer)
        return pool(tokenizer, 0)        # each copy made when a thread first borrows one
    return pooled
