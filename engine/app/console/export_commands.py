"""`litjudge export RUN --to DIR [--push-to-hub REPO]`: a finished run as a Hub-ready Hugging Face
dataset folder, uploaded when asked."""
from __future__ import annotations

from pathlib import Path

from ...core.console import terminal
from ..export import export, push_to_hub


def cmd_export(args) -> int:
    done = export(Path(args.run_dir), Path(args.to), prompts=args.prompts)
    rows = ", ".join(f"{name} ({n} rows)" for name, n in done.configs.items())
    print(f"Exported {args.run_dir} -> {args.to}: {rows}")                  # the folders as written
    print(f"  load: datasets.load_dataset({str(done.folder)!r})  (a table: load_dataset(DIR, NAME))")
    if done.unread:                          # a dataset of unread answers is exported, and said
        print(f"litjudge: warning: {done.unread} of the {done.answered} answers exported could not be read as a "
              "verdict (status unparsed, why in `reason`): " + ("the dataset holds no verdict" if done.unread ==
              done.answered else "their rows hold no label"), file=terminal())
    if getattr(args, "push_to_hub", None):
        print(f"  pushed to the Hub: {push_to_hub(done.folder, args.push_to_hub)}")
    else:
        print(f"  publish: litjudge export {args.run_dir} --to {args.to} --push-to-hub you/NAME")
    return 0
