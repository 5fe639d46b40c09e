"""What a run was made lighter by (issue 36) must not change what it reads or records: JSON read by
orjson gives what the standard parser gives (and every error it named; integers beyond 64 bits
become floats, as documented), the collector's thresholds
come back after a run even when it fails, the manifest names torch without loading it, and a
replayed judge's answers are read once per version of their file (a changed file is read again)."""
from __future__ import annotations

import gc
import json
import math
import subprocess
import sys
import weakref
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litjudge.engine.core.errors import DataError
from litjudge.engine.core.planner import cycles_collected_after, fewer_collections
from litjudge.engine.data.readers import parse_json

SCALARS = (st.none() | st.booleans() | st.integers(-(2 ** 63), 2 ** 64 - 1) | st.floats(allow_nan=False)   # 64-bit ints:
           | st.text())                                                          # beyond, floats (see below)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                      max_leaves=20)


def same(a, b) -> bool:
    """Equal values of equal types all the way down (1 == 1.0 == True would hide a float read as an int)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


@settings(max_examples=400, deadline=None)
@given(value=VALUES, ascii_only=st.booleans())
def test_json_reads_as_the_standard_parser_reads_it(value, ascii_only):
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert same(parse_json(text, Path("x.jsonl"), 1), json.loads(text))


@pytest.mark.parametrize("text", ['[NaN, Infinity, -Infinity]', "18446744073709551615", "-9223372036854775808",
                                  "0.12345678901234567890123", '{"a": 1, "a": 2}', '"\\ud83d\\ude00"',
                                  '"\\u00e9\\n"', "1e400", " [1] "])
def test_what_orjson_reads_otherwise_or_refuses_is_read_as_before(text):
    assert same(parse_json(text, Path("x.jsonl"), 1), json.loads(text))


def test_an_integer_beyond_64_bits_is_read_exactly():
    """Ids are kept as written (#44): two 30-digit ids were refused as duplicates of one float."""
    assert parse_json("[123456789012345678901234567890]", Path("x.jsonl"), 1) == [123456789012345678901234567890]


@pytest.mark.parametrize("text,error", [('{"a": "\\ud800"}', "lone surrogate"), ("{", "invalid JSON"),
                                        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
                                        ('{"a": 1,}', "invalid JSON")])
def test_bad_json_names_the_file_and_line_as_before(text, error):
    with pytest.raises(DataError, match=error) as err:
        parse_json(text, Path("data/x.jsonl"), 7)
    assert "x.jsonl" in str(err.value) and "7" in str(err.value)


def test_the_collectors_thresholds_come_back_after_a_run_that_fails():
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), fewer_collections():
        assert gc.get_threshold()[0] == 100_000
        raise RuntimeError("the run failed")
    assert gc.get_threshold() == before


def test_what_a_runs_planning_froze_returns_to_the_collector_and_its_cycles_are_collected():
    class Node:
        pass

    with fewer_collections():
        with cycles_collected_after():          # a chunk planned: what is alive after it is frozen
            node = Node()
            node.me = node                      # a cycle, unreachable once the name is dropped
            alive = weakref.ref(node)
            del node
        assert gc.get_freeze_count() > 0
        gc.collect()
        assert alive() is not None              # frozen: not collected during the run
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert alive() is None                      # after it, collected


def test_the_manifest_names_torch_without_loading_it():
    code = ("import sys; from litjudge.engine.core.manifest import machine; m = machine(); "
            "print(m.get('torch', ''), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    from importlib import metadata
    assert out == [metadata.version("torch"), "False"]


def test_a_replayed_judges_answers_are_read_again_when_their_file_changes(tmp_path):
    from litjudge.engine.backends.replay import _recorded

    path = tmp_path / "answers.jsonl"
    path.write_text('{"id": "a", "response": "A"}\n')
    first = _recorded(path)
    assert _recorded(path) is first and first == {"a": "A"}      # read once: a run opens its judge twice
    path.write_text('{"id": "a", "response": "B"}\n{"id": "b", "response": "A"}\n')
    assert _recorded(path) == {"a": "B", "b": "A"}
    path.unlink()
    with pytest.raises(DataError, match="not found"):
        _recorded(path)
