"""Sweeps: one run config with a matrix; every distinct verdict computed once.

    [matrix]                     # axes that need inference: every combination is a cell
    judge = ["smollm2-135m", "gemma3-270m"]
    "options.variant" = ["upstream", "default"]

    [sweep]
    rank_by = "overall.kappa"    # table.metric the cells are ranked by
    [sweep.post]                 # axes evaluated from stored verdicts: no model call
    "options.threshold" = [0.3, 0.5, 0.7]

Matrix axes: `judge`, `mode`, `limit`, `options.NAME`, `sampling.NAME`. Post axes: the protocol
options the protocol marks as aggregate-only (`Protocol.post_options`). Each cell is validated as a
full run config before anything runs, so a bad value fails at once naming its axis.
"""
from __future__ import annotations

import copy
import dataclasses
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judges import PROTOCOLS

from ..core.config import RunConfig, apply_overrides, check_engine_judges, config_path, judges_named, read_toml
from ..core.errors import ConfigError
from ..core.schema import build
from ..data.cards import dataset_card, with_data

MATRIX_TOP = ("judge", "mode", "limit")
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
    bootstrap: int = 1000

    @property
    def axes(self) -> list[str]:
        return list(self.cells[0].values) if self.cells else []

    def post_settings(self) -> list[dict[str, Any]]:
        """Every combination of the post axes ({} when there are none)."""
        keys = list(self.post)
        return [dict(zip(keys, combo)) for combo in itertools.product(*(self.post[k] for k in keys))] or [{}]


def _slug(value: Any) -> str:
    if isinstance(value, list):
        text = "-".join(map(str, value)) or "all"
    else:
        text = value if isinstance(value, str) else repr(value)
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(text).name if "/" in text else text).strip("-") or "x"


def _set(table: dict, axis: str, value: Any) -> None:
    if "." in axis:
        head, tail = axis.split(".", 1)
        table.setdefault(head, {})[tail] = value
    else:
        table[axis] = value


def load_sweep(path: str | Path, data: str | None = None, table: dict[str, Any] | None = None,
               **overrides: Any) -> Sweep:
    """A run config (with or without a matrix) -> a validated sweep of cells; `data` is a file read
    in the config's dataset layout instead of the card's own (`--data`); `table`: the file, already read."""
    path = config_path(path)
    where = str(path)
    table = copy.deepcopy(table) if table is not None else read_toml(path)
    if data and ("generate" in table or "tasks" in table):
        raise ConfigError("--data reads your file in the layout of the config's one dataset; this config "
                          + ("generates its items ([generate])" if "generate" in table else
                             "has several tasks ([[tasks]]), each with its own dataset") + ": give the data in the "
                          "config instead", where=where)
    if data:
        table["dataset"] = with_data(dataset_card(table.get("dataset", ""), where, str(table.get("protocol", ""))), data)
    matrix = table.pop("matrix", {})
    spec = table.pop("sweep", {})
    named = judges_named(table)                   # before a --judge override replaces them
    apply_overrides(table, overrides)
    if not isinstance(matrix, dict) or not isinstance(spec, dict):
        raise ConfigError("expected a table", where=where, key="matrix" if not isinstance(matrix, dict) else "sweep")
    for axis, values in matrix.items():
        head = axis.split(".", 1)[0]
        if not (axis in MATRIX_TOP or (head in MATRIX_TABLES and "." in axis)):
            raise ConfigError(f"not a matrix axis (use {', '.join(MATRIX_TOP)}, options.NAME or sampling.NAME)",
                              where=where, key=f"matrix.{axis}")
        if not isinstance(values, list) or not values:
            raise ConfigError("expected a non-empty list of values", where=where, key=f"matrix.{axis}")
        if axis in overrides and overrides[axis] is not None:
            matrix[axis] = [overrides[axis]]          # a command-line override pins the axis
    unknown = [k for k in spec if k not in ("rank_by", "bootstrap", "post")]
    if unknown:
        raise ConfigError("unknown key (known: rank_by, bootstrap, post)", where=where, key=f"sweep.{unknown[0]}")
    base = build(RunConfig, copy.deepcopy(table), where, source=where)
    check_engine_judges(base.engine, named + base.judges + [j for v in matrix.get("judge", [])
                                                            for j in judges_named({"judge": v})], where)
    if base.tasks and not base.generate.enabled:   # several tasks: planned task by task (not a sweep)
        if matrix or spec:
            raise ConfigError("a config with [[tasks]] cannot also be a sweep ([matrix] / [sweep])", where=where,
                              key="matrix" if matrix else "sweep")
        return Sweep(base.name, where, base, [Cell(name, cfg, {"task": name}) for name, cfg in base.task_configs()])
    if base.generate.enabled:
        raise ConfigError("a run with [generate] judges items that exist only once it runs, so it cannot be planned "
                          "or swept ahead: `litjudge run CONFIG --generate-only` writes them first", where=where,
                          key="generate")
    protocol = PROTOCOLS.get(base.protocol)()
    post = spec.get("post", {})
    for axis, values in post.items():
        name = axis.removeprefix("options.")
        if not axis.startswith("options.") or name not in protocol.post_options:
            raise ConfigError(f"not an aggregate-only option of protocol {base.protocol!r} "
                              f"(those are: {', '.join('options.' + o for o in protocol.post_options) or 'none'})",
                              where=where, key=f"sweep.post.{axis}")
        if not isinstance(values, list) or not values:
            raise ConfigError("expected a non-empty list of values", where=where, key=f"sweep.post.{axis}")
        if axis in matrix:
            raise ConfigError("needs no inference: list it under [sweep.post], not [matrix]", where=where,
                              key=f"matrix.{axis}")
    rank_by = str(spec.get("rank_by", protocol.default_rank_by))
    try:
        protocol.parse_rank_by(rank_by)
    except ValueError as e:
        raise ConfigError(str(e), where=where, key="sweep.rank_by") from None
    cells = []
    axes = list(matrix)
    for combo in itertools.product(*(matrix[a] for a in axes)):
        cell_table = copy.deepcopy(table)
        for axis, value in zip(axes, combo):
            _set(cell_table, axis, value)
        values = dict(zip(axes, combo))
        config = build(RunConfig, cell_table, f"{where} (cell {values})" if values else where, source=where)
        protocol.options(config)                   # options are checked now, not after hours of inference
        for setting in itertools.product(*post.values()):
            opts = dict(config.options)
            opts.update({k.removeprefix("options."): v for k, v in zip(post, setting)})
            protocol.options(dataclasses.replace(config, options=opts))
        cell_id = "_".join(_slug(v) for v in combo) or "all"
        cells.append(Cell(cell_id, config, values))
    ids = [c.id for c in cells]
    if len(set(ids)) != len(ids):
        raise ConfigError("two cells get the same id; make the matrix values distinct", where=where, key="matrix")
    return Sweep(base.name, where, base, cells, post, rank_by, int(spec.get("bootstrap", 1000)))
