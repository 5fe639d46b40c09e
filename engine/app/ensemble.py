"""Cascades and juries over the judges of several runs, from their stored tables (no model call):
judges of different runs (a distribution-mode open judge and a replayed one, say) meet on the same
items. `litjudge ensemble RUN...` over finished runs, or `litjudge run ENSEMBLE.toml`, a config
naming its member runs (run first, resuming) and the [cascade] / [jury] to compute:

    name = "cascade-ttcw"
    [[runs]]
    config = "ttcw-binary.toml"        # relative to this file, or a committed config's name
    mode = "distribution"              # any run-config key overrides the member's
    name = "ttcw-binary-p"
    [[runs]]
    config = "ttcw-replay.toml"
    [cascade]
    judges = ["smollm2-135m", "replay:claude3-opus"]
    target = 0.8
    [jury]                             # judges = [] (default): every judge of the runs

Writes runs/out/NAME/ (tables and a manifest, so `litjudge report` renders its panels)."""
from __future__ import annotations

import dataclasses
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from litjudge.judges.ensembles import (
    POOLED,
    CascadeOptions,
    JuryOptions,
    cascade_tables,
    decision_frame,
    decision_item,
    jury_tables,
)

from ..core.config import config_path, load_config, read_toml, valid_name
from ..core.console import printable, say
from ..core.errors import ConfigError
from ..core.manifest import git_commit, litjudge_version, machine
from ..core.schema import build, check_field
from ..core.session import Session
from ..core.store import Store
from .manifest import RunManifest
from .outputs import read_table, write_tables, write_text
from .results_file import ensemble_results, write_results
from .run import run
from .run_folder import recorded_claim, refuse_foreign
from .runs import load_run


def verdict_tokens(run_dir: Path, protocol: str) -> pl.DataFrame:
    """(judge, item, tokens): each stored verdict's prompt + output tokens, keyed as the decision
    frame keys items, so a cascade can say what share of the work each level did."""
    verdicts = read_table(run_dir / "verdicts.parquet")
    store = Store.open(run_dir / "store.sqlite", create=False)
    try:
        rows = [r for batch in store.token_counts() for r in batch]
    finally:
        store.close()
    counts = pl.DataFrame(rows, schema={"key": pl.Utf8, "p": pl.Int64, "o": pl.Int64}, orient="row").select(
        "key", (pl.col("p").fill_null(0) + pl.col("o").fill_null(0)).alias("tokens"))
    return (verdicts.select("judge", "key", decision_item(protocol)).join(counts, on="key", how="left")
            .select("judge", "item", "tokens"))


def combined_frame(run_dirs: list[str]) -> pl.DataFrame:
    frames, protocols = [], set()
    for path in run_dirs:
        run = load_run(Path(path))
        protocol = run.manifest.protocol
        protocols.add(protocol)
        try:
            frame = decision_frame(protocol, run.tables)
        except ValueError as exc:
            raise ConfigError(str(exc), where=str(path)) from None
        frames.append(frame.drop("tokens").join(verdict_tokens(Path(path), protocol), on=["judge", "item"], how="left"))
    if len(protocols) > 1:
        raise ConfigError(f"the runs are of different protocols ({', '.join(sorted(protocols))}): an ensemble "
                          "pools judges on the same items")
    seen: dict[str, str] = {}
    for path, part in zip(run_dirs, frames, strict=True):
        for judge in part["judge"].unique(maintain_order=True):
            if seen.setdefault(judge, path) != path:      # a replay judge is named by its file's name: two
                raise ConfigError(f"judge {judge!r} is in two of the runs ({seen[judge]} and {path}): an ensemble "
                                  "pools different judges; name each judge once")   # recordings, one name
    frame = pl.concat(frames, how="diagonal_relaxed")
    dup = frame.group_by("judge").agg(pl.col("item").n_unique().alias("u"), pl.len().alias("n")).filter(
        pl.col("u") < pl.col("n"))
    if dup.height:
        raise ConfigError(f"judge {dup['judge'][0]!r} has one decision twice in its run's tables: the protocol's "
                          "decision_key does not name one decision (a plugin's declaration?)")
    differ = frame.group_by("item", maintain_order=True).agg(pl.col("truth").n_unique().alias("t"),
                                                             pl.col("cluster").n_unique().alias("c"))
    differ = differ.filter((pl.col("t") > 1) | (pl.col("c") > 1))
    if differ.height and len(run_dirs) > 1:
        raise ConfigError(f"the runs give item {differ['item'][0]!r} different human labels or stories ({differ.height} "
                          "item(s) in all): an ensemble pools judges of the same data; are these runs over different "
                          "datasets with the same ids?")
    return frame


