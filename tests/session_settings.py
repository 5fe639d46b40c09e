"""The test session's settings, computed once per session (tests/conftest.py is imported twice, as
`conftest` by pytest and as `tests.conftest` by the tests that import its helpers; this module once).

Hermetic: no LITJUDGE_* variable of the user's shell changes a test's outcome. Every one is cleared,
for the session and again before each test (conftest's `hermetic` fixture), and these settings put
in their place. What the user's settings locate is kept, resolved: the converted judges (`make run`
put them in the model cache), the shared datasets and the papers' prompts. Everything else litjudge
keeps outside run folders goes to a temporary folder for the session (a calibration stored by an
earlier `plan --calibrate` made a test expecting "not calibrated" fail), and the verdict cache
shared by a user's runs is off (each test counts what it generates; the tests of the cache itself
switch it on with a path of their own). The names are engine.core.envs' (checked here).

Nor does the session leave anything in the system's temporary folder: every process of the session
(the workers, the CLI's, vLLM's and Ray's) writes its temporary files in one folder of the session,
removed when the session ends (as the process that made it exits). Measured before: each `make test`
left 155 MB of torch's precompiled headers in /tmp/torchinductor_$USER, a vLLM rendezvous file and
a socket for each engine, two cache folders per worker and a Ray session. pytest's own folders
(tmp_path, kept for the last three sessions) stay where pytest puts them."""
from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from litjudge.engine.core import envs
from litjudge.engine.core.paths import cache_dir, data_root, model_cache_dir, prompts_root

SESSION_TMP_PREFIX = "litjudge-tests-"
# pytest's folders stay in the system's temporary folder (a worker and a nested pytest inherit it).
SYSTEM_TMP = Path(os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir()))


def _session_tmp() -> tuple[Path, bool]:
    """The session's temporary folder, and whether this process made it (and so removes it): a
    pytest-xdist worker, a pytest a worker's test starts, or a process of a test that is no pytest
    (`python -c` reading these settings) shares its parent's (inherited as TMPDIR, which the parent
    set before starting it); any other pytest process makes its own."""
    inherited = Path(os.environ.get("TMPDIR", "/nonexistent"))
    child = os.environ.get("PYTEST_XDIST_WORKER") or "_pytest" not in sys.modules
    if child and inherited.name.startswith(SESSION_TMP_PREFIX) and inherited.is_dir():
        return inherited, False
    return Path(tempfile.mkdtemp(prefix=SESSION_TMP_PREFIX, dir=SYSTEM_TMP)), True


SESSION_TMP, _MADE_HERE = _session_tmp()
# The user's cache folder, as the session's first process found it (a worker inherits the session's).
_USER_CACHE_NOTE = SESSION_TMP / "user-cache-folder"
if _MADE_HERE:
    _USER_CACHE_NOTE.write_text(str(cache_dir()))
USER_CACHE = Path(_USER_CACHE_NOTE.read_text())
SESSION_SETTINGS = {
    "LITJUDGE_MODEL_CACHE": str(model_cache_dir()),
    "LITJUDGE_DATA_ROOT": str(data_root()),
    "LITJUDGE_PROMPTS_ROOT": str(prompts_root()),
    "LITJUDGE_CACHE": str(SESSION_TMP / "litjudge-cache"),
    "LITJUDGE_VERDICT_CACHE": "off",
}
assert set(SESSION_SETTINGS) <= set(envs.BY_NAME), "a session setting that engine.core.envs does not know"
# torch's compile cache (/tmp/torchinductor_$USER) is the user's too: outlines compiles its grammar
# mask there for the transformers backend, and a kernel compiled under another CPU capability
# (ATEN_CPU_CAPABILITY=avx2 on an AVX-512 CPU, measured) aborted that backend in later sessions.
# Ray reads RAY_TMPDIR before TMPDIR (a user's would take the session's Ray elsewhere). The
# datasets library's cache (~/.cache/huggingface/datasets: the export tests' reads left lock files
# there) and pip's (~/.cache/pip/wheels: the wheels the install tests build) are the user's too, as
# is matplotlib's font list (~/.cache/matplotlib, written by the first report a session draws; 0.2 s).
THIRD_PARTY_SETTINGS = {"TMPDIR": str(SESSION_TMP), "RAY_TMPDIR": str(SESSION_TMP),
                        "MPLCONFIGDIR": str(SESSION_TMP / "matplotlib"),
                        "TORCHINDUCTOR_CACHE_DIR": str(SESSION_TMP / "torchinductor"),
                        "HF_DATASETS_CACHE": str(SESSION_TMP / "hf-datasets"),
                        "PIP_CACHE_DIR": str(SESSION_TMP / "pip-cache")}
FAULTS = str(Path(__file__).resolve().parent / "faults")


def apply_session_settings(delenv: Callable[[str], object], setenv: Callable[[str, str], object]) -> None:
    """Every LITJUDGE_* variable cleared (with `delenv`: os.environ.pop, or a monkeypatch's), then
    the test session's settings set."""
    for name in [k for k in os.environ if k.startswith("LITJUDGE_")]:
        delenv(name)
    for name, value in {**SESSION_SETTINGS, **THIRD_PARTY_SETTINGS}.items():
        setenv(name, value)
    tempfile.tempdir = str(SESSION_TMP)          # this process's own temporary files too (cached at first use)


def _remove_session_tmp(maker: int = os.getpid()) -> None:
    """The session's temporary folder gone, with whatever its processes left in it: by the process
    that made it, as it exits (after its workers; not in a child forked from it)."""
    if os.getpid() == maker:
        shutil.rmtree(SESSION_TMP, ignore_errors=True)


def _known_checksums(user_cache: Path, session_cache: Path, models: Path) -> None:
    """The checksums the user's cache remembers of the model cache's judge folders, copied into the
    session's: a remembered checksum stands only while every file has the size, inode and times it
    was hashed with (engine/backends/local/checksum.py), so it changes no outcome, only spares each
    session hashing every judge again (Qwen2.5-Coder 1.5B: 3 s of hashing, and 3 GB read from disk
    where the page cache no longer held them, 12 s in a suite)."""
    target = session_cache / "checksums"
    for memo in sorted((user_cache / "checksums").glob("*.json")):
        try:
            folder = Path(json.loads(memo.read_text())["folder"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if folder.is_relative_to(models):
            target.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(memo, target / memo.name)


if _MADE_HERE:
    atexit.register(_remove_session_tmp)
    _known_checksums(USER_CACHE, Path(SESSION_SETTINGS["LITJUDGE_CACHE"]), model_cache_dir().resolve())
