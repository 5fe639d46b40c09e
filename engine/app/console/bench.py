"""`litjudge bench`: TTCW (36 judgeable stories x 14 tests) on the default judge, measured side by
side in one invocation on one engine:

(a) litjudge as planned: deduplicated, prefix-ordered, Yes/No choice constraint, streamed;
(b) common peer practice: the same prompts through one `LLM.generate` in the dataset's item
    order, free-form (max_tokens 512, `--free-tokens`), verdict found afterwards by the upstream regex;
(c) a transformers generate loop, one prompt at a time (the transformers+outlines backend), on a
    subset, extrapolated and labelled as such.

Usable verdicts/s counts only outputs that parse. The prefix cache is reset between (a) and (b).
Any registry judge (`--judge`), by default in the dtype this CPU runs best (`--dtype auto`:
bfloat16 with AMX or AVX-512 BF16, float32 otherwise). Prefill FLOP/s counts the work of the
prompt tokens each setup computes, weights and attention (`engine.flops`), and is compared with
this machine's matmul rate in that dtype, measured in the same run. From the same count: the
least time (a) could take if all its prefill ran at that matmul rate, and so the largest ratio
over (c) this machine allows.
"""
from __future__ import annotations

import json
import os
import re
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from litjudge.judges.base import Context
from litjudge.judges.ttcw import TTCW

from ... import backends as registry
from ...backends.hardware import SHOWN_FLAGS, cpu_model, preloaded_libraries, vector_flags
from ...backends.local.modes import run_steps
from ...backends.local.steps import Decoding, FreeText, Prompt
from ...core.config import RunConfig
from ...core.errors import BackendUnavailable
from ...core.planner import make_plan
from ...data.cards import load_card
from ..flops import DecoderShape

UPSTREAM_RULE = re.compile(r"^\s*(yes|no)\b", re.IGNORECASE)


@dataclass
class Row:
    name: str
    requests: int
    seconds: float
    prompt_tokens: int
    uncached_tokens: int
    parse_failures: int
    prefill_flops: float = 0.0
    extrapolated: bool = False

    @property
    def tag(self) -> str:
        """The setup's letter, "(a)", "(b)" or "(c)", as the ratios and bounds name it."""
        return self.name.split(" ")[0]

    @property
    def usable_per_s(self) -> float:
        return (self.requests - self.parse_failures) / self.seconds

    def line(self, matmul: float) -> str:
        hit = 1 - self.uncached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0
        tag = " (extrapolated)" if self.extrapolated else ""
        return (f"| {self.name}{tag} | {self.requests} | {self.seconds:,.1f} | {self.requests / self.seconds:.2f} | "
                f"{self.usable_per_s:.2f} | {self.prompt_tokens / self.seconds:,.0f} | "
                f"{self.uncached_tokens / self.seconds:,.0f} | {100 * hit:.0f}% | {self.parse_failures} | "
                f"{100 * self.prefill_flops / self.seconds / matmul:.1f}% |")


def matmul_flops(dtype: str = "bfloat16", sizes: tuple[int, ...] = (1024, 1536, 2048, 3072), repeats: int = 4,
                 budget_s: float = 30.0) -> float:
    """The best matmul rate in `dtype` over a few square sizes: the machine's attainable peak (the
    highest seen, so the bound derived from it is conservative). A size the rate so far says would
    end past `budget_s` is skipped, and said: a dtype the CPU has no instructions for multiplies
    at ~1 GFLOP/s (float16 on an EPYC Zen 4: its four sizes would take some 10 minutes)."""
    import torch

    kind = getattr(torch, dtype)
    best, start = 0.0, time.perf_counter()
    for k, n in enumerate(sizes):
        needed = 2 * n ** 3 * (repeats + 1) / best if best else 0.0
        if k and time.perf_counter() - start + needed > budget_s:
            print(f"{dtype} matmul: sizes {', '.join(map(str, sizes[k:]))} skipped (the next some {needed:.0f} s "
                  f"at {best / 1e9:.1f} GFLOP/s: past the {budget_s:g}-s budget)")
            break
        a, b = torch.randn(n, n, dtype=kind), torch.randn(n, n, dtype=kind)
        torch.matmul(a, b)
        t = time.perf_counter()
        for _ in range(repeats):
            torch.matmul(a, b)
        best = max(best, 2 * n ** 3 * repeats / (time.perf_counter() - t))
    return best


