"""The three calls: `judge` (your data in memory, one protocol, one or more judges), `run` (a config,
as the console's `litjudge run` takes it) and `load` (a finished run folder). `judge` and `run`
go through the console's own `execute` (config -> plan -> store lookup -> backend -> store ->
tables): same store, same shared verdict cache, same content keys, so a repeated call generates
nothing, and one budget cap for all of a call's API judges.

Each call has its own Session (engine.core.session): `out=` and `cache=` reach the run as
arguments, never through the environment, so calls in two threads keep their own folders, caches
and API spend. A run folder keeps one config and one dataset (engine.app.run_folder): `judge()`
without a `name` gets a folder of its own per config and data; a named folder holding another run
is refused unless `overwrite=True`."""
from __future__ import annotations

import dataclasses
import inspect
import json
import logging
import os
import shutil
import sys
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from litjudge.engine.app.annotate.serve import annotate as serve_annotations
from litjudge.engine.app.execute import Asked, execute
from litjudge.engine.app.run_folder import DataRead, claim, claim_of, default_name, refuse_foreign
from litjudge.engine.core.config import RunConfig, load_config, read_toml, valid_name
from litjudge.engine.core.console import prepare_environment, quiet, shown
from litjudge.engine.core.errors import ConfigError, DataError, GrammarError, LitjudgeError, did_you_mean, fault
from litjudge.engine.core.manifest import config_dict
from litjudge.engine.core.run_lock import RunLock
from litjudge.engine.core.schema import python_value
from litjudge.engine.core.session import Session
from litjudge.engine.data.cards import dataset_card
from litjudge.engine.data.table import FIELDS, check_first
from litjudge.judges import PROTOCOLS

from . import rows as data_rows
from .python_terms import config_values, plain_table
from .result import LitjudgeWarning, Result, is_path

JUDGE_WHERE = "litjudge.judge()"
RUN_WHERE = "litjudge.run(dict)"
INPUT = Path("input") / "data.jsonl"            # where judge() keeps your rows, inside the run folder
OVERWRITE = "overwrite=True"


def _is_flag(value: Any) -> bool:
    return isinstance(value, bool)


# The arguments judge() and run() share, each with what it must be: checked before anything is read
# or written (overwrite="no" is truthy, and replaced a finished run; cache=123 became a file "./123").
ARGUMENTS = {
    "out": ("a folder's path (str or Path)", lambda v: v is None or is_path(v)),
    "cache": ("True, False or a verdict cache's path (str or Path)", lambda v: _is_flag(v) or is_path(v)),
    "progress": ("True or False", _is_flag),
    "overwrite": ("True or False", _is_flag),
    "rebuild_store": ("True or False", _is_flag),
    "name": ("a folder name of letters, digits, '-' and '_'", lambda v: v is None or (isinstance(v, str) and valid_name(v))),
}


def _checked_arguments(where: str, **given: Any) -> dict[str, Any]:
    """The call's shared arguments, numpy scalars as their Python values (np.True_), each checked:
    one ConfigError naming the first wrong one."""
    out = {}
    for name, value in given.items():
        value = python_value(value)
        need, ok = ARGUMENTS[name]
        if not ok(value):
            raise ConfigError(f"expected {need}, got {type(value).__name__} {value!r}", where=where, parameter=name,
                              value=value)
        out[name] = value
    return out


