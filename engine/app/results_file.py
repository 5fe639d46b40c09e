"""RUN/results.json: one small file another tool loads without reading litjudge's tables, in the
shape users of lm-eval's results JSON and inspect_ai's eval log expect: the headline metrics with
their intervals per judge and view, the config, the versions, each judge's identity, how many
verdicts (unparsed, missing) and how long. The headline is the protocol's declared estimate (its
`rank_by`, what a sweep ranks by) and the other rankable metrics of that table, every row of it (a
view, an order, a question), the pooled one marked. docs/python-api.md ("results.json") lists the
keys; `SCHEMA` changes when one changes meaning. It names no absolute path (a data file, a replay
file or a local model's folder as a judge's name, one in a warning): a path under the run config's
folder relative to it, any other as `<local path>/NAME` (public.py), as a dataset card does."""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from litjudge.judges.base import Protocol
from litjudge.judges.contract import Declaration

from .outputs import write_text
from .public import config_folder, public_names, redact

SCHEMA = "litjudge.results/1"
# What of a judge's manifest entry identifies it (the rest is the plan's and the engine's figures).
IDENTITY = ("judge", "backend", "fingerprint", "chat_template_hash", "model", "revision", "source", "sha256",
            "provider", "base_url", "dtype", "device", "vllm_version")


def results(protocol: Protocol, options: Any, tables: Mapping[str, pl.DataFrame], manifest: Mapping[str, Any]
            ) -> dict[str, Any]:
    """The results record of one run (or task) from its tables and manifest."""
    rank_by = protocol.rank_by_for(options)
    rank = protocol.parse_rank_by(rank_by) if rank_by else None
    pooled = protocol.rank_group(rank, options) if rank else None
    counts = manifest.get("verdicts_by_judge", {})
    rows: list[dict[str, Any]] = []
    judges = []
    for entry in manifest.get("judges", []):
        name = entry["judge"]
        mine = headline_rows(protocol, tables, name, rank.table, pooled, rank.metric) if rank else []
        rows += mine
        top = next((r for r in mine if r["headline"]), None)
        c = counts.get(name, {})
        judges.append({**_identities({"judges": [entry]})[0],
                       "n": c.get("rows"), "unparsed": c.get("unparsed"), "missing": c.get("missing"),
                       "seconds": _number(entry.get("seconds")),
                       "headline": {k: top[k] for k in ("value", "ci_low", "ci_high", "n")} if top else None})
    total = manifest.get("verdicts", {})
    return _published(manifest, {
        **_head("run", manifest), "task": manifest.get("task"),
        "protocol": manifest.get("protocol"),
        "dataset": redact(manifest.get("dataset"), config_folder(manifest.get("config"))),
        "headline": ({"metric": f"{rank.table}.{rank.metric}", "view": pooled,
                      "higher_is_better": protocol.declared.direction(rank.table, rank.metric),
                      **({} if rows else {"note": f"this run has no {rank.table} table (data without human labels?): "
                                                  "no headline value"})} if rank else None),
        "results": rows, "judges": judges,
        "n": total.get("rows"), "unparsed": total.get("unparsed"), "missing": total.get("missing"),
        "missing_policy": manifest.get("missing_policy"), **_tail(manifest),
        "warnings": list(manifest.get("warnings", [])),
    })


def headline_rows(protocol: Protocol, tables: Mapping[str, pl.DataFrame], judge: str, table: str,
                  pooled: str | None, metric: str) -> list[dict[str, Any]]:
    """One row per view (group row of the headline table) and rankable metric of one judge, with
    its interval where the table gives one (`METRIC_low`/`_high`, or `ci_low`/`ci_high` in a table of
    one metric); `headline` marks the declared estimate's pooled row."""
    frame = tables.get(table)
    spec = protocol.declared.metric_table_specs.get(table)
    if frame is None or spec is None or "judge" not in frame.columns or not frame.height:
        return []
    tidied = tidy({table: frame.filter(pl.col("judge") == judge)}, protocol.declared, {})
    at = {(r["group"], r["metric"]): r for r in tidied}
    single = len(set(spec.rank) | set(spec.higher) | set(spec.lower)) == 1
    out = []
    for group in dict.fromkeys(r["group"] for r in tidied):
        for name in spec.rank:
            row = at.get((group, name))
            if row is None:
                continue
            low = at.get((group, f"{name}_low")) or (at.get((group, "ci_low")) if single else None)
            high = at.get((group, f"{name}_high")) or (at.get((group, "ci_high")) if single else None)
            out.append({"judge": judge, "metric": f"{table}.{name}", "view": group, "value": _number(row["value"]),
                        "ci_low": _number(low["value"]) if low else None,
                        "ci_high": _number(high["value"]) if high else None, "n": row["n"],
                        "headline": name == metric and group == pooled})
    return out


