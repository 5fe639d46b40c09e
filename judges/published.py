"""The seed papers' published numbers (published.toml), and a run's own beside them: the run's
value, its 95% CI (from the run's tables: `METRIC_low`/`METRIC_high`, or `ci_low`/`ci_high`), and
whether the paper's number falls inside. Nothing is recomputed here: the tables are the run's."""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from litjudge.engine.core.errors import ConfigError

PUBLISHED_FILE = Path(__file__).with_name("published.toml")
RESERVED = ("judge", "run_judges", "table", "where", "config", "note", "n")


@dataclass(frozen=True)
class PublishedRow:
    judge: str                          # as the paper names it
    run_judges: tuple[str, ...]         # the run judge names that stand for it
    values: dict[str, float]            # metric -> published value
    table: str
    where: dict[str, Any]               # which rows of the table the number means
    config: str = ""                    # the config that reproduces it (runs/repro/)


@dataclass(frozen=True)
class Baseline:
    name: str
    title: str
    paper: str
    source: str
    protocol: str
    tested: bool
    rows: tuple[PublishedRow, ...]
    n: int | None = None                # what the table's `n` was behind each paper number, where known


def baselines() -> dict[str, Baseline]:
    with PUBLISHED_FILE.open("rb") as f:
        raw = tomllib.load(f)
    out = {}
    for name, b in raw.items():
        rows = tuple(PublishedRow(r["judge"], tuple(r.get("run_judges", [r["judge"]])),
                                  {k: float(v) for k, v in r.items() if k not in RESERVED},
                                  r.get("table", b["table"]), r.get("where", b.get("where", {})),
                                  r.get("config", b.get("config", ""))) for r in b["rows"])
        out[name] = Baseline(name, b["title"], b["paper"], b["source"], b["protocol"], bool(b.get("tested")), rows,
                             b.get("n"))
    return out


def published(name: str) -> Baseline:
    known = baselines()
    if name not in known:
        raise ConfigError(f"no published baseline {name!r} (known: {', '.join(known)})", parameter="--published")
    return known[name]


def _interval(row: dict[str, Any], metric: str) -> tuple[float | None, float | None]:
    for low, high in ((f"{metric}_low", f"{metric}_high"), ("ci_low", "ci_high")):
        if low in row and high in row:
            return row[low], row[high]
    return None, None


def _number(x: Any) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def beside(baseline: Baseline, protocol: str, tables: dict[str, pl.DataFrame], where: str = "run") -> pl.DataFrame:
    """One row per (published row, metric) whose judge the run has: paper, run, CI, inside."""
    if protocol != baseline.protocol:
        raise ConfigError(f"the run's protocol is {protocol!r}; baseline {baseline.name!r} is for "
                          f"{baseline.protocol!r}", where=where)
    out = []
    for row in baseline.rows:
        table = tables.get(row.table)
        if table is None or "judge" not in table.columns:
            continue
        match = table.filter(pl.col("judge").is_in(list(row.run_judges)))
        for column, value in row.where.items():
            if column in match.columns:
                match = match.filter(pl.col(column) == value)
        for found in match.iter_rows(named=True):
            for metric, paper in row.values.items():
                low, high = (_number(x) for x in _interval(found, metric))
                run_value = _number(found.get(metric))
                # the run's own count beside its value: a run of other items (504 judgeable stories'
                # tests against the paper's 672) printed OUTSIDE with nothing saying so
                n = found.get("n")
                out.append({"paper_judge": row.judge, "run_judge": found["judge"], "metric": metric, "paper": paper,
                            "run": run_value, "run_n": n if isinstance(n, int) else None, "ci_low": low,
                            "ci_high": high, "inside": None if low is None or high is None else low <= paper <= high})
    schema = {"paper_judge": pl.Utf8, "run_judge": pl.Utf8, "metric": pl.Utf8, "paper": pl.Float64, "run": pl.Float64,
              "run_n": pl.Int64, "ci_low": pl.Float64, "ci_high": pl.Float64, "inside": pl.Boolean}
    return pl.DataFrame(out, schema=schema)


def headline(baseline: Baseline, table: pl.DataFrame) -> str:
    """How many published numbers fall inside the run's 95% CI, counting only rows over as many
    verdicts as the paper's (`Baseline.n`, where known): a run of 504 judgeable items beside the
    paper's 672 is over other items, whose interval need not hold the paper's number: said apart."""
    with_ci = table.filter(pl.col("inside").is_not_null())
    other = with_ci.filter(pl.col("run_n").is_null() | (pl.col("run_n") != baseline.n)) if baseline.n else with_ci.clear()
    same = with_ci.filter(pl.col("run_n") == baseline.n) if baseline.n else with_ci
    text = f"{int(same['inside'].sum())} of {same.height} published numbers inside the run's 95% CI"
    if other.height:
        ns = ", ".join(str(n) for n in sorted(set(other["run_n"].drop_nulls()))) or "unknown"
        text += (f" (over the paper's {baseline.n} verdicts); {other.height} more not counted: the run's are over "
                 f"{ns} verdicts, other items than the paper's")
    return text
