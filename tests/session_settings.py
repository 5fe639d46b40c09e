"""The test session's settings, computed once per session (tests/conftest.py is imported twice, as
`conftest` by pytest and as `tests.conftest` by the tests that import its helpers; this module once).

Hermetic: no LITJUDGE_* variable of the user's shell changes a test's outcome. Every one is cleared,
for the session and again before each test (conftest's `hermetic` fixture), and these settings put
in their place. What the user's settings locate is kept, resolved: the converted judges (`make run`
put them in the model cache), the shared datasets and the papers' prompts. Everything else litjudge
keeps outside run folders goes to a temporary folder for the session (a calibration stored by an
earlier `plan --calibrate` made a test expecting "not calibrated" fail), and the verdict cache
shared by a user's runs is off (each test counts what it generates; the tests of the cache itself
switch it on with a path of their own). The names are engine.core.envs' (checked here)."""
from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from litjudge.engine.core import envs
from litjudge.engine.core.paths import cache_dir, data_root, model_cache_dir, prompts_root

USER_CACHE = cache_dir()
SESSION_SETTINGS = {
    "LITJUDGE_MODEL_CACHE": str(model_cache_dir()),
    "LITJUDGE_DATA_ROOT": str(data_root()),
    "LITJUDGE_PROMPTS_ROOT": str(prompts_root()),
    "LITJUDGE_CACHE": tempfile.mkdtemp(prefix="litjudge-test-cache-"),
    "LITJUDGE_VERDICT_CACHE": "off",
}
assert set(SESSION_SETTINGS) <= set(envs.BY_NAME), "a session setting that engine.core.envs does not know"
# torch's compile cache (/tmp/torchinductor_$USER) is the user's too: outlines compiles its grammar
# mask there for the transformers backend, and a kernel compiled under another CPU capability
# (ATEN_CPU_CAPABILITY=avx2 on an AVX-512 CPU, measured) aborted that backend in later sessions.
THIRD_PARTY_SETTINGS = {"TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix="litjudge-test-inductor-")}
FAULTS = str(Path(__file__).resolve().parent / "faults")


def apply_session_settings(delenv: Callable[[str], object], setenv: Callable[[str, str], object]) -> None:
    """Every LITJUDGE_* variable cleared (with `delenv`: os.environ.pop, or a monkeypatch's), then
    the test session's settings set."""
    for name in [k for k in os.environ if k.startswith("LITJUDGE_")]:
        delenv(name)
    for name, value in {**SESSION_SETTINGS, **THIRD_PARTY_SETTINGS}.items():
        setenv(name, value)
