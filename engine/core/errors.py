"""One error hierarchy. Every error a user can hit prints as one clear line and exit status 2
(see `engine.app.cli`): what is wrong, where (file, line, key), and the fix."""
from __future__ import annotations

import copy
import difflib
import errno
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from litjudge.grammars.errors import GrammarError  # noqa: F401  (a user error of the grammars layer, printed the same way)

from . import envs


def did_you_mean(name: object, known: Iterable[object], n: int = 1, prefix: str = "",
                 form: Callable[[str], str] = repr) -> str:
    """" (did you mean 'x'?)" naming the closest of `known` to a misspelt `name` (up to `n`, each
    with `prefix`, e.g. a table's "engine.", written by `form`), or "" when none is close: the one
    wording of every unknown name's hint (config keys, loaders, backends, columns, template fields)."""
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=n)
    return f" (did you mean {', '.join(form(prefix + c) for c in close)}?)" if close else ""


class LitjudgeError(Exception):
    """Base of every error litjudge raises on purpose; the CLI prints it as one line."""

    def in_python(self) -> LitjudgeError:
        """The same error said in the Python API's words (itself when it names no setting)."""
        return self


NOTHING: Any = object()    # a Setting or ConfigError given no value


# The keys of the dataset table that litjudge.judge() takes as keywords of its own.
JUDGE_KEYWORDS = ("columns", "values", "category_order")


def python_key(parameter: str) -> str:
    """A dotted config key as a Python caller gave it: judge()'s keywords are the dataset table's
    keys (`dataset.values.label` is `values.label`); every other key is the config dict's own."""
    table, _, rest = parameter.partition(".")
    return rest if table == "dataset" and rest.split(".")[0] in JUDGE_KEYWORDS else parameter


def _toml_key(key: object) -> str:
    text = str(key)
    return text if re.fullmatch(r"[A-Za-z0-9_-]+", text) else json.dumps(text, ensure_ascii=False)


def _literal(value: object) -> str:
    """A value as TOML and Python both write it (strings, numbers, lists and tables of them: JSON)."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


@dataclass(frozen=True)
class Setting:
    """A config key named inside an error message, with what to write there: worded for the config
    file (`[dataset.values.label] maybe = "a"`) or for the Python call (`values={"label": {"maybe": "a"}}`),
    both from these fields."""

    parameter: str                 # the dotted config key: "dataset.columns", "dataset.values.label"
    value: Any = NOTHING           # what to write: a table's entries (a dict), or a key's value
    table: bool = False            # `parameter` is a table ([dataset.columns]), not a key ([dataset] path)

    def console(self) -> str:
        if self.table or isinstance(self.value, dict):
            entries = self.value.items() if isinstance(self.value, dict) else ()
            return " ".join([f"[{self.parameter}]", *(f"{_toml_key(k)} = {_literal(v)}" for k, v in entries)])
        table, _, key = self.parameter.rpartition(".")
        said = f"[{table}] {key}" if table else key
        return said if self.value is NOTHING else f"{said} = {_literal(self.value)}"

    def python(self) -> str:
        keyword, *keys = python_key(self.parameter).split(".")
        if self.value is NOTHING:
            return keyword + "".join(f"[{json.dumps(k)}]" for k in keys)
        value = self.value
        for k in reversed(keys):
            value = {k: value}
        return f"{keyword}={_literal(value)}"


@dataclass(frozen=True)
class Option:
    """A command's option named inside an error message: its flag on the console (`--per-item`), its
    keyword in the Python call (`per_item`)."""

    flag: str
    keyword: str

    def console(self) -> str:
        return self.flag

    def python(self) -> str:
        return self.keyword


Part = str | Setting | Option

# The remedy for a corrupt run store, as the console and the Python calls say it.
REBUILD_STORE = Option("`litjudge run CONFIG --rebuild-store`", "rebuild_store=True (litjudge.judge or litjudge.run)")


class WordedError(LitjudgeError):
    """An error whose message names settings: its parts are text and `Setting`s, said in the config
    file's words (str(): the console) or in the Python caller's (`in_python`), each from its fields."""

    python = False                 # this copy speaks Python

    def __init__(self, message: str | Sequence[Part]):
        self.parts: tuple[Part, ...] = (message,) if isinstance(message, str) else tuple(message)
        super().__init__(self.said(python=False))

    @property
    def message(self) -> str:
        """The message without its prefix (where), in the console's words."""
        return self._body(python=False)

    def _body(self, python: bool) -> str:
        return "".join(p if isinstance(p, str) else p.python() if python else p.console() for p in self.parts)

    def where_said(self, python: bool) -> str:
        """Where the error is (file, key, row), in front of the message; "" for nowhere."""
        return ""

    def said(self, python: bool) -> str:
        prefix, body = self.where_said(python), self._body(python)
        return f"{prefix}: {body}" if prefix else body

    def __str__(self) -> str:
        return self.said(self.python)

    def in_python(self) -> LitjudgeError:
        if self.said(python=True) == self.said(python=False):
            return self
        said = copy.copy(self)
        said.python = True
        return said


