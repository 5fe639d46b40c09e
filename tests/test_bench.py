"""`litjudge bench` end to end on one story: it runs all three setups side by side and its printed
bound follows from its own numbers (the README's table comes from the full-size run; here (b)'s
free-form answers stop at 16 tokens, not 512, and (c) times one prompt, not 8: on one core 512
tokens took 34 s of this test's 58, and each of (c)'s prompts, 1,900 tokens of a story, 8 s). The
command runs in this process, its vLLM setups on the session's tiny random judge's engine
(tests/shared_cli.py): the benchmark's work is the point, not its process or what the judge says (its
free-form answers (b) never parse), in that engine's float32 on every CPU; its engine's start-up is
outside every timing it prints.
Its story is cut to two paragraphs and the tests' backgrounds to one (tests/short_data.py): the same
three setups, plan and bound on ~400-token prompts in place of ~1,950 (nothing asserted reads a
text's length; the planned run still shares each story's prefix across its 14 tests)."""
import json

import pytest

from tests.conftest import needs_data
from tests.short_data import ttcw_cut_short


@needs_data
@pytest.mark.slow
def test_bench_one_story(tmp_path, tiny, litjudge_shared):
    out = tmp_path / "bench.json"
    data = ttcw_cut_short(tmp_path / "data" / "ttcw", short_backgrounds=True).parent
    res = litjudge_shared({tiny.spec.name: tiny}, "bench", "--judge", tiny.spec.name, "--stories", "1", "--hf-subset",
                          "1", "--block-size", "32", "--free-tokens", "16", "--dtype", "float32", "--out", str(out),
                          env={"LITJUDGE_DATA_ROOT": str(data)})
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(out.read_text())
    a, b, c = got["rows"]
    assert a["requests"] == b["requests"] == c["requests"] == 14
    assert a["parse_failures"] == 0 and c["extrapolated"]
    # the planned run reuses the story's prefix: it computes fewer tokens and less work than (c)
    assert a["uncached_tokens"] < 0.5 * a["prompt_tokens"] and a["prefill_flops"] < 0.5 * c["prefill_flops"]
    assert "block size 32" in res.stdout and "free-form 16 tokens" in res.stdout
    assert got["dtype"] == "float32" and "dtype float32 (set by --dtype)" in res.stdout    # the matmul rate's too
    # the bound: (c)'s time over (a)'s least possible time at the matmul rate, and it is printed
    floor = a["prefill_flops"] / got["matmul_flops"]
    assert got["bounds"]["(c)"] == pytest.approx(c["seconds"] / floor * c["requests"] / (c["requests"] - c["parse_failures"]))
    assert f"cannot exceed {got['bounds']['(c)']:.1f}x" in res.stdout
    # no setup can beat its own bound: (a) measured never runs faster than all work at the matmul rate
    assert a["seconds"] >= floor


def test_a_setup_with_no_usable_verdict_is_said_not_divided_by(capsys):
    """(b)'s free-form answers may all miss the upstream rule (a story cut short, few free tokens):
    the table says so and its bound is infinite, where the ratio divided by zero."""
    from litjudge.engine.app.console.bench import Row, _print_rows
    from litjudge.engine.app.flops import DecoderShape

    shape = DecoderShape(layers=2, hidden=64, heads=4, head_dim=16, kv_heads=2, intermediate=128, vocab=100)
    rows = [Row("(a) planned", 14, 2.0, 1000, 400, 0, 1e9), Row("(b) free-form", 14, 3.0, 1000, 1000, 14, 2e9)]
    bounds = _print_rows(rows, "float32", 1e11, shape)
    out = capsys.readouterr().out
    assert "(a) vs (b): (b) gave no usable verdict (14 of 14 did not parse)" in out
    assert bounds == {"(b)": float("inf")} and "cannot exceed infx" in out


def test_a_matmul_size_the_budget_cannot_hold_is_skipped_and_said(capsys):
    """A dtype the CPU has no instructions for (float16 on an EPYC Zen 4: 1 GFLOP/s) made the
    bench's matmul rate take some 10 minutes: a size the rate so far says would end past the budget
    is skipped, and the line says which."""
    from litjudge.engine.app.console.bench import matmul_flops

    rate = matmul_flops("float32", sizes=(64, 4096), repeats=1, budget_s=0.01)
    assert rate > 0 and "float32 matmul: sizes 4096 skipped (the next some" in capsys.readouterr().out
