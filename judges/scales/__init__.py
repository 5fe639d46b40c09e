"""The scales a rubric question may be on, by the name its `scale = "..."` gives: each one class in
one file of this folder (a subclass of `base.Scale`), registered here in the order the docs, the
errors and the tables list them. A new scale: its file, and its name below."""
from __future__ import annotations

from functools import cache

from litjudge.engine.core.errors import did_you_mean
from litjudge.engine.core.registry import Registry

from .base import Scale

SCALES: Registry[type[Scale]] = Registry("scale", base="litjudge.judges.scales.base:Scale")
ORDER = ("binary", "points", "pairwise", "categorical")
for _name in ORDER:
    SCALES.add(_name, f"litjudge.judges.scales.{_name}:{_name.title()}")
del _name


@cache
def scale(name: str) -> Scale:
    """The scale named `name`; ValueError (one line, with a did-you-mean) for no such scale."""
    if name not in SCALES:
        raise ValueError(f"scale must be one of {list(ORDER)}, got {name!r}{did_you_mean(name, ORDER)}")
    return SCALES.get(name)()


def scales() -> list[Scale]:
    """Every scale, in ORDER."""
    return [scale(name) for name in ORDER]


__all__ = ["ORDER", "SCALES", "Scale", "scale", "scales"]
