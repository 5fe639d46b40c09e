"""Which core a pytest-xdist worker keeps to; imported first by tests/conftest.py, before anything
imports polars."""
from __future__ import annotations

import os

# Under pytest-xdist (`make test`: two workers on two cores), each worker and every process it starts
# keep to a core of their own: two vLLM engines whose OpenMP threads both spun on both cores made
# the heaviest tests several times slower than alone (the AUT study 612 s beside 92 s). Pinned before
# anything imports polars, whose thread pool is sized at import: pinned after, each worker kept two
# polars threads on its one core: a group-by of a 60-row frame took 179-202 us of CPU, 119-151 pinned
# first, a partition 277-312 us, 159-213 (EPYC Zen 3, three runs each way, alternated).
WORKER = os.environ.get("PYTEST_XDISTWORKER", "")
if WORKER.startswith("gw") and hasattr(os, "sched_setaffinity"):
    _cores = sorted(os.sched_getaffinity(0))
    if len(_cores) >= 2:
        _core = _cores[int(WORKER[2:]) % len(_cores)]
        os.sched_setaffinity(0, {_core})
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = str(_core)
        os.environ["OMP_NUM_THREADS"] = "1"
