"""The real CLI in its own process, started from a warm interpreter (a "zygote", as Chromium and
Android start their processes): each test worker keeps one Python process that has imported torch,
transformers and vLLM (8-9 s of every engine run's 17 s here) and forks it for each command. The
child is a separate process running `python -m litjudge ARGS` as the fresh interpreter would: its
own folder, environment, stdout and stderr, exit code (or the signal that killed it: a test's
SIGKILL is -9), exit handlers, and its engine started from scratch. Only the imports are shared.

litjudge's console modules are imported before the fork as well (0.5 s of class building in each
command): litjudge reads no setting at import (engine/core/envs.py: each variable is read when
used; the warm interpreter records what its imports look up, and tests/test_warm_cli.py checks
that no LITJUDGE_* variable is among them), so its settings still come from the child's own
environment, which is exactly the command's; the tests' fault hooks are installed into it in the
child (tests/faults/sitecustomize.py).
A command that sets differently a variable the warm imports read (IMPORT_TIME) runs in a fresh
interpreter instead (`subprocess.run`), as does a second command while one is running (a test's
threads). tests/test_warm_cli.py compares both ways.

A test's Python script (`python -c CODE ARGS`, `run_python`) forks the same way, as `__main__` of
its own, with the warm interpreter's tcmalloc loaded: a script whose result depends on the
allocator runs in a fresh interpreter."""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from litjudge.engine.app.console.preload import tcmalloc
from litjudge.engine.core.console import prepare_environment

# What the warm interpreter imports before it forks: the third-party libraries a run loads, the
# parts of vLLM its engine start imports, matplotlib's pyplot (every command of console/commands.py
# imports the report's figures: 0.3-0.5 s each), Anthropic's SDK (1.2 s in each command with a
# claude judge) and litjudge's console. 64 CLI-heavy tests (test_api_batch, test_cli_probe) took
# 96 s with the libraries and vLLM alone, 57 s with these. Ray's exit handler (registered when vLLM
# imports Ray) imports `ray.dag.compiled_dag_node` as every command exits: `litjudge protocols`
# forked took 375-389 ms without it here, 319-335 ms with it (Zen 3), some 20 s of the suite's CPU.
# The rest of the second line: what the forked commands still imported for themselves, in py-spy's
# samples over the suite (some 9 s of its CPU): vLLM's loader's online quantization, the structured
# output check, the engine arguments' names (in the manifest), OpenAI's chat client, the API backend
# and the rubric protocol.
WARM = ("torch", "transformers", "polars", "numpy", "scipy.stats", "vllm", "vllm.entrypoints.llm",
        "ray.dag.compiled_dag_node",
        "vllm.model_executor.layers.quantization.online.base", "vllm.v1.structured_output.backend_lm_format_enforcer",
        "vllm.entrypoints.launchers.cli_args", "openai.resources.chat.chat", "litjudge.engine.backends.api",
        "litjudge.judges.rubric",
        "vllm.v1.engine.llm_engine", "vllm.v1.engine.core", "vllm.v1.worker.cpu_worker",
        "vllm.v1.worker.cpu_model_runner", "vllm.model_executor.models.llama", "vllm.model_executor.models.gemma3",
        "vllm.model_executor.models.qwen2", "xgrammar", "matplotlib.pyplot", "anthropic",
        "litjudge.engine.app.console.cli", "litjudge.engine.app.console.commands",
        "litjudge.engine.app.console.run_commands")
# What the warm libraries read as they are imported (or as the process starts): a command whose
# setting of one of these differs from the warm interpreter's runs in a fresh one. Everything else
# (litjudge's settings, provider keys, what an engine in the test's own process set) is read when
# the command runs, from the child's own environment, which is exactly the command's.
IMPORT_TIME = ("HF_", "HUGGINGFACE", "TRANSFORMERS_", "TORCH_", "PYTORCH_", "OMP_", "KMP_", "MKL_",
               "GOMP_", "CUDA_", "NUMBA_", "POLARS_", "MPL", "PYTHON", "HOME", "XDG_", "TMPDIR", "LANG", "LC_",
               "VLLM_LOGGING", "VLLM_CONFIGURE_LOGGING", "VLLM_USE_", "VLLM_TARGET_DEVICE", "VLLM_PLUGINS")
# Of those, read when the command runs: its path (set up in the child from the command's own) and
# the breakpoint hook (read at each breakpoint(); Ray's driver sets it in the test's process).
PER_COMMAND = ("PYTHONPATH", "PYTHONBREAKPOINT")
COMMAND = ["-m", "litjudge"]          # `python` + this: the litjudge command line

