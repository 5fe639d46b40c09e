"""The commands that plan and run: `run` (a run, a sweep or an ensemble config), `plan` and
`reparse`, and what their console says at the end (the exit status of a run that left requests
unanswered). The command line (cli.py) imports this module only when one of them runs."""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import polars as pl

from litjudge.judges import PROTOCOLS

from ...core.config import config_kind, read_toml
from ...core.console import captured_log, printable, terminal
from ...core.errors import ConfigError, StoreError
from ...core.paths import run_folder_hint
from ...core.session import Session
from ..calibrate import cached, calibrate, estimate_seconds
from ..execute import Asked, Executed, execute
from ..manifest import RunManifest
from ..plan_costs import api_estimate, over_the_caps
from ..reparse import reparse
from ..run import RunOutcome
from ..summary import figures
from ..sweep import load_sweep
from ..sweep_rank import MULTIPLE_COMPARISONS
from ..sweep_run import plan_summary
from .tables import print_ensemble, print_table


def _overrides(args) -> dict[str, Any]:
    """Command-line settings that replace the config's; `--judge a,b` names several judges."""
    out: dict[str, Any] = {"limit": args.limit, "mode": args.mode, "data_root": args.data_root}
    if getattr(args, "judge", None) is not None:
        names = [n.strip() for n in args.judge.split(",")]
        if not all(names):
            raise ConfigError(f"--judge {args.judge!r}: an empty judge name (give names separated by commas)")
        out["judge"] = names if len(names) > 1 else names[0]
    if getattr(args, "missing", None) is not None:
        out["missing"] = args.missing
    out["cluster"] = {"replicas": getattr(args, "replicas", None), "address": getattr(args, "address", None)}
    return out


def cmd_run(args) -> int:
    table = read_toml(args.config)                 # the file is read once; what it is decides the rest
    done = execute(table, str(args.config), _overrides(args), args.session,
                   Asked(data=args.data, generate_only=args.generate_only, rebuild=args.rebuild_store,
                         overwrite=args.overwrite))
    if done.kind == "sweep":
        return print_sweep(args, done)
    if done.kind == "ensemble":
        if done.ensemble is None:
            print("litjudge: the ensemble was not built: a member run is incomplete", file=terminal())
            return unanswered_exit(sum(m.unanswered for m in done.incomplete),
                                   [j for m in done.incomplete for j in m.judges])
        return print_ensemble(*done.ensemble, max_rows=args.show)
    outcome = done.run
    assert outcome is not None
    if "generation" in outcome.tables:
        print_table(outcome.tables["generation"], "Generation (turns constrained to a numbered list)", max_rows=args.show)
        for g in outcome.manifest.generation:
            print(f"  {g['generator']}: {g['generated']} turns generated now, engine started {g['engine_starts']}x")
    if outcome.manifest.kind == "generation":
        for warning in outcome.manifest.warnings:
            print(f"litjudge: warning: {warning}", file=terminal())
        print(f"Items: {outcome.manifest.items_path}\nResults: {outcome.run_dir}")
        return 0
    return print_run(args, outcome, several=bool(table.get("tasks")))


