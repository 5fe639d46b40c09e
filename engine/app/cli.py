"""The `litjudge` command line. Errors a user can cause, and faults of the machine (disk full, a
read-only folder, a locked store), print as one line and exit 2; a bug prints a one-line summary
and the path of a crash log with the traceback, and exits 1."""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.config import load_config, read_toml
from ..core.console import prepare_environment, quiet, terminal
from ..core.errors import ConfigError, GrammarError, LitjudgeError, StoreError
from ..core.paths import cache_dir

# Commands import what they need when they run: `litjudge --help`, `data list`, `judges` and every
# one-line config error answer without loading polars' plotting, scipy, torch or vLLM.


def lazy(target: str) -> Callable[[Any], int]:
    """A command implemented in `.module:function`, imported when the command runs."""
    module, _, name = target.partition(":")

    def command(args) -> int:
        return getattr(importlib.import_module(module, __package__), name)(args)
    return command


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


def is_sweep(path: str | Path) -> bool:
    table = read_toml(path)
    return "matrix" in table or "sweep" in table


def cmd_run(args) -> int:
    overrides = _overrides(args)
    if is_sweep(args.config):
        return run_sweep_cli(args, overrides)
    table = read_toml(args.config)
    if "runs" in table and ("cascade" in table or "jury" in table):        # an ensemble config
        from .commands import print_ensemble
        from .ensemble import load_ensemble, run_ensemble

        return print_ensemble(*run_ensemble(load_ensemble(args.config), args.limit, progress=not args.quiet))
    config = load_config(args.config, **overrides)          # a config error is one line before any heavy import
    from judges import PROTOCOLS

    from ..data.cards import dataset_card, with_data
    from .outputs import rebuild_store
    from .run import run, run_dir_for
    from .summary import figures
    from .tables import print_table

    if args.generate_only and not config.generate.enabled:
        raise ConfigError("--generate-only runs a [generate] stage, and this config has none", where=config.source)
    if args.data:
        if config.generate.enabled or config.tasks:
            raise ConfigError("--data reads your file in the layout of the config's one dataset; this config "
                              + ("generates its items ([generate])" if config.generate.enabled
                                 else "has several tasks ([[tasks]]), each with its own dataset")
                              + ": give the data in the config instead", where=config.source)
        config = dataclasses.replace(config, dataset=with_data(dataset_card(config.dataset, config.source,
                                                                            config.protocol), args.data))
    if args.rebuild_store:
        moved = rebuild_store(run_dir_for(config))
        if moved:
            print(f"litjudge: the old store is kept as {moved}; every verdict is computed again", file=terminal())
    outcome = run(config, progress=not args.quiet, generate_only=args.generate_only)
    if "generation" in outcome.tables:
        print_table(outcome.tables["generation"], "Generation (turns constrained to a numbered list)", max_rows=args.show)
        for g in outcome.manifest.get("generation", []):
            print(f"  {g['generator']}: {g['generated']} turns generated now, engine started {g['engine_starts']}x")
    if outcome.manifest.get("kind") == "generation":
        for warning in outcome.manifest.get("warnings", []):
            print(f"litjudge: warning: {warning}", file=terminal())
        print(f"Items: {outcome.manifest['items']['path']}\nResults: {outcome.run_dir}")
        return 0
    for (task, task_config), task_outcome in zip(config.task_configs(), outcome.tasks or [outcome], strict=True):
        for name in PROTOCOLS.get(task_config.protocol).summary:
            table = task_outcome.tables.get(name)
            if table is not None and table.height:
                title = name.replace("_", " ").capitalize()
                print_table(table, f"{task}: {title}" if task else title, max_rows=args.show)
    m = outcome.manifest
    print(f"\n{m['verdicts']['rows']} verdicts ({m['verdicts']['unparsed']} unparsed) in {m['seconds']:.1f} s")
    for f, j in zip(figures(m), m["judges"], strict=True):
        plan = j["plan"]
        shared = f", {j['from_cache']} from the shared verdict cache" if j.get("from_cache") else ""
        print(f"  {f.judge}: {f.line()}{shared}; prompt tokens {plan['prompt_tokens']:,} "
              f"(distinct prefill {plan['distinct_prefill_tokens']:,})")
    for warning in m.get("warnings", []):
        print(f"litjudge: warning: {warning}", file=terminal())
    keep_log(args, outcome.run_dir)
    print(f"Results: {outcome.run_dir}")
    return unanswered_exit(m)


