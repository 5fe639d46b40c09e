"""The three calls: `judge` (your data in memory, one protocol, one or more judges), `run` (a config,
as the console's `litjudge run` takes it) and `load` (a finished run folder). They drive the same
engine as the console (config -> plan -> store lookup -> backend -> store -> tables): same store,
same shared verdict cache, same content keys, so a repeated call generates nothing."""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl

from litjudge.engine.app.execute import execute
from litjudge.engine.app.outputs import write_file
from litjudge.engine.app.run import run as run_config
from litjudge.engine.core.config import load_config, read_toml, valid_name
from litjudge.engine.core.console import prepare_environment, quiet
from litjudge.engine.core.errors import ConfigError, DataError, GrammarError, LitjudgeError, fault
from litjudge.engine.core.paths import cache_dir, runs_output_dir
from litjudge.engine.core.run_lock import RunLock

from .result import LitjudgeWarning, Result

JUDGE_WHERE = "litjudge.judge()"
RUN_WHERE = "litjudge.run(dict)"
INPUT = Path("input") / "data.jsonl"            # where judge() keeps your rows, inside the run folder


def judge(data: Any, *, protocol: str, judge: str | list[str] = "smollm2-135m",
          columns: Mapping[str, str] | None = None, values: Mapping[str, Mapping[str, str]] | None = None,
          options: Mapping[str, Any] | None = None, mode: str | None = None, name: str | None = None,
          out: str | Path | None = None, cache: bool | str | Path = True, progress: bool = True,
          **config: Any) -> Result:
    """Judge your rows with one protocol and one or more judges, and return the run's tables.

    `data`: a polars or pandas DataFrame, a Hugging Face `Dataset`, a list of dicts, or a file path
    (JSONL, CSV, Parquet). `columns` maps the protocol's fields to your column names (as a config's
    `[dataset.columns]`: ``{"text_a": "story_1", "label": "winner"}``), `values` renames your values
    (``{"label": {"model_a": "a"}}``). Anything else a run config says goes in `**config`
    (``limit=10``, ``sampling={...}``, ``engine={...}``, ``api={...}``); an option of the protocol may be a
    keyword too (``questions=[...]`` for ``protocol="rubric"``, as ``options={"questions": [...]}``). The run folder is
    `out/name` (default runs/out/<protocol>-python); `cache`: True for the shared verdict cache,
    False for none, or a path."""
    moved = _option_keywords(protocol, config)            # questions=[...]: an option of the rubric protocol
    if moved:
        given = dict(options or {})
        twice = sorted(set(given) & set(moved))
        if twice:
            raise ConfigError(f"{twice[0]!r} is given twice: as a keyword and in options=", where=JUDGE_WHERE,
                              key=f"options.{twice[0]}")
        options = {**given, **moved}
    table: dict[str, Any] = {"name": name or f"{protocol}-python", "protocol": protocol, "judge": judge, **config}
    for key, value in (("mode", mode), ("options", options)):
        if value is not None:
            table[key] = dict(value) if isinstance(value, Mapping) else value
    if "dataset" in table:
        raise ConfigError("give the rows as `data` (judge() builds the dataset from them)", where=JUDGE_WHERE,
                          key="dataset")
    if not valid_name(table["name"]):
        raise ConfigError(f"use letters, digits, '-' and '_' only, got {table['name']!r}", where=JUDGE_WHERE, key="name")
    with _engine_session(cache, out):
        run_dir = runs_output_dir() / table["name"]
        in_memory = not isinstance(data, (str, os.PathLike))
        path = run_dir / INPUT if in_memory else _existing_file(data)
        table["dataset"] = {"name": "python", "title": "your data (litjudge.judge)", "loader": "table",
                            "path": str(path), "root": "card", "columns": dict(columns or {}),
                            "values": {k: dict(v) for k, v in (values or {}).items()}}
        cfg = load_config(JUDGE_WHERE, table)         # every key checked before anything is written
        rows = _records(data) if in_memory else None
        created = not run_dir.exists()
        lock = RunLock(run_dir)                       # taken before the rows are written into the folder
        try:
            if rows is not None:
                _write_rows(rows, path)
            outcome = run_config(cfg, progress=progress, run_dir=run_dir, lock=lock)
        except LitjudgeError as exc:
            lock.release()
            if created and not (run_dir / "store.sqlite").exists():
                shutil.rmtree(run_dir, ignore_errors=True)   # a refusal leaves no folder behind
            if isinstance(exc, DataError) and in_memory and exc.path == str(path):
                raise DataError(exc.message, path="data", row=exc.row) from None   # your rows, not our file
            raise
        finally:
            lock.release()
    return _finished(outcome.run_dir)


def _option_keywords(protocol: str, config: dict[str, Any]) -> dict[str, Any]:
    """Keywords that name an option of the protocol and no run setting, taken out of `config`."""
    import dataclasses

    from litjudge.engine.core.config import RunConfig
    from litjudge.judges import PROTOCOLS

    if protocol not in PROTOCOLS:
        return {}
    settings = {f.name for f in dataclasses.fields(RunConfig)}
    names = {f.name for f in dataclasses.fields(PROTOCOLS.get(protocol).declared.options)} - settings
    return {k: config.pop(k) for k in list(config) if k in names}