ZYGOTE = r"""
import importlib, json, os, sys
reply = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)               # the imports' chatter goes nowhere
read, lookup = set(), os._Environ.__getitem__              # every variable the imports look up (get, in, [])
def recorded(environ, key):
    read.add(key.decode(errors="replace") if isinstance(key, bytes) else key)
    return lookup(environ, key)
os._Environ.__getitem__ = recorded
missing = []                                               # what could not be imported (a child imports it itself)
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except ImportError:
        missing.append(name)
os._Environ.__getitem__ = lookup
import gc
gc.freeze()                       # the imports' objects are never collected: a child's gc.collect() skips them
warm_env = dict(os.environ)
base_path = [p for p in sys.path if p not in os.environ.get("PYTHONPATH", "").split(os.pathsep)]
reply.write(json.dumps({"env": warm_env, "read": sorted(read), "missing": missing}) + "\n")
for line in sys.stdin:
    ask = json.loads(line)
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:                                              # the command's own process
        reply.close()
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(os.open(ask["stdout"], os.O_WRONLY | os.O_TRUNC), 1)
        os.dup2(os.open(ask["stderr"], os.O_WRONLY | os.O_TRUNC), 2)
        os.chdir(ask["cwd"])
        os.environ.clear()
        os.environ.update(ask["env"])
        extra = [p for p in ask["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        flag, target, *args = ask["python"]                   # ["-m", module, ...] or ["-c", code, ...]
        # sys.path and sys.argv as `python -m` / `python -c` set them up
        sys.path[:] = [os.getcwd() if flag == "-m" else "", *extra, *base_path[1:]]
        sys.argv = [flag, *args]
        if "sitecustomize" in sys.modules and hasattr(sys.modules["sitecustomize"], "_install"):
            sys.modules["sitecustomize"]._install()           # the tests' fault hooks, read from this environment
        import atexit, runpy, signal, threading, traceback, types
        code, interrupted = 0, False
        try:
            if flag == "-m":
                runpy.run_module(target, run_name="__main__", alter_sys=True)
            else:                                             # the script as __main__, a module of its own
                main = sys.modules["__main__"] = types.ModuleType("__main__")
                exec(compile(target, "<string>", "exec"), main.__dict__)
        except SystemExit as exc:
            code = 0 if exc.code is None else exc.code
            if not isinstance(code, int):                      # sys.exit("message"): printed, status 1
                print(code, file=sys.stderr)
                code = 1
        except KeyboardInterrupt:
            traceback.print_exc()
            interrupted = True
        except BaseException:
            traceback.print_exc()
            code = 1
        if interrupted:                                       # as Python exits on an uncaught Ctrl-C
            threading._shutdown()
            atexit._run_exitfuncs()
            sys.stdout.flush(); sys.stderr.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        # as the litjudge command ends (threads joined, exit handlers run, streams flushed, then
        # out without tearing torch's and vLLM's modules down object by object)
        from litjudge.engine.app.console.leave import leave
        leave(code)
    reply.write(json.dumps({"pid": pid}) + "\n")
    _, status = os.waitpid(pid, 0)
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    reply.write(json.dumps({"code": code}) + "\n")
"""


