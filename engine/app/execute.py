"""What running a config means, once: a sweep ([matrix] / [sweep]) runs its cells, an ensemble its
member runs and then the ensemble, anything else is a run (with its [[tasks]] and [generate]
stage). `litjudge run` (the console), `litjudge.run` and `litjudge.judge` (Python) all call
`execute` and differ only in how they build the config and show the outcome."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.config import RunConfig, config_kind, load_config
from ..core.errors import ConfigError
from ..core.run_lock import RunLock
from ..core.session import Session
from ..data.cards import dataset_card, with_data
from .ensemble import load_ensemble, run_ensemble
from .manifest import RunManifest
from .run import RunOutcome, run
from .sweep import Sweep, load_sweep
from .sweep_run import SweepOutcome, run_sweep


@dataclass(frozen=True)
class Executed:
    """The outcome of one config: exactly one of `run`, `sweep`, `ensemble` is set; an ensemble that
    could not be built (a member left requests unanswered) has `incomplete` instead."""

    kind: str                                          # "run", "sweep" or "ensemble"
    run: RunOutcome | None = None
    sweep: SweepOutcome | None = None
    swept: Sweep | None = None                         # the sweep's cells and settings (for printing)
    ensemble: tuple[Path, dict] | None = None          # (folder, tables)
    incomplete: tuple[RunManifest, ...] = ()           # the member manifests that left requests unanswered

    @property
    def run_dir(self) -> Path | None:
        if self.run is not None:
            return self.run.run_dir
        if self.sweep is not None:
            return self.sweep.run_dir
        return self.ensemble[0] if self.ensemble else None


@dataclass(frozen=True)
class Asked:
    """How to run a config beyond the config itself: `data`, a file read in the config's dataset
    layout; `generate_only`, the [generate] stage alone; `rebuild`, move the run's store aside first
    (every verdict taken again); `overwrite`, replace a folder's run of another config or data, a
    choice the refusal names as `switch`; `lock`, the run folder's RunLock when the caller took it
    first (litjudge.judge writes your rows into the folder before the run), released by the run."""

    data: str | None = None
    generate_only: bool = False
    rebuild: bool = False
    overwrite: bool = False
    switch: str = "--overwrite"
    lock: RunLock | None = None


def execute(table: dict[str, Any], where: str, overrides: dict[str, Any], session: Session,
            asked: Asked = Asked()) -> Executed:
    """Run the config `table` (read from `where`) with `overrides` (None: not given), as its kind
    says, in `session` (where run folders and the verdict cache are, progress). Every API judge of
    it counts against one budget (`[api] max_cost_usd`, `max_tokens_total`): the session's spend."""
    data, generate_only, progress = asked.data, asked.generate_only, session.progress
    kind = config_kind(table)
    if kind in ("sweep", "ensemble") and generate_only:
        if "generate" not in table:
            raise ConfigError(f"--generate-only runs a [generate] stage, and this {kind} config has none", where=where)
        table = {k: v for k, v in table.items() if k not in ("matrix", "sweep")}   # the stage alone, not swept
        kind = "run"
    if kind == "sweep":
        swept = load_sweep(where, data=data, table=table, **overrides)
        return Executed("sweep", sweep=run_sweep(swept, session, overwrite=asked.overwrite, switch=asked.switch,
                                                 rebuild=asked.rebuild), swept=swept)
    if kind == "ensemble":
        given = [flag for flag, value in (("--judge", overrides.get("judge")), ("--mode", overrides.get("mode")),
                                          ("--data", data), ("--missing", overrides.get("missing")))
                 if value is not None]
        if given:
            raise ConfigError(f"{given[0]} does not apply to an ensemble config: it pools its member runs' judges; "
                              "set it in a member ([[runs]] judge = ..., mode = ...) instead", where=where)
        out, tables, unanswered = run_ensemble(load_ensemble(where, table), overrides.get("limit"), session)
        if out is None:
            return Executed("ensemble", incomplete=tuple(unanswered))
        return Executed("ensemble", ensemble=(out, tables))
    config = load_config(where, table, **overrides)
    if generate_only and not config.generate.enabled:
        raise ConfigError("--generate-only runs a [generate] stage, and this config has none", where=config.source)
    if data:
        if config.generate.enabled or config.tasks:
            raise ConfigError("--data reads your file in the layout of the config's one dataset; this config "
                              + ("generates its items ([generate])" if config.generate.enabled
                                 else "has several tasks ([[tasks]]), each with its own dataset")
                              + ": give the data in the config instead", where=config.source)
        config = over_data(config, data)
    # what the command line changed in the run: where the config's folder holds the run without it,
    # this run gets a folder of its own beside it (`run ttcw-binary.toml --judge gemma3-270m` keeps both)
    console = asked.switch.startswith("--")
    derive = ", ".join(
        f"--{key}" if console else f"{key}=" for key, value in (("judge", overrides.get("judge")),
                                                               ("mode", overrides.get("mode")),
                                                               ("missing", overrides.get("missing")), ("data", data))
        if value is not None)
    return Executed("run", run=run(config, progress=progress, generate_only=generate_only, session=session,
                                   overwrite=asked.overwrite, switch=asked.switch, derive=derive, lock=asked.lock,
                                   rebuild=asked.rebuild))


def over_data(config: RunConfig, data: str) -> RunConfig:
    """The config reading `data` (`--data`: a file or folder in the layout of its one dataset)."""
    return dataclasses.replace(config, dataset=with_data(dataset_card(config.dataset, config.source, config.protocol),
                                                         data))
