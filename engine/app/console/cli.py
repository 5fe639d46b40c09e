"""The `litjudge` command line. Errors a user can cause, and faults of the machine (disk full, a
read-only folder, a locked store), print as one line and exit 2; a bug prints a one-line summary
and the path of a crash log with the traceback, and exits 1."""
from __future__ import annotations

import argparse
import functools
import importlib
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from litjudge.judges import PROTOCOLS

from ...core import envs
from ...core.config import DTYPES
from ...core.console import prepare_environment, printable, quiet, shown, terminal
from ...core.errors import ConfigError, GrammarError, LitjudgeError, PluginInterrupted, fault
from ...core.manifest import litjudge_version
from ...core.paths import run_folder
from ...core.session import Session
from .leave import leave
from .preload import reexec_with_tcmalloc
from .signals import Terminated, stop_on_sigterm

# Commands import what they need when they run: `litjudge --help`, `data list`, `judges` and every
# one-line config error answer without loading polars' plotting, scipy, torch or vLLM.


# The commands that store verdicts as they go (a Ctrl-C keeps what finished, and a re-run resumes).
JUDGING = ("run", "budgets", "ensemble")


def lazy(target: str) -> Callable[[Any], int]:
    """A command implemented in `.module:function`, imported when the command runs; its RUN
    arguments given as folders (`paths.run_folder`: a run's bare name is its folder in the runs
    folder, for every command that reads a finished run, where `annotate` alone took one)."""
    module, _, name = target.partition(":")

    def command(args) -> int:
        for key, given in [(k, v) for k, v in vars(args).items() if k in ("run_dir", "run_dirs")]:
            setattr(args, key, str(run_folder(given)) if isinstance(given, str) else [str(run_folder(r)) for r in given])
        return getattr(importlib.import_module(module, __package__), name)(args)
    return command


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
LIMIT_HELP = "only the first N units, in the data's own order{units}; default: all"


def limit_help() -> str:
    """--limit's help with what each protocol counts (its `Declaration.limit_counts`), read when
    the help is shown (so that `litjudge --help` loads no protocol)."""
    counts: dict[str, list[str]] = {}
    for name in PROTOCOLS.names():
        counts.setdefault(PROTOCOLS.get(name).declared.limit_counts, []).append(name)
    return LIMIT_HELP.format(units=": " + ", ".join(f"{unit} ({', '.join(names)})" for unit, names in counts.items()))


class _Formatter(argparse.HelpFormatter):
    def _get_help_string(self, action: argparse.Action) -> str | None:
        return limit_help() if action.help == LIMIT_HELP else action.help
_replicas = _whole(1, "1 is one engine in this process; leave it out to use the config's [cluster]")
_rows = _whole(0, "0 prints no table")


class _Version(argparse.Action):
    """`litjudge --version`: the installed distribution's version (read only when asked)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, help="print litjudge's version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"litjudge {litjudge_version()}")
        parser.exit()


class _Parser(argparse.ArgumentParser):
    """Usage mistakes are one line too (and exit 2, as argparse does)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **{**kwargs, "formatter_class": _Formatter})

    def error(self, message: str) -> NoReturn:
        print(f"litjudge: error: {self.prog}: {message} (see {self.prog} --help)", file=terminal())
        raise SystemExit(2)