class ConfigError(WordedError):
    """A run config, card or option is wrong. Names where (file, key: `parameter`, the dotted config
    key) and what was received (`value`, when one was)."""

    def __init__(self, message: str | Sequence[Part], *, where: str | None = None, parameter: str | None = None,
                 value: Any = NOTHING, key: str | None = None):
        """`key`: the older name of `parameter`, still taken from callers not yet renamed."""
        self.where, self.parameter, self.value = where, parameter or key, value
        super().__init__(message)

    def where_said(self, python: bool) -> str:
        key = self.parameter and (python_key(self.parameter) if python else self.parameter)
        return ": ".join(p for p in (self.where, key) if p)


class DataError(WordedError):
    """A dataset file or row is unusable. Names the file and the row (line) number."""

    def __init__(self, message: str | Sequence[Part], *, path: str | None = None, row: int | None = None):
        self.path, self.row = path, row
        super().__init__(message)

    def where_said(self, python: bool) -> str:
        where = self.path or ""
        if self.row is not None:
            where = f"{where}:{self.row}" if where else f"row {self.row}"
        return where


class JudgeNotFound(LitjudgeError):
    """A judge name is neither an alias, a local model folder, nor a reachable hub repo."""


class ContractError(LitjudgeError, TypeError):
    """A protocol, backend or other plugin breaks the contract it declares (judges.contract,
    core.backend): names the protocol or class, the table and column, and what to change. A
    TypeError too: it is a mistake in code, met where the class is defined or as a run starts."""


class BackendUnavailable(LitjudgeError):
    """A backend's library is not installed or cannot run here; says what to install."""


class PreflightError(LitjudgeError):
    """Prompts do not fit the judge's context window; lists the offending items."""


class StoreError(WordedError):
    """The result store is unreadable, locked, corrupt or of another layout; says how to recover
    (its remedy an `Option`: the console's flag, the Python call's keyword)."""


class SystemFault(LitjudgeError):
    """The machine refused: disk full, a read-only folder, a file we may not write. Nothing stored
    is lost; the message names the path and what to do."""


class PluginError(LitjudgeError):
    """A plugin (an entry point another distribution declares) cannot be used: it failed to import,
    or is not what its registry holds. Names the distribution, and is raised only where its name is used."""


class PluginInterrupted(KeyboardInterrupt):
    """A KeyboardInterrupt met while a plugin was imported (Ctrl-C then, or the plugin's own import
    raising it): the console says where, not that a run's verdicts are stored."""

    def __init__(self, where: str, distribution: str):
        super().__init__(where)
        self.where, self.distribution = where, distribution


