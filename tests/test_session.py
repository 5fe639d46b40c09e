"""State passed, not ambient: a Session per invocation carries the runs folder and the verdict cache
(two `judge()` calls in two threads keep their own), the package writes no environment variable
but third-party libraries' own once at start, every LITJUDGE_* variable is read in one module
(engine/core/envs.py), and the test suite is hermetic with respect to the user's shell."""
from __future__ import annotations

import contextlib
import io
import os
import re
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import litjudge
from litjudge.engine.backends.local.models import ALIASES
from litjudge.engine.core import envs
from litjudge.engine.core.session import Session
from tests.conftest import MODEL_CACHE, PROJECT_ROOT
from tests.conftest import litjudge as litjudge_cli
from tests.fake_api import FakeAPI
from tests.test_python_api import COLUMNS, VALUES, pairs

PACKAGE = [PROJECT_ROOT / d for d in ("engine", "judges", "grammars", "litjudge")]

# Every write to the environment the package makes, and why. Allowed: the console's entry module,
# and third-party libraries' own variables (which they read only from the environment) set once as
# a process starts, never over a user's value.
ALLOWED_WRITES = {
    ("engine/core/console.py", "VLLM_LOGGING_LEVEL"): "vLLM's log level, before vLLM is imported",
    ("engine/core/console.py", "VLLM_LOGGING_STREAM"): "vLLM logs to stdout unless told; stdout is for tables",
    ("engine/core/console.py", "VLLM_ENABLE_V1_MULTIPROCESSING"): "vLLM's engine in this process (quick start)",
    ("engine/core/console.py", "TRANSFORMERS_VERBOSITY"): "transformers' log level",
    ("engine/core/console.py", "TOKENIZERS_PARALLELISM"): "the tokenizers' pool off, so a forked planner may use it",
    ("engine/backends/vllm_backend.py", "VLLM_ENABLE_V1_MULTIPROCESSING"): "the same, for a backend made without "
                                                                             "the console (tests, the benchmark)",
    ("engine/core/plan_process.py", "TOKENIZERS_PARALLELISM"): "the forked planner's own tokenizer pool (read by "
                                                               "tokenizers at fork), set in the child",
    ("engine/backends/cluster.py", "env"): "a Ray replica's VLLM_* settings, as its actor process starts",
}
WRITE = re.compile(r"os\.environ(?:\[(?P<key>[^\]]+)\]\s*=(?!=)|\.(?:setdefault|update|pop|clear)\((?P<arg>[^,)]*))"
                   r"|os\.(?:putenv|unsetenv)\((?P<put>[^,)]*)|del\s+os\.environ")


def test_the_package_writes_no_environment_variable_of_its_own():
    found = set()
    for folder in PACKAGE:
        for path in folder.rglob("*.py"):
            for m in WRITE.finditer(path.read_text(encoding="utf-8")):
                name = (m["key"] or m["arg"] or m["put"] or "").strip().strip("\"'")
                found.add((path.relative_to(PROJECT_ROOT).as_posix(), name))
    assert not {w for w in found if w[1].startswith("LITJUDGE_")}, found
    assert found <= set(ALLOWED_WRITES), sorted(found - set(ALLOWED_WRITES))


def test_every_litjudge_variable_is_read_in_one_module_and_documented():
    """Outside engine/core/envs.py the package names no LITJUDGE_* variable in code that reads the
    environment, and every name it mentions is in the table (with a type, a default and a line)."""
    named, reads = set(), []
    for folder in PACKAGE:
        for path in folder.rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            named |= set(re.findall(r"LITJUDGE_[A-Z_]+[A-Z]", text))
            if path.name != "envs.py" and re.search(r"os\.(?:environ\.get\(|environ\[|getenv\()\s*[\"']LITJUDGE_", text):
                reads.append(path)
    assert not reads, reads
    assert named <= set(envs.BY_NAME), sorted(named - set(envs.BY_NAME))
    assert all(v.kind and v.default and v.doc for v in envs.VARIABLES)
    assert envs.markdown().count("\n| `LITJUDGE_") == len(envs.VARIABLES)