def config_options(p: argparse.ArgumentParser) -> None:
    """What `run` and `plan` both take: the config, and the settings that override its own."""
    p.add_argument("config", help="run config (TOML), e.g. runs/demo.toml, or a committed config's name")
    p.add_argument("--judge", help="override the judge(s): alias, model folder, hub id, replay:NAME; comma-separated")
    p.add_argument("--limit", type=_limit, help=LIMIT_HELP)
    p.add_argument("--mode", choices=["label", "analyze", "distribution", "reward"], help="override the verdict mode")
    p.add_argument("--missing", help='missing-answer policy: "drop", "wrong" or "label:LABEL"')
    p.add_argument("--data-root", help="folder holding the shared datasets (default ../shared/datasets)")
    p.add_argument("--data", help="your own data file (or folder) in the config's dataset layout")
    p.add_argument("--cache", metavar="PATH", help="the verdict cache shared by every run: a file, or a folder to "
                   "hold verdicts.sqlite (default LITJUDGE_VERDICT_CACHE, else verdicts.sqlite in LITJUDGE_CACHE, "
                   "~/.cache/litjudge)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the shared verdict cache")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="litjudge", description="Offline batch LLM-as-a-judge for creative writing.")
    p.add_argument("--version", action=_Version)
    p.add_argument("--verbose", action="store_true", help="show vLLM's, torch's and transformers' own messages "
                                                          "(by default they go to the run's engine.log)")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    r = sub.add_parser("run", help="run a config: plan, judge (resuming), aggregate, write tables")
    config_options(r)
    r.add_argument("--out", help="folder for the run's outputs, written to OUT/NAME (default ./runs/out; "
                                 "also LITJUDGE_RUNS_DIR)")
    r.add_argument("--replicas", type=_replicas, help="engines per judge, each a Ray actor (overrides [cluster])")
    r.add_argument("--address", help='Ray cluster: "local", "auto" or "ray://HOST:PORT" (overrides [cluster])')
    r.add_argument("--show", type=_rows, default=20,
                   help="table rows to print (0: no tables, only the counts, warnings and results folder)")
    r.add_argument("--generate-only", action="store_true",
                   help="with [generate]: write the items (RUN/generated/items.jsonl) and stop before judging")
    r.add_argument("--quiet", action="store_true", help="no progress bar (the tables are printed: --show 0 for none)")
    r.add_argument("--rebuild-store", action="store_true",
                   help="move a corrupt store.sqlite aside (kept) and compute every verdict again")
    r.add_argument("--overwrite", action="store_true",
                   help="write into a run folder that holds the results of another config or other data, replacing "
                        "its tables (its stored verdicts are kept); without it such a folder is refused")
    r.set_defaults(fn=lazy(".run_commands:cmd_run"))
    pl_ = sub.add_parser("plan", help="what a run or sweep will cost: requests, sharing, tokens, estimated time")
    config_options(pl_)
    pl_.add_argument("--calibrate", action="store_true",
                     help="measure this judge's speed here first (starts its engine on a few requests, shows "
                          "progress; stored per judge, dtype and CPU model, replacing an older measurement)")
    pl_.add_argument("--no-calibrate", dest="calibrate", action="store_false",
                     help="the default: estimates only from a stored calibration")
    pl_.add_argument("--out", help="the folder the run writes to (as `run --out`): its stored verdicts are counted")
    pl_.set_defaults(fn=lazy(".run_commands:cmd_plan"))
    rp = sub.add_parser("reparse", help="re-apply parsing and aggregation to stored raw outputs (no model)")
    rp.add_argument("run_dir")
    rp.set_defaults(fn=lazy(".run_commands:cmd_reparse"))
    rep = sub.add_parser("report", help="report of finished runs: HTML (plots embedded), Markdown and CSV tables")
    rep.add_argument("run_dirs", nargs="+", metavar="RUN")
    rep.add_argument("--out", help="folder to write (default: RUN/report)")
    rep.add_argument("--text", action="store_true", help="also print every table")
    rep.set_defaults(fn=lazy(".commands:cmd_report"))
    ex = sub.add_parser("export", help="a finished run as a Hugging Face dataset folder (parquet configs and a dataset "
                                       "card), ready for the Hub")
    ex.add_argument("run_dir", metavar="RUN")
    ex.add_argument("--to", required=True, metavar="DIR", help="the folder to write (new, empty, or an earlier export)")
    ex.add_argument("--prompts", action="store_true", help="also each verdict's prompt as sent (the judged texts: "
                                                           "check the data card's license before publishing)")
    ex.add_argument("--push-to-hub", metavar="REPO", help="then upload the folder to the Hugging Face Hub as the "
                                                          "dataset REPO (you/NAME; created if new; your token: "
                                                          "`hf auth login` or HF_TOKEN)")
    ex.set_defaults(fn=lazy(".export_commands:cmd_export"))
    cmp_ = sub.add_parser("compare", help="the report's panels side by side across runs (judges, prompt variants)")
    cmp_.add_argument("run_dirs", nargs="+", metavar="RUN")
    cmp_.add_argument("--out", help="folder to write (default: compare-A-vs-B beside the first run's folder)")
    cmp_.add_argument("--published", metavar="NAME",
                      help="the paper's numbers beside the run's, with its 95%% CI (ttcw-notebook, litbench, li2025)")
    cmp_.set_defaults(fn=lazy(".commands:cmd_compare"))
    en = sub.add_parser("ensemble", help="a cascade with an agreement guarantee, or a calibrated jury, over finished "
                                         "runs' judges (from stored verdicts)")
    en.add_argument("run_dirs", nargs="+", metavar="RUN")
    en.add_argument("--cascade", metavar="J1,J2", help="judges cheapest first; each answers above its certified threshold")
    en.add_argument("--jury", nargs="?", const="", metavar="J1,J2", help="pool these judges (default: all)")
    en.add_argument("--target", type=float, help="agreement with humans on answered items (cascade; default 0.8)")
    en.add_argument("--delta", type=float, help="the guarantee fails with probability <= delta (cascade; default 0.1)")
    en.add_argument("--calibration-fraction", type=float, default=0.5, help="clusters used to fit/certify")
    en.add_argument("--seed", type=int, default=0)
    en.add_argument("--name", default="ensemble", help="output folder name under runs/out (default: ensemble)")
    en.set_defaults(fn=lazy(".commands:cmd_ensemble"))
    an = sub.add_parser("annotate", help="a local web page where people label the items of a finished run that narrow "
                                         "the interval most (drawn by the judges' uncertainty); live estimates")
    an.add_argument("run_dir", metavar="RUN")
    an.add_argument("--annotator", metavar="NAME", help="put this name in the printed URL")
    an.add_argument("--budget", type=_whole(1), metavar="N",
                    help="draws of the queue (default 50; a started queue: its own)")
    an.add_argument("--per-item", type=_whole(1), metavar="K", help="annotators per item (default: the queue's last "
                    "given, else 1)")
    an.add_argument("--floor", type=float, metavar="F", help="share of the draw probabilities drawn by "
                    "size, whatever the judges say (default 0.2)")
    an.add_argument("--seed", type=int, metavar="S", help="seed of the draws (default 0)")
    an.add_argument("--lock", type=float, default=600.0, metavar="SECONDS",
                    help="how long an item shown to one annotator is kept from the others (default 600)")
    an.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; any other needs the "
                                                         "printed token)")
    an.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: a free one)")
    an.add_argument("--new-token", action="store_true", help="beyond loopback: a new token for the queue (the one "
                                                             "it keeps across restarts stops working)")
    an.add_argument("--import", dest="import_file", metavar="FILE", help="store labels collected elsewhere (CSV or "
                                                                          "JSONL: annotator, item, label) and exit")
    an.add_argument("--export", dest="export_file", metavar="FILE", help="write the labels to a new .csv or .jsonl "
                                                                          "file, or a Hugging Face dataset folder "
                                                                          "(no suffix), and exit")
    an.add_argument("--simulate", metavar="COLUMN", help="answer the queue from this human column of the run (TTCW: "
                                                          "expert_pass; pairwise: human) and report labels needed, "
                                                          "coverage and a plot for the three designs, and exit")
    an.add_argument("--repeats", type=int, default=None, metavar="R", help="repeats of the simulation (default 500)")
    an.add_argument("--target-width", type=float, metavar="W", help="the 95%% half width the labels needed are for "
                                                                   "(default: uniform PPI++'s at the budget)")
    an.set_defaults(fn=lazy(".annotate_commands:cmd_annotate"))
    st = sub.add_parser("status", help="a run folder's provider batches (API judges with [api] batch = true): "
                                       "open ones with their size and age")
    st.add_argument("run_dir", metavar="RUN")
    st.add_argument("--cancel-batches", action="store_true", help="cancel the run's open provider batches")
    st.set_defaults(fn=lazy(".light_commands:cmd_status"))
    bu = sub.add_parser("budgets", help="verdicts at several reasoning budgets from an analyze-mode run's stored "
                                        "analyses (one generation, the tails only)")
    bu.add_argument("run_dir", metavar="RUN")
    bu.add_argument("--budgets", default="0,32,64,128,full", help="token budgets and 'full', comma-separated")
    bu.add_argument("--quiet", action="store_true", help="no progress bar")
    bu.set_defaults(fn=lazy(".commands:cmd_budgets"))
    pr = sub.add_parser("protocols", help="list the protocols and dataset loaders, built in or from plugins "
                                          "(each with where it came from)")
    pr.set_defaults(fn=lazy(".light_commands:cmd_protocols"))
    j = sub.add_parser("judges", help="list judge aliases and backends (--prepare obtains and converts the aliases)")
    j.add_argument("names", nargs="*", help="only these aliases")
    j.add_argument("--prepare", action="store_true")
    j.set_defaults(fn=lazy(".light_commands:cmd_judges"))
    cf = sub.add_parser("config", help="the configuration reference: every key of a config, or one with --explain KEY")
    cf.add_argument("--explain", metavar="KEY", help="one key (or a table, or a key's last part): type, default, "
                                                    "allowed values, what it does")
    cf.set_defaults(fn=lazy(".config_command:cmd_config"))
    c = sub.add_parser("check-labels", help="how distribution mode reads each verdict language's labels with a judge: "
                                            "in one next-token step, or in how many")
    c.add_argument("judge")
    c.add_argument("languages", nargs="*")
    c.add_argument("--prefill", default="", help="assistant text before the label (the decision point)")
    c.add_argument("--label", action="append", default=[], metavar="LABEL",
                   help="a label of your own set (repeat it: --label Great --label Good --label Poor), checked as "
                        "the `labels` language")
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
    d.set_defaults(fn=lazy(".light_commands:cmd_data"))
    b = sub.add_parser("bench", help="benchmark litjudge against common practice on TTCW (docs: measurements.md)")
    b.add_argument("--stories", type=_whole(1, "the TTCW stories with text to judge"), default=36)
    b.add_argument("--hf-subset", type=_whole(1), default=8, help="requests for the one-at-a-time transformers baseline")
    b.add_argument("--free-tokens", type=_whole(1), default=512,
                   help="(b)'s free-form answer length, as peers allow (512); fewer for a quick check")
    b.add_argument("--skip-hf", action="store_true")
    b.add_argument("--skip-naive", action="store_true")
    b.add_argument("--judge", default="smollm2-135m")
    b.add_argument("--block-size", type=_whole(0, "0: the default"), default=0,
                   help="vLLM KV block size (0: the default; CPU: 32)")
    b.add_argument("--dtype", choices=DTYPES, default="auto",
                   help="the judge's weights and compute (auto: bfloat16 where the CPU has AMX or AVX-512 BF16)")
    b.add_argument("--compile", action="store_true", help="torch.compile the vLLM model (slower start-up)")
    b.add_argument("--out", default="", help="write the results table (JSON) here")
    b.set_defaults(fn=lazy(".commands:cmd_bench"))
    return p


