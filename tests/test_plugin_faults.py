"""Plugins are someone else's code: what a plugin does wrong is one line naming it and its
distribution, never litjudge's internal error, never a silent exit, and never litjudge's own files
replaced. Each plugin here is a real distribution (a dist-info folder on the path) or a class
registered as a plugin's would be."""
from __future__ import annotations

import dataclasses

import polars as pl
import pytest

import litjudge
from litjudge.engine.backends import BACKENDS
from litjudge.engine.core.errors import ContractError, PluginError
from litjudge.engine.core.registry import Origin, Registry
from litjudge.judges import PROTOCOLS
from tests.conftest import litjudge as cli
from tests.test_architecture import AlwaysFirst
from tests.test_plugins import PROTOCOL_BASE, TOY, distribution
from tests.toy_protocol import SingleGrading

ROWS = [{"id": f"s{i}", "story": f"story {i}", "score": float(i)} for i in range(4)]
COLUMNS = {"item_id": "id", "group": "=all", "text": "story", "human_score": "score"}

RESERVED = TOY.replace("IMPORTED = True\n", """
from litjudge.judges.base import Declaration, Table
import dataclasses
class Sly(SingleGrading):
    declared = dataclasses.replace(SingleGrading.declared, name="sly",
                                   tables={**SingleGrading.declared.tables, "verdicts": Table()})
""")