def judge(data: Any, *, protocol: str, judge: str | list[str] = "smollm2-135m",
          columns: Mapping[str, str] | None = None, values: Mapping[str, Mapping[str, str]] | None = None,
          options: Mapping[str, Any] | None = None, mode: str | None = None, name: str | None = None,
          out: str | Path | None = None, cache: bool | str | Path = True, progress: bool = True,
          overwrite: bool = False, category_order: Sequence[str] | None = None, rebuild_store: bool = False,
          **config: Any) -> Result:
    """Judge your rows with one protocol and one or more judges, and return the run's tables.

    The run folder is `out/name`: one folder per config and data, so a repeated call resumes and a
    call on other rows never answers with these.

    Args:
        data: a polars or pandas DataFrame, a Hugging Face `Dataset`, a list of dicts, or a file path
            (JSONL, CSV, Parquet).
        protocol: the protocol's name (`litjudge protocols` lists them): "pairwise", "rubric", ...
        judge: one judge or a list: a registry alias, a model folder, a hub id, `openai:MODEL`,
            `replay:FILE.jsonl` ...
        columns: the protocol's fields to your column names, as a config's `[dataset.columns]`
            (``{"text_a": "story_1", "label": "winner"}``).
        values: your values renamed per field (``{"label": {"model_a": "a"}}``).
        options: the protocol's options, as a config's `[options]`.
        mode: how a verdict is read: "label", "analyze", "distribution" or "reward".
        name: the run folder's name (default ``<protocol>-python-<8 hex>``).
        out: the folder run folders go in (default runs/out).
        cache: True for the shared verdict cache, False for none, or a cache folder's path.
        progress: show the progress bar.
        overwrite: replace a named folder holding another run's results (refused otherwise).
        rebuild_store: move the run folder's store aside (kept, renamed) and take every verdict
            again (from the shared cache where it holds them): for a store said to be corrupt.
        category_order: your categories, worst first (as a config's `[dataset] category_order`;
            without it they rank by name, with a warning).
        **config: anything else a run config says (``limit=10``, ``sampling=SamplingConfig(...)``,
            ``engine=EngineConfig(...)``, ``api={...}``); an option of the protocol may be a keyword
            too (``questions=[...]`` for ``protocol="rubric"``, as ``options={"questions": [...]}``).

    Returns:
        The finished run: its tables, verdicts and manifest.
    """
    args = _checked_arguments(JUDGE_WHERE, out=out, cache=cache, progress=progress, overwrite=overwrite, name=name,
                              rebuild_store=rebuild_store)
    out, cache, progress, overwrite, name = (args[k] for k in ("out", "cache", "progress", "overwrite", "name"))
    # first: ["pairwise"] was an unhashable TypeError, " pairwise" blamed on the `name` made of it
    if not isinstance(protocol, str):
        raise ConfigError(f"expected a protocol's name (one of {', '.join(PROTOCOLS.names())}), got "
                          f"{type(protocol).__name__} {protocol!r:.60}", where=JUDGE_WHERE, parameter="protocol")
    if protocol not in PROTOCOLS:
        PROTOCOLS.get(protocol)                           # unknown: one line with "did you mean"
    moved = _option_keywords(protocol, config)            # questions=[...]: an option of the rubric protocol
    if moved:
        given = dict(options or {})
        twice = sorted(set(given) & set(moved))
        if twice:
            raise ConfigError(f"{twice[0]!r} is given twice: as a keyword and in options=", where=JUDGE_WHERE,
                              parameter=f"options.{twice[0]}")
        options = {**given, **moved}
    session = Session.current(out=out, cache=cache, progress=progress)
    table = _judge_table(protocol, judge, columns, values, options, mode, name, config, category_order)
    in_memory = not isinstance(data, (str, os.PathLike))
    with _engine_session(session):
        data_path = session.runs_dir / INPUT if in_memory else _existing_file(data)
        cfg = load_config(JUDGE_WHERE, {**table, "dataset": {**table["dataset"], "path": str(data_path)}})
        try:                                          # every key checked before anything is read or written
            lines, first = _rows_of(data, table) if in_memory else (None, None)
            _check_columns(cfg, data_path, first)     # this call's own mapping, whatever a folder holds
        except DataError as exc:
            raise _your_rows(exc) if in_memory and exc.path == str(data_path) else exc from None
        read = data_rows.identity(lines) if lines is not None else DataRead.of(data_path)
        new = claim_of("run", config_dict(cfg), [read])
        run_dir = session.run_dir(name or default_name(f"{protocol}-python", new))
        path = run_dir / INPUT if in_memory else data_path
        final = {**table, "name": run_dir.name, "dataset": {**table["dataset"], "path": str(path)}}
        created = not run_dir.exists()
        refuse_foreign(run_dir, OVERWRITE)            # a folder of the user's: before the lock writes into it
        lock = RunLock(run_dir)                       # taken before the rows are written into the folder
        previous: bytes | None = None
        try:
            if lines is not None:
                data_rows.recover(run_dir, path)      # an earlier overwrite killed mid-run
            claim(run_dir, new, overwrite=overwrite, switch=OVERWRITE)
            if lines is not None:
                previous = data_rows.replace(lines, path)
            done = execute(final, JUDGE_WHERE, {}, session, Asked(overwrite=overwrite, switch=OVERWRITE, lock=lock,
                                                                   rebuild=args["rebuild_store"]))
            if lines is not None:
                data_rows.settle(run_dir, path, previous, read)
        except BaseException as exc:
            if lines is not None:
                # refused or stopped before its outputs were written (a bad label on row 6 of an
                # overwrite, a judge not found, Ctrl-C): the folder's tables were made from the rows
                # before, which it keeps, so `load()` reads them together
                data_rows.settle(run_dir, path, previous, read)
            if not isinstance(exc, LitjudgeError):
                raise
            lock.release()
            if created and not (run_dir / "store.sqlite").exists():
                shutil.rmtree(run_dir, ignore_errors=True)   # a refusal leaves no folder behind
            if isinstance(exc, DataError) and in_memory and exc.path == str(path):
                raise _your_rows(exc) from None
            raise
        finally:
            lock.release()
    return _finished(done.run_dir)