def sweep_results(ranking: pl.DataFrame, manifest: Mapping[str, Any], higher_is_better: bool | None) -> dict[str, Any]:
    """A sweep: its ranking (cells x settings x judges by the ranked estimate, each with its interval
    and whether a paired test tells it from the best) as the results."""
    return _published(manifest, {**_head("sweep", manifest),
                                 "headline": {"metric": manifest.get("rank_by"), "higher_is_better": higher_is_better},
                                 "results": _records(ranking), "judges": _identities(manifest), **_tail(manifest),
                                 "warnings": list(manifest.get("warnings", []))})


def ensemble_results(name: str, tables: Mapping[str, pl.DataFrame], manifest: Mapping[str, Any]) -> dict[str, Any]:
    """An ensemble: its summary tables (a cascade's summary, a jury's members and poolings)."""
    summaries = ("cascade_summary", "jury")
    return {**_head("ensemble", manifest), "run": name,
            "results": {n: _records(tables[n]) for n in summaries if n in tables}, "runs": manifest.get("runs"),
            **_tail(manifest)}


def _head(kind: str, manifest: Mapping[str, Any]) -> dict[str, Any]:
    return {"schema": SCHEMA, "kind": kind, "run": (manifest.get("config") or {}).get("name"),
            "created": manifest.get("created"), "seconds": _number(manifest.get("seconds"))}


def _tail(manifest: Mapping[str, Any]) -> dict[str, Any]:
    machine = manifest.get("machine") or {}
    return {"versions": {k: v for k, v in {"litjudge": manifest.get("litjudge"), "vllm": manifest.get("vllm"),
                                           "python": machine.get("python"), "torch": machine.get("torch"),
                                           "git_commit": manifest.get("git_commit")}.items() if v},
            "config": redact(manifest.get("config"), config_folder(manifest.get("config")))}


def _published(manifest: Mapping[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    """`record` with its judges named as they may be published (public_names: a replay file's or a
    local model folder's path, two alike told apart) and the paths in its warnings made public."""
    base = config_folder(manifest.get("config"))
    names = public_names([e["judge"] for e in manifest.get("judges", []) if isinstance(e.get("judge"), str)], base)

    def named(row: Any) -> Any:
        judge = row.get("judge") if isinstance(row, dict) else None
        return {**row, "judge": names.get(judge) or redact(judge, base)} if isinstance(judge, str) else row

    return {**record, "results": [named(r) for r in record["results"]], "judges": [named(j) for j in record["judges"]],
            "warnings": [redact(w, base) for w in record["warnings"]]}


def _identities(manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each judge's identity; its `source` (a local file or folder) as public.py names it."""
    base = config_folder(manifest.get("config"))
    return [{k: redact(entry[k], base) if k == "source" else entry[k] for k in IDENTITY if entry.get(k) not in (None, "")}
            for entry in manifest.get("judges", [])]


def _records(frame: pl.DataFrame) -> list[dict[str, Any]]:
    """A table's rows as JSON records (NaN as null)."""
    return [{k: _number(v) if isinstance(v, float) else v for k, v in row.items()} for row in frame.iter_rows(named=True)]


def tasks_results(outcomes: list[tuple[str, dict[str, Any]]], manifest: Mapping[str, Any]) -> dict[str, Any]:
    """A run of several tasks: each task's record by its name (each also in its own folder)."""
    return {**_head("tasks", manifest), "tasks": dict(outcomes)}


def tidy(tables: dict[str, pl.DataFrame], declared: Declaration, head: dict[str, Any]) -> list[dict[str, Any]]:
    """A protocol's metric tables -> rows of (head..., table, metric, group, value, n, higher_is_better)."""
    rows = []
    for name, group_cols in declared.metric_tables.items():
        df = tables.get(name)
        if df is None or not df.height:
            continue
        floats = [c for c, t in df.schema.items() if t.is_float() and c not in group_cols]
        # the count behind each value (the ppi table's: its labelled rows; a sweep's ppi rows had none)
        n_col = next((c for c in ("n", "stories", "pairs_both_orders", "groups", "n_labelled") if c in df.columns), None)
        own = dict(declared.metric_table_specs[name].counts)
        for rec in df.iter_rows(named=True):
            group = ",".join(f"{c}={rec[c]}" for c in group_cols) or "all"
            for metric in floats:
                value, count = rec[metric], own.get(metric, n_col)
                rows.append({**head, "table": name, "metric": metric, "group": group,
                             "value": float(value) if value is not None else math.nan,
                             "n": int(rec[count]) if count and rec.get(count) is not None else None,
                             "higher_is_better": declared.direction(name, metric)})
    return rows


def write_results(run_dir: Path, record: Mapping[str, Any]) -> None:
    write_text(run_dir / "results.json", json.dumps(record, indent=2, default=str, allow_nan=False))


def _number(value: Any) -> float | None:
    """A float for JSON: NaN (an undefined metric) is null, as JSON has no NaN."""
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) or math.isinf(value) else value