def _planned(engine: Any, requests: list, shape: DecoderShape) -> tuple[Row, Any]:
    """(a) litjudge as planned: prefix-ordered, constrained; also the plan the other setups reuse."""
    engine.reset_prefix_cache()
    t = time.perf_counter()
    plan = make_plan(requests, engine)
    outs = list(engine.generate(plan.unique))
    secs = time.perf_counter() - t
    fails = sum(o.raw not in ("Yes", "No") for o in outs)
    print(f"(a) done in {secs:.1f} s, {fails} unparsed")
    return Row("(a) litjudge: planned, prefix-ordered, constrained", len(requests), secs,
               sum(o.prompt_tokens for o in outs), sum(o.prompt_tokens - o.cached_tokens for o in outs), fails,
               sum(shape.prefill_flops(o.prompt_tokens, o.cached_tokens) for o in outs)), plan


def _naive(engine: Any, requests: list, plan: Any, shape: DecoderShape, free_tokens: int) -> Row:
    """(b) peer practice: dataset order, free-form answers (512 tokens unless told), regex afterwards
    (every prompt queued at once, as one LLM.generate call does)."""
    engine.reset_prefix_cache()
    by_item = {p.request.meta.item_id: p for p in plan.unique}
    ordered = [by_item[r.meta.item_id] for r in requests]
    t = time.perf_counter()
    res = run_steps(engine, [FreeText(Prompt(p.token_ids, p.prompt), free_tokens, Decoding()) for p in ordered])
    secs = time.perf_counter() - t
    fails = sum(UPSTREAM_RULE.match(r.text) is None for r in res)
    print(f"(b) done in {secs:.1f} s, {fails} outputs without a leading Yes/No")
    return Row(f"(b) one LLM.generate, dataset order, free-form {free_tokens} tokens + regex", len(ordered), secs,
               sum(p.prompt_tokens for p in ordered),
               sum(p.prompt_tokens - r.cached_tokens for p, r in zip(ordered, res)), fails,
               sum(shape.prefill_flops(p.prompt_tokens, r.cached_tokens) for p, r in zip(ordered, res)))


