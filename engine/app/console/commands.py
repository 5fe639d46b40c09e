"""The commands around a run: its report and comparison, ensembles, reasoning budgets, a judge's
labels, generated candidates, the benchmark. (`run`, `plan` and `reparse` are in run_commands.py;
`judges`, `data` and `status` in light_commands.py.)"""
from __future__ import annotations

from pathlib import Path

import polars as pl

import litjudge.grammars as g
from litjudge.judges.ensembles import CascadeOptions
from litjudge.judges.published import beside, headline, published

from ... import backends as registry
from ...backends.local.label_tokens import check_language
from ...backends.local.models import resolve_judge
from ...backends.local.render import load_renderer
from ...core.errors import ConfigError
from ...core.requests import Message
from ...data.cards import load_card
from ..budgets import budgets, parse_budgets
from ..ensemble import ensemble
from ..generate import check_output, generate_candidates
from ..report import write_report
from ..runs import load_run, task_folders
from ..summary import figures, history, totals
from .bench import main as bench_main
from .tables import print_ensemble, print_table


def cmd_report(args) -> int:
    """Text summary of each run, then the HTML / Markdown / CSV report."""
    for path in task_folders([Path(p) for p in args.run_dirs]):
        run = load_run(path)
        m = run.manifest
        if m.kind == "ensemble":                 # no judge, vLLM or verdicts of its own: its runs'
            print(f"# litjudge ensemble {run.name}: git {m.git_commit}, machine {m.machine_name}")
            if args.text:
                for name, table in run.tables.items():
                    print_table(table, f"## {name}")
            continue
        print(f"# litjudge run {run.name}: protocol {m.protocol}, dataset {m.dataset}")
        print(f"git {m.git_commit}, vLLM {m.vllm}, machine {m.machine_name}")
        if m.raw.get("task"):          # not to be added up over the tasks
            print(f"(the judges' figures are of the whole run {path.parent.name}: each invocation judges all its tasks)")
        total = totals(path)
        for f, j in zip(figures(m), m.judges, strict=True):
            print(f"- {f.judge} [{j.get('backend')}], latest: {f.line()}, re-asked {j.get('reasked', 0)}")
            if f.judge in total and len(history(path)) > 1:
                print(f"  all {len(history(path))} invocations: {total[f.judge].line()}")
        print(f"unparsed {m.verdicts.unparsed} of {m.verdicts.rows}")
        if args.text:
            for name, table in run.tables.items():
                if name not in ("per_item", "per_verdict", "verdict_grid"):
                    print_table(table, f"## {name}")
    page = write_report([Path(p) for p in args.run_dirs], Path(args.out) if args.out else None)
    print(f"Report: {page} (+ report.md, tables/*.csv)")
    return 0


def cmd_compare(args) -> int:

    if args.published:
        return compare_published(args)
    page = write_report([Path(p) for p in args.run_dirs], Path(args.out) if args.out else None)
    print(f"Comparison report: {page} (+ report.md, tables/*.csv)")
    return 0


def compare_published(args) -> int:
    """Each run's numbers beside the paper's (`--published NAME`), with the run's 95% CI."""


    baseline = published(args.published)
    print(f"{baseline.title}\n{baseline.paper}: {baseline.source}")
    if not baseline.tested:
        print("(these rows are not reproduced on this project's test machines: they need the model; see runs/repro/)")
    for path in args.run_dirs:
        run = load_run(Path(path))
        table = beside(baseline, run.manifest.protocol, run.tables, where=str(path))
        if not table.height:
            judges = ", ".join(run.manifest.judge_names)
            wanted = ", ".join(j for r in baseline.rows for j in r.run_judges)
            raise ConfigError(f"no judge of the run is a published row of {baseline.name!r} (run: {judges}; "
                              f"published as: {wanted})", where=str(path))
        print_table(table.with_columns(pl.when(pl.col("inside")).then(pl.lit("inside"))
                                       .when(pl.col("inside").not_()).then(pl.lit("OUTSIDE"))
                                       .otherwise(pl.lit("no CI")).alias("paper in run's 95% CI")).drop("inside"),
                    f"{run.name} beside {baseline.name}", max_rows=200)
        print(headline(baseline, table))
    return 0


def _names(text: str | None) -> list[str] | None:
    """A comma-separated option: None when not given, [] when given empty (a jury of every judge)."""
    return None if text is None else [j.strip() for j in text.split(",") if j.strip()]


