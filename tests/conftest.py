import contextlib
import ctypes
import ctypes.util
import fcntl
import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
# Ray test clusters stay on loopback: with this, Ray takes 127.0.0.1 as every node's address.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
# The session's memory budget: every engine the tests start (in a worker, a CLI subprocess, a Ray
# replica) keeps a 1 GiB KV cache whatever its config asks (vLLM-CPU's own override; the configs'
# default is 4 GiB). Two workers each beside an engine of their own outgrew 24 GiB and the kernel
# killed one; and each engine faults in and zeroes its whole cache at start and frees it at close
# (2 GiB took 3 s of page faults on this VM; two sampled-language tests on the session's engine
# took 104 s with 2 GiB, 77 s with 1). 1 GiB holds 29k float32 tokens of Gemma 3 270M, the widest
# judge the tests run at 8,192 tokens.
# tests/test_sweep.py clears it to check that each engine gets its own config's cache.
os.environ["VLLM_CPU_KVCACHE_SPACE"] = "1"

from litjudge.engine.core.paths import PROJECT_ROOT, data_root, prompts_root
from tests import model_cache_guard
from tests.session_settings import FAULTS, SESSION_SETTINGS, USER_CACHE, apply_session_settings  # noqa: F401
from tests.shared_cli import litjudge_in_process
from tests.warm_cli import run_cli, warm_for

# The property tests draw the same cases on every run and keep no example database: a run's outcome
# depends on neither a failure an earlier run saved under .hypothesis/ nor the luck of the draw (a
# case found once in many runs fails CI once in many runs, on whatever change is being submitted).
settings.register_profile("litjudge", database=None, derandomize=True)
settings.load_profile("litjudge")

# Under pytest-xdist (`make test`: two workers on two cores), each worker and every process it starts
# keep to a core of their own: two vLLM engines whose OpenMP threads both spun on both cores made
# the heaviest tests several times slower than alone (the AUT study 612 s beside 92 s). Pinned after
# the imports above, on purpose: pinned before them (so that polars, numpy and torch sized their
# thread pools for one core), four of the suite's files under `-n 2` took 186 s and 290 s of user
# CPU, not 139 s and 201 s, and a fresh clone's pytest 19 min 54 s (EPYC Zen 3, 2026-11-30).
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if _WORKER.startswith("gw") and hasattr(os, "sched_setaffinity"):
    _cores = sorted(os.sched_getaffinity(0))
    if len(_cores) >= 2:
        _core = _cores[int(_WORKER[2:]) % len(_cores)]
        os.sched_setaffinity(0, {_core})
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = str(_core)
        os.environ["OMP_NUM_THREADS"] = "1"

# Hermetic: the session's settings replace every LITJUDGE_* variable of the user's shell, here and
# before each test (tests/session_settings.py says which and why), and every Python process the
# tests start finds tests/faults/sitecustomize.py (the fault injection of the crash tests).
apply_session_settings(os.environ.pop, os.environ.__setitem__)
if FAULTS not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join([FAULTS, *filter(None, [os.environ.get("PYTHONPATH")])])
warm_for(os.environ)          # the CLI's processes are forked from a warm interpreter with these settings

# A suite started as a background job of a script (`make test &`, `nohup`) inherits SIGINT ignored, and
# so would every process its tests start: the tests that send a Ctrl-C saw it ignored and the run
# finish. Each process of the session takes the default back (its children start with it).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session):
    """The test modules' assertion-rewritten code is cached in their __pycache__ (as pytest does by
    default, and as scripts/install.sh compiles the project's modules) even where the shell sets
    PYTHONDONTWRITEBYTECODE: under it, every worker and every nested session rewrote all 240 modules
    again, 7 of a worker's 18 s of collection (EPYC Zen 4). Only while collecting: what the tests
    import afterwards (a plugin in a test's folder) is written as the shell says."""
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, False
    try:
        yield
    finally:
        sys.dont_write_bytecode = saved


@pytest.fixture(autouse=True)
def hermetic(monkeypatch):
    """Each test starts from the session's settings, whatever the shell or an earlier test set."""
    apply_session_settings(monkeypatch.delenv, monkeypatch.setenv)