def _one_at_a_time(args: Any, requests: list, plan: Any, shape: DecoderShape) -> Row:
    """(c) transformers + outlines, one prompt at a time, on a subset, extrapolated to the workload."""
    hf = registry.create(registry.model_spec(args.judge, backend="transformers", max_model_len=8192, dtype=args.dtype))
    subset = plan.unique[:: max(1, len(plan.unique) // args.hf_subset)][:args.hf_subset]
    # The outlines index is built outside the timing, by the same constraint on the first prompt's last
    # tokens: the whole prompt's prefill (1,900 tokens of a TTCW story: 8 s on one core) added nothing.
    list(hf.generate([replace(subset[0], token_ids=subset[0].token_ids[-16:])]))
    t = time.perf_counter()
    outs = list(hf.generate(subset))
    secs = time.perf_counter() - t
    scale = len(requests) / len(subset)
    toks = sum(p.prompt_tokens for p in subset)
    print(f"(c) {len(subset)} requests in {secs:.1f} s, extrapolated to {len(requests)}")
    return Row("(c) transformers+outlines, one at a time", len(requests), secs * scale,
               int(toks * scale), int(toks * scale), int(round(sum(o.raw not in ("Yes", "No") for o in outs) * scale)),
               sum(shape.prefill_flops(p.prompt_tokens) for p in subset) * scale, extrapolated=True)


def _print_rows(rows: list[Row], dtype: str, mm: float, shape: DecoderShape) -> dict[str, float]:
    """The table, the ratios against (a), and each setup's bound at the matmul rate (returned)."""
    header = ("| setup | requests | seconds | requests/s | usable verdicts/s | prompt tok/s | uncached prefill tok/s "
              f"| prefix-cache hit | parse failures | prefill FLOP/s vs {dtype} matmul |\n" + "|---" * 10 + "|")
    print(f"\n{dtype} matmul on this machine: {mm / 1e9:.1f} GFLOP/s; judge: {shape.layers} layers, "
          f"{shape.matmul_flops_per_token / 2e6:.1f} M non-embedding parameters\n")
    print(header)
    for r in rows:
        print(r.line(mm))
    a = rows[0]
    for r in rows[1:]:
        print(f"\n(a) vs {r.tag}: {a.usable_per_s / r.usable_per_s:.1f}x usable verdicts/s" if r.usable_per_s else
              f"\n(a) vs {r.tag}: {r.tag} gave no usable verdict ({r.parse_failures} of {r.requests} did not parse)")
    bounds: dict[str, float] = {}
    if a.prefill_flops:
        floor = a.prefill_flops / mm
        print(f"\n(a)'s prefill work: {a.prefill_flops / 1e12:.2f} TFLOP (weights and attention of its "
              f"{a.uncached_tokens:,} computed tokens); at the {dtype} matmul rate that takes at least {floor:.1f} s: "
              f"(a) ran at {100 * floor / a.seconds:.0f}% of that rate.")
        for r in rows[1:]:
            usable = r.requests - r.parse_failures
            bounds[r.tag] = r.seconds / floor * r.requests / usable if usable else float("inf")
            print(f"bound: (a) vs {r.tag} cannot exceed {bounds[r.tag]:.1f}x on this machine with this workload, "
                  f"even with every (a) FLOP at the matmul rate")
    return bounds


def main(args) -> int:
    outlines_needed = not args.skip_hf and args.hf_subset
    if outlines_needed:
        try:
            import outlines  # noqa: F401
        except ImportError:
            raise BackendUnavailable("setup (c) of the benchmark needs the transformers backend: "
                                     "pip install 'litjudge[hf]' (or run with --skip-hf)") from None
    config = RunConfig(name="bench", protocol="ttcw", dataset="ttcw", judge=args.judge, limit=args.stories,
                       options={"variant": "upstream"})
    protocol = TTCW()
    ctx = Context(config, protocol.options(config), load_card("ttcw"))
    requests = list(protocol.build(ctx).requests)     # TTCW's units are a list: built at once
    spec = registry.model_spec(args.judge, max_model_len=8192, kv_cache_gib=4, block_size=args.block_size or None,
                               enforce_eager=not args.compile, dtype=args.dtype)
    print(f"workload: TTCW upstream prompts, {len(requests)} requests ({args.stories} stories x 14 tests), "
          f"judge {args.judge}, {os.cpu_count()} CPU cores")
    print(f"CPU: {cpu_model()}; flags {', '.join(vector_flags()) or 'none of ' + ', '.join(SHOWN_FLAGS)}; dtype "
          f"{spec.engine.dtype} ({spec.detail('dtype_reason') if args.dtype == 'auto' else 'set by --dtype'}); preloaded: "
          f"{', '.join(preloaded_libraries()) or 'nothing'}")
    t = time.perf_counter()
    engine = registry.create(spec)
    print(f"vLLM engine up in {time.perf_counter() - t:.1f} s (block size {engine.block_size}, "
          f"{'torch.compile' if args.compile else 'eager'}; start-up is outside every timing below)")
    shape = DecoderShape.from_config(spec.target)
    planned, plan = _planned(engine, requests, shape)
    rows = [planned] + ([] if args.skip_naive else [_naive(engine, requests, plan, shape, args.free_tokens)])
    engine.close()
    if outlines_needed:
        rows.append(_one_at_a_time(args, requests, plan, shape))
    dtype = spec.engine.dtype
    mm = matmul_flops(dtype)
    bounds = _print_rows(rows, dtype, mm, shape)
    if args.out:
        Path(args.out).write_text(json.dumps({"cpu": cpu_model(), "flags": vector_flags(), "dtype": dtype,
                                              "matmul_flops": mm, "shape": asdict(shape), "bounds": bounds,
                                              "rows": [asdict(r) for r in rows]}, indent=2))
    return 0
