"""`litjudge annotate RUN`: serve the annotation page, or import or export its labels."""
from __future__ import annotations

import math
import socket
from pathlib import Path

from litjudge.judges.metrics.active import MAX_COST, MIN

from ...core.console import printable, terminal
from ...core.errors import ConfigError, DataError
from ..annotate.labels import FILE
from ..annotate.queue import Queue, build_queue, finished_run
from ..annotate.queue_store import Options, QueueChanged, open_queue, open_stored, per_item, settings
from ..annotate.serve import Annotation, export_labels, import_labels, unfinished, url_of
from ..annotate.simulate import run_simulation
from .signals import Terminated


def cmd_annotate(args) -> int:
    options = Options(args.budget, args.floor, args.seed, args.per_item, args.lock, args.host, args.port, args.new_token)
    run = finished_run(Path(args.run_dir), by_name=True)       # a name: its folder (cli.lazy)
    _refuse_mixed(args)
    if args.simulate:
        return simulate(run, options, args)
    if args.import_file or args.export_file:
        return import_export(run, options, args)
    app = Annotation(run, options, args.annotator)
    q = app.queue
    asked = settings(run, options).floor
    # said where it happens (--help says 0.2, and a new user read 0.86 in /api/info, explained under "Method" only)
    raised = (f"; the floor raised from {asked:g} to {q.design.floor:.2f} before any label, so that the draws cost "
              f"at most {MAX_COST:g} times uniform's variance if the judges' uncertainty means nothing"
              if q.design.floor > asked + 1e-9 else "")
    skewed = (f"; the active interval from {q.min_draws} labelled draws on (the judges' probabilities make the "
              "draws skewed: a simulation of the queue under them)" if q.min_draws > MIN else "")
    if q.min_draws > len(q.design.draws):     # said before anyone labels: the budget is fixed once started
        print(f"litjudge: warning: the active interval needs {q.min_draws} labelled draws and the queue's budget is "
              f"{len(q.design.draws)}: it will give the human-only interval alone (a new queue with --budget "
              f"{q.min_draws} or more gives both)", file=terminal())
    print(f"Annotation queue of {run} ({q.protocol}: {q.quantity}): {len(q.design.draws)} draws over "
          f"{len(set(q.design.draws.tolist()))} of {len(q.clusters)} clusters, by {q.uncertainty_source}"
          + (f"; {q.outside}" if q.outside else "") + raised + skewed)
    if app.token:
        print(f"Bound to {args.host}: every request needs the token (in the URL below)")
    print(f"Open {app.url}", flush=True)
    if args.host in ("0.0.0.0", "::"):             # every address of this machine: colleagues need one of them
        print(f"Colleagues open it by this machine's name or address in place of {args.host} (e.g. "
              f"{url_of(socket.gethostname(), app.port, app.token)})", flush=True)
    print("Stop with Ctrl-C; labels are saved as they are submitted.", file=terminal(), flush=True)
    try:
        app.run()
    except (KeyboardInterrupt, Terminated):        # the way to stop it: nothing is lost
        pass
    # also where uvicorn's own handler took the signal and run() returned: a server started as a shell's
    # background job (SIGINT ignored, which uvicorn raises again on exit) stopped without a word
    print(f"litjudge: annotation server stopped; every submitted label is in {run / FILE}", file=terminal())
    return 0


def import_export(run: Path, options: Options, args) -> int:
    """`--import FILE` and/or `--export FILE`. An export alone never starts a queue, and exports
    from the store alone a queue whose run was judged again since (the labels stay the people's); a
    refused first import starts no queue either (its budget stays open)."""
    started = (run / FILE).exists()
    if args.export_file and not args.import_file and not started:
        raise ConfigError(f"no labels to export: the annotation queue of {run} has not been started (no {FILE})",
                          where=str(run))
    queue: Queue | None
    try:
        queue, labels = open_queue(run, options)
    except QueueChanged as changed:
        if args.import_file:
            raise
        queue, labels = None, open_stored(run)
        print(printable(f"litjudge: warning: {changed}"), file=terminal())     # the error names the folder
    try:
        if args.import_file:
            assert queue is not None
            try:
                stored, again = import_labels(queue, labels, Path(args.import_file),
                                              per_item(labels, options, keep=False), starts=not started)
            except DataError:
                if not started:
                    labels.close()
                    for part in (FILE, f"{FILE}-wal", f"{FILE}-shm"):
                        (run / part).unlink(missing_ok=True)
                raise
            per_item(labels, options)                       # stored: its --per-item is the queue's from now on
            if not started:
                s = settings(run, options)
                print(f"Started the annotation queue of {run} to import into: --budget {s.budget} --floor {s.floor:g} "
                      f"--seed {s.seed} (fixed from now on: {FILE})")
            print(f"Imported {args.import_file}: {stored} submissions stored, {again} already there")
            for line in unfinished(queue, labels):
                print(f"litjudge: unfinished story {line}", file=terminal())
        if args.export_file:
            n = export_labels(queue, labels, Path(args.export_file))
            alone = "" if queue is not None else " (from the store alone: score, counted and the judges' totals are empty)"
            print(f"Exported {n} labels -> {args.export_file}{alone}")
    finally:
        labels.close()
    return 0