def check_ensemble(name: str, cascade: list[str] | None, jury: list[str] | None, target: float, delta: float,
                   calibration_fraction: float, seed: int, where: str = "") -> None:
    """Every setting of an ensemble checked before anything runs or is written."""
    if not valid_name(name):
        raise ConfigError(f"an ensemble's name is one folder under the outputs: letters, digits, '-' and '_' only, "
                          f"got {name!r}", where=where or None, parameter="name" if where else None)
    if cascade is None and jury is None:
        raise ConfigError("an ensemble needs a cascade (--cascade JUDGE,JUDGE... / [cascade]) and/or a jury "
                          "(--jury [JUDGE,...] / [jury])", where=where or None)
    try:
        if cascade is not None:
            CascadeOptions(cascade, target, delta, calibration_fraction, seed)
        if jury is not None:
            JuryOptions(jury, calibration_fraction, seed)
    except ValueError as exc:
        raise ConfigError(str(exc), where=where or None) from None


def _ensemble_folder(out: Path) -> None:
    """An ensemble is written into a new folder or an earlier ensemble's, never a folder of the
    user's (its results.json and tables/ were overwritten) nor a run's (its manifest became an
    ensemble's): one line naming the folder."""
    refuse_foreign(out, "--name")
    old = recorded_claim(out)
    if (out / "store.sqlite").exists() or (old is not None and old.kind != "ensemble"):
        raise ConfigError(f"holds a {old.kind if old else 'run'}'s results, not an ensemble's: give the ensemble "
                          "another name (--name, or name in its config)", where=str(out))


def _say_what_it_replaces(out: Path, runs: list[str], config: dict[str, Any]) -> None:
    """A warning when the folder holds an ensemble of other runs or other settings, which this one
    replaces (the default --name is one folder for every ensemble: a second over other runs took
    the first's place unsaid)."""
    try:
        old = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if not isinstance(old, dict) or (old.get("runs"), old.get("config")) == (runs, config):
        return
    what = "other runs" if old.get("runs") != runs else "other settings"
    say(f"litjudge: warning: replacing the ensemble of {what} in {printable(str(out))}; give --name (or name in "
        "its config) to keep both", logging.WARNING)


def _say_what_the_jury_left_out(jury: pl.DataFrame | None) -> None:
    """A warning when the jury reads fewer items than are labelled: those every member answered,
    each member's count said (a member answered in one order only halved every member's items)."""
    if jury is None or not jury.height or jury["shared_items"][0] == jury["items"][0]:
        return
    members = jury.filter(pl.col("member").str.starts_with("judge: "))
    counts = ", ".join(f"{m.removeprefix('judge: ')} {n}" for m, n in zip(members["member"], members["answered"]))
    say(f"litjudge: warning: the jury reads the {jury['shared_items'][0]} items every member answered, of "
        f"{jury['items'][0]} labelled (answered: {counts}); every member's row is scored on those", logging.WARNING)


def _say_a_jury_of_one(jury: pl.DataFrame | None) -> None:
    """A jury of one judge pools nothing: its majority vote and average are the judge's own rows
    (three equal rows, read as three poolings agreeing), its stacking the judge recalibrated."""
    if jury is None or jury.filter(pl.col("member").str.starts_with("judge: ")).height != 1:
        return
    say("litjudge: warning: the jury has one judge: its majority vote and average are that judge, and its "
        "stacking is the judge recalibrated on the calibration split (name two or more judges to pool)",
        logging.WARNING)