def fault(exc: OSError, path: object, option: str | None = None) -> SystemFault:
    """An OS refusal as one line naming the path and what to do; nothing stored is lost. `option`:
    the command's own option for where it writes (export's `--to`), named in the fix instead of a
    run's `--out` / LITJUDGE_RUNS_DIR."""
    if exc.errno == errno.ENOSPC or exc.errno == errno.EFBIG:
        what = "the disk is full (or a file-size limit was hit)"
        fix = (f"free space (or give {option} a folder on another disk) and try again" if option else
               "free space and run again: finished verdicts are stored and a re-run resumes")
    elif exc.errno in (errno.EACCES, errno.EPERM) and _unreadable(exc.filename or path):
        # a data or replay file litjudge only reads: "not writable", with write permission the fix, was wrong
        path = exc.filename or path
        what, fix = "cannot be read (permission denied)", "give read permission (chmod u+r) or name another file"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        what = "is not writable"
        fix = f"give write permission or give {option} another folder" if option else \
            "give write permission or point --out (out= in Python) or LITJUDGE_RUNS_DIR elsewhere"
    elif exc.errno in (errno.EEXIST, errno.ENOTDIR):
        path = exc.filename or path
        what = "is in the way: a file stands where a folder is needed"
        fix = f"give {option} a folder, or move the file" if option else \
            "give --out (out= in Python, or LITJUDGE_RUNS_DIR) a folder, or move the file"
    else:
        # a refusal of a read or a write alike (a folder where a data file is named, a name too long,
        # a symbolic link loop): it read "cannot be written" for a data file that was never written
        what, fix = f"{exc.strerror or exc}", "check the path and run again"
    return SystemFault(f"{path}: {what}; {fix}")


def _unreadable(path: object) -> bool:
    """The path exists and this process may not read it (a folder: list and enter it)."""
    name = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if name is None or not os.path.exists(name):
        return False
    return not os.access(name, os.R_OK | (os.X_OK if os.path.isdir(name) else 0))


OS_ERROR = re.compile(r"\(os error (\d+)\)")


def os_error_of(exc: Exception) -> OSError | None:
    """The OS refusal inside a library's own error (polars' parquet writer raises ComputeError
    "... File too large (os error 27)"), so that it is worded by `fault` like any other."""
    if isinstance(exc, OSError):
        return exc
    found = OS_ERROR.search(str(exc))
    if found is None:
        return None
    number = int(found.group(1))
    return OSError(number, os.strerror(number))


LOCK_WAIT_S = 60.0       # how long a run waits for another process's write lock before giving up


def lock_wait() -> float:
    """`LITJUDGE_LOCK_WAIT_S` (engine.core.envs; its default is LOCK_WAIT_S)."""
    try:
        return envs.LITJUDGE_LOCK_WAIT_S
    except envs.Unreadable as exc:
        raise ConfigError(str(exc), where="environment", parameter=exc.name) from None


def store_failure(exc: Exception, path: Path) -> Exception:
    """SQLite's refusals (known by their message) and the OS's (by errno, worded by `fault`) as one
    line each; what was committed stays committed."""
    if isinstance(exc, OSError) and exc.errno is not None:
        return fault(exc, path)
    text = str(exc).lower()
    if "locked" in text or "busy" in text:
        return StoreError(f"{path}: locked by another litjudge process for {lock_wait():.0f} s; let it finish "
                          "(or stop it), then run again: nothing stored is lost")
    if "full" in text:
        return fault(OSError(errno.ENOSPC, text), path)
    if "disk i/o error" in text:        # SQLite's word for a write the OS refused (ulimit -f, a failing disk)
        return SystemFault(f"{path}: a write was refused by the system (a file-size limit such as `ulimit -f`, a full "
                           "or failing disk); lift the limit or free space and run again: finished verdicts are "
                           "stored and a re-run resumes")
    if "readonly" in text or "read-only" in text or "unable to open" in text:
        return fault(OSError(errno.EACCES, text), path)
    return StoreError(f"{path}: {exc}")
