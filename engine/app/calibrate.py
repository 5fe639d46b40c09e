"""How long will a plan take here? `litjudge plan --calibrate` starts the judge's engine, runs a
few of the plan's distinct requests, and scales by distinct prefill tokens (prefill dominates
verdict decoding). The measurement is stored per (judge weights, backend family, dtype, mode, CPU
or GPU model, cores) and replaced by the next `--calibrate`; `litjudge plan` without it never
starts an engine and uses a stored measurement where there is one. The estimate is rough: it
ignores how sharing differs between the sample and the whole plan, and a loaded machine measures
slower."""
from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

from .. import backends as registry
from ..core.backend import JudgeSpec
from ..core.console import say
from ..core.manifest import machine
from ..core.paths import cache_dir
from ..core.planner import common_prefix
from ..core.progress import RunProgress
from ..core.requests import Prepared

SAMPLE = 8


def _cache() -> Path:
    return cache_dir() / "calibration.json"


def calibration_key(planner, spec: JudgeSpec, mode: str) -> str:
    ident = planner.identity()
    m = machine()
    return "|".join([ident.fingerprint, ident.backend_family, spec.engine.dtype, mode,
                     m.get("gpu") or m.get("cpu") or "?", str(m.get("cpu_count"))])


def _table() -> dict:
    path = _cache()
    try:
        table = json.loads(path.read_text()) if path.exists() else {}
    except (json.JSONDecodeError, OSError):
        return {}                                  # a damaged record is remeasured, not trusted
    return table if isinstance(table, dict) else {}


def cached(planner, spec: JudgeSpec, mode: str) -> dict | None:
    return _table().get(calibration_key(planner, spec, mode))


def calibrate(spec: JudgeSpec, config, sample: list[Prepared], planner, progress: bool = True) -> dict:
    """Run a sample of a plan's distinct requests on a fresh engine; record start-up and speed
    (replacing an older record for the same judge, dtype and machine)."""
    say(f"litjudge: calibrating {spec.name} ({spec.engine.dtype}) on {len(sample)} requests: starting its engine")
    t0 = time.perf_counter()
    backend = registry.create(spec)
    start = time.perf_counter() - t0
    bar = RunProgress(len(sample), f"calibrating {spec.name}", enabled=progress)
    try:
        t1 = time.perf_counter()
        for g in backend.generate(sample):
            bar.update(g)
        seconds = time.perf_counter() - t1
    finally:
        bar.close()
        backend.close()
    tokens = 0
    prev: Sequence[int] = ()
    for p in sample:
        tokens += p.prompt_tokens - common_prefix(prev, p.token_ids)
        prev = p.token_ids
    record = {"engine_start_s": round(start, 1), "sample_requests": len(sample), "sample_seconds": round(seconds, 2),
              "sample_distinct_prefill_tokens": tokens, "seconds_per_token": seconds / max(tokens, 1),
              "measured": time.strftime("%Y-%m-%dT%H:%M:%S")}
    table = _table()
    table[calibration_key(planner, spec, config.mode)] = record
    path = _cache()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(table, indent=2))
    return record


def estimate_seconds(record: dict, prefill_tokens: int) -> float:
    """Engine start plus the distinct prefill tokens left to generate at the measured rate."""
    return record["engine_start_s"] + record["seconds_per_token"] * prefill_tokens
