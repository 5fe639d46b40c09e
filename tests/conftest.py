import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
# Ray test clusters stay on loopback: with this, Ray takes 127.0.0.1 as every node's address.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
# The verdict cache shared by a user's runs is off in tests (each test counts what it generates);
# the tests of the cache itself switch it on with a path of their own.
os.environ.setdefault("LITJUDGE_VERDICT_CACHE", "off")

import tempfile

from litjudge.engine.core.paths import PROJECT_ROOT, cache_dir, data_root

# A test run never reads or writes the user's own litjudge files (a calibration stored by an
# earlier `plan --calibrate` made a test expecting "not calibrated" fail): everything litjudge keeps
# outside run folders goes to a temporary folder for the session, except the converted judges,
# which are read where `make run` put them, and the data root, kept where it is.
os.environ.setdefault("LITJUDGE_MODEL_CACHE", str(cache_dir()))
os.environ.setdefault("LITJUDGE_DATA_ROOT", str(data_root()))
USER_CACHE = cache_dir()
os.environ["LITJUDGE_CACHE"] = tempfile.mkdtemp(prefix="litjudge-test-cache-")

DATA = data_root()
needs_data = pytest.mark.skipif(not (DATA / "ttcw" / "stories.json").exists(),
                                reason=f"shared datasets not found at {DATA} (set LITJUDGE_DATA_ROOT)")


@pytest.fixture(scope="session")
def smollm():
    """ONE in-process vLLM engine on the default judge for the whole session (engines are
    expensive; other judges run in subprocesses through the CLI)."""
    from litjudge.engine import backends

    backend = backends.create(backends.model_spec("smollm2-135m", max_model_len=4096, kv_cache_gib=2))
    yield backend


@pytest.fixture
def runs_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("LITJUDGE_RUNS_DIR", str(tmp_path / "runs"))
    return tmp_path / "runs"


def litjudge(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run the real CLI in a subprocess."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "litjudge", *args], cwd=PROJECT_ROOT, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def write_config(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
