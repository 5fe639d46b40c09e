"""The protocol contract (judges/contract.py): what the framework applies for every protocol (limit,
mode, repeats, skips, typed fields) and the mistakes a declaration cannot make. No model: these
are the requests a protocol builds and the tables it is handed."""
from __future__ import annotations

from dataclasses import dataclass

import polars as pl
import pytest

from litjudge.engine.core.config import RunConfig
from litjudge.engine.core.errors import ConfigError
from litjudge.engine.core.sampling import SamplingConfig
from litjudge.engine.data.cards import load_card
from litjudge.grammars import Analyzed
from litjudge.judges.base import Ask, Context, Declaration, MetricTable, Protocol, Skip
from litjudge.judges.pairwise import Pairwise
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
    with pytest.raises(TypeError, match=r"fields \['m'\]"):
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
