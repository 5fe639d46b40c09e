"""A small typed registry: names to entries, lazy imports, "did you mean" on unknown names, and
plugins: entries another installed distribution declares under the registry's entry-point group.

Built-in entries register as "module:attr" strings (so `import litjudge` never imports vLLM or
torch); a plugin's entry point is read the same way. Nothing is imported until a name is used (or
the registry is listed): the entry points are read from the installed distributions' metadata the
first time a name is not a built-in one. When an entry loads it is checked against the registry's
base class (lm-eval's `base_cls`); a plugin that fails to import, or is not what the registry holds,
is ONE line naming its distribution, raised only where its name is used (`get`), a warning where the
registry is listed (`check_plugins`), and every other entry works.
"""
from __future__ import annotations

import functools
import importlib
import inspect
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Generic, TypeVar

from .console import say
from .errors import ConfigError, ContractError, LitjudgeError, PluginError, PluginInterrupted, did_you_mean

T = TypeVar("T")


class Named(ABC):
    """A class a registry holds by name, which knows its own name (a protocol's declared name, a
    backend's `name`): registered under another, it is refused when it loads."""

    @classmethod
    @abstractmethod
    def registered_name(cls) -> str:
        """The name this class registers under."""


@dataclass(frozen=True)
class Origin:
    """Where an entry came from: litjudge itself, or an installed distribution's entry point."""

    distribution: str = ""
    version: str = ""

    def __str__(self) -> str:
        return f"{self.distribution} {self.version}" if self.distribution else "built-in"


BUILT_IN = Origin()


@functools.cache
def entry_points(group: str) -> tuple[metadata.EntryPoint, ...]:
    """The installed distributions' entry points of `group` (metadata only, nothing imported; read
    once per process), each distribution once even where it is on the path twice."""
    seen: dict[tuple[str, str, str], metadata.EntryPoint] = {}
    for distribution in metadata.distributions():
        try:
            found = distribution.entry_points.select(group=group)
        except Exception as exc:  # noqa: BLE001  (another package's damaged metadata: never every run's failure)
            name = distribution.metadata["Name"] or str(getattr(distribution, "_path", "a distribution"))
            _unreadable(name, exc)
            continue
        for ep in found:
            dist = ep.dist.metadata["Name"] if ep.dist is not None else ""
            seen.setdefault((ep.name, ep.value, dist), ep)
    return tuple(seen.values())


_UNREADABLE: set[str] = set()


def _unreadable(distribution: str, exc: BaseException) -> None:
    """Said once per distribution: its entry_points.txt cannot be read (a line without '=' made
    every run litjudge's internal error, whatever package it belonged to)."""
    if distribution in _UNREADABLE:
        return
    _UNREADABLE.add(distribution)
    say(f"litjudge: warning: the entry points of installed distribution {distribution!r} cannot be read "
        f"({type(exc).__name__}: {str(exc)[:120]}): its plugins, if any, are not loaded", logging.WARNING)


def origin_of(ep: metadata.EntryPoint) -> Origin:
    if ep.dist is None:
        return Origin("an unnamed distribution")
    return Origin(ep.dist.metadata["Name"], ep.dist.version)


def load_target(target: str) -> Any:
    """`module:attr` (attr may be dotted, as in entry points) -> the object, imported now."""
    module, _, attr = target.partition(":")
    return functools.reduce(getattr, attr.split(".") if attr else [], importlib.import_module(module.strip()))


def _target(entry: Any) -> str:
    """An entry as an entry point names it ("module:Class"); a lazy entry is that string already."""
    if entry is None or isinstance(entry, str):
        return entry or ""
    return f"{entry.__module__}:{entry.__qualname__}"