def _refuse_mixed(args) -> None:
    """Options of one mode given with another's, in one line (the server started silently with a
    simulation's --repeats, and --simulate ignored --export)."""
    if not args.simulate and (args.repeats is not None or args.target_width is not None):
        given = "--repeats" if args.repeats is not None else "--target-width"
        raise ConfigError(f"{given} goes with --simulate COLUMN (a simulation of the queue); without it, annotate "
                          "serves the page")
    if args.simulate and (args.import_file or args.export_file):
        given = "--import" if args.import_file else "--export"
        raise ConfigError(f"--simulate answers the queue from the run's own column and stores nothing: {given} is "
                          "for the labels people gave; run them apart")
    if args.new_token and (args.simulate or args.import_file or args.export_file):    # it was ignored, unsaid
        raise ConfigError("--new-token replaces the token of the page served beyond loopback: give it with --host to "
                          "serve the page, not with --import, --export or --simulate")


def simulate(run: Path, options: Options, args) -> int:
    """`--simulate COLUMN`: the three designs answered from the run's human column (no store is
    opened, no label written)."""

    s = settings(run, options)
    queue = build_queue(run, s.budget, floor=s.floor, seed=s.seed, floor_by=s.floor_by, pairs_by=s.pairs_by)
    sim = run_simulation(queue, args.simulate, 500 if args.repeats is None else args.repeats, seed=s.seed,
                         target=args.target_width)
    print(f"Simulated queue of {run} ({queue.protocol}: {queue.quantity}) answered from {sim.column!r} "
          f"(its estimate from every label: {sim.truth:.4f}): {sim.repeats} repeat{'s' * (sim.repeats != 1)} of "
          f"{sim.budget} draws over "
          f"{len(queue.clusters)} clusters, active by {queue.uncertainty_source}")
    print(f"{'design':<15} {'labels':>6} {'mean half width':>15} {'coverage':>8} {'with an interval':>16}")
    for r in sim.rows:
        width, cover = ("no interval", "-") if r.intervals == 0 else (f"{r.half_width:.4f}", f"{r.coverage:.3f}")
        print(f"{r.design:<15} {r.labels:>6} {width:>15} {cover:>8} {r.intervals:>16.3f}")
    if queue.min_draws > MIN:            # why active gives no interval before it (a helper read it as a fault)
        print(f"The active design gives no interval before {queue.min_draws} labelled draws: the judges' "
              "probabilities make the draws skewed (a simulation of the queue under them; docs/annotate.md, "
              "\"Skewed draws\")")
    if sim.target != sim.target:         # NaN: uniform PPI++ gives no interval at the budget
        print("Labels needed: not compared (no repeat of uniform PPI++ gives an interval at this budget: every labelled "
              "draw the same value, say); give --target-width")
    else:
        first = {r.design: MIN for r in sim.rows} | {"active": queue.min_draws}   # each curve's first interval
        # whole labels: the interpolated 10.04 printed "active 10.0" beside "uniform PPI++ 10 or fewer"
        whole = {r.design: math.ceil(r.needed - 1e-9) if r.needed == r.needed else 0 for r in sim.rows}
        print(f"Labels needed for a half width of {sim.target:.4f}: " + ", ".join(
            f"{r.design} more than {sim.reach}" if r.needed != r.needed else       # NaN: past the curves
            f"{r.design} {MIN} or fewer" if whole[r.design] <= MIN else            # at the first point
            f"{r.design} {whole[r.design]} (its first interval)" if r.needed <= first[r.design] else
            f"{r.design} {whole[r.design]}" for r in sim.rows))
    print(f"Plot: {sim.plot}")
    return 0
