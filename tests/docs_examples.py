"""The examples of the README and the docs site, read out of their Markdown and run as a reader
would run them, page by page, in a fresh folder each.

A fenced block runs by its language: `console` (each `$ ` line a command; the lines after it, if
any, are output the command must print, in order, `...` standing for anything), `bash` (a
script that must exit 0), `python` (run in one interpreter per page, so a later block sees an
earlier block's names), `toml` (read by the config loader: a run, sweep, ensemble or dataset
table, completed with a name, protocol and dataset where it is a fragment). HTML comments just
before a block steer it:

    <!-- file: NAME -->      write the block to NAME in the page's folder (data, configs) instead
    <!-- skip: REASON -->    not run (installs, GPUs, networks); the reason is required
    <!-- needs: data -->     run only where the human-labelled data is (else skipped, with a reason)
"""
from __future__ import annotations

import json
import os
import queue
import re
import shlex
import subprocess
import sys
import threading
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from litjudge.engine.app.ensemble import load_ensemble
from litjudge.engine.app.sweep import load_sweep
from litjudge.engine.core.config import config_kind, load_config
from litjudge.engine.data.cards import dataset_card
from litjudge.judges import PROTOCOLS

RUNNABLE = {"console", "bash", "sh", "python", "toml"}
MARKER = re.compile(r"^\s*<!--\s*(file|skip|needs):\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)```(\w*)")
TIMEOUT_S = 900


