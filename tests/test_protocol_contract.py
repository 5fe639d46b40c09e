"""The protocol contract (judges/contract.py): what the framework applies for every protocol (limit,
mode, repeats, skips, typed fields) and the mistakes a declaration cannot make. No model: these
are the requests a protocol builds and the tables it is handed."""
from __future__ import annotations

import dataclasses
import json
import re
import uuid
from dataclasses import dataclass

import polars as pl
import pytest

from litjudge.engine.app.run import run
from litjudge.engine.core.config import RunConfig, load_config
from litjudge.engine.core.errors import ConfigError, ContractError, LitjudgeError
from litjudge.engine.core.sampling import SamplingConfig
from litjudge.engine.data.cards import load_card
from litjudge.grammars import Analyzed
from litjudge.judges import PROTOCOLS
from litjudge.judges.base import Ask, Context, Declaration, MetricTable, Protocol, Skip, Table
from litjudge.judges.pairwise import Pairwise
from tests.conftest import write_config
from tests.toy_protocol import SingleGrading


def _context(protocol: Protocol, dataset: str, **config) -> Context:
    cfg = RunConfig(name="c", protocol=protocol.name, dataset=dataset, judge="smollm2-135m", **config)
    return Context(cfg, protocol.options(cfg), load_card(dataset))


def test_the_framework_applies_limit_and_repeats_each_with_its_own_seed():
    toy = SingleGrading()
    built = toy.build(_context(toy, "rated-items-generic", limit=2,
                               sampling=SamplingConfig(temperature=0.7, seed=5, repeats=3)))
    requests = list(built.requests)
    assert len(requests) == 6 and len({r.meta.item_id for r in requests}) == 2          # 2 items x 3 repeats
    assert [dict(r.meta.fields)["repeat"] for r in requests] == [0, 1, 2] * 2
    assert len({r.sampling.seed for r in requests[:3]}) == 3
    assert all(r.mode == "label" and r.meta.protocol == "single" for r in requests)
    # two runs a seed apart share no draw: seed + repeat made repeat 1 of seed 5 repeat 0 of seed 6
    seeds = {SamplingConfig(temperature=0.7, seed=s, repeats=3).for_repeat(r).seed for s in (5, 6) for r in range(3)}
    assert len(seeds) == 6


def test_modes_are_opt_in_and_analyze_wraps_each_ask_with_its_marker():
    toy = SingleGrading()
    with pytest.raises(ConfigError, match="aggregates mode label, not 'analyze'"):
        _context(toy, "rated-items-generic", mode="analyze")
    pairwise = Pairwise()
    built = pairwise.build(_context(pairwise, "pairs-generic", mode="analyze", limit=1, options={"analysis_tokens": 32}))
    requests = list(built.requests)
    assert [dict(r.meta.fields)["order"] for r in requests] == ["ab", "ba"]
    language = requests[0].language
    assert isinstance(language, Analyzed) and language.marker == "Preferred:" and language.max_analysis_tokens == 32
    reward = list(pairwise.build(_context(pairwise, "pairs-generic", mode="reward", limit=1,
                                          sampling=SamplingConfig(temperature=0.7, repeats=4))).requests)
    assert [dict(r.meta.fields)["repeat"] for r in reward] == [0, 0]                     # a reward model scores once


@dataclass(frozen=True)
class _Options:
    pass


class _Skipping(Protocol):
    """Units 1..5 with a Skip before each even one; asks a field it does not type when told to."""

    declared = Declaration("skipping", "1", "items", _Options, "numbers", fields={"n": int})
    undeclared = False

    def units(self, ctx):
        for n in range(1, 6):
            if n % 2 == 0:
                yield Skip(f"s{n}", "even")
            yield n

    def asks(self, ctx, n):
        yield Ask(f"i{n}", f"Is {n} odd?", _binary(), (("m" if self.undeclared else "n", n),))

    def aggregate(self, table, ctx):
        return {"t": table}


def _binary():
    import litjudge.grammars as grammars
    return grammars.binary()


def test_skips_are_recorded_not_counted_and_an_untyped_field_is_refused():
    protocol = _Skipping()
    ctx = _context(protocol, "rated-items-generic", limit=3)
    built = protocol.build(ctx)
    requests = list(built.requests)              # units are an iterator: they stream
    assert [r.meta.item_id for r in requests] == ["i1", "i2", "i3"]
    assert [s.item_id for s in built.skipped] == ["s2"]      # the skip after the limit is not met
    protocol.undeclared = True
    with pytest.raises(TypeError, match=r"field 'm' = 1, a field its Declaration.fields does not type"):
        list(protocol.build(ctx).requests)