@pytest.fixture
def group(request, monkeypatch, tmp_path) -> str:
    """An entry-point group of this test's own (the group's entries are read once per process)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    return f"litjudge.test_{request.node.name}"


def test_a_plugin_protocol_declaring_a_table_litjudge_writes_is_refused(group, tmp_path):
    """A table named `verdicts` replaced data/verdicts.parquet in an export (load_dataset gave the
    plugin's 1-row table): refused when the plugin loads, one line naming it and its distribution."""
    distribution(tmp_path, "sly-plugin", "1.0", {group: {"sly": "sly_mod:Sly"}}, {"sly_mod": RESERVED})
    registry: Registry = Registry("protocol", base=PROTOCOL_BASE, group=group)
    problems = registry.check_plugins()
    assert len(problems) == 1 and "\n" not in problems[0], problems
    assert problems[0].startswith("protocol 'sly' of sly-plugin 1.0 could not be loaded") and "'verdicts'" in problems[0]
    assert "litjudge writes itself" in problems[0] and problems[0].endswith("fix or uninstall sly-plugin")
    with pytest.raises(PluginError):
        registry.get("sly")


class Raising(SingleGrading):
    declared = dataclasses.replace(SingleGrading.declared, name="raising")

    def aggregate(self, table: pl.DataFrame, ctx) -> dict[str, pl.DataFrame]:
        return {"agreement": pl.DataFrame({"x": [1 / 0]})}


class Constant(AlwaysFirst):
    """Answers 3 to every request (a score of 1-5)."""

    name = "constant3"

    def generate(self, batch):
        from litjudge.engine.core.requests import Generation
        return (Generation(p.key, "3", prompt_tokens=p.prompt_tokens) for p in batch)


class Twice(Constant):
    """Answers every request twice."""

    name = "twice"

    def generate(self, batch):
        from litjudge.engine.core.requests import Generation
        return (Generation(p.key, "3", prompt_tokens=p.prompt_tokens) for p in batch for _ in range(2))


@pytest.fixture
def registered():
    PROTOCOLS.add("raising", Raising, origin=Origin("raising-plugin", "0.1"))
    PROTOCOLS.add("single", SingleGrading, origin=Origin("toy-plugin", "1.0"))
    BACKENDS.add("constant3", Constant, prefix="constant3:", origin=Origin("constant-plugin", "2.0"))
    BACKENDS.add("twice", Twice, prefix="twice:", origin=Origin("twice-plugin", "0.2"))
    yield
    for name in ("raising", "single"):
        PROTOCOLS.remove(name)
    for name in ("constant3", "twice"):
        BACKENDS.remove(name)


def test_a_plugin_protocols_failing_aggregate_names_it_and_its_distribution(registered, tmp_path):
    with pytest.raises(PluginError) as refused:
        litjudge.judge(ROWS, protocol="raising", judge="constant3:x", columns=COLUMNS, out=tmp_path / "runs",
                       cache=False, progress=False)
    assert str(refused.value) == ("protocol 'raising' of raising-plugin 0.1: its aggregate raised ZeroDivisionError: "
                                  "division by zero; fix or uninstall raising-plugin")


def test_a_backend_answering_a_request_twice_is_named(registered, tmp_path):
    """It gave "-6 request(s) were left without an answer": one line naming the backend and what it did."""
    with pytest.raises(ContractError) as refused:
        litjudge.judge(ROWS, protocol="single", judge="twice:x", columns=COLUMNS, out=tmp_path / "runs",
                       cache=False, progress=False)
    line = str(refused.value)
    assert line.startswith("backend 'twice' (judge twice:x) answered 4 request(s) twice") and "\n" not in line, line


@pytest.mark.parametrize("body, said", [
    ("import sys\nsys.exit(3)\n", "SystemExit: 3"),
    ("raise KeyboardInterrupt\n", "interrupted while importing protocol 'quitter' of quitter-plugin 1.0"),
])
def test_a_plugin_import_that_exits_or_interrupts_is_named(tmp_path, body, said):
    """`sys.exit(3)` at a plugin's import made `litjudge protocols` exit 3 with no word; a
    KeyboardInterrupt there said "finished verdicts are stored" (a run's words)."""
    distribution(tmp_path, "quitter-plugin", "1.0", {"litjudge.protocols": {"quitter": "quitter_mod:Quitter"}},
                 {"quitter_mod": body})
    r = cli("protocols", env={"PYTHONPATH": str(tmp_path)})
    assert said in r.stderr and "verdicts" not in r.stderr and "Traceback" not in r.stderr, (r.returncode, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    if "exit" in body:                          # a failing plugin: a warning, and the listing goes on
        assert r.returncode == 0 and "pairwise" in r.stdout and "fix or uninstall quitter-plugin" in r.stderr
    else:
        assert r.returncode == 130 and "fix or uninstall quitter-plugin" in r.stderr


class RaisingAsks(SingleGrading):
    declared = dataclasses.replace(SingleGrading.declared, name="raising-asks")

    def asks(self, ctx, unit):
        raise KeyError("boom in asks")


class RaisingUnits(SingleGrading):
    declared = dataclasses.replace(SingleGrading.declared, name="raising-units")

    def units(self, ctx):
        raise RuntimeError("boom in units")


class Listed(SingleGrading):
    declared = dataclasses.replace(SingleGrading.declared, name="listed")

    def aggregate(self, table: pl.DataFrame, ctx):
        return [table]


class RaisingView(SingleGrading):
    declared = dataclasses.replace(SingleGrading.declared, name="raising-view")

    def human_view(self, verdicts, tables):
        raise ValueError("boom in human_view")


@pytest.fixture
def more_registered(registered):
    kinds = {"raising-asks": RaisingAsks, "raising-units": RaisingUnits, "listed": Listed, "raising-view": RaisingView}
    for name, cls in kinds.items():
        PROTOCOLS.add(name, cls, origin=Origin("bad-plugin", "0.3"))
    yield
    for name in kinds:
        PROTOCOLS.remove(name)


def test_a_plugin_protocols_units_asks_tables_and_view_failing_name_it(more_registered, tmp_path):
    """Its units or asks raising, aggregate returning a list: each was litjudge's 'internal error (a
    bug, please report it)'; a failing human_view crashed the report and the export, which now go on
    without its answers, saying so."""
    def judged(protocol: str):
        return litjudge.judge(ROWS, protocol=protocol, judge="constant3:x", columns=COLUMNS, out=tmp_path / "runs",
                              cache=False, progress=False)
    for protocol, words in [("raising-asks", "its units or asks raised KeyError: 'boom in asks'"),
                            ("raising-units", "its units raised RuntimeError: boom in units")]:
        with pytest.raises(PluginError, match=f"protocol '{protocol}' of bad-plugin 0.3: {words}; fix or uninstall"):
            judged(protocol)
    with pytest.raises(ContractError, match="protocol 'listed': aggregate returned list, not a dict of table name"):
        judged("listed")
    result = judged("raising-view")
    report = result.report()
    assert report.exists() and "answer" not in result.to_dataset().column_names