def cmd_ensemble(args) -> int:
    """A cascade (`--cascade J1,J2`) and/or a jury (`--jury [J1,J2]`) over finished runs' judges."""
    if args.cascade is None and args.jury is None:
        raise ConfigError("ensemble needs --cascade JUDGE,JUDGE... and/or --jury [JUDGE,...]")
    if args.cascade is None and (args.target, args.delta) != (None, None):    # a jury's run went on, the flag unread
        raise ConfigError("--target and --delta are the cascade's guarantee, and a jury has none: give --cascade "
                          "JUDGE,JUDGE... too, or leave them out")
    out, tables = ensemble(args.run_dirs, args.name, _names(args.cascade), _names(args.jury),
                           CascadeOptions.target if args.target is None else args.target,
                           CascadeOptions.delta if args.delta is None else args.delta, args.calibration_fraction, args.seed)
    return print_ensemble(out, tables)


def cmd_budgets(args) -> int:
    """Verdicts at several reasoning budgets from each stored analysis of an analyze-mode run."""
    out, table = budgets(Path(args.run_dir), parse_budgets(args.budgets), progress=not args.quiet,
                         spend=args.session.spend)
    print_table(table, "Agreement against thinking tokens")
    print(f"Results: {out}")
    return 0


def cmd_check_labels(args) -> int:
    """How distribution mode reads each language's labels at the decision point: in one next-token
    step, or one per prefix the labels share (the modes' own reading)."""
    languages = {"binary": g.binary(), "likert3": g.likert(3), "likert5": g.likert(5), "likert7": g.likert(7),
                 "preference": g.preference(), "score5": g.score(1, 5), "score10": g.score(1, 10)}
    unknown = [n for n in args.languages if n not in languages]
    if unknown:
        raise ConfigError(f"unknown language {unknown[0]!r} (known: {', '.join(languages)})")
    chosen = {n: languages[n] for n in args.languages or ([] if args.label else languages)}
    if args.label:
        chosen["labels"] = g.categorical(args.label, "labels")      # a bad set is refused in one line
    backend = registry.backend_named(args.judge)
    if backend not in LOCAL_BACKENDS:     # not "unknown judge": a judge, no tokenizer
        kind = NOT_GENERATIVE.get(backend, "a recording or an API judge")
        raise ConfigError(f"`litjudge check-labels` reads a generative local model's tokenizer, and {args.judge!r} is "
                          f"not one ({kind}): give a model name or folder", parameter="judge")
    judge = resolve_judge(args.judge)
    renderer = load_renderer(judge.path, judge.chat)
    prompt = renderer.render([Message("user", "Judge this.")], args.prefill)
    ids, eos = renderer.encode(prompt), renderer.tokenizer.eos_token_id
    for name, lang in chosen.items():
        report = check_language(renderer.label_tokens(prompt, lang.labels()), ids, lang.prefixed, eos)
        print(f"{name:11s} single-token: {'yes' if report['single_token'] else 'no '}  -> {report['method']}")
    return 0


LOCAL_BACKENDS = ("vllm", "transformers")
NOT_GENERATIVE = {"vllm-reward": "a reward model: it scores texts and generates none"}


def cmd_generate(args) -> int:
    """Write candidate stories from the TTCW plots with a judge-capable model (reference format)."""
    check_output(Path(args.out))                   # before the engine: the stories are written at the end
    backend = registry.backend_named(args.model)
    if backend not in LOCAL_BACKENDS:
        raise ConfigError(f"`litjudge generate` writes stories with a local model (vLLM or transformers), and "
                          f"{args.model!r} is not one ({NOT_GENERATIVE.get(backend, f'its backend: {backend}')}): "
                          "give a model name or folder", parameter="--model")
    spec = registry.model_spec(args.model, max_model_len=args.max_model_len)
    backend = registry.create(spec)
    try:
        drafts = generate_candidates(backend, load_card("ttcw").folder(args.data_root or ""), Path(args.out),
                                     limit=args.limit, target_words=args.target_words, tolerance=args.tolerance,
                                     max_rounds=args.max_rounds)
    finally:
        backend.close()
    for d in drafts:
        print(f"plot group {d.group}: {d.words} words (target {d.target_words}) after {d.rounds} expansion round(s)")
    print(f"Dataset (generic reference format): {args.out}")
    return 0


def cmd_bench(args) -> int:

    return bench_main(args)