class Zygote:
    """One warm interpreter per test worker, started at its first command."""

    def __init__(self, base: dict[str, str]) -> None:
        self.base = base
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.start_env: dict[str, str] = {}
        self.warm_env: dict[str, str] = {}
        self.import_reads: frozenset[str] = frozenset()     # the variables the warm imports looked up
        self.import_missing: tuple[str, ...] = ()            # the names of WARM that did not import
        self.lib = tcmalloc() if sys.platform.startswith("linux") else None

    def _start(self) -> subprocess.Popen:
        env = {k: v for k, v in self.base.items() if not k.startswith("LITJUDGE_")}
        prepare_environment(False, env)                      # what the console sets before vLLM is imported
        if self.lib:                                         # as the console re-executes itself (console/preload.py)
            env["LD_PRELOAD"] = self.lib
        self.start_env = env
        proc = subprocess.Popen([sys.executable, "-c", ZYGOTE, json.dumps(WARM)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=env, cwd=tempfile.gettempdir())
        started = json.loads(_line(proc))
        self.warm_env, self.import_reads = started["env"], frozenset(started["read"])
        self.import_missing = tuple(started["missing"])
        return proc

    def fits(self, args: list[str], env: dict[str, str]) -> bool:
        """The command's environment (a litjudge command's as its console prepares it before
        importing vLLM) agrees with the warm interpreter's on what the imports read."""
        env = dict(env)
        if args[:2] == COMMAND:
            prepare_environment("--verbose" in args, env)
        keys = {k for k in set(env) | set(self.warm_env) if k.startswith(IMPORT_TIME) and k not in PER_COMMAND}
        # as the warm interpreter started (its imports then set what they set), or as its imports left it
        return all(env.get(k) in (self.start_env.get(k), self.warm_env.get(k)) for k in keys) \
            and "LITJUDGE_PRELOAD" not in env

    def run(self, argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess | None:
        """The command's result, or None where it must run in a fresh interpreter."""
        return self.python([*COMMAND, *argv], cwd, env, timeout)

    def python(self, args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess | None:
        """`python ARGS` (`-m MODULE ...` or `-c CODE ...`) forked warm, or None where it must run in
        a fresh interpreter."""
        if not self.lock.acquire(blocking=False):
            return None
        try:
            if self.proc is None or self.proc.poll() is not None:
                self.proc = self._start()
            if not self.fits(args, env):
                return None
            child_env = dict(env)
            if self.lib:                                     # loaded in the warm interpreter, so in each child;
                child_env.setdefault("LD_PRELOAD", self.lib)      # a command's as the console's re-execution sets them
                if args[:2] == COMMAND:
                    child_env["LITJUDGE_PRELOADED"] = "1"
            with tempfile.TemporaryDirectory() as tmp:
                out, err = Path(tmp) / "out", Path(tmp) / "err"
                out.touch()
                err.touch()
                ask = {"python": args, "cwd": str(cwd), "env": child_env, "stdout": str(out), "stderr": str(err)}
                assert self.proc.stdin is not None and self.proc.stdout is not None
                self.proc.stdin.write((json.dumps(ask) + "\n").encode())
                self.proc.stdin.flush()
                pid = json.loads(_line(self.proc))["pid"]
                timed_out = not select.select([self.proc.stdout], [], [], timeout)[0]
                if timed_out:
                    os.kill(pid, signal.SIGKILL)
                answer = json.loads(_line(self.proc))
                result = subprocess.CompletedProcess([sys.executable, *args], answer["code"],
                                                     out.read_text(errors="replace"), err.read_text(errors="replace"))
            if timed_out:
                raise subprocess.TimeoutExpired(result.args, timeout, result.stdout, result.stderr)
            return result
        finally:
            self.lock.release()


def _line(proc: subprocess.Popen) -> str:
    """One line from the warm interpreter, read a byte at a time (nothing read ahead, so `select`
    sees what is still to come)."""
    assert proc.stdout is not None
    fd, got = proc.stdout.fileno(), b""
    while not got.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            raise RuntimeError("the warm interpreter ended")
        got += byte
    return got.decode().strip()


_ZYGOTE: Zygote | None = None


def warm_for(session_env: dict[str, str]) -> None:
    """The environment the warm interpreter starts with: the test session's (conftest, once set up)."""
    global _ZYGOTE
    if _ZYGOTE is None:
        _ZYGOTE = Zygote(dict(session_env))


def fresh_python(args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """`python ARGS` in a fresh interpreter."""
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def fresh_cli(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """`python -m litjudge ARGV` in a fresh interpreter."""
    return fresh_python([*COMMAND, *argv], cwd, env, timeout)


def console_env(env: dict[str, str]) -> dict[str, str]:
    """`env` with the third-party settings litjudge's console and `litjudge.judge` set before
    vLLM loads (engine.core.console.prepare_environment): a script run with it forks warm."""
    env = dict(env)
    prepare_environment(False, env)
    return env


def run_python(args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """`python ARGS` (`-c CODE ...` or `-m MODULE ...`) in `cwd` with exactly `env`, captured as
    `subprocess.run(..., text=True)` would: forked warm where it can be, else a fresh interpreter."""
    done = _ZYGOTE.python(args, cwd, env, timeout) if _ZYGOTE is not None else None
    return done if done is not None else fresh_python(args, cwd, env, timeout)


def run_cli(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """`python -m litjudge ARGV` in `cwd` with exactly `env`, captured as `subprocess.run` would."""
    return run_python([*COMMAND, *argv], cwd, env, timeout)