def crash_log(exc: BaseException, session: Session) -> Path:
    """The traceback of an unexpected error, kept for a bug report."""
    folder = session.cache_dir / "crash"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    path.write_text(f"litjudge {' '.join(sys.argv[1:])}\n\n" + "".join(traceback.format_exception(exc)))
    return path


def console_log(session: Session) -> Path:
    """This invocation's console log, in litjudge's own folder (the session's cache_dir); a file
    standing where that folder should be is one line naming the setting to change."""
    folder = session.cache_dir
    blocked = next((p for p in (folder, *folder.parents) if p.exists()), folder)
    if not blocked.is_dir():
        what = "console logs, the verdict cache, crash reports"
        if envs.LITJUDGE_CACHE is not None:
            raise ConfigError(f"LITJUDGE_CACHE={folder}: {blocked} is a file, and litjudge keeps its own files ({what}) "
                              "in a folder: point LITJUDGE_CACHE at a folder")
        raise ConfigError(f"{blocked} is a file where litjudge keeps its own folder {folder} ({what}): move it, or set "
                          "LITJUDGE_CACHE to a folder")
    return folder / "logs" / f"litjudge-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"


def command_session(args: argparse.Namespace) -> Session:
    """The command's Session: `--out` (run, plan), `--cache` / `--no-cache`, `--quiet`, `--verbose`
    over the environment's settings; passed to the command as `args.session`."""
    out = getattr(args, "out", None) if args.command in ("run", "plan") else None
    cache = False if getattr(args, "no_cache", False) else getattr(args, "cache", None)
    return Session.current(out=out or None, cache=cache, progress=not getattr(args, "quiet", False),
                           verbose=args.verbose)


