"""The backend contract (engine.core.backend.Backend): one base class with every method the planner
and the runner call, optional ones as no-ops, so nothing asks a backend what it has; the registry
refuses, as a class loads, what does not keep the contract (one line each)."""
from __future__ import annotations

import ast
import re

import pytest

from litjudge.engine.backends import BACKENDS
from litjudge.engine.core.backend import Backend, Capabilities, JudgeSpec
from litjudge.engine.core.errors import ContractError
from litjudge.engine.core.session import Spend
from tests.conftest import PROJECT_ROOT
from tests.test_architecture import AlwaysFirst

PROBES = ("getattr", "hasattr")
# Where a backend is used: nothing there may ask one what it has.
NO_PROBING = ("engine/core/runner.py", "engine/core/planner.py", "engine/core/plan_process.py")
BACKENDISH = re.compile(r"backend|planner|engine|live|replica|spec|judge", re.IGNORECASE)


def probes(path) -> list[tuple[int, str]]:
    """(line, first argument) of every getattr / hasattr call in a module."""
    tree = ast.parse(path.read_text())
    return [(node.lineno, ast.unparse(node.args[0])) for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in PROBES and node.args]


def test_nothing_probes_a_backend_by_name():
    paths = [PROJECT_ROOT / rel for rel in NO_PROBING] + sorted((PROJECT_ROOT / "engine" / "app").rglob("*.py"))
    found = [f"{path.relative_to(PROJECT_ROOT)}:{line} ({arg})" for path in paths for line, arg in probes(path)
             if BACKENDISH.search(arg)]
    assert found == [], found


def test_every_registered_backend_keeps_the_whole_contract():
    """Each loads through the base-class check: a Backend subclass, nothing abstract left, its own
    name; so `context_window`, `attach`, `progress_note`... are there on every one."""
    for name in BACKENDS.names():
        if name == "cluster" and not _installed("ray"):
            continue
        cls = BACKENDS.get(name)
        assert issubclass(cls, Backend) and not cls.__abstractmethods__ and cls.registered_name() == name
        assert isinstance(cls.capabilities, Capabilities)


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


class _DuckTyped:
    """Has every method a backend needs, but is no Backend (the registry took `object()` before)."""

    name = "duck"
    capabilities = Capabilities(frozenset({"label"}))


class _NoContextWindow(Backend):
    name = "nowindow"
    capabilities = Capabilities(frozenset({"label"}))
    resolve = AlwaysFirst.resolve
    identity, render, encode, generate = AlwaysFirst.identity, AlwaysFirst.render, AlwaysFirst.encode, \
        AlwaysFirst.generate


class _Misnamed(AlwaysFirst):
    name = "tooy"


@pytest.mark.parametrize("entry, message", [
    (_DuckTyped, r"backend 'toy' \(.*_DuckTyped.*\) is not a subclass of litjudge.engine.core.backend.Backend"),
    (object(), "is not a subclass of"),
    (_NoContextWindow, r"does not implement context_window of Backend"),
    (_Misnamed, "names itself 'tooy': register it under that name"),
])
def test_a_backend_that_breaks_the_contract_is_refused_where_it_is_registered(entry, message):
    with pytest.raises(ContractError, match=message) as caught:
        BACKENDS.add("toy", entry, prefix="toy:")
    assert "toy" not in BACKENDS and "\n" not in str(caught.value)


def test_a_lazy_entry_is_refused_as_it_loads_not_mid_run(monkeypatch):
    """A "module:Class" entry is checked when first looked up (resolving a judge, before any
    planning): a backend without context_window fails there in one line, not with an AttributeError
    once the plan starts."""
    from litjudge.engine import backends
    from litjudge.engine.core.config import RunConfig

    BACKENDS.add("nowindow", "tests.test_backend_contract:_NoContextWindow", prefix="nowindow:")
    try:
        config = RunConfig(name="t", protocol="pairwise", dataset="pairs-generic", judge="nowindow:x")
        with pytest.raises(ContractError, match="does not implement context_window"):
            backends.resolve("nowindow:x", config)
    finally:
        BACKENDS.remove("nowindow")


def test_a_backend_class_without_capabilities_is_refused():
    """A class that never sets what it can honour is refused, naming what it lacks."""
    stripped = type("Stripped", (Backend,), {"name": "stripped", "resolve": AlwaysFirst.resolve,
                                             **{m: getattr(AlwaysFirst, m) for m in
                                                ("identity", "render", "encode", "context_window", "generate")}})
    with pytest.raises(ContractError, match=r"Stripped does not set capabilities"):
        BACKENDS.add("stripped", stripped)


def test_the_optional_capabilities_are_no_ops_by_default():
    toy = AlwaysFirst(JudgeSpec("toy", "toy", "x", "toy:x", "toy"))
    toy.attach(None, Spend())                              # type: ignore[arg-type]
    assert toy.progress_note() == "" and toy.tokenization() == {} and toy.describe() == {"backend": "toy"}
    assert list(map(list, toy.encode_batch(["a bb", "ccc"]))) == [[1, 2], [3]]
    assert AlwaysFirst.cost(toy.spec, 1e6, 1e6) is None and isinstance(AlwaysFirst.plan(toy.spec), AlwaysFirst)
    toy.close()