def _judge_table(protocol: str, judge: str | list[str], columns: Any, values: Any, options: Any, mode: str | None,
                 name: str | None, config: dict[str, Any], category_order: Any = None) -> dict[str, Any]:
    """judge()'s arguments as a run config's table (typed config objects as their tables), checked
    for what only judge() takes: the name, `dataset`, and the shapes of `columns` and `values`."""
    table: dict[str, Any] = {"name": name or f"{protocol}-python", "protocol": protocol, "judge": judge,
                             **{k: plain_table(v, k) for k, v in config.items()}}
    for key, value in (("mode", mode), ("options", options)):
        if value is not None:
            table[key] = plain_table(value, key)
    if "dataset" in table:
        raise ConfigError("give the rows as `data` (judge() builds the dataset from them)", where=JUDGE_WHERE,
                          parameter="dataset")
    if not valid_name(table["name"]):
        raise ConfigError(f"use letters, digits, '-' and '_' only, got {table['name']!r}", where=JUDGE_WHERE,
                          parameter="name", value=table["name"])
    if columns is not None and not (isinstance(columns, Mapping) and all(isinstance(v, str) for v in columns.values())):
        raise ConfigError(f'expected a dict of field -> your column name, e.g. columns={{"text_a": "story_1"}}, got '
                          f"{columns!r:.80}", where=JUDGE_WHERE, parameter="columns")
    if values is not None and not (isinstance(values, Mapping) and all(isinstance(v, Mapping) for v in values.values())):
        raise ConfigError('expected a dict of field -> {your value: litjudge\'s}, e.g. values={"label": {"first": "a"}}',
                          where=JUDGE_WHERE, parameter="values")
    # a list or a tuple only: a set's order changes from one process to the next (spearman_category
    # read -0.91 for +0.91), a dict's keys ignore its values, a generator was used up by this check
    if category_order is not None and (not isinstance(category_order, list | tuple) or not all(
            isinstance(c, str) for c in category_order)):
        raise ConfigError('expected a list of your category names, worst first, e.g. category_order=["low", "high"] '
                          f"(a set or a dict has no order to trust), got {type(category_order).__name__}",
                          where=JUDGE_WHERE, parameter="category_order")
    table["dataset"] = {"name": "python", "title": "your data (litjudge.judge)", "loader": "table", "root": "card",
                        **({"category_order": list(category_order)} if category_order is not None else {}),
                        "columns": {str(k): v for k, v in (columns or {}).items()},
                        "values": {str(k): {str(a): b for a, b in v.items()} for k, v in (values or {}).items()}}
    return table


