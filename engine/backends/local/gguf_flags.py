"""The special tokens a GGUF's tokenizer adds around a text, and a converted tokenizer made to add them.

transformers' GGUF loader builds a tokenizer's vocabulary, merges and special tokens from the file's
metadata but drops `tokenizer.ggml.add_bos_token` and `add_eos_token`: Gemma 3's file says
add_bos_token = 1, and the tokenizer converted from it added no <bos> (a Gemma base model without
its BOS judges badly). llama.cpp adds what these flags say whenever it tokenizes a prompt with its
special tokens, as transformers does with `add_special_tokens=True` (the plain layout of a base
model; a chat template places its own, and a chat prompt is tokenized without adding any). So the
flags a file states are given to the converted tokenizer; a flag it does not state leaves the
loader's choice. Only the metadata is read: it opens the file, so a chunked GGUF's first chunk holds it.
"""
from __future__ import annotations

import struct
from collections.abc import Collection
from typing import IO, Any

FLAGS = {"tokenizer.ggml.add_bos_token": "add_bos_token", "tokenizer.ggml.add_eos_token": "add_eos_token"}
_FIXED = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


def _take(stream: IO[bytes], n: int) -> bytes:
    data = stream.read(n)
    if len(data) != n:
        raise ValueError("the file ends inside its GGUF metadata")
    return data


def _number(stream: IO[bytes], fmt: str) -> Any:
    return struct.unpack(fmt, _take(stream, struct.calcsize(fmt)))[0]


def _value(stream: IO[bytes], kind: int, keep: bool) -> Any:
    """One metadata value (kept, or only read past: arrays are always read past)."""
    if kind in _FIXED:
        return _number(stream, _FIXED[kind])
    if kind == _STRING:
        text = _take(stream, _number(stream, "<Q"))
        return text.decode("utf-8", "replace") if keep else None
    if kind == _ARRAY:
        item, count = _number(stream, "<I"), _number(stream, "<Q")
        if item in _FIXED:
            _take(stream, count * struct.calcsize(_FIXED[item]))
        else:
            for _ in range(count):
                _value(stream, item, False)
        return None
    raise ValueError(f"GGUF metadata value of unknown type {kind}")


def read_metadata(stream: IO[bytes], keys: Collection[str]) -> dict[str, Any]:
    """The values of `keys` (numbers, booleans, strings) among a GGUF's metadata, read from the start
    of `stream` and no further than the last of them; a key the file lacks is absent. ValueError for
    a stream that is not a GGUF or ends inside its metadata."""
    if stream.read(4) != b"GGUF":
        raise ValueError("not a GGUF file (no GGUF magic at its start)")
    if _number(stream, "<I") < 2:
        raise ValueError("a GGUF of version 1 (32-bit counts), which nothing converts any more")
    _number(stream, "<Q")                                       # the tensor count
    found: dict[str, Any] = {}
    for _ in range(_number(stream, "<Q")):
        key = _take(stream, _number(stream, "<Q")).decode("utf-8", "replace")
        value = _value(stream, _number(stream, "<I"), key in keys)
        if key in keys:
            found[key] = value
            if len(found) == len(keys):
                break
    return found


def tokenizer_flags(stream: IO[bytes]) -> dict[str, bool]:
    """What the GGUF says its tokenizer adds around a text, as transformers names it (the flags it states)."""
    return {FLAGS[key]: bool(value) for key, value in read_metadata(stream, FLAGS).items()}


def added_around(tok: Any) -> tuple[list[int], list[int]]:
    """The ids a (transformers) tokenizer puts before and after a text when it adds its special tokens."""
    bare = tok("a", add_special_tokens=False)["input_ids"]
    full = tok("a", add_special_tokens=True)["input_ids"]
    for at in range(len(full) - len(bare) + 1):
        if full[at:at + len(bare)] == bare:
            return full[:at], full[at + len(bare):]
    raise ValueError("the tokenizer changes a text's own tokens when it adds its special tokens")


def departures(tok: Any, flags: dict[str, bool]) -> list[str]:
    """How the tokenizer departs from the GGUF's flags, one phrase each ([] when it adds what they say)."""
    before, after = added_around(tok)
    seen = {"add_bos_token": (before, tok.bos_token_id), "add_eos_token": (after, tok.eos_token_id)}
    out = []
    for name, on in flags.items():
        got, token = seen[name]
        if got != ([token] if on else []):
            out.append(f"the GGUF says {name} = {int(on)} and the tokenizer adds {got or 'nothing'} "
                       f"{'before' if name == 'add_bos_token' else 'after'} a text")
    return out


def give_flags(tok: Any, flags: dict[str, bool]) -> None:
    """Make the tokenizer add what the GGUF says (its post-processor, saved in tokenizer.json); one that
    already does is left untouched, so its saved files stay byte for byte what they were."""
    if not departures(tok, flags):
        return
    for name, on in flags.items():
        setattr(tok, name, on)                   # transformers rebuilds the post-processor from these
    left = departures(tok, flags)
    if left:
        raise ValueError("; ".join(left))