def test_a_field_null_on_every_row_comes_back_typed():
    declared = SingleGrading.declared
    frame = pl.DataFrame({"item_id": ["a", "b"], "human_score": [None, None]})
    assert frame.schema["human_score"] == pl.Null
    typed = declared.typed(frame)
    assert typed.schema["human_score"] == pl.Float64 and typed["human_score"].null_count() == 2
    assert declared.typed(pl.DataFrame({"item_id": ["a"]})).columns == ["item_id"]   # absent stays absent


@pytest.mark.parametrize("change, message", [
    ({"modes": ("label", "sing")}, "modes must be some of"),
    ({"modes": ("label", "analyze")}, "analysis_tokens"),
    ({"missing": ("label",)}, "missing must hold 'drop'"),
    ({"post_options": ("nope",)}, "post_options"),
    ({"tables": {"t": MetricTable(higher=("kappa",), rank=("kappa", "n"))}}, r"ranks by \['n'\] with no direction"),
    ({"rank_by": "t.kappa"}, "rank_by 't.kappa' is none of"),
    ({"fields": {"score": list}}, "fields are typed"),
    ({"fields": {"repeat": int}}, "never 'repeat'"),
])
def test_a_wrong_declaration_fails_where_it_is_written(change, message):
    base = {"name": "x", "version": "1", "reads": "items", "options": _Options, "limit_counts": "items"}
    with pytest.raises(TypeError, match=message) as caught:
        Declaration(**{**base, **change})
    assert "protocol 'x'" in str(caught.value)


# -- every mistake a protocol can make, each one line where it is declared or as the run starts ----
# The toy protocol (tests/toy_protocol.py) with one mistake each, run on the shipped rated-items card
# by a replayed judge (recorded answers by item id: no model). A mistake only the tables can show
# is met after aggregating, still before anything is written.
def _declared(**change) -> Declaration:
    return dataclasses.replace(SingleGrading.declared, **change)


def _run_toy(protocol: type, tmp_path, registered: str = "single"):
    """Run `protocol` registered as `registered`; the LitjudgeError it fails with (one line)."""
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"id": f"p{i}", "response": str(1 + i % 5)}) + "\n" for i in range(1, 7)))
    config = load_config(write_config(tmp_path / "toy.toml", f'name = "toy"\nprotocol = "{registered}"\n'
                                      f'dataset = "rated-items-generic"\njudge = "replay:{answers}"\n'))
    PROTOCOLS.add(registered, protocol)
    try:
        with pytest.raises(LitjudgeError) as caught:
            run(config, progress=False)
    finally:
        PROTOCOLS.remove(registered)
    message = str(caught.value)
    assert "\n" not in message and len(message) < 400, message
    return caught.value


def _nothing_written(runs_dir) -> bool:
    toy = runs_dir / "toy"
    return not (toy / "tables").exists() and not (toy / "manifest.json").exists()


@pytest.mark.parametrize("change, message", [
    ({"rank_by": "agreement.rho"}, r"rank_by 'agreement.rho' is none of the rankable metrics \['agreement.spearman'\]"),
    ({"modes": ("label", "analyze")}, "analysis_tokens"),
    ({"fields": {"human_score": list}}, "fields are typed"),
    ({"options": dict}, "options must be a dataclass"),
    ({"summary": ("agreement", "ranking")}, r"summary names \['ranking'\], which Declaration.tables does not declare"),
    # a misspelt report panel: refused as the protocol is declared (it was a bare ModuleNotFoundError
    # or AttributeError when a report was drawn), with the registered name it is closest to
    ({"report": "litjudge.engine.app.report.panel:ttcw_panels"},
     r"report 'litjudge.engine.app.report.panel:ttcw_panels' names no registered report panels \(did you mean "
     r"'litjudge.engine.app.report.panels:ttcw_panels'\?\)"),
    ({"report": 42}, r"report 42 names no registered report panels"),
])
def test_a_mistake_in_the_declaration_fails_where_it_is_written(change, message):
    with pytest.raises(ContractError, match=message) as caught:
        _declared(**change)
    assert str(caught.value).startswith("protocol 'single': ") and "\n" not in str(caught.value)