def test_a_misspelt_litjudge_variable_is_named_not_ignored_in_silence(tmp_path, monkeypatch, caplog):
    """A variable one word off one litjudge reads was ignored without a word (the cache went to
    ~/.cache/litjudge); a command names it and the one it resembles, a Python process once. Names
    like none (a test's fault hook, a name sharing only the prefix) are not flagged."""
    import logging

    from litjudge.engine.core import session

    typo = "LITJUDGE_" + "CACHE_DIR"
    unrelated = {n: "1" for n in ("LITJUDGE_FAULT_KILL_AFTER", "LITJUDGE_" + "HOME", "LITJUDGE_" + "PORT", "LITJUDGE_")}
    assert envs.misspelt({typo: "/x", "LITJUDGE_CACHE": "/y", **unrelated}) == [
        f"{typo} is not a litjudge variable (did you mean LITJUDGE_CACHE?): it is ignored (docs/environment.md lists them)"]
    monkeypatch.setenv(typo, str(tmp_path))
    monkeypatch.setattr(session, "_SAID", set())
    with caplog.at_level(logging.WARNING, logger="litjudge"):
        Session.current(out=tmp_path)
        Session.current(out=tmp_path)
    assert [r.getMessage() for r in caplog.records].count(f"litjudge: warning: {envs.misspelt()[0]}") == 1
    r = litjudge_cli("protocols", env={typo: str(tmp_path)})
    assert r.returncode == 0 and f"litjudge: warning: {typo} is not a litjudge variable" in r.stderr, r.stderr


def test_two_calls_in_two_threads_keep_their_own_folders_and_caches(tmp_path):
    """Overlapping `judge()` calls with different `out=` and `cache=` (an API judge on a loopback
    server, so the verdict cache is used): each run in its own folder, each cache file written,
    and the process's environment and default session unchanged afterwards."""
    before_env, before_session = dict(os.environ), Session.current()
    results: dict[str, litjudge.Result] = {}
    errors: list[BaseException] = []
    with FakeAPI() as server:
        start = threading.Barrier(2)

        def one(tag: str) -> None:
            try:
                start.wait()
                results[tag] = litjudge.judge(pairs(6), protocol="pairwise", columns=COLUMNS, values=VALUES,
                                              judge=f"openai-compatible:{server.url}/v1:fake-{tag}", name=tag,
                                              out=tmp_path / f"out-{tag}", cache=tmp_path / f"cache-{tag}.sqlite",
                                              progress=False, api=litjudge.ApiConfig(concurrency=2))
            except BaseException as exc:  # noqa: BLE001  (reported by the main thread)
                errors.append(exc)
        threads = [threading.Thread(target=one, args=(t,)) for t in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
    assert not errors, errors
    for tag in ("a", "b"):
        assert results[tag].run_dir == (tmp_path / f"out-{tag}" / tag).resolve()
        assert results[tag].verdicts.height == 12
        cache = tmp_path / f"cache-{tag}.sqlite"
        assert cache.exists()
        assert sqlite3.connect(cache).execute("SELECT count(*) FROM results").fetchone() == (12,)
    third_party = {name for _, name in ALLOWED_WRITES}                   # set once, at the first call
    assert {k: v for k, v in os.environ.items() if k not in third_party} == \
        {k: v for k, v in before_env.items() if k not in third_party}
    assert Session.current() == before_session


HOSTILE = {"LITJUDGE_RUNS_DIR": "hostile-runs", "LITJUDGE_VERDICT_CACHE": "hostile-cache.sqlite",
           "LITJUDGE_CACHE": "hostile-home", "LITJUDGE_LOCK_WAIT_S": "soon", "LITJUDGE_PLAN_PROCESS": "0",
           "LITJUDGE_FAULT_KILL_AFTER": "1", "LITJUDGE_PRELOAD": "on", "LITJUDGE_SOMETHING_NEW": "x"}


def test_the_suite_is_hermetic_against_the_users_litjudge_variables(tmp_path):
    """A subprocess pytest run with hostile LITJUDGE_* values in its shell (a runs folder, a verdict
    cache and a cache of the user's, an unreadable lock wait, a fault hook) and third-party caches
    of the user's (torch's, Ray's): the tests that read them pass, nothing is written where the
    variables point, and the run leaves nothing in the system's temporary folder."""
    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir()
    env = {**{k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "PYTEST_DEBUG_TEMPROOT")},
           **{k: str(tmp_path / v) if "hostile" in v else v for k, v in HOSTILE.items()},
           "TMPDIR": str(system_tmp), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "hostile-inductor"),
           "RAY_TMPDIR": str(tmp_path / "hostile-ray")}
    tests = ["tests/test_newcomer.py::test_one_verdict_cache_across_output_folders",
             "tests/test_python_api.py::test_tables_are_the_run_folders_and_a_repeat_generates_nothing"]
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp",
                        str(tmp_path / "bt"), *tests], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout[-3000:]
    assert "2 passed" in r.stdout
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("hostile")], list(tmp_path.iterdir())
    assert not list(system_tmp.iterdir()), list(system_tmp.rglob("*"))[:20]