class Registry(Generic[T]):
    def __init__(self, kind: str, *, base: str = "", group: str = "",
                 plugin_meta: Callable[[str], dict[str, Any]] | None = None, unique: tuple[str, ...] = ()):
        """`base`: "module:Class" every entry must subclass, checked when the entry loads (""; any
        callable); `group`: the entry-point group other distributions declare entries in ("": none);
        `plugin_meta`: the facts (`meta`) of a plugin's entry, from its name (a backend's prefix);
        `unique`: facts no two entries may share (a plugin claiming a taken one is ignored)."""
        self.kind, self.base, self.group, self.unique = kind, base, group, unique
        self._plugin_meta = plugin_meta or (lambda name: {})
        self._entries: dict[str, T | str] = {}
        self._meta: dict[str, dict[str, Any]] = {}
        self._origins: dict[str, Origin] = {}
        self._broken: dict[str, str] = {}            # a plugin's name -> why it cannot be used (one line)
        self._ignored: list[str] = []                # plugins refused a built-in's name (one line each)
        self._discovered = not group

    def add(self, name: str, entry: T | str, *, origin: Origin = BUILT_IN, **meta: Any) -> None:
        """Register `entry` (an object, or a lazy "module:attr" string) under `name`, with facts
        about it (`meta`, e.g. a backend's judge-name prefix) kept in the same record."""
        if name in self._entries and self._entries[name] is not entry:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        wrong = "" if isinstance(entry, str) else self._wrong(name, entry)
        if wrong:
            raise ContractError(f"{self.kind} {name!r} ({entry!r}) {wrong}")
        self._entries[name] = entry
        self._meta[name] = meta
        self._origins[name] = origin

    def register(self, entry: T) -> T:
        """A decorator: register a `Named` class under its own name where it is defined, so a new
        entry is one class in one file and no list names it. The class a plugin's entry point names
        ("module:Class", loading now) is that entry, not a second one."""
        name = entry.registered_name()  # type: ignore[attr-defined]
        if self._entries.get(name) == _target(entry):
            return entry
        self.add(name, entry)
        return entry

    def remove(self, name: str) -> None:
        """Take an entry out again (tests that register a toy entry clean up after themselves)."""
        for table in (self._entries, self._meta, self._origins, self._broken):
            table.pop(name, None)

    def meta(self, name: str) -> dict[str, Any]:
        self._known(name)
        return self._meta.get(name, {})

    def origin(self, name: str) -> Origin:
        """Built-in, or the distribution (name and version) whose entry point declared `name`."""
        self._known(name)
        return self._origins.get(name, BUILT_IN)

    def names(self) -> list[str]:
        """Every usable name, plugins' included (read from metadata; nothing imported)."""
        self._discover()
        return sorted(n for n in self._entries if n not in self._broken)

    def __contains__(self, name: str) -> bool:
        return self._known(name) and name not in self._broken

    def get(self, name: str) -> T:
        if not self._known(name):
            raise ConfigError(f"unknown {self.kind} {name!r}{did_you_mean(name, self.names())} "
                              f"(known: {', '.join(self.names())}; a plugin's is known once its package is installed)")
        if name in self._broken:
            raise PluginError(self._broken[name])
        entry = self._entries[name]
        if isinstance(entry, str):
            entry = self._load(name, entry)
            self._entries[name] = entry
        return entry

    def check_plugins(self) -> list[str]:
        """Load every plugin's entry (built-ins stay lazy: a listing must not need vLLM or Ray): one
        line per plugin that cannot be used, which a listing prints as a warning and goes on."""
        self._discover()
        for name in list(self._entries):
            if self._origins.get(name, BUILT_IN) != BUILT_IN and name not in self._broken:
                try:
                    self.get(name)
                except PluginError:
                    pass                                 # recorded in _broken, reported below
        return [*self._ignored, *(self._broken[n] for n in sorted(self._broken))]

    def blame(self, name: str, what: str, exc: BaseException) -> PluginError | None:
        """A plugin entry's own code failing as it runs (a protocol's `aggregate`): one line naming the
        entry and its distribution, as an import failure is; None for a built-in entry (litjudge's
        own bug) and for litjudge's own errors (already one line)."""
        origin = self._origins.get(name, BUILT_IN)
        if origin == BUILT_IN or isinstance(exc, LitjudgeError):
            return None
        why = str(exc).splitlines()[0] if str(exc) else ""
        return PluginError(f"{self.kind} {name!r} of {origin}: its {what} raised {type(exc).__name__}"
                           f"{': ' + why[:200] if why else ''}; fix or uninstall {origin.distribution}")

    # -- internals ---------------------------------------------------------------------------------
    def _known(self, name: str) -> bool:
        """`name` is registered or broken (built-ins answer without reading any metadata)."""
        if name not in self._entries and name not in self._broken:
            self._discover()
        return name in self._entries or name in self._broken

    def _discover(self) -> None:
        """Register the entry points of the registry's group (once): a name a built-in holds, or two
        distributions declare, is refused in one line naming them."""
        if self._discovered:
            return
        self._discovered = True
        by_name: dict[str, list[metadata.EntryPoint]] = {}
        for ep in entry_points(self.group):
            by_name.setdefault(ep.name, []).append(ep)
        for name, eps in sorted(by_name.items()):
            owners = " and ".join(str(origin_of(ep)) for ep in eps)
            if len(eps) == 1 and _target(self._entries.get(name)) == eps[0].value:
                self._origins[name] = origin_of(eps[0])      # the plugin's own class, imported (registered) already
            elif name in self._entries:
                self._ignored.append(f"{self.kind} {name!r} of {owners} (entry point group {self.group}) is ignored: "
                                     f"litjudge's own {self.kind} {name!r} keeps the name; rename it in the plugin")
            elif len(eps) > 1:
                self._broken[name] = (f"{self.kind} {name!r} is declared by {owners} (entry point group {self.group}): "
                                      "uninstall one of them")
                self._origins[name] = origin_of(eps[0])
            else:
                meta = self._plugin_meta(name)
                taken = next(((k, other) for k in self.unique if k in meta for other, m in self._meta.items()
                              if m.get(k) == meta[k]), None)
                if taken:
                    self._ignored.append(f"{self.kind} {name!r} of {owners} (entry point group {self.group}) is ignored: "
                                         f"its {taken[0]} {meta[taken[0]]!r} is {self.kind} {taken[1]!r}'s; rename it "
                                         "in the plugin")
                else:
                    self.add(name, eps[0].value, origin=origin_of(eps[0]), **meta)

    def _load(self, name: str, target: str) -> T:
        """Import an entry and check it is what this registry holds; a plugin's failure is one line
        naming its distribution (a built-in's propagates: that is litjudge's own error)."""
        origin = self._origins.get(name, BUILT_IN)
        if origin == BUILT_IN:
            entry = load_target(target)
        else:
            try:
                entry = load_target(target)
            except KeyboardInterrupt:
                raise PluginInterrupted(f"while importing {self.kind} {name!r} of {origin} ({target})",
                                        origin.distribution) from None
            except (Exception, SystemExit) as exc:  # noqa: BLE001  (whatever someone else's import raises, sys.exit too, is one line)
                why = str(exc).splitlines()[0] if str(exc) else ""
                self._broken[name] = (f"{self.kind} {name!r} of {origin} could not be loaded ({target}: "
                                      f"{type(exc).__name__}{': ' + why if why else ''}); fix or uninstall "
                                      f"{origin.distribution}")
                raise PluginError(self._broken[name]) from None
        wrong = self._wrong(name, entry)
        if wrong:
            message = f"{self.kind} {name!r} of {origin} ({target}) {wrong}"
            if origin == BUILT_IN:
                raise ContractError(message)
            self._broken[name] = f"{message}; fix or uninstall {origin.distribution}"
            raise PluginError(self._broken[name])
        return entry

    def _wrong(self, name: str, entry: Any) -> str:
        """What is wrong with a loaded entry ("" when nothing is): (no base) not callable; not a
        subclass of the registry's base; a method of the base left abstract; or (a `Named` base) a
        name of its own differing from the registered one."""
        if not self.base:
            return "" if callable(entry) else f"is a {type(entry).__name__}, not a function"
        base = load_target(self.base)
        if not (isinstance(entry, type) and issubclass(entry, base)):
            module, _, attr = self.base.partition(":")
            return f"is not a subclass of {module}.{attr}"
        if inspect.isabstract(entry):
            return f"does not implement {', '.join(sorted(entry.__abstractmethods__))} of {base.__qualname__}"  # type: ignore[attr-defined]
        if issubclass(entry, Named) and entry.registered_name() != name:
            return f"names itself {entry.registered_name()!r}: register it under that name, or rename it {name!r}"
        return ""


__all__ = ["BUILT_IN", "Named", "Origin", "PluginError", "Registry", "entry_points"]