UNANSWERED = 3      # exit status of a run that left requests without an answer (a re-run asks them again)


def unanswered_exit(manifest: dict) -> int:
    """0, or UNANSWERED with one line saying how many requests have no stored answer and why."""
    left = manifest.get("unanswered", 0)
    if not left:
        return 0
    per = "; ".join(f"{j['judge']}: {j['unanswered']}" + (
        f" ({j['api']['not_sent_over_budget']} held back by the budget cap)"
        if j.get("api", {}).get("not_sent_over_budget") else "") for j in manifest["judges"] if j.get("unanswered"))
    print(f"litjudge: {left} request(s) were left without an answer ({per}): they are not verdicts and were not "
          "stored; the tables cover the rest. Run the same command again to ask them again.", file=terminal())
    return UNANSWERED


def keep_log(args, run_dir: Path) -> None:
    """The third-party messages of this command, kept as RUN/engine.log (appended), unless the run
    already wrote them there as they came."""
    from ..core.console import captured_log

    log = getattr(args, "console_log", None)
    if captured_log() == run_dir / "engine.log":
        return
    if log is not None and log.exists() and log.stat().st_size:
        with open(run_dir / "engine.log", "ab") as out:
            out.write(log.read_bytes())


def run_sweep_cli(args, overrides: dict) -> int:
    from .sweep import load_sweep
    from .sweep_run import run_sweep
    from .tables import print_table

    sweep = load_sweep(args.config, data=args.data, **overrides)
    out = run_sweep(sweep, progress=not args.quiet)
    cols = ["rank", "cell", *sweep.post, "judge", "value", "ci_low", "ci_high", "n"]
    print_table(out.ranking.select([c for c in cols if c in out.ranking.columns]).head(args.show),
                 f"Top {args.show} cells x settings by {sweep.rank_by} "
                 f"({out.ranking['group'][0] if out.ranking.height else ''}; 95% cluster-bootstrap CI)", max_rows=args.show)
    sh = out.manifest["sharing"]
    print(f"\n{len(sweep.cells)} cells x {sh['post_settings_per_cell']} post settings; {sh['requests']} requests, "
          f"{sh['distinct_requests']} distinct: sharing across cells saved {sh['model_calls_saved_across_cells']} "
          f"model calls, and the post settings saved {sh['model_calls_saved_by_post_settings']} more (evaluated "
          f"from stored verdicts); {out.manifest['generated_now']} generated now")
    keep_log(args, out.run_dir)
    print(f"Results: {out.run_dir} (sweep_metrics.parquet: one row per cell, setting, judge, metric, group)")
    return unanswered_exit(out.manifest)


