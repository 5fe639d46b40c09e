"""One error hierarchy. Every error a user can hit prints as one clear line and exit status 2
(see `engine.app.cli`): what is wrong, where (file, line, key), and the fix."""
from __future__ import annotations

import difflib
import errno
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

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


class ConfigError(LitjudgeError):
    """A run config, card or option is wrong. Names where (file, key) and what was received."""

    def __init__(self, message: str, *, where: str | None = None, key: str | None = None):
        self.where, self.key, self.message = where, key, message
        prefix = ": ".join(p for p in (where, key) if p)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class DataError(LitjudgeError):
    """A dataset file or row is unusable. Names the file and the row (line) number."""

    def __init__(self, message: str, *, path: str | None = None, row: int | None = None):
        self.path, self.row, self.message = path, row, message
        where = path or ""
        if row is not None:
            where = f"{where}:{row}" if where else f"row {row}"
        super().__init__(f"{where}: {message}" if where else message)


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


class StoreError(LitjudgeError):
    """The result store is unreadable, locked, corrupt or of another layout; says how to recover."""


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
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        what = "is not writable"
        fix = f"give write permission or give {option} another folder" if option else \
            "give write permission or point LITJUDGE_RUNS_DIR / --out elsewhere"
    elif exc.errno in (errno.EEXIST, errno.ENOTDIR):
        path = exc.filename or path
        what = "is in the way: a file stands where a folder is needed"
        fix = f"give {option} a folder, or move the file" if option else \
            "give --out (or LITJUDGE_RUNS_DIR) a folder, or move the file"
    else:
        what, fix = f"cannot be written ({exc.strerror})", "check the folder and run again"
    return SystemFault(f"{path}: {what}; {fix}")


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
        raise ConfigError(str(exc), where="environment", key=exc.name) from None


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