class _TypoInReads(SingleGrading):
    declared = _declared(reads="itmes")


class _LoadsTheWrongKind(SingleGrading):
    def units(self, ctx):
        return ctx.load("pairs")


class _AsksAnUndeclaredField(SingleGrading):
    def asks(self, ctx, item):
        for ask in super().asks(ctx, item):
            yield dataclasses.replace(ask, fields=(*ask.fields, ("rater", "x")))


class _CarriesTextInAFloatField(SingleGrading):
    def asks(self, ctx, item):
        for ask in super().asks(ctx, item):
            yield dataclasses.replace(ask, fields=(("human_score", str(item.human_score)),))


class _Misnamed(SingleGrading):
    declared = _declared(name="singel")


class _NotRepeatable(SingleGrading):
    """Each walk of its build asks differently (a fresh id in every prompt)."""

    def asks(self, ctx, item):
        for ask in super().asks(ctx, item):
            yield dataclasses.replace(ask, prompt=f"{ask.prompt}\n(request {uuid.uuid4().hex})")


@pytest.mark.parametrize("protocol, message", [
    (_TypoInReads, "protocol 'single' reads itmes data, and dataset 'rated-items-generic'"),
    (_LoadsTheWrongKind, "protocol 'single' loads pairs data, and declares reads = 'items'"),
    (_AsksAnUndeclaredField, "protocol 'single': item 'p1' is asked with field 'rater' = 'x', a field its "
                             r"Declaration.fields does not type \(fields: human_score\)"),
    (_CarriesTextInAFloatField, "protocol 'single': item 'p1' is asked with field 'human_score' = '1.5', not the "
                                "float its Declaration.fields types"),
    (_NotRepeatable, "protocol 'single': its build is not repeatable"),
])
def test_a_mistake_in_the_code_fails_as_the_run_starts(protocol, message, tmp_path, runs_dir, monkeypatch):
    monkeypatch.delenv("LITJUDGE_PLAN_PROCESS", raising=False)          # the plan made in a process of its own
    error = _run_toy(protocol, tmp_path)
    assert re.search(message, str(error)), str(error)
    assert not (runs_dir / "toy").exists()                                # refused before any verdict: no folder


def test_a_name_other_than_the_declared_one_is_refused_where_it_is_registered(tmp_path, runs_dir):
    with pytest.raises(ContractError, match=r"protocol 'single' \(.*_Misnamed.*\) names itself 'singel'"):
        PROTOCOLS.add("single", _Misnamed)
    assert "single" not in PROTOCOLS
    error = _run_toy("tests.test_protocol_contract:_Misnamed", tmp_path)     # a lazy entry: refused as it loads
    assert "names itself 'singel': register it under that name" in str(error)
    with pytest.raises(ContractError, match="is not a subclass of litjudge.judges.base.Protocol"):
        PROTOCOLS.add("single", dict)


class _ReturnsAnUndeclaredTable(SingleGrading):
    def aggregate(self, table, ctx):
        return {**super().aggregate(table, ctx), "extra": pl.DataFrame({"x": [1]})}


class _NeverProducesItsRankableMetric(SingleGrading):
    def aggregate(self, table, ctx):
        tables = super().aggregate(table, ctx)
        return {**tables, "agreement": tables["agreement"].rename({"spearman": "rho"})}


class _LeavesOutADeclaredTable(SingleGrading):
    def aggregate(self, table, ctx):
        return {"agreement": super().aggregate(table, ctx)["agreement"]}


class _GivesTextAsAMetric(SingleGrading):
    def aggregate(self, table, ctx):
        tables = super().aggregate(table, ctx)
        return {**tables, "agreement": tables["agreement"].with_columns(pl.col("spearman").cast(pl.Utf8))}


@pytest.mark.parametrize("protocol, message", [
    (_ReturnsAnUndeclaredTable, r"aggregate returned table\(s\) \['extra'\] that Declaration.tables does not declare"),
    (_NeverProducesItsRankableMetric, r"table 'agreement' lacks column\(s\) \['spearman'\] it declares"),
    (_LeavesOutADeclaredTable, r"aggregate did not return table\(s\) \['scores'\], declared when='always'"),
    (_GivesTextAsAMetric, "table 'agreement', column 'spearman' is declared float and holds String values"),
])
def test_a_mistake_only_the_tables_show_fails_before_any_table_is_written(protocol, message, tmp_path, runs_dir):
    error = _run_toy(protocol, tmp_path)
    assert isinstance(error, ContractError) and re.search(message, str(error)), str(error)
    assert str(error).startswith("protocol 'single': ") and _nothing_written(runs_dir)


