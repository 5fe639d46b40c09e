"""A small typed registry: names to entries, lazy imports, "did you mean" on unknown names.

Backends register as "module:attr" strings so that `import engine` never imports vLLM or torch.
"""
from __future__ import annotations

import difflib
import importlib
from typing import Any, Generic, TypeVar

from .errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, T | str] = {}
        self._meta: dict[str, dict[str, Any]] = {}

    def add(self, name: str, entry: T | str, **meta: Any) -> None:
        """Register `entry` (an object, or a lazy "module:attr" string) under `name`, with facts
        about it (`meta`, e.g. a backend's judge-name prefix) kept in the same record."""
        if name in self._entries and self._entries[name] is not entry:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = entry
        self._meta[name] = meta

    def remove(self, name: str) -> None:
        """Take an entry out again (tests that register a toy entry clean up after themselves)."""
        self._entries.pop(name, None)
        self._meta.pop(name, None)

    def meta(self, name: str) -> dict[str, Any]:
        return self._meta.get(name, {})

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def get(self, name: str) -> T:
        if name not in self._entries:
            close = difflib.get_close_matches(name, self._entries, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"unknown {self.kind} {name!r}{hint} (known: {', '.join(self.names())})")
        entry = self._entries[name]
        if isinstance(entry, str):
            module, _, attr = entry.partition(":")
            entry = getattr(importlib.import_module(module), attr)
            self._entries[name] = entry
        return entry