def _rows_of(data: Any, table: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """Your rows as the file judge() writes, and the first row as the loader will read it."""
    rows = data_rows.records(data, table["dataset"]["columns"])
    lines = data_rows.jsonl(rows)
    return lines, json.loads(lines.split(b"\n", 1)[0])


def _check_columns(cfg: Any, location: Path, first: dict[str, Any] | None) -> None:
    """The columns and values maps against the protocol's fields and the data's first row, now:
    before a folder is chosen or written (the loader checks the same again as it reads)."""
    try:
        protocol = PROTOCOLS.get(cfg.protocol)()
        options = protocol.options(cfg)
        kind = protocol.reads(options)                # the options may choose (a rubric of pairs)
    except ConfigError:
        return                                        # an unknown protocol or bad options: said in their own words
    card = dataset_card(cfg.dataset, cfg.source, cfg.protocol)
    try:
        check_first(card, kind, location, first)
    except DataError as exc:
        # the columns name another kind's fields (item_id for a rubric of pairs): how the protocol reads that kind
        gives = tuple(k for k, fields in FIELDS.items() if k != kind and set(card.columns) <= set(fields))
        hint = protocol.reads_hint(options, gives) if gives else ""
        if not hint:
            raise
        raise DataError((*exc.parts, hint), path=exc.path, row=exc.row) from None


def _your_rows(exc: DataError) -> DataError:
    """A bad row of RUN/input/data.jsonl named as your data's row (line n is row n)."""
    return DataError((f"row {exc.row}: ", *exc.parts) if exc.row else exc.parts, path=data_rows.WHERE)


def _option_keywords(protocol: str, config: dict[str, Any]) -> dict[str, Any]:
    """Keywords that name an option of the protocol and no run setting, taken out of `config`."""
    if protocol not in PROTOCOLS:
        return {}
    settings = {f.name for f in dataclasses.fields(RunConfig)}
    names = {f.name for f in dataclasses.fields(PROTOCOLS.get(protocol).declared.options)} - settings
    return {k: config.pop(k) for k in list(config) if k in names}


def run(config: str | Path | Mapping[str, Any], *, out: str | Path | None = None, cache: bool | str | Path = True,
        progress: bool = True, overwrite: bool = False, rebuild_store: bool = False, **overrides: Any) -> Result:
    """Run a config as `litjudge run` does. A sweep ([matrix]) returns the sweep's ranking; a run of
    several tasks returns every task in `Result.tasks`.

    Args:
        config: a TOML file's path (or a committed config's name, e.g. "demo"), or the same table as a dict.
        out: the folder run folders go in (default runs/out).
        cache: True for the shared verdict cache, False for none, or a cache folder's path.
        progress: show the progress bar.
        overwrite: replace a folder holding another config's or other data's results (refused otherwise).
        rebuild_store: move the run folder's store aside (kept, renamed) and take every verdict again,
            as `litjudge run --rebuild-store`: for a store said to be corrupt.
        **overrides: keys replacing the config's (``limit=2``, ``judge="replay:gpt4"``).

    Returns:
        The finished run (a sweep's, an ensemble's, or a run of several tasks').
    """
    args = _checked_arguments("litjudge.run()", out=out, cache=cache, progress=progress, overwrite=overwrite,
                              rebuild_store=rebuild_store)
    out, cache, progress, overwrite = (args[k] for k in ("out", "cache", "progress", "overwrite"))
    if isinstance(config, Mapping):
        table, where = config_values(plain_table(config, "config"), "config", RUN_WHERE), RUN_WHERE
    elif is_path(config):
        table, where = read_toml(config), str(config)
    else:
        raise ConfigError(f"expected a config file's path (str or Path), a committed config's name or a dict, got "
                          f"{type(config).__name__} {config!r}", where="litjudge.run()", parameter="config", value=config)
    given = {k: plain_table(v, k) for k, v in overrides.items() if v is not None}
    session = Session.current(out=out, cache=cache, progress=progress)
    with _engine_session(session):
        done = execute(table, where, given, session, Asked(overwrite=overwrite, switch=OVERWRITE,
                                                           rebuild=args["rebuild_store"]))
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
    """A finished run folder as a Result.

    Args:
        run_dir: the folder a run, a run of several tasks, a sweep or an ensemble wrote.

    Returns:
        The run, as `judge()` and `run()` return it.
    """
    with _errors():
        result = Result.open(run_dir)               # the argument checked first
        data_rows.recover_when_free(result.run_dir, result.run_dir / INPUT)
        return result


def annotate(run: Result | str | Path, **options: Any) -> Any:
    """The annotation page of a finished run, served from this process (docs/annotate.md): returns
    the running app (`.url`, `.stop()`); options as `litjudge annotate`'s: budget, per_item, floor,
    seed, host, port (0, the default here: a free one), annotator (put in the URL) and lock_seconds
    (how long a story handed out stays its annotator's; `--lock`)."""
    known = [name for name in inspect.signature(serve_annotations).parameters if name != "run"]
    for name in options:
        if name not in known:
            raise ConfigError(f"annotate() has no option {name!r}{did_you_mean(name, known)}; its options: "
                              f"{', '.join(known)}")
    with _errors():
        return serve_annotations(run, **options)


def _existing_file(data: str | os.PathLike) -> Path:
    if not str(data).strip():         # "" is the working folder: "cannot be read as arrow: Directory ..."
        raise ConfigError("an empty path: give your data's file (or its rows)", where=JUDGE_WHERE, parameter="data")
    path = Path(data).expanduser().resolve()
    if not path.exists():
        raise DataError("no such file", path=str(path))
    return path


@contextmanager
def _errors() -> Iterator[None]:
    """Failures a user can cause, raised as LitjudgeError with the console's one-line message, in
    Python's terms (`columns=` and `values=`, not the config file's tables)."""
    try:
        yield
    except GrammarError as exc:
        raise ConfigError(str(exc)) from None
    except LitjudgeError as exc:
        said = exc.in_python()
        if said is exc:
            raise
        raise said from None
    except OSError as exc:
        raise fault(exc, exc.filename or "a file") from None


@contextmanager
def _engine_session(session: Session) -> Iterator[None]:
    """What `litjudge` sets around a command, for one call: third-party libraries' own settings
    (once per process), their log lines into a log file (the notebook shows litjudge's progress and
    the result, nothing else), and errors as LitjudgeError. litjudge's own settings are the
    session's: nothing here writes a LITJUDGE_* variable."""
    prepare_environment(verbose=False)
    log = session.cache_dir / "logs" / f"litjudge-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    with (_errors(), quiet(log, enabled=True, stream=None if _stderr_is_fd2() else sys.stderr),
          shown(logging.INFO if session.progress else logging.WARNING)):
        yield


def _stderr_is_fd2() -> bool:
    """Whether sys.stderr is the process's fd 2 (a terminal or a file) rather than a notebook's
    stream (ipykernel's, which also forwards what C code writes to fd 2 into the cell)."""
    try:
        return sys.stderr.fileno() == 2
    except (AttributeError, OSError, ValueError):
        return False
