"""`litjudge ensemble RUN...`: a cascade or a jury over the judges of finished runs, from their
stored tables (no model call): judges of different runs (a distribution-mode open judge and a
replayed one, say) meet on the same items. Writes runs/out/NAME/tables and prints them."""
from __future__ import annotations

from pathlib import Path

import polars as pl

from judges.ensembles import CascadeOptions, JuryOptions, cascade_tables, decision_frame, jury_tables

from ..core.errors import ConfigError
from ..core.paths import runs_output_dir
from .outputs import write_tables
from .report import load_run


def combined_frame(run_dirs: list[str]) -> pl.DataFrame:
    frames, protocols = [], set()
    for path in run_dirs:
        run = load_run(Path(path))
        protocol = run.manifest["config"].get("protocol", "")
        protocols.add(protocol)
        try:
            frames.append(decision_frame(protocol, run.tables))
        except ValueError as exc:
            raise ConfigError(str(exc), where=str(path)) from None
    if len(protocols) > 1:
        raise ConfigError(f"the runs are of different protocols ({', '.join(sorted(protocols))}): an ensemble "
                          "pools judges on the same items")
    frame = pl.concat(frames, how="diagonal_relaxed")
    dup = frame.group_by("judge").agg(pl.col("item").n_unique().alias("u"), pl.len().alias("n")).filter(
        pl.col("u") < pl.col("n"))
    if dup.height:
        raise ConfigError(f"judge {dup['judge'][0]!r} appears in more than one of the runs: name each judge once")
    return frame


def ensemble(run_dirs: list[str], name: str, cascade: list[str] | None, jury: list[str] | None, target: float,
             delta: float, calibration_fraction: float, seed: int) -> tuple[Path, dict[str, pl.DataFrame]]:
    frame = combined_frame(run_dirs)
    judges = sorted(set(frame["judge"].to_list()))
    tables: dict[str, pl.DataFrame] = {}
    try:
        if cascade is not None:
            unknown = [j for j in cascade if j not in judges]
            if unknown:
                raise ConfigError(f"--cascade names {unknown[0]!r}, not a judge of these runs (judges: {', '.join(judges)})")
            tables |= cascade_tables(frame, CascadeOptions(cascade, target, delta, calibration_fraction, seed))
        if jury is not None:
            tables |= jury_tables(frame, JuryOptions(jury, calibration_fraction, seed))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    out = runs_output_dir() / name
    out.mkdir(parents=True, exist_ok=True)
    write_tables(out, tables)
    return out, tables