INTRUDER = """
import os
from pathlib import Path


def pytest_runtest_call(item):
    (Path(os.environ["LITJUDGE_MODEL_CACHE"]) / "models" / "intruder.txt").write_text("a test wrote here")
"""


def nested_session(tmp_path: Path, model_cache: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**{k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "PYTEST_DEBUG_TEMPROOT")},
           "LITJUDGE_MODEL_CACHE": str(model_cache), "PYTHONPATH": os.pathsep.join([str(tmp_path), *filter(None, [
               os.environ.get("PYTHONPATH")])])}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp",
                           str(tmp_path / "bt"), *args, "tests/test_session.py::test_every_litjudge_variable_is_read_in_one_module_and_documented"],
                          cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_the_suite_reads_the_model_cache_and_writes_nothing_there(tmp_path):
    """A session on a model cache without the registry judges stops before any test, in one line
    naming them, and creates nothing there (the tests used to download and convert them into the
    user's cache); a session during which something writes into the cache fails, naming the file,
    though its tests passed."""
    empty = tmp_path / "empty-cache"
    empty.mkdir()
    r = nested_session(tmp_path, empty)
    lines = [ln for ln in r.stdout.splitlines() if "not prepared" in ln]
    assert r.returncode == 4 and len(lines) == 1 and "passed" not in r.stdout, r.stdout[-2000:]
    assert all(name in lines[0] for name in ALIASES) and "make test" in lines[0], lines[0]
    assert list(empty.iterdir()) == []

    cache = tmp_path / "cache"                     # the judges, prepared (the user's folders, linked)
    (cache / "models").mkdir(parents=True)
    for name in ALIASES:
        (cache / "models" / name).symlink_to(MODEL_CACHE / "models" / name)
    (tmp_path / "intruder.py").write_text(INTRUDER)
    r = nested_session(tmp_path, cache, "-p", "intruder")
    assert "1 passed" in r.stdout and r.returncode == 1, r.stdout[-2000:]
    assert "wrote into the user's model cache" in r.stdout and "added models/intruder.txt" in r.stdout, r.stdout[-2000:]
    (cache / "models" / "intruder.txt").unlink()
    assert nested_session(tmp_path, cache).returncode == 0       # the same session without the intruder


TEMPORARY_FOLDERS = """
import tempfile
from torch._inductor.runtime.runtime_utils import cache_dir
from torch._inductor.codecache import _HEADER_DIR
from ray._common.utils import get_default_ray_temp_dir
from vllm.utils.network_utils import get_file_store_init_method, get_open_zmq_ipc_path
from datasets import config
from pip._internal.locations import USER_CACHE_DIR
from tests.chromium import browser_env
import matplotlib
print(tempfile.gettempdir(), cache_dir(), _HEADER_DIR, get_default_ray_temp_dir(),
      get_file_store_init_method().removeprefix("file://"), get_open_zmq_ipc_path().removeprefix("ipc://"),
      config.HF_DATASETS_CACHE, __import__("os").environ.get("PIP_CACHE_DIR", USER_CACHE_DIR),
      browser_env()["XDG_CONFIG_HOME"], matplotlib.get_cachedir())
"""