def cmd_plan(args) -> int:
    import polars as pl

    from .. import backends as registry
    from .calibrate import cached, calibrate, estimate_seconds
    from .ensemble import is_ensemble
    from .sweep import load_sweep
    from .sweep_run import plan_summary
    from .tables import print_table

    if is_ensemble(args.config):
        raise ConfigError("an ensemble config pools finished runs' verdicts and costs no model call itself: plan each "
                          "of its member configs ([[runs]] config = ...)", where=str(args.config))
    sweep = load_sweep(args.config, data=args.data, **_overrides(args))
    rows = plan_summary(sweep)
    table, notes = [], []
    for r in rows:
        est, how, cost = None, "replay: no model", None
        spec = r["spec"]
        caps = registry.BACKENDS.get(spec.backend).capabilities
        if spec.family.startswith("api-"):
            api = r["config"].api
            tokens_in = 1.3 * r["prompt_tokens"] * r["to_generate"] / max(r["distinct_requests"], 1)
            tokens_out = r["to_generate"] * max((p.max_tokens for p in r["sample"]), default=0)
            from ..backends.prices import cost as price
            from ..backends.prices import prices

            cost = round(price(prices(spec.detail("provider"), api.price_in_per_mtok, api.price_out_per_mtok),
                               tokens_in, tokens_out, batch=api.batch), 4)
            how = (f"API: ~{tokens_in:,.0f} prompt tokens to send (1.3 x words), about {tokens_out:,} output tokens "
                   f"at most; cost from api.price_in_per_mtok / price_out_per_mtok"
                   + (" at the provider's batch rate; results within 24 h" if api.batch else
                      "; time depends on the server"))
        elif not caps.recorded:
            config = r["config"]
            rec = None
            if args.calibrate and r["sample"]:
                rec = calibrate(spec, config, r["sample"], r["planner"], progress=True)
            elif args.calibrate:
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
        table.append({k: r[k] for k in ("judge", "cells", "requests", "too_long", "distinct_requests",
                                          "saved_by_sharing", "stored", "to_generate", "prompt_tokens",
                                          "distinct_prefill_tokens", "to_prefill_tokens")}
                     | {"est_minutes": est, "est_cost_usd": cost})
        notes.append(f"  {r['judge']}: {how}")
    print_table(pl.DataFrame(table), f"Plan of {args.config}: {len(sweep.cells)} cell(s) x "
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
    print(f"{stored} of {distinct} distinct requests are stored already (this run's folder or the shared verdict "
          f"cache): {distinct - stored} to generate")
    if too_long:
        print(f"{too_long} request(s) are left out: their prompts do not fit the context window "
              "(truncation = \"skip\"); raise max_model_len to keep them")
    return 0


def cmd_reparse(args) -> int:
    from .reparse import reparse

    path = Path(args.run_dir)
    if not path.is_dir():
        raise StoreError(f"{path}: not a run folder (give the folder a run wrote, e.g. runs/out/demo)")
    counts = reparse(path)
    print(f"reparsed {counts['results']} stored outputs, {counts['changed']} changed; tables rebuilt in {args.run_dir}")
    return 0


def _whole(least: int, hint: str = ""):
    """An argparse type: a whole number >= `least`, refused in one line with `hint`."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be >= {least}{f' ({hint})' if hint else ''}, got {value}")
        return value
    return parse


_limit = _whole(1, "leave it out to judge every item")
LIMIT_HELP = ("only the first N units, in the data's own order: stories (ttcw), pairs (pairwise), groups "
              "(reference_likert; listwise and classification: objects or sets, or the listed options.groups); "
              "default: all")
_replicas = _whole(1, "1 is one engine in this process; leave it out to use the config's [cluster]")


class _Parser(argparse.ArgumentParser):
    """Usage mistakes are one line too (and exit 2, as argparse does)."""

    def error(self, message: str):  # type: ignore[override]
        print(f"litjudge: error: {self.prog}: {message} (see {self.prog} --help)", file=terminal())
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="litjudge", description="Offline batch LLM-as-a-judge for creative writing.")
    p.add_argument("--verbose", action="store_true", help="show vLLM's, torch's and transformers' own messages "
                                                          "(by default they go to the run's engine.log)")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    r = sub.add_parser("run", help="run a config: plan, judge (resuming), aggregate, write tables")
    r.add_argument("config", help="run config (TOML), e.g. runs/demo.toml")
    r.add_argument("--judge", help="override the judge(s): alias, model folder, hub id, replay:NAME; comma-separated")
    r.add_argument("--limit", type=_limit, help=LIMIT_HELP)
    r.add_argument("--mode", choices=["label", "analyze", "distribution", "reward"], help="override the verdict mode")
    r.add_argument("--missing", help='missing-answer policy: "drop", "wrong" or "label:LABEL"')
    r.add_argument("--data-root", help="folder holding the shared datasets (default ../shared/datasets)")
    r.add_argument("--data", help="your own data file (or folder) in the config's dataset layout")
    r.add_argument("--out", help="folder for the run's outputs, written to OUT/NAME (default ./runs/out; "
                                 "also LITJUDGE_RUNS_DIR)")
    r.add_argument("--cache", metavar="PATH", help="the verdict cache shared by every run (default "
                   "~/.cache/litjudge/verdicts.sqlite; also LITJUDGE_VERDICT_CACHE)")
    r.add_argument("--no-cache", action="store_true", help="neither read nor write the shared verdict cache")
    r.add_argument("--replicas", type=_replicas, help="engines per judge, each a Ray actor (overrides [cluster])")
    r.add_argument("--address", help='Ray cluster: "local", "auto" or "ray://HOST:PORT" (overrides [cluster])')
    r.add_argument("--show", type=int, default=20, help="table rows to print")
    r.add_argument("--generate-only", action="store_true",
                   help="with [generate]: write the items (RUN/generated/items.jsonl) and stop before judging")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.add_argument("--rebuild-store", action="store_true",
                   help="move a corrupt store.sqlite aside (kept) and compute every verdict again")
    r.set_defaults(fn=cmd_run)
    pl_ = sub.add_parser("plan", help="what a run or sweep will cost: requests, sharing, tokens, estimated time")
    pl_.add_argument("config")
    pl_.add_argument("--judge", help="override the judge(s), comma-separated")
    pl_.add_argument("--limit", type=_limit, help=LIMIT_HELP)
    pl_.add_argument("--mode", choices=["label", "analyze", "distribution", "reward"])
    pl_.add_argument("--data-root")
    pl_.add_argument("--data", help="your own data file (or folder) in the config's dataset layout")
    pl_.add_argument("--calibrate", action="store_true",
                     help="measure this judge's speed here first (starts its engine on a few requests, shows "
                          "progress; stored per judge, dtype and CPU model, replacing an older measurement)")
    pl_.add_argument("--no-calibrate", dest="calibrate", action="store_false",
                     help="the default: estimates only from a stored calibration")
    pl_.set_defaults(fn=cmd_plan)
    rp = sub.add_parser("reparse", help="re-apply parsing and aggregation to stored raw outputs (no model)")
    rp.add_argument("run_dir")
    rp.set_defaults(fn=cmd_reparse)
    rep = sub.add_parser("report", help="report of finished runs: HTML (plots embedded), Markdown and CSV tables")
    rep.add_argument("run_dirs", nargs="+", metavar="RUN")
    rep.add_argument("--out", help="folder to write (default: RUN/report)")
    rep.add_argument("--text", action="store_true", help="also print every table")
    rep.set_defaults(fn=lazy(".commands:cmd_report"))
    cmp_ = sub.add_parser("compare", help="the report's panels side by side across runs (judges, prompt variants)")
    cmp_.add_argument("run_dirs", nargs="+", metavar="RUN")
    cmp_.add_argument("--out", help="folder to write (default: runs/out/compare-A-vs-B)")
    cmp_.add_argument("--published", metavar="NAME",
                      help="the paper's numbers beside the run's, with its 95%% CI (ttcw-notebook, litbench, li2025)")
    cmp_.set_defaults(fn=lazy(".commands:cmd_compare"))
    en = sub.add_parser("ensemble", help="a cascade with an agreement guarantee, or a calibrated jury, over finished "
                                         "runs' judges (from stored verdicts)")
    en.add_argument("run_dirs", nargs="+", metavar="RUN")
    en.add_argument("--cascade", metavar="J1,J2", help="judges cheapest first; each answers above its certified threshold")
    en.add_argument("--jury", nargs="?", const="", metavar="J1,J2", help="pool these judges (default: all)")
    en.add_argument("--target", type=float, default=0.8, help="agreement with humans on answered items (cascade)")
    en.add_argument("--delta", type=float, default=0.1, help="the guarantee fails with probability <= delta")
    en.add_argument("--calibration-fraction", type=float, default=0.5, help="clusters used to fit/certify")
    en.add_argument("--seed", type=int, default=0)
    en.add_argument("--name", default="ensemble", help="output folder name under runs/out (default: ensemble)")
    en.set_defaults(fn=lazy(".commands:cmd_ensemble"))
    st = sub.add_parser("status", help="a run folder's provider batches (API judges with [api] batch = true): "
                                       "open ones with their size and age")
    st.add_argument("run_dir", metavar="RUN")
    st.add_argument("--cancel-batches", action="store_true", help="cancel the run's open provider batches")
    st.set_defaults(fn=lazy(".commands:cmd_status"))
    bu = sub.add_parser("budgets", help="verdicts at several reasoning budgets from an analyze-mode run's stored "
                                        "analyses (one generation, the tails only)")
    bu.add_argument("run_dir", metavar="RUN")
    bu.add_argument("--budgets", default="0,32,64,128,full", help="token budgets and 'full', comma-separated")
    bu.add_argument("--quiet", action="store_true", help="no progress bar")
    bu.set_defaults(fn=lazy(".commands:cmd_budgets"))
    j = sub.add_parser("judges", help="list judge aliases (--prepare obtains and converts them)")
    j.add_argument("names", nargs="*", help="only these aliases")
    j.add_argument("--prepare", action="store_true")
    j.set_defaults(fn=lazy(".commands:cmd_judges"))
    c = sub.add_parser("check-labels", help="which verdict languages a judge can score in one token (distribution mode)")
    c.add_argument("judge")
    c.add_argument("languages", nargs="*")
    c.add_argument("--prefill", default="", help="assistant text before the label (the decision point)")
    c.set_defaults(fn=lazy(".commands:cmd_check_labels"))
    gen = sub.add_parser("generate", help="generate candidate stories from the TTCW plots (length-matched)")
    gen.add_argument("--model", default="smollm2-135m")
    gen.add_argument("--out", required=True, help="JSONL to write (generic reference format)")
    gen.add_argument("--limit", type=_whole(0, "0: every plot group"), default=0, help="only the first N plot groups")
    gen.add_argument("--target-words", type=_whole(0, "0: the reference story's length"), default=0,
                     help="0: the reference story's length")
    gen.add_argument("--tolerance", type=_whole(0), default=200)
    gen.add_argument("--max-rounds", type=_whole(0), default=20)
    gen.add_argument("--max-model-len", type=_whole(32), default=8192)
    gen.add_argument("--data-root")
    gen.set_defaults(fn=lazy(".commands:cmd_generate"))
    d = sub.add_parser("data", help="datasets: `data list`, `data fetch NAME` (from the pinned public source, verified)")
    d.add_argument("action", choices=["list", "fetch"])
    d.add_argument("names", nargs="*")
    d.add_argument("--data-root", help="where the data goes (default: LITJUDGE_DATA_ROOT, ../shared/datasets beside a "
                                       "checkout, else ~/.cache/litjudge/data)")
    d.set_defaults(fn=lazy(".commands:cmd_data"))
    b = sub.add_parser("bench", help="benchmark litjudge against common practice on TTCW (see README)")
    b.add_argument("--stories", type=_whole(1, "the TTCW stories with text to judge"), default=36)
    b.add_argument("--hf-subset", type=_whole(1), default=8, help="requests for the one-at-a-time transformers baseline")
    b.add_argument("--skip-hf", action="store_true")
    b.add_argument("--skip-naive", action="store_true")
    b.add_argument("--judge", default="smollm2-135m")
    b.add_argument("--block-size", type=_whole(0, "0: vLLM's default"), default=0,
                   help="vLLM KV block size (0: vLLM's default; CPU: 128)")
    b.add_argument("--compile", action="store_true", help="torch.compile the vLLM model (slower start-up)")
    b.add_argument("--out", default="", help="write the results table (JSON) here")
    b.set_defaults(fn=lazy(".commands:cmd_bench"))
    return p


def crash_log(exc: BaseException) -> Path:
    """The traceback of an unexpected error, kept for a bug report."""
    folder = cache_dir() / "crash"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    path.write_text(f"litjudge {' '.join(sys.argv[1:])}\n\n" + "".join(traceback.format_exception(exc)))
    return path


def main(argv: list[str] | None = None) -> int:
    if argv is None:                     # the command line (not a test calling main): maybe under tcmalloc
        from .preload import reexec_with_tcmalloc

        reexec_with_tcmalloc(sys.argv[1:])
    args = build_parser().parse_args(argv)
    prepare_environment(args.verbose)
    if getattr(args, "out", None) and args.command == "run":
        # the one place outputs are found (runs_output_dir), for this process and the workers it starts
        os.environ["LITJUDGE_RUNS_DIR"] = str(Path(args.out).resolve())
    if getattr(args, "no_cache", False):
        os.environ["LITJUDGE_VERDICT_CACHE"] = "off"
    elif getattr(args, "cache", None):
        os.environ["LITJUDGE_VERDICT_CACHE"] = str(Path(args.cache).expanduser().resolve())
    # In-process engine: quick start, and no spawned workers that need a __main__ guard.
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    log = cache_dir() / "logs" / f"litjudge-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    args.console_log = log
    try:
        with quiet(log, enabled=not args.verbose):
            return args.fn(args)
    except (LitjudgeError, GrammarError) as exc:
        print(f"litjudge: error: {exc}", file=terminal())
        return 2
    except KeyboardInterrupt:
        print("litjudge: interrupted; finished verdicts are stored and a re-run resumes", file=terminal())
        return 130
    except OSError as exc:
        from .outputs import fault

        print(f"litjudge: error: {fault(exc, exc.filename or 'a file')}", file=terminal())
        return 2
    except Exception as exc:  # noqa: BLE001  (a bug: one line here, the traceback in a file)
        try:
            where = f"; the traceback is in {crash_log(exc)}"
        except OSError:
            where = ""
        print(f"litjudge: internal error: {type(exc).__name__}: {str(exc)[:300]} (a bug, please report it{where})",
              file=terminal())
        return 1


if __name__ == "__main__":
    sys.exit(main())