def print_run(args, outcome: RunOutcome, several: bool) -> int:
    """A finished run's summary tables, counts, judges, warnings and folder (with `several` tasks:
    each task's tables under its name); its exit status."""
    tasks = outcome.tasks or [outcome]
    for task_outcome in tasks:
        task = task_outcome.run_dir.name if several else ""
        for name in PROTOCOLS.get(task_outcome.manifest.protocol).declared.summary:
            frame = task_outcome.tables.get(name)
            if frame is not None and frame.height:
                title = name.replace("_", " ").capitalize()
                print_table(frame, f"{task}: {title}" if task else title, max_rows=args.show)
    # every task's counts, warnings and exit status: the first task's alone said "9 verdicts (1 unparsed)"
    # and exited 0 where a second task had none of its 9 read
    m = outcome.manifest
    for n, task_outcome in enumerate(tasks):
        v = task_outcome.manifest.verdicts
        label = ("" if n else "\n") + (f"{task_outcome.run_dir.name}: " if several else "")
        # a request never answered (a cap, an outage) is no verdict: "80 verdicts" had 10
        print(f"{label}{v.rows} verdicts ({v.unparsed} unparsed) in {m.seconds or 0.0:.1f} s" if not v.missing else
              f"{label}{v.rows - v.missing} verdicts of {v.rows} planned ({v.unparsed} unparsed; {v.missing} never "
              f"answered: the same command asks them) in {m.seconds or 0.0:.1f} s")
    for f, j in zip(figures(m), m.judges, strict=True):
        plan = j["plan"]
        shared = f", {j['from_cache']} from the shared verdict cache" if j.get("from_cache") else ""
        print(f"  {f.judge}: {f.line()}{shared}; prompt tokens {plan['prompt_tokens']:,} "
              f"(distinct prefill {plan['distinct_prefill_tokens']:,})")
    said: dict[str, list[str]] = {}            # a warning every task gave (the run's own) is said once
    for task_outcome in tasks:
        for warning in task_outcome.manifest.warnings:
            said.setdefault(warning, []).append(task_outcome.run_dir.name)
    for warning, where in said.items():
        label = f"{', '.join(where)}: " if several and len(where) < len(tasks) else ""
        print(f"litjudge: warning: {label}{warning}", file=terminal())
    folder = outcome.run_dir.parent if several else outcome.run_dir
    keep_log(args, folder)
    print(f"Results: {folder}")
    return unanswered_exit(m.unanswered, m.judges) or max(nothing_parsed_exit(t.manifest) for t in tasks)


UNANSWERED = 3      # exit status of a run that left requests without an answer (a re-run asks them again)
NOTHING_PARSED = 4  # exit status of a run where some judge's every answer failed to parse: no result at all


def nothing_parsed_exit(manifest: RunManifest) -> int:
    """0, or NOTHING_PARSED with one line naming each judge whose every answered verdict is
    unparsed (a recording that matches no item, a grammar the model never follows): its tables
    are computed from no verdict, which is no result."""
    if not manifest.verdicts.rows:
        print("litjudge: error: the run judged no item: every item was skipped or none was selected (the items left "
              "out and why are in tables/skipped; `litjudge plan CONFIG` says the same before a run)", file=terminal())
        return NOTHING_PARSED
    failed = [(name, c.rows - c.missing) for name, c in manifest.verdicts_by_judge.items()
              if c.rows > c.missing and c.unparsed == c.rows - c.missing]
    if not failed:
        return 0
    who = "; ".join(f"{name}: all {n} unparsed" for name, n in failed)
    print(f"litjudge: error: no verdict could be read ({who}): the tables hold no result; see the reasons in "
          "verdicts.parquet (column reason) or log.jsonl", file=terminal())
    return NOTHING_PARSED


def unanswered_exit(left: int, judges: Iterable[dict[str, Any]]) -> int:
    """0, or UNANSWERED with one line saying how many requests have no stored answer and why (per judge)."""
    if not left:
        return 0
    per = "; ".join(f"{j['judge']}: {j['unanswered']}" + (
        f" ({j['api']['not_sent_over_budget']} held back by the budget cap)"
        if j.get("api", {}).get("not_sent_over_budget") else "") + (
        f" (the last: {j['api']['last_unanswered_error'][:160]})" if j.get("api", {}).get("last_unanswered_error") else "")
        for j in judges if j.get("unanswered"))
    print(printable(f"litjudge: {left} request(s) were left without an answer ({per}): they are not verdicts and were "
                    "not stored; the tables cover the rest. Run the same command again to ask them again."), file=terminal())
    return UNANSWERED


def keep_log(args, run_dir: Path) -> None:
    """The third-party messages of this command, kept as RUN/engine.log (appended), unless the run
    already wrote them there as they came."""

    log = getattr(args, "console_log", None)
    if captured_log() == run_dir / "engine.log":
        return
    if log is not None and log.exists() and log.stat().st_size:
        with open(run_dir / "engine.log", "ab") as out:
            out.write(log.read_bytes())