def run(config: str | Path | Mapping[str, Any], *, out: str | Path | None = None, cache: bool | str | Path = True,
        progress: bool = True, **overrides: Any) -> Result:
    """Run a config as `litjudge run` does: a TOML file's path (or a committed config's name, e.g.
    "demo"), or the same table as a dict. A sweep ([matrix]) returns the sweep's ranking; a run of
    several tasks returns every task in `Result.tasks`. `overrides` replace the config's keys
    (``limit=2``, ``judge="replay:gpt4"``); `out` is the folder run folders go in (default runs/out)."""
    if isinstance(config, Mapping):
        table, where = json.loads(json.dumps(dict(config), default=str)), RUN_WHERE
    else:
        table, where = read_toml(config), str(config)
    given = {k: v for k, v in overrides.items() if v is not None}
    with _engine_session(cache, out):
        done = execute(table, where, given, progress=progress)
    if done.kind == "ensemble" and done.ensemble is None:
        raise LitjudgeError(f"{where}: the ensemble was not built: a member run left "
                            f"{sum(m.unanswered for m in done.incomplete)} requests unanswered; run it "
                            "again to ask them")
    return _finished(done.run_dir)


def _finished(run_dir: Path | None) -> Result:
    """The Result of a run just written, with the console's end-of-run warnings as Python warnings
    (requests left unanswered, a judge whose every answer failed to parse)."""
    assert run_dir is not None
    result = Result.open(run_dir)
    for line in result.problems():
        warnings.warn(line, LitjudgeWarning, stacklevel=3)
    return result


def load(run_dir: str | Path) -> Result:
    """A finished run folder (a run, a run of several tasks, a sweep or an ensemble) as a Result."""
    with _errors():
        return Result.open(run_dir)


def _existing_file(data: str | os.PathLike) -> Path:
    path = Path(data).expanduser().resolve()
    if not path.exists():
        raise DataError("no such file", path=str(path))
    return path


def _write_rows(rows: list[dict[str, Any]], target: Path) -> None:
    """Rows in memory as RUN/input/data.jsonl, the file the `table` loader reads (rewritten only when
    they change), so the run folder holds what was judged and `litjudge reparse` can read it again."""
    lines = []
    for n, row in enumerate(rows):
        try:
            lines.append(json.dumps(row, ensure_ascii=False, default=str, allow_nan=False) + "\n")
        except ValueError:
            raise DataError(f"row {n} holds NaN or an infinite number: leave the value out (null) or give a "
                            "number", path="data") from None
    data = "".join(lines).encode()
    if target.exists() and target.read_bytes() == data:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    write_file(target, lambda tmp: tmp.write_bytes(data))


def _records(data: Any) -> list[dict[str, Any]]:
    """Rows as dicts, from polars, pandas, a Hugging Face Dataset or a list of dicts (missing
    values, pandas' NaN included, become null)."""
    if isinstance(data, pl.DataFrame):
        frame = data
    elif type(data).__module__.startswith("pandas"):
        frame = pl.from_pandas(data, nan_to_null=True)
    elif type(data).__module__.startswith("datasets"):
        frame = pl.from_arrow(data.data.table) if hasattr(data, "data") else pl.DataFrame(list(data))
    elif isinstance(data, list):
        if not all(isinstance(r, Mapping) for r in data):
            bad = next(i for i, r in enumerate(data) if not isinstance(r, Mapping))
            raise DataError(f"row {bad} is a {type(data[bad]).__name__}, not a dict of column -> value", path="data")
        rows = [dict(r) for r in data]
    else:
        raise DataError(f"a {type(data).__name__} is not data litjudge reads: give a polars or pandas DataFrame, "
                        "a Hugging Face Dataset, a list of dicts or a file path", path="data")
    if not isinstance(data, list):
        floats = [c for c, t in frame.schema.items() if t.is_float()]
        rows = frame.with_columns(pl.col(c).fill_nan(None) for c in floats).to_dicts()
    if not rows:
        raise DataError("no rows to judge (the data is empty)", path="data")
    return rows


@contextmanager
def _errors() -> Iterator[None]:
    """Failures a user can cause, raised as LitjudgeError with the console's one-line message."""
    try:
        yield
    except GrammarError as exc:
        raise ConfigError(str(exc)) from None
    except LitjudgeError:
        raise
    except OSError as exc:
        raise fault(exc, exc.filename or "a file") from None


@contextmanager
def _engine_session(cache: bool | str | Path, out: str | Path | None = None) -> Iterator[None]:
    """What `litjudge` sets around a command, for one call: the verdict cache and output folder
    asked for, third-party log lines into a log file (the notebook shows litjudge's progress and
    nothing else), and errors as LitjudgeError. The environment is restored afterwards."""
    saved = {k: os.environ.get(k) for k in ("LITJUDGE_VERDICT_CACHE", "LITJUDGE_RUNS_DIR")}
    if cache is False:
        os.environ["LITJUDGE_VERDICT_CACHE"] = "off"
    elif cache is not True:
        os.environ["LITJUDGE_VERDICT_CACHE"] = str(Path(cache).expanduser().resolve())
    if out is not None:
        os.environ["LITJUDGE_RUNS_DIR"] = str(Path(out).expanduser().resolve())
    prepare_environment(verbose=False)
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")     # in-process engine, as the console
    log = cache_dir() / "logs" / f"litjudge-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    try:
        with _errors(), quiet(log, enabled=_stderr_is_fd2()):
            yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _stderr_is_fd2() -> bool:
    """Whether sys.stderr is the process's fd 2 (a terminal or a file) rather than a notebook's
    stream: only then is fd 2 moved to the log (in a notebook, fd 2 is the kernel's own log)."""
    try:
        return sys.stderr.fileno() == 2
    except (AttributeError, OSError, ValueError):
        return False