def main(argv: list[str] | None = None) -> int:
    """The console: `argv` from Python returns the command's exit code; without it (the command
    line) the process ends with it (console/leave.py)."""
    if argv is None:                     # the command line (not a test calling main): maybe under tcmalloc
        reexec_with_tcmalloc(sys.argv[1:])
    code = command(argv)
    if argv is None:
        leave(code)
    return code


@functools.cache
def parser() -> argparse.ArgumentParser:
    """The console's parser, built once a process: its 18 commands took 8 ms of argparse (a
    formatter and a terminal-size lookup per option) at every call of `main` from Python, 9 s of
    the config fuzz test's 24. Parsing reads it and never changes it: each call gets a namespace
    of its own."""
    return build_parser()


LISTS = ("run_dirs", "names", "languages")      # a command's list of positionals


def parsed(argv: list[str] | None) -> argparse.Namespace:
    """The arguments, with a command's list of names continued after an option (`data list
    --data-root X ttcw`, `report RUN_A --out X RUN_B`): argparse ends the list at the first option
    and refused the rest as "unrecognized arguments"."""
    args, extra = parser().parse_known_args(argv)
    lists = [name for name in LISTS if isinstance(getattr(args, name, None), list)]
    if extra and len(lists) == 1 and not any(e.startswith("-") for e in extra):
        setattr(args, lists[0], [*getattr(args, lists[0]), *extra])
        return args
    return parser().parse_args(argv) if extra else args      # anything else: argparse's own one line