def test_what_the_suite_writes_to_temporary_folders_is_the_sessions():
    """torch's compile cache and precompiled headers (/tmp/torchinductor_$USER: 155 MB a session,
    and a kernel compiled under another CPU capability aborted the transformers backend), vLLM's
    rendezvous files and sockets, Ray's sessions, the datasets library's and pip's caches, the
    browser's configuration, matplotlib's font list: all in the session's temporary folder, which goes when the session
    ends, here and in a command's process; never the user's."""
    from tests.session_settings import SESSION_TMP, SYSTEM_TMP

    here = subprocess.run([sys.executable, "-c", TEMPORARY_FOLDERS], capture_output=True, text=True, timeout=300,
                          cwd=PROJECT_ROOT)
    exec_globals: dict = {}
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        exec(TEMPORARY_FOLDERS, exec_globals)
    for paths in (printed.getvalue().split(), here.stdout.split()):
        assert len(paths) == 10, here.stderr[-2000:]
        assert all(SESSION_TMP in Path(p).parents or Path(p) == SESSION_TMP for p in paths), (SESSION_TMP, paths)
    assert SESSION_TMP.parent == SYSTEM_TMP and SESSION_TMP.name.startswith("litjudge-tests-")


def test_a_session_is_the_invocations_settings():
    """--cache DIR/ (a folder not yet made) names the cache file inside it, not a file DIR; off is off."""
    s = Session.current(out="x", cache="somewhere/new/")
    assert s.runs_dir == Path("x").resolve() and s.verdict_cache == Path("somewhere/new/verdicts.sqlite").resolve()
    assert Session.current(cache=False).verdict_cache is None
    assert Session.current(cache="off").verdict_cache is None


NOTEBOOK = """
import io, logging, sys, warnings
from pathlib import Path
from litjudge.engine.core.console import quiet, say, shown
cell = sys.stderr = io.StringIO()              # a notebook's stderr: a stream that is not fd 2
log = Path(sys.argv[1])
with quiet(log, stream=cell), shown():         # as litjudge.judge(progress=True) does
    warnings.warn("a third-party warning")
    logging.getLogger("lib").addHandler(logging.StreamHandler(sys.stderr))
    logging.getLogger("lib").warning("a library log line")
    say("litjudge: progress")
logging.getLogger("lib").warning("after the call")
print(repr(cell.getvalue()))
"""


def test_a_notebook_shows_litjudges_lines_and_the_log_keeps_the_rest(tmp_path):
    """In a notebook (stderr is not fd 2), a call's Python-level third-party messages (warnings,
    a logging handler bound to stderr) go to the log, litjudge's own to the notebook's stream; a
    handler kept after the call writes to the notebook again, not to a closed log."""
    log = tmp_path / "log.txt"
    r = subprocess.run([sys.executable, "-c", NOTEBOOK, str(log)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == repr("litjudge: progress\nafter the call\n")
    assert "a third-party warning" in log.read_text() and "a library log line" in log.read_text()


def test_the_session_takes_only_the_model_caches_remembered_checksums_and_they_still_check_the_files(tmp_path):
    """The session starts from the checksums the user's cache remembers of the model cache's judge
    folders (tests/session_settings.py): a damaged memo and one of a folder elsewhere are left
    behind, and a remembered checksum still stands only while the folder's files are as hashed."""
    import json

    from litjudge.engine.backends.local import checksum
    from tests.session_settings import _known_checksums

    models, user, session = tmp_path / "models", tmp_path / "user", tmp_path / "session"
    judge = models / "judge"
    judge.mkdir(parents=True)
    (judge / "model.safetensors").write_bytes(b"weights")
    (user / "checksums").mkdir(parents=True)
    kept = {"folder": str(judge), "files": [], "checksum": "remembered"}
    (user / "checksums" / "a.json").write_text(json.dumps(kept))
    (user / "checksums" / "b.json").write_text(json.dumps({**kept, "folder": str(tmp_path / "elsewhere")}))
    (user / "checksums" / "c.json").write_text("{not json")
    _known_checksums(user, session, models)
    assert sorted(p.name for p in (session / "checksums").iterdir()) == ["a.json"]
    memo = session / "checksums" / "a.json"
    assert checksum._remembered(memo, judge, [["model.safetensors", 1]]) is None      # files differ: hashed again
    assert checksum._remembered(memo, judge, []) == "remembered"