def ensemble(run_dirs: list[str], name: str, cascade: list[str] | None, jury: list[str] | None, target: float,
             delta: float, calibration_fraction: float, seed: int,
             session: Session | None = None) -> tuple[Path, dict[str, pl.DataFrame]]:
    check_ensemble(name, cascade, jury, target, delta, calibration_fraction, seed)
    frame = combined_frame(run_dirs)
    judges = sorted(set(frame["judge"].to_list()))
    tables: dict[str, pl.DataFrame] = {}
    for option, named in (("--cascade", cascade), ("--jury", jury)):
        unknown = [j for j in named or [] if j not in judges]
        if unknown:
            raise ConfigError(f"{option} names {unknown[0]!r}, not a judge of these runs (judges: {', '.join(judges)})")
    try:
        if cascade is not None:
            tables |= cascade_tables(frame, CascadeOptions(cascade, target, delta, calibration_fraction, seed))
        if jury is not None:
            tables |= jury_tables(frame, JuryOptions(jury, calibration_fraction, seed))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    _say_what_the_jury_left_out(tables.get("jury"))
    _say_a_jury_of_one(tables.get("jury"))
    out = (session or Session.current()).run_dir(name)
    _ensemble_folder(out)
    runs = [str(Path(d).resolve()) for d in run_dirs]
    config = {"protocol": "ensemble", "mode": "-", "cascade": cascade, "jury": jury, "target": target,
              "delta": delta, "calibration_fraction": calibration_fraction, "seed": seed}
    _say_what_it_replaces(out, runs, config)
    out.mkdir(parents=True, exist_ok=True)
    write_tables(out, tables)
    manifest = {"kind": "ensemble", "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "litjudge": litjudge_version(),
                "git_commit": git_commit(), "machine": machine(), "runs": runs, "judges": [], "config": config,
                "dataset": {"card": "-"}, "verdicts": {"rows": int(frame.height), "unparsed": 0},
                "tables": sorted(tables)}                       # a table deleted since is named when it is read
    write_text(out / "manifest.json", json.dumps(manifest, indent=2, default=str))
    write_results(out, ensemble_results(name, tables, manifest))
    return out, tables


@dataclass(frozen=True)
class EnsembleConfig:
    """An ensemble config's top level, read through the schema as run configs are: its members
    (`[[runs]]`, each a `config` with overrides) and the `[cascade]` and `[jury]` it builds."""
    runs: list[dict[str, Any]]       # the member runs: [[runs]] tables, each a `config` plus overrides
    name: str = ""                   # the output folder's name; "": the file's name
    cascade: CascadeOptions | None = None   # a cascade with an agreement guarantee over the judges named
    jury: JuryOptions | None = None         # a calibrated jury pooling the judges named
    source: str = ""

    def __post_init__(self) -> None:
        check_field(bool(self.runs) and all("config" in r for r in self.runs if isinstance(r, dict))
                    and all(isinstance(r, dict) for r in self.runs), "runs",
                    "runs must be [[runs]] tables, each with a `config`")

    def settings(self) -> tuple[list[str] | None, list[str] | None, float, float, float, int]:
        """(cascade judges, jury judges, target, delta, calibration_fraction, seed) as `ensemble` takes them:
        one split serves both (the jury's own was dropped without a word where they differed)."""
        c, j = self.cascade, self.jury
        for key in ("calibration_fraction", "seed"):
            if c and j and getattr(c, key) != getattr(j, key):
                raise ConfigError(f"[cascade] {key} = {getattr(c, key)} and [jury] {key} = {getattr(j, key)} differ "
                                  "(a table without it takes the default): the cascade and the jury share one "
                                  f"calibration split; give the same {key} in both", where=self.source or None,
                                  parameter=f"jury.{key}")
        first = c or j
        return (c.judges if c else None, j.judges if j else None, c.target if c else 0.8, c.delta if c else 0.1,
                first.calibration_fraction if first else 0.5, first.seed if first else 0)