@dataclass
class Block:
    page: str
    line: int                 # the opening fence's line (1-based)
    lang: str
    text: str
    markers: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(path: Path, root: Path) -> list[Block]:
    """Every fenced block of a Markdown file, with the markers on the lines right above it."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, lang = opening.group(1), opening.group(2)
        markers, above = {}, i - 1
        while above >= 0 and MARKER.match(lines[above]):
            kind, value = MARKER.match(lines[above]).groups()
            markers[kind] = value
            above -= 1
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        body = "\n".join(line[len(indent):] if line.startswith(indent) else line for line in lines[i + 1:end])
        found.append(Block(str(path.relative_to(root)), i + 1, lang, body + "\n", markers))
        i = end + 1
    return found


def expected_lines(text: str) -> list[tuple[str, list[str]]]:
    """A console block as (command, the output lines it must print)."""
    out: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            out.append((line[2:], []))
        elif out and line.strip():
            out[-1][1].append(line)
    return out


def printed(expected: list[str], output: str) -> str | None:
    """None when every expected line is found in the output in order (`...` matches anything,
    inside a line too); else the first line that was not."""
    lines, at = output.splitlines(), 0
    for want in expected:
        if want.strip() == "...":
            continue
        pattern = re.compile(".*".join(re.escape(part.strip()) for part in want.split("...")))
        while at < len(lines) and not pattern.search(lines[at]):
            at += 1
        if at == len(lines):
            return want
        at += 1
    return None


def check_toml(text: str, folder: Path) -> None:
    """A TOML example through the loader that reads it; a fragment gets a name (and a protocol
    and dataset when it names none) so that it reads as a whole run config. A block naming its
    `protocol` is a whole config a reader saves and runs: read as written (docs/templates.md's
    lacked `name`, filled in here, and failed in a reader's hands)."""
    table = tomllib.loads(text)
    where = folder / "example.toml"
    where.write_text(text, encoding="utf-8")           # paths in it (a template) start beside it, as in a reader's file
    kind = config_kind(table)
    if kind == "ensemble":
        load_ensemble(where, table=table)
        return
    if "loader" in table and "protocol" not in table:            # a dataset card
        dataset_card({**table, "name": table.get("name", "example")}, str(where))
        return
    if "protocol" not in table:
        table = {"name": "example", **table}
    if not table.get("tasks") and not table.get("generate"):
        table.setdefault("protocol", "ttcw")
        table.setdefault("dataset", "ttcw-demo")
    if kind == "sweep":
        load_sweep(where, table=table)
        return
    config = load_config(where, table=table)
    for _, task in config.task_configs():
        if task.protocol:
            PROTOCOLS.get(task.protocol)().options(task)
        if isinstance(task.dataset, dict):
            dataset_card(task.dataset, str(where))


DRIVER = r"""
import json, os, shlex, sys, tempfile, traceback

# Messages go back on a copy of the pipe; fds 1 and 2 are a file of each example's own while it runs
# (the console writes its messages to a duplicate of fd 2, so only a file descriptor captures them).
reply = os.fdopen(os.dup(1), "w", buffering=1)

from litjudge.engine import backends
from litjudge.engine.app.console.cli import main as console

# One local engine at a time, kept across examples (each run would otherwise start and close its
# own): a judge asked again with the same weights and engine settings reuses it; another closes it.
started, real_create = {}, backends.create


def create(spec, cluster=None):
    if spec.backend != "vllm" or (cluster is not None and cluster.enabled):
        return real_create(spec, cluster)
    key = (spec.name, spec.fingerprint, repr(spec.engine))
    if key not in started:
        for engine in started.values():
            type(engine).close(engine)
        started.clear()
        engine = started[key] = real_create(spec, cluster)
        engine.close = lambda: None              # closed here, when another engine or the session needs it
    return started[key]


backends.create = create
namespaces = {}


def captured(work):
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as out:
        saved = os.dup(1), os.dup(2)
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
        try:
            status = work()
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
            status = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        out.seek(0)
        return status, out.read().decode("utf-8", "replace")


for line in sys.stdin:
    ask = json.loads(line)
    os.chdir(ask["cwd"])
    if ask["kind"] == "python":
        namespace = namespaces.setdefault(ask["page"], {"__name__": "__main__"})
        status, output = captured(lambda: exec(compile(ask["text"], ask["where"], "exec"), namespace) or 0)
    else:
        status, output = captured(lambda: console(ask["argv"]))
    reply.write(json.dumps({"status": status, "output": output}) + "\n")
for engine in started.values():
    type(engine).close(engine)
"""


class Interpreter:
    """One Python process for every page's examples: a page's Python blocks share names (each page
    has its own), `litjudge ...` console lines run in it too (the console's `main`), and a local
    engine started by one example serves the next that asks for the same judge."""

    def __init__(self, folder: Path, env: dict[str, str]):
        self.process = subprocess.Popen([sys.executable, "-c", DRIVER], cwd=folder, env=env, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(json.dumps({"status": 1, "output": "the examples' interpreter exited"}) + "\n")

    def ask(self, message: dict) -> tuple[int, str]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()
        while True:
            line = self.lines.get(timeout=TIMEOUT_S)
            try:
                answer = json.loads(line)
            except ValueError:
                continue                                 # a stray line written before the capture began
            return int(answer["status"]), answer["output"]

    def run(self, block: Block, folder: Path) -> tuple[int, str]:
        return self.ask({"kind": "python", "page": block.page, "cwd": str(folder), "text": block.text,
                         "where": block.where})

    def console(self, argv: list[str], folder: Path) -> tuple[int, str]:
        return self.ask({"kind": "console", "cwd": str(folder), "argv": argv})

    def cpu(self) -> float:
        """CPU seconds (user + system) the interpreter has used so far (Linux: /proc)."""
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(timeout=120)


@dataclass
class PageRun:
    """What running a page's examples did: blocks run, skipped (with why), and the failures."""

    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def shell(command: str, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", command], cwd=folder, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT_S)


SHELL_SYNTAX = re.compile(r"[|&;<>()$`*?]|^\w+=")


def _command(command: str, folder: Path, env: dict[str, str], python: Interpreter) -> tuple[int, str]:
    """A plain `litjudge ...` line runs in the examples' interpreter (as the console's `main`);
    anything with shell syntax (pipes, variables, other programs) in bash."""
    argv = shlex.split(command)
    if argv and argv[0] == "litjudge" and not SHELL_SYNTAX.search(command):
        return python.console(argv[1:], folder)
    done = shell(command, folder, env)
    return done.returncode, done.stdout


def _console(block: Block, folder: Path, env: dict[str, str], python: Interpreter) -> str | None:
    """A console block's commands; an expected output, where given, is what is checked (an error
    shown on purpose exits non-zero), else the command must succeed."""
    for command, want in expected_lines(block.text):
        status, output = _command(command, folder, env, python)
        missing = printed(want, output) if want else None
        if missing is not None or (not want and status != 0):
            return (f"`{command}` exited {status}" + (f"; expected a line {missing!r}" if missing else "")
                    + f"; it printed:\n{output[-3000:]}")
    return None


def run_page(path: Path, root: Path, folder: Path, env: dict[str, str], have_data: bool,
             python: Interpreter) -> PageRun:
    """Run a page's examples in order, in `folder` (Python and `litjudge` lines in `python`)."""
    result = PageRun()
    for block in blocks(path, root):
        if block.lang not in RUNNABLE and "file" not in block.markers:
            continue
        if "skip" in block.markers:
            if not block.markers["skip"]:
                result.failures.append(f"{block.where}: a skipped example says why (<!-- skip: REASON -->)")
            result.skipped.append(f"{block.where}: {block.markers['skip']}")
            continue
        if block.markers.get("needs") == "data" and not have_data:
            result.skipped.append(f"{block.where}: the human-labelled data is absent")
            continue
        if "file" in block.markers:
            target = folder / block.markers["file"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.text, encoding="utf-8")
            continue
        failure = None
        if block.lang == "toml":
            try:
                check_toml(block.text, folder)
            except Exception as exc:  # noqa: BLE001  (reported as the example's failure)
                failure = f"{type(exc).__name__}: {exc}"
        elif block.lang == "console":
            failure = _console(block, folder, env, python)
        elif block.lang in ("bash", "sh"):
            done = shell(block.text, folder, env)
            failure = None if done.returncode == 0 else f"exited {done.returncode}:\n{done.stdout[-3000:]}"
        else:
            status, output = python.run(block, folder)
            failure = None if status == 0 else output[-3000:]
        (result.failures if failure else result.ran).append(f"{block.where}" + (f": {failure}" if failure else ""))
        if failure:
            break                                  # later blocks build on this one
    return result


def example_env(cache: Path) -> dict[str, str]:
    """The environment a reader's shell would have: litjudge on the PATH, the verdict cache of
    this test session shared by every page (the same question asked on two pages is generated
    once), outputs under the page's folder."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "LITJUDGE_VERDICT_CACHE": str(cache), "COLUMNS": "120"}
    env.pop("LITJUDGE_RUNS_DIR", None)
    return env