def test_a_float_field_carrying_text_is_refused_when_the_tables_are_made():
    """The second line of defence (verdicts stored by an earlier version of the protocol): the
    verdict frame's declared fields are cast strictly, naming the column."""
    with pytest.raises(ContractError, match="table 'verdicts', column 'human_score' is declared float and holds "
                                            "String values \\(e.g. 'high'\\)"):
        SingleGrading.declared.typed(pl.DataFrame({"item_id": ["a"], "human_score": ["high"]}))
    typed = SingleGrading.declared.typed(pl.DataFrame({"item_id": ["a"], "human_score": [3]}))
    assert typed.schema["human_score"] == pl.Float64                        # an int is a float


def test_unlabelled_data_may_leave_out_the_labelled_tables_and_the_rank_columns():
    declared = _declared(tables={"agreement": MetricTable(higher=("spearman",), rank=("spearman",), when="labelled"),
                                 "scores": Table()})
    scores = pl.DataFrame({"judge": ["j"], "value": [3]})
    with pytest.raises(ContractError, match=r"did not return table\(s\) \['agreement'\], declared when='labelled'"):
        declared.checked({"scores": scores})
    assert declared.checked({"scores": scores}, unlabelled=True) == {"scores": scores}
    counts = pl.DataFrame({"judge": ["j"], "items": [2]})                # the agreement table without its metric
    with pytest.raises(ContractError, match="lacks column"):
        declared.checked({"scores": scores, "agreement": counts})
    assert declared.checked({"scores": scores, "agreement": counts}, unlabelled=True)["agreement"].equals(counts)
    empty = declared.checked({"scores": scores, "agreement": pl.DataFrame()})       # nothing to show: empty is fine
    assert empty["agreement"].height == 0


def test_every_built_in_declaration_names_its_hooks_and_tables():
    """The application asks the declaration, never the protocol's name: the ensembles' decision key,
    the generation stage's self-preference option, the report's panels, --limit's help."""
    from litjudge.engine.app.console.cli import limit_help

    assert PROTOCOLS.get("ttcw").declared.decision_key == ("item_id", "repeat")
    assert PROTOCOLS.get("listwise").declared.self_preference == "self_sources"
    for name in PROTOCOLS.names():
        declared = PROTOCOLS.get(name).declared
        assert set(declared.summary) <= set(declared.tables) and declared.report.endswith(f":{name}_panels")
        assert f"({name}" in limit_help() or f", {name}" in limit_help()


def test_report_panels_are_resolved_objects():
    """A protocol's panels are a function it gives (a plugin's, a notebook's) or panels registered in
    PANELS; the report draws exactly those, and every registered one is a function."""
    from litjudge.engine.app.report.extras import protocol_panels
    from litjudge.judges import PANELS

    drawn: list[dict] = []

    def my_panels(tables):
        drawn.append(tables)
        return ["a panel"]

    class _OwnPanels(SingleGrading):
        declared = _declared(report=my_panels)

    PROTOCOLS.add("single", _OwnPanels)
    try:
        assert protocol_panels("single", {"agreement": pl.DataFrame()}) == ["a panel"] and len(drawn) == 1
    finally:
        PROTOCOLS.remove("single")
    assert PANELS.names() and all(callable(PANELS.get(name)) for name in PANELS.names())


def test_a_field_takes_values_of_its_declared_type():
    """An int is a float (a score of 3), numpy's float64 is a float, None is no value; a bool is
    neither an int nor a float, and text is no number."""
    import numpy as np

    declared = _declared(fields={"human_score": float, "n": int, "flag": bool, "name": str})
    declared.check_fields("i", (("human_score", 3), ("human_score", np.float64(2.5)), ("n", None), ("flag", False),
                                ("name", "x")))
    for field, value in (("human_score", True), ("n", 2.0), ("n", True), ("name", 3), ("flag", 1)):
        with pytest.raises(ContractError, match=f"field '{field}' = {value!r}, not the"):
            declared.check_fields("i", ((field, value),))
