"""The store's bulk writes (one statement over a JSON array, so SQLite releases the GIL once) keep
every value exactly as the row-by-row path would: text with any character, floats bit for bit,
None, ints; rows JSON cannot carry (NUL, NaN, huge ints) take the row-by-row path; plan order kept."""
from __future__ import annotations

import dataclasses
import math
import sqlite3
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from litjudge.engine.core.store import PLAN_RESULT_COLUMNS, ResultRow, Store

text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
rows = st.builds(
    ResultRow, key=st.text(alphabet="0123456789abcdef", min_size=8, max_size=8), judge=text, backend=text,
    mode=st.sampled_from(["label", "analyze", "distribution"]),
    language=st.fixed_dictionaries({"kind": st.just("labels"), "labels": st.lists(text, max_size=3)}),
    status=st.sampled_from(["ok", "unparsed"]), label=st.none() | text,
    value=st.none() | text | st.integers(-10**6, 10**6), reason=st.none() | text, raw=text,
    analysis=st.none() | text,
    distribution=st.none() | st.dictionaries(text, st.floats(0, 1), max_size=3),
    label_mass=st.none() | st.floats(allow_nan=True, allow_infinity=True),
    prompt_tokens=st.none() | st.integers(0, 2**40), cached_tokens=st.none() | st.integers(0, 10**6),
    output_tokens=st.none() | st.integers(0, 10**6), created=st.floats(1e9, 2e9), failure=st.none() | text,
    cut=st.booleans(), analysis_distribution=st.none() | st.dictionaries(text, st.floats(0, 1), max_size=3))


def same(a: float | None, b: float | None) -> bool:
    return a == b or (a is not None and b is not None and math.isnan(a) and math.isnan(b)) \
        or (a is not None and math.isnan(a) and b is None)          # SQLite stores NaN as NULL (both paths)


@given(st.lists(rows, max_size=30, unique_by=lambda r: r.key))
@settings(max_examples=150, deadline=None)
def test_stored_rows_read_back_exactly(batch):
    with tempfile.TemporaryDirectory() as tmp:
        check_round_trip(Store(Path(tmp) / "store.sqlite"), batch)


def check_round_trip(store: Store, batch: list[ResultRow]) -> None:
    assert store.put_results(batch) == len(batch)
    assert store.put_results(batch) == 0                              # stored keys are left untouched
    back = {r.key: r for r in store.results()}
    assert store.finished_keys([r.key for r in batch] + ["nothere"]) == {r.key for r in batch}
    for r in batch:
        b = back[r.key]
        assert same(r.label_mass, b.label_mass)
        assert b == dataclasses.replace(r, label_mass=b.label_mass)
    store.close()


def test_plan_rows_keep_their_order_and_every_character(tmp_path):
    store = Store(tmp_path / "store.sqlite")
    odd = ["tab\tnew\nline", "nul\x00inside", "\u2028\U0001f600 \"quoted\" \\ back", "é"]
    entries = [("run", f"k{i:05d}", odd[i % len(odd)] + str(i), {"protocol": "p", "i": i, "w": odd[i % 4]})
               for i in range(5000)]
    store.add_plan(entries[:2500])             # the chunk with a NUL goes row by row, the rest in bulk
    store.add_plan([e for e in entries[2500:] if "\x00" not in e[2] and "\x00" not in e[3]["w"]])
    got = store.plan("run")
    want = entries[:2500] + [e for e in entries[2500:] if "\x00" not in e[2] and "\x00" not in e[3]["w"]]
    assert [(k, item, meta) for k, item, meta in got] == [(k, item, meta) for _, k, item, meta in want]


def test_a_store_written_before_analysis_distribution_reads_it_as_none_and_gains_it_when_written(tmp_path):
    """A store of an earlier version lacks the column: read-only (status, a read-only shared cache) it
    reads as None, every other field as stored; opened to write, the column is added in place and a
    new verdict keeps its probabilities."""
    path = tmp_path / "store.sqlite"
    old = ResultRow("k1", "j", "vllm", "analyze", {"kind": "labels"}, "ok", "Yes", "Yes", None, "...Verdict: Yes",
                    analysis="...", label_mass=0.9, created=1.7e9)
    store = Store(path)
    store.put_results([old])
    store.add_plan([("run", "k1", "item", {"protocol": "p"})])
    store.close()
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE results DROP COLUMN analysis_distribution")
    db.commit()
    db.close()
    ro = Store(path, readonly=True)
    assert list(ro.results()) == [old] and list(ro.raw_results(["k1"]))[0][-1] is None
    at = PLAN_RESULT_COLUMNS.index("analysis_distribution")
    assert [row[at] for rows in ro.plan_results("run") for row in rows] == [None]
    ro.close()
    new = dataclasses.replace(old, key="k2", analysis_distribution={"Yes": 0.75, "No": 0.25})
    rw = Store(path)
    rw.put_results([new])
    assert {r.key: r for r in rw.results()} == {"k1": old, "k2": new}
    rw.close()
