"""The scales a rubric question may be on, by the name its `scale = "..."` gives. Each is one class
in one file, registered where it is defined (`@SCALES.register`): this package imports every module
of its folder, so no list names them; a scale elsewhere registers when its file is imported, a
plugin's through entry-point group `litjudge.scales`. Their order (the docs', the errors', the
tables'): each scale's `order`, then its name."""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from typing import Any

from litjudge.engine.core.errors import ContractError, did_you_mean

from .base import SCALES, Scale, Setting

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")


@cache
def _instance(kind: type[Scale]) -> Scale:
    return kind()


def scales() -> list[Scale]:
    """Every registered scale, plugins' included (one that cannot load is left out here: a question
    naming it gets its one line), by `order`, then name."""
    SCALES.check_plugins()
    return sorted((_instance(SCALES.get(n)) for n in SCALES.names()), key=lambda k: (k.order, k.name))


def names() -> list[str]:
    return [k.name for k in scales()]


def scale(name: str) -> Scale:
    """The scale named `name`; ValueError (one line, with a did-you-mean) for no such scale."""
    if name not in SCALES:
        known = names()
        raise ValueError(f"scale must be one of {known}, got {name!r}{did_you_mean(name, known)}")
    return _instance(SCALES.get(name))


def settings(common: tuple[str, ...] = ()) -> dict[str, tuple[Setting, list[Scale]]]:
    """Every scale's own keys, each with the scales declaring it (in scale order). Two scales may
    share a key of one type; a key of two types, or one named as a question's `common` keys, is
    the scale's bug (ContractError naming it)."""
    out: dict[str, tuple[Setting, list[Scale]]] = {}
    for kind in scales():
        for key, setting in kind.settings.items():
            first = out.setdefault(key, (setting, []))
            if key in common or first[0].type != setting.type:
                clash = f"a question's own key {key!r}" if key in common else \
                    f"{first[1][0].name}'s {key!r} (of another type)"
                raise ContractError(f"scale {kind.name!r} declares setting {key!r}, which is {clash}: rename it")
            first[1].append(kind)
    return out


def own_settings(qid: str, kind: Scale, given: dict[str, Any], common: tuple[str, ...]) -> tuple[tuple[str, Any], ...]:
    """Question `qid`'s settings of its scale `kind` (each given or its default); a key of another
    scale set to anything but its default, or no scale's key, is one line (`common`: the question's
    own keys, for the did-you-mean)."""
    declared = settings(common)
    for key, value in given.items():
        if key in kind.settings:
            continue
        if key not in declared:
            raise ValueError(f"question {qid!r}: unknown key {key!r}{did_you_mean(key, [*common, *declared])}")
        setting, owners = declared[key]
        if _plain(value) != setting.default:
            raise ValueError(f"question {qid!r}: {owners[0].settings[key].why.format(scale=kind.name)}")
    return tuple((k, _plain(given.get(k, s.default))) for k, s in kind.settings.items())


def _plain(value: Any) -> Any:
    """A setting as a question keeps it: a list as a tuple (hashable, compared with its default)."""
    return tuple(value) if isinstance(value, list) else value


class Live(Mapping[str, Any]):
    """A mapping read when it is used, from a function: a protocol's declared tables beside every
    scale registered by then (the declaration is made when the rubric is imported; a scale may be
    registered later, from its own file or a plugin)."""

    def __init__(self, read: Callable[[], dict[str, Any]]):
        self._read = read

    def __getitem__(self, key: str) -> Any:
        return self._read()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())

    def __repr__(self) -> str:
        return f"Live({self._read()!r})"


__all__ = ["SCALES", "Live", "Scale", "Setting", "names", "own_settings", "scale", "scales", "settings"]