def command(argv: list[str] | None) -> int:
    args = parsed(argv)
    prepare_environment(args.verbose)            # third-party libraries' own variables, before they load
    stop_on_sigterm()
    try:
        session = args.session = command_session(args)
        args.console_log = log = console_log(session)
    except LitjudgeError as exc:
        print(printable(f"litjudge: error: {exc}"), file=terminal())
        return 2
    try:
        with quiet(log, enabled=not args.verbose), shown():
            code = args.fn(args)
            sys.stdout.flush()              # a closed pipe is met here, where it is answered, not at exit
            return code
    except (LitjudgeError, GrammarError) as exc:
        print(printable(f"litjudge: error: {exc}"), file=terminal())
        return 2
    except Terminated:
        stored = "; finished verdicts are stored and a re-run resumes" if args.command in JUDGING else ""
        print(f"litjudge: stopped (SIGTERM){stored}", file=terminal())
        return 128 + signal.SIGTERM
    except PluginInterrupted as exc:
        print(f"litjudge: interrupted {exc.where}: if that was not Ctrl-C, the plugin's import raised "
              f"KeyboardInterrupt itself: fix or uninstall {exc.distribution}", file=terminal())
        return 130
    except KeyboardInterrupt:
        stored = "; finished verdicts are stored and a re-run resumes" if args.command in JUDGING else ""
        print(f"litjudge: interrupted{stored}", file=terminal())
        return 130
    except BrokenPipeError:                 # `litjudge protocols | head -3`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # the interpreter's last flush goes nowhere
        return 128 + signal.SIGPIPE
    except OSError as exc:
        print(printable(f"litjudge: error: {fault(exc, exc.filename or 'a file')}"), file=terminal())
        return 2
    except Exception as exc:  # noqa: BLE001  (a bug: one line here, the traceback in a file)
        try:
            where = f"; the traceback is in {crash_log(exc, session)}"
        except OSError:
            where = ""
        print(printable(f"litjudge: internal error: {type(exc).__name__}: {str(exc)[:300]} (a bug, please report "
                        f"it{where})"), file=terminal())
        return 1


if __name__ == "__main__":
    sys.exit(main())
