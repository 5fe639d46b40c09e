"""Sweeps: one run config with a matrix; every distinct verdict computed once.

    [matrix]                     # axes that need inference: every combination is a cell
    judge = ["smollm2-135m", "gemma3-270m"]
    "options.variant" = ["upstream", "default"]

    [sweep]
    rank_by = "overall.kappa"    # table.metric the cells are ranked by
    [sweep.post]                 # axes evaluated from stored verdicts: no model call
    "options.threshold" = [0.3, 0.5, 0.7]

Matrix axes: `judge`, `mode`, `limit`, `template`, `options.NAME` (a list of tables too: a rubric's
`options.questions`), `sampling.NAME`. Post axes: the protocol
options the protocol marks as aggregate-only (`Declaration.post_options`). Each cell is validated as a
full run config before anything runs, so a bad value fails at once naming its axis.
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from litjudge.judges import PROTOCOLS
from litjudge.judges.metrics.bootstrap import RESAMPLES, resamples_problem

from ..core.config import OTHER_KINDS, RunConfig, apply_overrides, check_engine_judges, config_path, judges_named, read_toml
from ..core.errors import ConfigError
from ..core.schema import build, refuse
from ..data.cards import dataset_card, with_data

MATRIX_TOP = ("judge", "mode", "limit", "template")
MATRIX_TABLES = ("options", "sampling")


@dataclass(frozen=True)
class Cell:
    id: str
    config: RunConfig
    values: dict[str, Any]          # the cell's matrix coordinates, axis -> value


@dataclass
class Sweep:
    name: str
    source: str
    base: RunConfig
    cells: list[Cell]
    post: dict[str, list] = field(default_factory=dict)     # "options.threshold" -> values
    rank_by: str = ""
    bootstrap: int = RESAMPLES

    @property
    def axes(self) -> list[str]:
        return list(self.cells[0].values) if self.cells else []

    def post_settings(self) -> list[dict[str, Any]]:
        """Every combination of the post axes ({} when there are none)."""
        keys = list(self.post)
        return [dict(zip(keys, combo)) for combo in itertools.product(*(self.post[k] for k in keys))] or [{}]


SLUG_CHARS = 40


def _slug(value: Any) -> str:
    """A matrix value as part of a cell's id (its rows in the tables, its runs in the store; users
    read it and may make folders of it, so never "." or ".."; "" is "default"). A path (a judge's
    folder) is named by its last part; tables (a rubric's questions) and long text (an inline template) by what they
    hold: question ids, or the text's start, plus a short hash of the whole value, so two wordings
    of one question are two cells."""
    if value == "":
        return "default"                   # an axis's own default (a template axis: the built-in prompt)
    if isinstance(value, str) and "/" in value and not any(c.isspace() for c in value):
        value = Path(value).name or value
    tables = isinstance(value, dict) or isinstance(value, list) and any(isinstance(v, dict) for v in value)
    if tables or isinstance(value, str) and (len(value) > SLUG_CHARS or "\n" in value):
        head = "-".join(str(v.get("id", "")) for v in value if isinstance(v, dict)) if isinstance(value, list) \
            else "" if isinstance(value, dict) else value[:24]
        text = f"{head}-{_digest(value)}"
    elif isinstance(value, list):
        text = "-".join(map(str, value)) or "all"
    else:
        text = value if isinstance(value, str) else repr(value)
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.") or "x"      # never "." or ".."


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:8]


def _axis_slugs(values: list[Any]) -> list[str]:
    """Each value of one matrix axis as part of a cell's id; values whose ids would coincide (two
    judges' folders of one name in different places) are told apart by a short hash of each."""
    slugs = [_slug(v) for v in values]
    return [f"{s}-{_digest(v)}" if slugs.count(s) > 1 else s for s, v in zip(slugs, values)]


def _set(table: dict, axis: str, value: Any) -> None:
    if "." in axis:
        head, tail = axis.split(".", 1)
        table.setdefault(head, {})[tail] = value
    else:
        table[axis] = value


@dataclass(frozen=True)
class SweepSpec:
    """`[sweep]`, read through the schema like every other table: the estimate the cells are ranked
    by (the protocol's pooled default when empty), the resamples of the ranking's intervals, and the
    aggregate-only options tried on every cell's stored verdicts (`[sweep.post]`)."""
    rank_by: str = ""               # "table.metric" (or "table.metric@col=value"); "": the protocol's pooled default
    bootstrap: int = RESAMPLES      # resamples of the ranking's intervals
    post: dict[str, Any] = field(default_factory=dict)   # aggregate-only option -> values tried on stored verdicts

    def __post_init__(self) -> None:
        refuse(resamples_problem(self.bootstrap), "bootstrap")


def _read_table(path: Path, table: dict[str, Any] | None, data: str | None) -> dict[str, Any]:
    """The config's table, with `--data` read in the layout of its one dataset."""
    where = str(path)
    table = copy.deepcopy(table) if table is not None else read_toml(path)
    if data and ("generate" in table or "tasks" in table):
        raise ConfigError("--data reads your file in the layout of the config's one dataset; this config "
                          + ("generates its items ([generate])" if "generate" in table else
                             "has several tasks ([[tasks]]), each with its own dataset") + ": give the data in the "
                          "config instead", where=where)
    if data:
        table["dataset"] = with_data(dataset_card(table.get("dataset", ""), where, str(table.get("protocol", ""))), data)
    return table


def _matrix(matrix: Any, overrides: dict[str, Any], where: str) -> dict[str, list]:
    """`[matrix]` checked axis by axis; a command-line override stands for an axis of one value, and
    is refused where the axis has several."""
    if not isinstance(matrix, dict):
        raise ConfigError("expected a table", where=where, parameter="matrix")
    for axis, values in matrix.items():
        head = axis.split(".", 1)[0]
        if not (axis in MATRIX_TOP or (head in MATRIX_TABLES and "." in axis)):
            raise ConfigError(f"not a matrix axis (use {', '.join(MATRIX_TOP)}, options.NAME or sampling.NAME)",
                              where=where, parameter=f"matrix.{axis}")
        if not isinstance(values, list) or not values:
            raise ConfigError("expected a non-empty list of values", where=where, parameter=f"matrix.{axis}")
        if overrides.get(axis) is not None and len(values) > 1:
            # it replaced the axis: `run sweep.toml --judge X` ran 2 of 8 cells, saying nothing
            raise ConfigError(f"--{axis} would replace the sweep's {axis} axis ({len(values)} values) and run only "
                              f"the cells with {overrides[axis]!r}: leave it out, or give the axis one value",
                              where=where, parameter=f"matrix.{axis}")
    return {axis: [overrides[axis]] if overrides.get(axis) is not None else values for axis, values in matrix.items()}


def _repeated(values: list[Any]) -> list[Any]:
    """The values of an axis listed again after their first time (compared by ==: 1 and 1.0 are one)."""
    return [v for i, v in enumerate(values) if v in values[:i]]


def _check_post(post: dict[str, Any], matrix: dict[str, list], protocol: Any, base: RunConfig, where: str) -> None:
    """Every post axis is an aggregate-only option of the protocol, with values, and not also a matrix axis."""
    for axis, values in post.items():
        if not axis.startswith("options.") or axis.removeprefix("options.") not in protocol.declared.post_options:
            raise ConfigError(f"not an aggregate-only option of protocol {base.protocol!r} "
                              f"(those are: {', '.join('options.' + o for o in protocol.declared.post_options) or 'none'})",
                              where=where, parameter=f"sweep.post.{axis}")
        if not isinstance(values, list) or not values:
            raise ConfigError("expected a non-empty list of values", where=where, parameter=f"sweep.post.{axis}")
        if twice := _repeated(values):
            raise ConfigError(f"{twice[0]!r} is listed twice (each value is one setting: list each once)", where=where,
                              parameter=f"sweep.post.{axis}")
        if axis in matrix:
            raise ConfigError("needs no inference: list it under [sweep.post], not [matrix]", where=where,
                              parameter=f"matrix.{axis}")


def _cells(table: dict[str, Any], matrix: dict[str, list], post: dict[str, Any], protocol: Any, where: str) -> list[Cell]:
    """One validated run config per combination of the matrix; its options checked now under every
    post setting, not after hours of inference."""
    cells = []
    axes = list(matrix)
    for axis in axes:
        if twice := _repeated(matrix[axis]):
            raise ConfigError(f"{twice[0]!r} is listed twice (each value is one cell: list each once)", where=where,
                              parameter=f"matrix.{axis}")
    slugs = [_axis_slugs(matrix[a]) for a in axes]
    for picks in itertools.product(*(range(len(matrix[a])) for a in axes)):
        combo = [matrix[a][i] for a, i in zip(axes, picks)]
        cell_table = copy.deepcopy(table)
        for axis, value in zip(axes, combo):
            _set(cell_table, axis, value)
        values = dict(zip(axes, combo))
        named = f"{where} (cell {values})" if values else where
        config = build(RunConfig, cell_table, named, source=where)
        checked = dataclasses.replace(config, source=named)          # its options' errors name the cell
        protocol.options(checked)
        for setting in itertools.product(*post.values()):
            opts = {**config.options, **{k.removeprefix("options."): v for k, v in zip(post, setting)}}
            protocol.options(dataclasses.replace(checked, options=opts))
        cells.append(Cell("_".join(slugs[k][i] for k, i in enumerate(picks)) or "all", config, values))
    ids = [c.id for c in cells]
    if len(set(ids)) != len(ids):
        raise ConfigError("two cells get the same id; make the matrix values distinct", where=where, parameter="matrix")
    return cells


def load_sweep(path: str | Path, data: str | None = None, table: dict[str, Any] | None = None,
               **overrides: Any) -> Sweep:
    """A run config (with or without a matrix) -> a validated sweep of cells; `data` is a file read
    in the config's dataset layout instead of the card's own (`--data`); `table`: the file, already read."""
    path = config_path(path)
    where = str(path)
    table = _read_table(path, table, data)
    raw_matrix, raw_spec = table.pop("matrix", {}), table.pop("sweep", {})
    named = judges_named(table)                   # before a --judge override replaces them
    apply_overrides(table, overrides)
    matrix = _matrix(raw_matrix, overrides, where)
    if not isinstance(raw_spec, dict):
        raise ConfigError("expected a table", where=where, parameter="sweep")
    spec = build(SweepSpec, raw_spec, where, prefix="sweep.")
    base = build(RunConfig, copy.deepcopy(table), where, elsewhere=OTHER_KINDS, source=where)
    check_engine_judges(base.engine, named + base.judges + [j for v in matrix.get("judge", [])
                                                            for j in judges_named({"judge": v})], where)
    if base.tasks and not base.generate.enabled:   # several tasks: planned task by task (not a sweep)
        if matrix or raw_spec:
            raise ConfigError("a config with [[tasks]] cannot also be a sweep ([matrix] / [sweep])", where=where,
                              parameter="matrix" if matrix else "sweep")
        return Sweep(base.name, where, base, [Cell(name, cfg, {"task": name}) for name, cfg in base.task_configs()])
    if base.generate.enabled:
        # (after --generate-only too: a plan of this config still generates; the items' own config plans)
        raise ConfigError("a run with [generate] judges items that exist only once it runs, so it cannot be planned "
                          "or swept ahead: run it (`--generate-only` stops at RUN/generated/items.jsonl, which a "
                          "config of its own plans and sweeps as dataset = {loader = \"rated_items_jsonl\", "
                          "path = ...})", where=where, parameter="generate")
    protocol = PROTOCOLS.get(base.protocol)()
    _check_post(spec.post, matrix, protocol, base, where)
    rank_by = spec.rank_by or protocol.declared.rank_by
    cells = _cells(table, matrix, spec.post, protocol, where)
    try:
        rank = protocol.parse_rank_by(rank_by)
        for cell in cells:
            try:
                protocol.check_rank(rank, protocol.options(cell.config))
            except ValueError as e:
                raise ValueError(f"{e} (cell {cell.values})" if len(cells) > 1 else str(e)) from None
    except ValueError as e:
        raise ConfigError(str(e), where=where, parameter="sweep.rank_by") from None
    return Sweep(base.name, where, base, cells, dict(spec.post), rank_by, spec.bootstrap)
