import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
# Ray test clusters stay on loopback: with this, Ray takes 127.0.0.1 as every node's address.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

from litjudge.engine.core import envs
from litjudge.engine.core.paths import PROJECT_ROOT, cache_dir, data_root, model_cache_dir, prompts_root

# Hermetic: no LITJUDGE_* variable of the user's shell changes a test's outcome. Every one is
# cleared, for the session here and again before each test (`hermetic`, below), and the session's
# own settings put in their place. What the user's settings locate is kept, resolved: the converted
# judges (`make run` put them in the model cache), the shared datasets and the papers' prompts.
# Everything else litjudge keeps outside run folders goes to a temporary folder for the session (a
# calibration stored by an earlier `plan --calibrate` made a test expecting "not calibrated" fail),
# and the verdict cache shared by a user's runs is off (each test counts what it generates; the
# tests of the cache itself switch it on with a path of their own).
USER_CACHE = cache_dir()
SESSION_SETTINGS = {
    "LITJUDGE_MODEL_CACHE": str(model_cache_dir()),
    "LITJUDGE_DATA_ROOT": str(data_root()),
    "LITJUDGE_PROMPTS_ROOT": str(prompts_root()),
    "LITJUDGE_CACHE": tempfile.mkdtemp(prefix="litjudge-test-cache-"),
    "LITJUDGE_VERDICT_CACHE": "off",
}
assert set(SESSION_SETTINGS) <= set(envs.BY_NAME), "a session setting that engine.core.envs does not know"


def apply_session_settings(delenv, setenv) -> None:
    """Every LITJUDGE_* variable cleared (with `delenv`: os.environ.pop, or a monkeypatch's), then
    the test session's settings set."""
    for name in [k for k in os.environ if k.startswith("LITJUDGE_")]:
        delenv(name)
    for name, value in SESSION_SETTINGS.items():
        setenv(name, value)


apply_session_settings(os.environ.pop, os.environ.__setitem__)

# Fault injection: every Python process the tests start finds tests/faults/sitecustomize.py, which
# kills a run at a known point when a test asks with LITJUDGE_FAULT_* (see that file).
FAULTS = str(Path(__file__).resolve().parent / "faults")
os.environ["PYTHONPATH"] = os.pathsep.join([FAULTS, *filter(None, [os.environ.get("PYTHONPATH")])])


@pytest.fixture(autouse=True)
def hermetic(monkeypatch):
    """Each test starts from the session's settings, whatever the shell or an earlier test set."""
    apply_session_settings(monkeypatch.delenv, monkeypatch.setenv)


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
