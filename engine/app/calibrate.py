"""How long will a plan take here? A short calibration: start the judge's engine, run the plan's
first few distinct requests, and scale by distinct prefill tokens (prefill dominates verdict
decoding). Cached per (judge, backend, mode, machine), so `litjudge plan` is quick after the first time.
The estimate is rough: it ignores how sharing differs between the sample and the whole plan."""
from __future__ import annotations

import json
import time
from pathlib import Path

from .. import backends as registry
from ..core.backend import JudgeSpec
from ..core.manifest import machine
from ..core.paths import cache_dir
from ..core.planner import PlanStats, common_prefix
from ..core.requests import Prepared

SAMPLE = 8


def _cache() -> Path:
    return cache_dir() / "calibration.json"


def calibration_key(planner, mode: str) -> str:
    ident = planner.identity()
    m = machine()
    return "|".join([ident.fingerprint, ident.backend_family, mode, m.get("gpu") or m.get("cpu") or "?",
                     str(m.get("cpu_count"))])


def cached(planner, mode: str) -> dict | None:
    path = _cache()
    if not path.exists():
        return None
    return json.loads(path.read_text()).get(calibration_key(planner, mode))


def calibrate(spec: JudgeSpec, config, sample: list[Prepared], planner) -> dict:
    """Run a sample of a plan's distinct requests on a fresh engine; record start-up and speed."""
    found = cached(planner, config.mode)
    if found:
        return found
    t0 = time.perf_counter()
    backend = registry.create(spec)
    start = time.perf_counter() - t0
    try:
        t1 = time.perf_counter()
        for _ in backend.generate(sample):
            pass
        seconds = time.perf_counter() - t1
    finally:
        backend.close()
    tokens, prev = 0, ()
    for p in sample:
        tokens += p.prompt_tokens - common_prefix(prev, p.token_ids)
        prev = p.token_ids
    record = {"engine_start_s": round(start, 1), "sample_requests": len(sample), "sample_seconds": round(seconds, 2),
              "sample_distinct_prefill_tokens": tokens, "seconds_per_token": seconds / max(tokens, 1),
              "measured": time.strftime("%Y-%m-%dT%H:%M:%S")}
    path = _cache()
    table = json.loads(path.read_text()) if path.exists() else {}
    table[calibration_key(planner, config.mode)] = record
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(table, indent=2))
    return record


def estimate_seconds(record: dict, stats: PlanStats) -> float:
    return record["engine_start_s"] + record["seconds_per_token"] * stats.distinct_prefill_tokens