def interval_notes(ranking) -> list[str]:
    """The ranking's notes, each once: under "no interval where" only the notes of ranked rows
    printed without one (a constant rate's exact bound is an interval, and says how it was made),
    under "unranked where" why the unranked ones have no value."""
    ranked = ranking.filter(pl.col("rank").is_not_null())
    missing = ranked["ci_low"].is_null()
    lines = [f"no interval where: {n}" for n in sorted(set(ranked.filter(missing)["ci_note"].drop_nulls().to_list()))]
    lines += [f"interval where: {n}" for n in sorted(set(ranked.filter(~missing)["ci_note"].drop_nulls().to_list()))]
    return lines + [f"unranked where: {n}" for n in
                    sorted(set(ranking.filter(pl.col("rank").is_null())["ci_note"].drop_nulls().to_list()))]


def print_sweep(args, done: Executed) -> int:
    sweep, out = done.swept, done.sweep
    assert sweep is not None and out is not None
    cols = ["rank", "cell", *sweep.post, "judge", "value", "ci_low", "ci_high", "clusters", "same_as_best"]
    if "unread" in out.ranking.columns and (out.ranking["unread"].fill_null(0.0) > 0).any():
        cols.append("unread")          # each value is over the answers read: say where some were not
    rows = out.ranking.height
    ranked = rows - out.ranking["rank"].null_count()
    shown = f"{min(args.show, rows)} of {rows}" if rows > args.show else f"all {rows}"
    if ranked and args.show:
        print_table(out.ranking.select([c for c in cols if c in out.ranking.columns]).head(args.show),
                     f"Cells x settings by {sweep.rank_by} ({out.ranking['group'][0]}; 95% CI over clusters): {shown}, "
                     "best first", max_rows=args.show)
        print("\n".join(["", *interval_notes(out.ranking.head(args.show)), MULTIPLE_COMPARISONS]))
    elif rows and args.show:                       # none ranked: each cell with why it has no value
        print_table(out.ranking.select([c for c in ["cell", *sweep.post, "judge", "n", "ci_note"]
                                        if c in out.ranking.columns]).head(args.show),
                     f"No cell ranked by {sweep.rank_by} ({out.ranking['group'][0]}): {shown}, each undefined",
                     max_rows=args.show)
        print("\n".join(["", *interval_notes(out.ranking.head(args.show))]))
    sh = out.manifest.sharing
    print(f"\n{len(sweep.cells)} cells x {sh['post_settings_per_cell']} post settings; {sh['requests']} requests, "
          f"{sh['distinct_requests']} distinct: sharing across cells saved {sh['model_calls_saved_across_cells']} "
          f"model calls, and the post settings saved {sh['model_calls_saved_by_post_settings']} more (evaluated "
          f"from stored verdicts); {out.manifest.generated_now} generated now")
    for warning in out.manifest.warnings:          # the cells' (data without labels, say)
        print(f"litjudge: warning: {warning}", file=terminal())
    keep_log(args, out.run_dir)
    print(f"Results: {out.run_dir} (sweep_metrics.parquet: one row per cell, setting, judge, metric, group)")
    return unanswered_exit(out.manifest.unanswered, out.manifest.judges)


def _estimate(r: dict[str, Any], calibrate_now: bool) -> tuple[float | None, str, float | None]:
    """One judge's row of the plan: (minutes, how they were estimated, API cost in USD)."""
    est, how, cost = None, "replay: no model", None
    spec = r["spec"]
    if spec.family.startswith("api-"):
        priced, how = api_estimate(r)
        return est, how, None if priced.cost_usd is None else round(priced.cost_usd, 4)
    if spec.capabilities.recorded:
        return est, how, cost
    config = r["config"]
    rec = None
    if calibrate_now and r["sample"]:
        rec = calibrate(spec, config, r["sample"], r["planner"], progress=True)
    elif calibrate_now:
        how = "nothing left to generate: no calibration needed"
    rec = rec or cached(r["planner"], spec, config.mode)
    if not r["to_generate"]:
        est, how = 0.0, "every distinct request is stored already: nothing to generate"
    elif rec:
        est = round(estimate_seconds(rec, r["to_prefill_tokens"]) / 60, 1)
        how = (f"calibrated {rec['measured']}: {rec['sample_requests']} requests, "
               f"{1 / rec['seconds_per_token']:,.0f} distinct prefill tok/s, start {rec['engine_start_s']} s")
    else:
        how = ("not calibrated for this judge, dtype and CPU: `litjudge plan CONFIG --calibrate` measures "
               "it (starts the engine once)")
    return est, how, cost