DATA = data_root()
needs_data = pytest.mark.skipif(not (DATA / "ttcw" / "stories.json").exists(),
                                reason=f"shared datasets not found at {DATA} (set LITJUDGE_DATA_ROOT)")
needs_prompts = pytest.mark.skipif(not (prompts_root() / "paper_prompts.json").exists(),
                                   reason=f"paper prompts not found at {prompts_root()} (set LITJUDGE_PROMPTS_ROOT)")


# The session's in-process engines hold a quarter of a GiB of KV cache each, as their specs ask
# (11k bfloat16 tokens of the default judge at 4,096 where auto is bfloat16, 5.8k float32 at 2,048): VLLM_CPU_KVCACHE_SPACE
# (whole GiB only) would give each 1 GiB, and a worker holding both was 4.6 GB where it is now 3.0.
IN_PROCESS_KV_GIB = 0.25


@contextlib.contextmanager
def kv_cache_from_specs():
    """Engines made meanwhile (in this process, or in processes that inherit its environment, as
    Ray's nodes do) keep the KV cache their specs ask for: vLLM-CPU reads VLLM_CPU_KVCACHE_SPACE
    when an engine's config is made, so it is set aside."""
    saved = os.environ.pop("VLLM_CPU_KVCACHE_SPACE", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["VLLM_CPU_KVCACHE_SPACE"] = saved


def in_process_engine(spec):
    """An engine in this process with the KV cache its spec asks for."""
    from litjudge.engine import backends

    with kv_cache_from_specs():
        return backends.create(spec)


@pytest.fixture(scope="session")
def smollm():
    """ONE in-process vLLM engine on the default judge for the whole session (engines are
    expensive; other judges run in subprocesses through the CLI). Once it runs, the worker's heap
    (torch, vLLM, this engine, every test module) is frozen out of Python's collector: each full
    collection walked all of it, in every later test and at every later engine's start and close."""
    import gc

    from litjudge.engine import backends

    backend = in_process_engine(backends.model_spec("smollm2-135m", max_model_len=4096, kv_cache_gib=IN_PROCESS_KV_GIB))
    gc.collect()
    gc.freeze()
    yield backend


@pytest.fixture(scope="session")
def tiny_folder(tmp_path_factory) -> Path:
    """A tiny random Llama with the default judge's vocabulary, tokenizer and chat template
    (tests/tiny_models.py), built once a session: a judge by its path wherever what the model says
    is not the point (a grammar under sampling, a config's plumbing), at a twentieth of SmolLM2's
    compute per token."""
    from tests.tiny_models import tiny_causal_lm

    return tiny_causal_lm(tmp_path_factory.mktemp("tiny") / "tiny-llama", max_positions=8192)


@pytest.fixture(scope="session")
def tiny_qwen_folder(tmp_path_factory) -> Path:
    """A second tiny random judge, a Qwen2 of the same size and tokenizer as `tiny_folder`: for the
    runs whose point is two judges (two generators, a sweep's two engines one after the other)."""
    from tests.tiny_models import tiny_causal_lm

    return tiny_causal_lm(tmp_path_factory.mktemp("tiny") / "tiny-qwen2", "qwen2", max_positions=8192)


@pytest.fixture(scope="session")
def tiny(tiny_folder):
    """An in-process engine on `tiny_folder` for the session. Its judge name (`tiny.spec.name`) is
    the folder; float32 on every CPU (its numbers do not depend on which requests share a batch: a
    CLI run on the folder with `dtype = "float32"` gives the same verdicts). Never closed, as `smollm`."""
    from litjudge.engine import backends

    return in_process_engine(backends.model_spec(str(tiny_folder), max_model_len=4096, kv_cache_gib=0.0625,
                                                 dtype="float32"))


@pytest.fixture(scope="session")
def smollm32(request):
    """The default judge in float32, in-process, for the session: the reference run that other
    processes, replicas and servers are compared with (float32: numbers that do not depend on which
    requests share a batch). Passed to `run(..., backends=...)`, it is never closed by a run (closing
    an in-process engine ends vLLM's process-wide state, which `smollm` shares). Where the default
    judge's `auto` is float32 itself (an AVX2 CPU, a Xeon without AMX), it is `smollm`: one engine of
    the same weights and numbers, not two (1.2 GB each); elsewhere its own, at 2,048 tokens."""
    from litjudge.engine import backends

    if backends.model_spec("smollm2-135m").engine.dtype == "float32":
        return request.getfixturevalue("smollm")
    return in_process_engine(backends.model_spec("smollm2-135m", max_model_len=2048, kv_cache_gib=IN_PROCESS_KV_GIB,
                                                  dtype="float32"))


@pytest.fixture(scope="session")
def finished(tmp_path_factory) -> Path:
    """A finished TTCW run of two replayed judges (tests/annotate_run.py `ttcw_run`), made once a
    worker for the annotation tests, which each take a fresh copy (`run`): made once a module, the
    three modules built it three times (11 s each)."""
    from tests.annotate_run import ttcw_run

    return ttcw_run(tmp_path_factory.mktemp("ttcw"))


def run_on(engine, config, run_dir: Path):
    """`config` (a RunConfig, or the path of one) run in this process on `engine` (a session
    fixture's), into `run_dir`, from an empty prefix cache, as on an engine of its own."""
    from litjudge.engine.app.run import run
    from litjudge.engine.core.config import load_config

    engine.reset_prefix_cache()
    config = load_config(config) if isinstance(config, Path) else config
    return run(config, progress=False, run_dir=run_dir, backends={engine.spec.name: engine})


@pytest.fixture
def runs_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("LITJUDGE_RUNS_DIR", str(tmp_path / "runs"))
    return tmp_path / "runs"


def litjudge(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run the real CLI in a process of its own (tests/warm_cli.py: forked from a warm interpreter),
    with `env` over the test's environment (a variable given as None is unset for the command)."""
    merged = {**os.environ, **(env or {})}
    return run_cli(list(args), PROJECT_ROOT, {k: v for k, v in merged.items() if v is not None}, timeout)


@pytest.fixture
def litjudge_shared(monkeypatch, capfd):
    """`litjudge_shared({"smollm2-135m": smollm}, ARGS...)`: the command run by the console in this
    process, its judge on the session's engine (tests/shared_cli.py: where the CLI's process is not
    the point); a CompletedProcess as `litjudge` returns."""
    return lambda engines, *args, env=None: litjudge_in_process(engines, list(args), env, monkeypatch, capfd)


def write_config(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# For a command whose engines keep the KV cache their config asks for: the session's 1 GiB each
# (VLLM_CPU_KVCACHE_SPACE, whole GiB only) set aside, where a quarter or half GiB fits the test.
OWN_KV_CACHE = {"VLLM_CPU_KVCACHE_SPACE": None}


def with_kv_cache(text: str, gib: float) -> str:
    """A config's text with its one `kv_cache_gib` line set to `gib` (a config saying none fails here,
    rather than keeping its own larger cache unnoticed)."""
    text, n = re.subn(r"(?m)^kv_cache_gib = .*$", f"kv_cache_gib = {gib:g}", text)
    assert n == 1, f"{n} kv_cache_gib lines in the config, not 1"
    return text


# The model cache is read, never written (tests/model_cache_guard.py): the session's first process
# stops in one line when a registry judge is not prepared there, and fails when its end finds a
# file under the cache's models/ or wheels/ added, removed or changed.
MODEL_CACHE = Path(SESSION_SETTINGS["LITJUDGE_MODEL_CACHE"])
_CACHE_BEFORE = pytest.StashKey[dict]()
_CACHE_CHANGES = pytest.StashKey[list]()


def pytest_sessionstart(session):
    if _WORKER:
        return
    line = model_cache_guard.refusal(MODEL_CACHE)
    if line:
        pytest.exit(line, returncode=pytest.ExitCode.USAGE_ERROR)
    session.config.stash[_CACHE_BEFORE] = model_cache_guard.snapshot(MODEL_CACHE)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    before = session.config.stash.get(_CACHE_BEFORE, None)
    if before is None:                                   # a worker, or a session refused at its start
        return
    changed = model_cache_guard.changes(before, model_cache_guard.snapshot(MODEL_CACHE))
    if changed:
        session.config.stash[_CACHE_CHANGES] = changed
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    changed = config.stash.get(_CACHE_CHANGES, [])
    if changed:
        terminalreporter.write_line(f"FAILED: the session wrote into the user's model cache {MODEL_CACHE} "
                                    f"({len(changed)} changes; tests must not): " + "; ".join(changed[:10]), red=True)


HEAVY_GROUP = "heavy"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist, the tests sharing a module-scoped fixture of their own module run on one
    worker (one xdist group per module): split between two workers, each built it (a vLLM server, an
    installed wheel, a replayed run) and held it, twice the time and the memory.

    The `heavy` tests, and the module-fixture tests of their modules, make one group: one worker
    runs them one after another. They take turns anyway (the lock below); on both workers, one
    waited for the other's lock, idle (47 s of one run's 17 min)."""
    heavy_modules = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("heavy")}
    for item in items:
        module = item.nodeid.split("::")[0]
        if item.get_closest_marker("heavy"):
            item.add_marker(pytest.mark.xdist_group(HEAVY_GROUP))
            continue
        if item.get_closest_marker("xdist_group") or not hasattr(item, "_fixtureinfo"):
            continue
        defs = [d for ds in item._fixtureinfo.name2fixturedefs.values() for d in ds]
        if any(d.scope == "module" and getattr(d, "baseid", "").startswith(module) for d in defs):
            item.add_marker(pytest.mark.xdist_group(HEAVY_GROUP if module in heavy_modules else module))
    if getattr(config.option, "loadgroup", False):
        for item in items:
            name_the_group(item)


def name_the_group(item) -> None:
    """`--dist loadgroup` schedules by the node id's `@group` suffix, which pytest-xdist 3.8 writes
    to `item._nodeid`: pytest 9 reads a node's id from `item._id`, so no test was grouped (a module's
    fixture was built on both workers, the Ray cluster's and the docs examples' tests split). The
    suffix is written here as xdist would, in the form this pytest reads."""
    names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                    for m in item.iter_markers("xdist_group")})
    if not names or "@" in item.nodeid.rpartition("]")[2]:
        return
    if HEAVY_GROUP in names:                  # the heavy tests' one worker, whatever else groups them
        names = [HEAVY_GROUP]
    grouped = f"{item.nodeid}@{'_'.join(names)}"
    if hasattr(item, "_id"):
        from _pytest.nodeid import NodeId  # pytest 9's structured node id
        item._id = NodeId.parse(grouped)
    else:
        item._nodeid = grouped


# The tests that start several engines, a server or a cluster beside their worker's own (each
# 4.5-8.5 GB more at its peak, measured per test): two of them at once, one on each worker, took
# the machine past 18 GB. They take turns: a test marked `heavy` holds a lock shared by the
# session's workers (pytest-xdist's run id names it) from its setup to its teardown, kept through
# the next test of its module when that one is heavy too (module-scoped engines live between them).
HEAVY_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")
_heavy_lock: list = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    heavy = HEAVY_RUN and item.get_closest_marker("heavy") is not None
    if heavy and not _heavy_lock:
        handle = open(Path(tempfile.gettempdir()) / f"litjudge-tests-heavy-{HEAVY_RUN}.lock", "a")
        fcntl.flock(handle, fcntl.LOCK_EX)
        _heavy_lock.append(handle)
    yield
    release_freed_memory()
    keep = (nextitem is not None and nextitem.get_closest_marker("heavy") is not None
            and nextitem.nodeid.split("::")[0] == item.nodeid.split("::")[0])
    if _heavy_lock and not keep:
        handle = _heavy_lock.pop()
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


# glibc keeps what a test freed (an engine's batches, a converted model, a data frame) in its heaps
# for reuse, so a worker grew test by test: measured, a worker that had converted Qwen 1.5B held
# 4.5 GB for the rest of the session, and each sampled-generation test left ~200 MB more than it
# needed. malloc_trim(0) gives the free pages back after each test (1-8 ms each).
_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6") if os.name == "posix" else None


def release_freed_memory() -> None:
    """Freed heap pages returned to the system (glibc's malloc_trim; nothing elsewhere)."""
    trim = getattr(_LIBC, "malloc_trim", None)
    if trim is not None:
        trim(0)
