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
    """`base`: entries are subclasses of it, checked when each loads (a lazy one on first use, a
    class when it is added): not a subclass, a method of the base left abstract, or (a `Named`
    base) a name of its own differing from the registered one is refused in one line."""

    def __init__(self, kind: str, base: type | str | None = None):
        self.kind, self._base = kind, base
        self._entries: dict[str, T | str] = {}
        self._meta: dict[str, dict[str, Any]] = {}

    def add(self, name: str, entry: T | str, **meta: Any) -> None:
        """Register `entry` (an object, or a lazy "module:attr" string) under `name`, with facts
        about it (`meta`, e.g. a backend's judge-name prefix) kept in the same record."""
        if name in self._entries and self._entries[name] is not entry:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = entry if isinstance(entry, str) else self._checked(name, repr(entry), entry)
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
            entry = self._checked(name, entry, getattr(importlib.import_module(module), attr))
            self._entries[name] = entry
        return entry

    @property
    def base(self) -> type | None:
        """The base class (given as a lazy "module:Class" too, so a light package can name it)."""
        if isinstance(self._base, str):
            module, _, attr = self._base.partition(":")
            self._base = getattr(importlib.import_module(module), attr)
        return self._base  # type: ignore[return-value]

    def _checked(self, name: str, where: str, entry: Any) -> Any:
        """`entry` as its registry's base requires it (see the class)."""
        base = self.base
        if base is None:
            return entry
        what = f"{self.kind} {name!r} ({where})"
        if not (isinstance(entry, type) and issubclass(entry, base)):
            raise ContractError(f"{what} is not a subclass of {base.__module__}.{base.__qualname__}")
        if inspect.isabstract(entry):
            missing = ", ".join(sorted(entry.__abstractmethods__))  # type: ignore[attr-defined]
            raise ContractError(f"{what} does not implement {missing} of {base.__qualname__}")
        if issubclass(entry, Named) and entry.registered_name() != name:
            raise ContractError(f"{what} names itself {entry.registered_name()!r}: register it under that name, or "
                                f"rename it {name!r}")
        return entry