def cmd_plan(args) -> int:


    table = read_toml(args.config)
    if config_kind(table) == "ensemble":
        raise ConfigError("an ensemble config pools finished runs' verdicts and costs no model call itself: plan each "
                          "of its member configs ([[runs]] config = ...)", where=str(args.config))
    sweep = load_sweep(args.config, data=args.data, table=table, **_overrides(args))
    rows = plan_summary(sweep, args.session)
    plan_rows: list[dict[str, Any]] = []
    notes = []
    for r in rows:
        est, how, cost = _estimate(r, args.calibrate)
        plan_rows.append({k: r[k] for k in ("judge", "cells", "requests", "too_long", "distinct_requests",
                                              "saved_by_sharing", "stored", "to_generate", "prompt_tokens",
                                              "distinct_prefill_tokens", "to_prefill_tokens")}
                         | {"est_minutes": est, "est_cost_usd": cost})
        notes.append(f"  {r['judge']}: {how}")
    print_table(pl.DataFrame(plan_rows), f"Plan of {args.config}: {len(sweep.cells)} cell(s) x "
                                          f"{len(sweep.post_settings())} post setting(s) (no model call each)")
    print("Estimates (rough: distinct prefill tokens left to generate x the calibrated rate, plus engine start):")
    print("\n".join(notes))
    total, distinct = sum(r["requests"] for r in rows), sum(r["distinct_requests"] for r in rows)
    too_long = sum(r["too_long"] for r in rows)
    saved = total - too_long - distinct
    stored = sum(r["stored"] for r in rows)
    print(f"\n{total} requests, {distinct} distinct: sharing saves {saved} model calls "
          f"({100 * saved / max(total, 1):.0f}%); prefix sharing leaves "
          f"{sum(r['distinct_prefill_tokens'] for r in rows):,} of {sum(r['prompt_tokens'] for r in rows):,} "
          "prompt tokens to prefill")
    print(f"{stored} of {distinct} distinct requests are stored already ({_where_stored(sweep.name, args.session)}): "
          f"{distinct - stored} to generate")
    if too_long:
        print(f"{too_long} request(s) are left out: their prompts do not fit the context window "
              "(truncation = \"skip\"); raise max_model_len to keep them")
    for line in over_the_caps([api_estimate(r)[0] for r in rows if r["spec"].family.startswith("api-")]):
        print(f"litjudge: warning: {line}", file=terminal())
    if not total:
        skipped = [s for r in rows for s in r["skipped"]]
        reasons = "; ".join(f"{n} x {why}" for why, n in Counter(s.reason for s in skipped).most_common(3))
        print("litjudge: warning: the plan selects no item to judge" + (f": {len(skipped)} item(s) skipped ({reasons})"
              if skipped else ": the dataset gave none this protocol reads (check --limit, the dataset and its "
              "options)"), file=terminal())
    return 0


def _where_stored(name: str, session: Session) -> str:
    """Where `plan` looked for stored verdicts, named, so a run written elsewhere (`run --out DIR`) is
    not read as "nothing stored"."""
    folder, cache = session.run_dir(name), session.verdict_cache
    run = (f"in {folder}" if (folder / "store.sqlite").exists() else
           f"no run folder at {folder}: a run written with --out DIR is counted by plan --out DIR")
    return run + (f"; the shared verdict cache {cache}, for live judges" if cache else "; the shared verdict cache is off")


def cmd_reparse(args) -> int:

    path = Path(args.run_dir)
    if not path.is_dir():
        raise StoreError(f"{path}: not a run folder ({run_folder_hint(by_name=True)})")
    counts = reparse(path)
    print(f"reparsed {counts['results']} stored outputs, {counts['changed']} changed; tables rebuilt in {args.run_dir}")
    return 0