def load_ensemble(path: str | Path, table: dict[str, Any] | None = None) -> EnsembleConfig:
    """An ensemble config, checked whole before any member runs: its own keys and values (the
    [cascade] and [jury] tables through the same schema builder as run configs), and each member's
    config with its overrides (an error names the ensemble file and `runs[k]`)."""
    where = str(config_path(path))
    table = table if table is not None else read_toml(path)
    cfg: EnsembleConfig = build(EnsembleConfig, table, where, source=where)
    if not cfg.name:
        cfg = dataclasses.replace(cfg, name=Path(where).stem)
    runs = cfg.runs
    check_ensemble(cfg.name, *cfg.settings(), where=where)
    members = [member_config(cfg, member, None, where=f"{where} runs[{k}]") for k, member in enumerate(runs)]
    judges = [j for member in members for j in member.judges]
    for k, member in enumerate(members):          # what `combined_frame` refuses, said before any member runs
        if member.protocol not in POOLED:
            raise ConfigError(f"a {member.protocol or 'multi-task'!r} run: juries and cascades take the binary "
                              f"decisions of a {' or '.join(POOLED)} run", where=f"{where} runs[{k}]", parameter="protocol")
    if len({m.protocol for m in members}) > 1:
        raise ConfigError(f"the runs are of different protocols ({', '.join(sorted({m.protocol or '' for m in members}))}"
                          "): an ensemble pools judges on the same items", where=where, parameter="runs")
    for section, options in (("cascade", cfg.cascade), ("jury", cfg.jury)):
        unknown = [j for j in (options.judges if options else []) if j not in judges]
        if unknown:                                # said before any member runs, not after
            raise ConfigError(f"names {unknown[0]!r}, not a judge of the member runs (judges: {', '.join(judges)})",
                              where=where, parameter=f"{section}.judges")
    return cfg


def member_config(cfg: EnsembleConfig, member: dict[str, Any], limit: int | None, where: str):
    """A member run's config with the ensemble's overrides; an override it refuses names the
    ensemble file and the member, not the member's own file."""
    base = Path(cfg.source).parent
    overrides = {k: v for k, v in member.items() if k != "config"}
    if limit is not None:
        overrides["limit"] = limit
    path = base / member["config"] if (base / member["config"]).exists() else member["config"]
    load_config(path)                             # the member file alone: its own errors name it
    try:
        return load_config(path, **overrides)
    except ConfigError as exc:                    # then an error is the override's
        if exc.where == str(config_path(path)) and (exc.parameter or "").split(".")[0] in overrides:
            raise ConfigError(exc.parts, where=where, parameter=exc.parameter, value=exc.value) from None
        raise


def run_ensemble(cfg: EnsembleConfig, limit: int | None = None,
                 session: Session | None = None) -> tuple[Path | None, dict, list[RunManifest]]:
    """Each member run (resuming: stored verdicts are not generated again), then the ensemble. A
    member that left requests unanswered (an API outage) is incomplete: the ensemble is not built
    from part of it (nor its outage blamed on the data); its manifest comes back, and the command
    exits 3 as a run does: the same command again asks the missing requests and builds it."""
    configs = [member_config(cfg, m, limit, where=f"{cfg.source} runs[{k}]") for k, m in enumerate(cfg.runs)]
    session = session or Session.current()
    outcomes = [run(config, progress=session.progress, session=session) for config in configs]
    unanswered = [o.manifest for o in outcomes if o.manifest.unanswered]
    if unanswered:
        return None, {}, unanswered
    out, tables = ensemble([str(o.run_dir) for o in outcomes], cfg.name, *cfg.settings(), session=session)
    return out, tables, []
