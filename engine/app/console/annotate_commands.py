"""`litjudge annotate RUN`: serve the annotation page, or import or export its labels."""
from __future__ import annotations

from pathlib import Path

from ...core.console import terminal
from ..annotate.labels import FILE
from ..annotate.serve import Annotation, Options, export_labels, import_labels, open_queue
from .signals import Terminated


def cmd_annotate(args) -> int:
    options = Options(args.budget, args.floor, args.seed, args.per_item, args.lock, args.host, args.port)
    run = Path(args.run_dir)
    if args.import_file or args.export_file:
        queue, labels = open_queue(run, options)
        try:
            if args.import_file:
                stored, again = import_labels(queue, labels, Path(args.import_file))
                print(f"Imported {args.import_file}: {stored} submissions stored, {again} already there")
            if args.export_file:
                n = export_labels(labels, Path(args.export_file))
                print(f"Exported {n} labels -> {args.export_file}")
        finally:
            labels.close()
        return 0
    app = Annotation(run, options, args.annotator)
    q = app.queue
    print(f"Annotation queue of {run} ({q.protocol}: {q.quantity}): {len(q.design.draws)} draws over "
          f"{len(set(q.design.draws.tolist()))} of {len(q.clusters)} clusters, by {q.uncertainty_source}")
    if app.token:
        print(f"Bound to {args.host}: every request needs the token (in the URL below)")
    print(f"Open {app.url}", flush=True)
    print("Stop with Ctrl-C; labels are saved as they are submitted.", file=terminal(), flush=True)
    try:
        app.run()
    except (KeyboardInterrupt, Terminated):        # the way to stop it: nothing is lost
        print(f"litjudge: annotation server stopped; every submitted label is in {run / FILE}", file=terminal())
    return 0
