"""One parse of a GGUF file per conversion.

transformers' GGUF loader builds a new `gguf.GGUFReader` each time it is asked for a config, a
tokenizer or the weights, and a reader parses every metadata field as it opens: Gemma 3's 262k-token
vocabulary is 2.4 M fields, most of a conversion's time (its config, tokenizer and weights were
three parses). The reader only reads a memory map of the file, so inside `one_parse()` each file
is parsed once and its reader shared; outside it, the library is as it was.

The shared reader also holds the map as a plain array: an `np.memmap` runs Python code for every
slice the parse takes and every element transformers lists out of a string (12.8 M calls for
Gemma 3), where an ndarray over the same map does it in C. The bytes are the same ones.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_LOCK = threading.Lock()


@contextmanager
def one_parse() -> Iterator[None]:
    """Within the block, `gguf.GGUFReader(path)` opened read-only returns one reader per file."""
    import gguf

    library: Any = gguf                      # the reader class is swapped for the block
    with _LOCK:
        original = library.GGUFReader
        plain = _plain_reader(original)
        readers: dict[tuple[str, int, int], Any] = {}

        def shared(path: Any, mode: Any = "r") -> Any:
            if mode != "r":
                return original(path, mode)
            st = os.stat(path)
            key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
            if key not in readers:
                readers[key] = plain(path, mode)
            return readers[key]

        library.GGUFReader = shared
        try:
            yield
        finally:
            library.GGUFReader = original


def _plain_reader(reader: Any) -> Any:
    """`reader` whose memory map is kept as a base ndarray (the map stays open through it)."""
    import numpy as np

    class PlainReader(reader):
        @property
        def data(self) -> Any:
            return self.__dict__["_plain"]

        @data.setter
        def data(self, value: Any) -> None:
            self.__dict__["_plain"] = np.asarray(value)

    return PlainReader
