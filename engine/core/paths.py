"""Where things live: the data root (human-labelled datasets, paper prompts beside it), the cache
(models, fetched data), run outputs, and what ships with the package (dataset cards, the demo
sample, the committed run configs).

Nothing depends on where the source tree is: in a checkout the cards and configs are read from it,
in an installed wheel from its package data. Each location can be overridden by an environment
variable, read in engine.core.envs (and the data root by `--data-root`); the runs folder and the
verdict cache of one invocation are its Session's (engine.core.session).
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from . import envs
from .errors import ConfigError, DataError

PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent


CHECKOUT_DATA = PROJECT_ROOT.parent / "shared" / "datasets"     # beside a development checkout


def data_root() -> Path:
    """Human-labelled datasets (never copied into the project): `LITJUDGE_DATA_ROOT`, else the
    shared folder beside a checkout, else the cache that `litjudge data fetch` fills."""
    return envs.LITJUDGE_DATA_ROOT or (CHECKOUT_DATA if CHECKOUT_DATA.is_dir() else cache_dir() / "data")


def prompts_root() -> Path:
    """The seed papers' prompts. `LITJUDGE_PROMPTS_ROOT` overrides."""
    return envs.LITJUDGE_PROMPTS_ROOT or data_root().parent / "prompts"


def paper_prompt(name: str, *inner: str) -> Any:
    """One entry of the seed papers' prompts (`paper_prompts.json` under the prompts root), or a
    value inside it (`paper_prompt("aut_scoring", "template")`); a missing one is one line."""
    path = prompts_root() / "paper_prompts.json"
    if not path.exists():
        raise DataError(f"the seed papers' prompts are not here, and {name!r} needs them: set LITJUDGE_PROMPTS_ROOT "
                        "to a folder holding paper_prompts.json (docs: getting-started.md), or use the project's own "
                        "template", path=str(path))
    try:
        prompts = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"the paper prompts are not valid JSON ({str(exc).splitlines()[0][:120]}): restore the file",
                        path=str(path)) from None
    entry: Any = prompts
    for step in (name, *inner):
        if not isinstance(entry, dict) or step not in entry:
            raise DataError(f"the paper prompts have no entry {'.'.join((name, *inner))!r} (an old or damaged copy: "
                            "restore the file)", path=str(path))
        entry = entry[step]
    return entry


def cache_dir() -> Path:
    """litjudge's own files outside a run folder: the shared verdict cache, calibrations, console
    logs, crash reports, fetched data, judge folders' checksums. `LITJUDGE_CACHE` overrides (the
    tests point it at a temporary folder: a test run never reads or writes a user's cache)."""
    return envs.LITJUDGE_CACHE or Path.home() / ".cache" / "litjudge"


def model_cache_dir() -> Path:
    """Where converted judges (models/) and their downloaded wheels (wheels/) live: the cache
    folder unless `LITJUDGE_MODEL_CACHE` says otherwise (the tests keep the real judges while
    everything else of theirs goes to a temporary folder)."""
    return envs.LITJUDGE_MODEL_CACHE or cache_dir()


def _shipped(folder: str) -> Path:
    """A folder the package ships: the checkout's own (datasets/, runs/), else the installed package
    data. Installed, this module is litjudge/engine/core/paths.py and PROJECT_ROOT is the package's
    folder, which holds the data as _data/datasets and _data/runs (pyproject's package-dir)."""
    if (PROJECT_ROOT / "pyproject.toml").exists():         # a checkout (editable or not installed)
        return PROJECT_ROOT / folder
    shipped = PROJECT_ROOT / "_data" / folder
    if not shipped.is_dir():
        raise FileNotFoundError(f"litjudge's package data ({shipped}) is not installed: reinstall litjudge")
    return shipped


def cards_dir() -> Path:
    """Dataset cards and the demo samples (`datasets/` of the project)."""
    return _shipped("datasets")


def configs_dir() -> Path:
    """The committed run configs (`runs/` of the project): `litjudge run demo` finds demo.toml here."""
    return _shipped("runs")


def runs_output_dir() -> Path:
    """The default folder for run folders (a Session's `runs_dir` when no `--out` / `out=` is given):
    ./runs/out under the current folder; `LITJUDGE_RUNS_DIR` overrides."""
    return envs.LITJUDGE_RUNS_DIR or Path.cwd() / "runs" / "out"


def writable(folder: Path) -> bool:
    """Whether a folder can be written: permissions, and a filesystem not mounted read-only (which
    root's permissions do not see)."""
    try:
        return os.access(folder, os.W_OK) and not os.statvfs(folder).f_flag & os.ST_RDONLY
    except OSError:
        return False


FileIdentity = tuple[int, int, int, int, int]       # size, inode, device, mtime_ns, ctime_ns


def file_identity(path: Path) -> FileIdentity:
    """A file as it is now, without reading it (a link's target: what a read gets): size, inode,
    device, modification and change times. A write moves the change time, which no tool sets back
    (`os.utime` moves it too), so a rewrite with its size and mtime put back still shows."""
    st = path.stat()
    return (st.st_size, st.st_ino, st.st_dev, st.st_mtime_ns, st.st_ctime_ns)


def path_version(path: Path) -> tuple[Any, ...]:
    """A file's or folder's identity as it is now, without reading it: its resolved path and the
    `file_identity` of it (a file) or of every file under it (a folder)."""
    path = path.expanduser().resolve()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return (str(path), *((str(f.relative_to(path)) if f != path else "", *file_identity(f)) for f in files))


def sha256_file(path: Path, digest: Any = None) -> Any:
    """`digest` (a new sha256 when None) updated with the file's bytes, read 1 MiB at a time."""
    digest = digest or hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest


def run_folder(given: str) -> Path:
    """The folder a run argument names: the folder itself, else a run's bare name (no separator, no
    leading `.`: `./demo` is a path, taken as given) in the runs folder (LITJUDGE_RUNS_DIR, else
    ./runs/out), where `litjudge run` wrote it under its name. A folder of that name here that holds
    no run does not hide the run of that name (it was refused as "not a run folder")."""
    if not given.strip():
        raise ConfigError(f"no run given (an empty argument): {run_folder_hint(by_name=True)}")
    path = Path(given)
    if (path / "manifest.json").is_file() or given.startswith(".") or "/" in given or os.sep in given:
        return path
    named = runs_output_dir() / given
    return named if named.is_dir() else path


def run_folder_hint(by_name: bool = False) -> str:
    """The folder runs are written to, as an example of a run folder to give (the runs folder here,
    not ./runs/out where LITJUDGE_RUNS_DIR moved it); `by_name`: where a run's name is taken too
    (`run_folder`)."""
    return (f"give the folder `litjudge run` wrote, e.g. {runs_output_dir() / 'NAME'}"
            + (", or the run's name" if by_name else ""))
