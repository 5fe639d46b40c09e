"""A small typed registry: names to entries, lazy imports, "did you mean" on unknown names.

Backends register as "module:attr" strings so that `import engine` never imports vLLM or torch.
"""
from __future__ import annotations

import difflib
import importlib
import inspect
from abc import ABC, abstractmethod
from typing import Any, Generic, TypeVar

from .errors import ConfigError, ContractError

T = TypeVar("T")


class Named(ABC):
    """A class a registry holds by name, which knows its own name (a protocol's declared name, a
    backend's `name`): registered under another, it is refused when it loads."""

    @classmethod
    @abstractmethod
    def registered_name(cls) -> str:
        """The name this class registers under."""


class Registry(Generic[T]):
    def __init__(self, kind: str, *, base: str = ""):
        """`base`: "module:Class" every entry must subclass (a light package can name it without
        importing it), checked when the entry loads (a lazy one on first use, a class when it is
        added): not a subclass, a method of the base left abstract, or (a `Named` base) a name of
        its own differing from the registered one is refused in one line (`_wrong`)."""
        self.kind, self.base = kind, base
        self._entries: dict[str, T | str] = {}
        self._meta: dict[str, dict[str, Any]] = {}

    def add(self, name: str, entry: T | str, **meta: Any) -> None:
        """Register `entry` (an object, or a lazy "module:attr" string) under `name`, with facts
        about it (`meta`, e.g. a backend's judge-name prefix) kept in the same record."""
        if name in self._entries and self._entries[name] is not entry:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        wrong = "" if isinstance(entry, str) else self._wrong(name, entry)
        if wrong:
            raise ContractError(f"{self.kind} {name!r} ({entry!r}) {wrong}")
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
            loaded = load_target(entry)
            wrong = self._wrong(name, loaded)
            if wrong:
                raise ContractError(f"{self.kind} {name!r} ({entry}) {wrong}")
            entry = self._entries[name] = loaded
        return entry

    def _wrong(self, name: str, entry: Any) -> str:
        """What is wrong with a loaded entry ("" when nothing is; see `__init__`)."""
        if not self.base:
            return ""
        base = load_target(self.base)
        if not (isinstance(entry, type) and issubclass(entry, base)):
            return f"is not a subclass of {self.base.replace(':', '.')}"
        if inspect.isabstract(entry):
            return f"does not implement {', '.join(sorted(entry.__abstractmethods__))} of {base.__qualname__}"  # type: ignore[attr-defined]
        if issubclass(entry, Named) and entry.registered_name() != name:
            return f"names itself {entry.registered_name()!r}: register it under that name, or rename it {name!r}"
        return ""


def load_target(target: str) -> Any:
    """`module:attr` -> the object, imported now."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)
