"""`litjudge ARGS` run by the console's own `main` in the test's process, its local judges served by
the session's in-process engines (conftest's `smollm`, `smollm32`): the docs-examples pattern
(tests/docs_examples.py) for tests whose point is a command's work, not its process. A CLI
subprocess starts an engine of its own (2.5-3.5 GiB beside the worker's, and 10-30 s); here the
command meets the worker's engine, as the next docs example meets the one the last example started.

What stays a subprocess (tests/warm_cli.py's `litjudge`): a kill, a signal, an exit code of the
process, an environment read at import, another model that is converted or served, a replica, a
server, an installed wheel."""
from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from litjudge.engine.core.paths import PROJECT_ROOT


def serving(engines: dict[str, Any], real):
    """`backends.create` that hands a judge named in `engines` its shared engine (prefix cache
    emptied, as a fresh engine's) and starts every other backend as it would. A shared engine
    must be what the config asks for in what changes verdicts (its dtype): a float32 config on a
    bfloat16 engine is refused, not silently judged by another model's numbers."""
    def create(spec, cluster=None):
        engine = engines.get(spec.name)
        if engine is None or spec.backend != "vllm" or (cluster is not None and cluster.enabled):
            return real(spec, cluster)
        if spec.engine.dtype != engine.spec.engine.dtype:
            raise AssertionError(f"{spec.name}: the config asks dtype {spec.engine.dtype}, the shared engine "
                                 f"is {engine.spec.engine.dtype}")
        engine.reset_prefix_cache()
        return engine
    return create


def litjudge_in_process(engines: dict[str, Any], args: list[str], env: dict[str, str] | None,
                        monkeypatch, capfd) -> subprocess.CompletedProcess:
    """The command in this process (from the project's folder, as `litjudge` runs it) with `env`
    over the test's environment; its exit code, stdout and stderr as a CompletedProcess. A run
    never closes the shared engines (their `close` does nothing while the command runs: closing an
    in-process engine ends vLLM's process-wide state, which every session engine shares); the
    environment and SIGTERM's handler, which the console sets, are put back after it."""
    from litjudge.engine import backends  # at the call: conftest imports this module, and backends loads more
    from litjudge.engine.app.console.cli import main

    saved_env, saved_term, cwd = dict(os.environ), signal.getsignal(signal.SIGTERM), Path.cwd()
    with monkeypatch.context() as patch:
        patch.setattr(backends, "create", serving(engines, backends.create))
        for engine in engines.values():
            patch.setattr(engine, "close", lambda: None)
        os.environ.update(env or {})
        os.chdir(PROJECT_ROOT)
        capfd.readouterr()
        try:
            code = main(list(args))
        finally:
            out, err = capfd.readouterr()
            os.chdir(cwd)
            signal.signal(signal.SIGTERM, saved_term)
            os.environ.clear()
            os.environ.update(saved_env)
    return subprocess.CompletedProcess(["litjudge", *args], code, out, err)
