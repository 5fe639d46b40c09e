"""`litjudge config`: the configuration reference on the terminal, the same entries as the docs
site's reference page: every key with its default (`litjudge config`), or one key's type, default,
allowed values and doc (`litjudge config --explain KEY`)."""
from __future__ import annotations

import shutil

from ..config_reference import as_text, explain, sections


def cmd_config(args) -> int:
    if args.explain:
        print("\n\n".join(as_text(e) for e in explain(args.explain)))
        return 0
    width = shutil.get_terminal_size((120, 24)).columns
    for section in sections():
        print(f"{section.title}")
        for e in section.entries:
            line = f"  {e.key:34s} {e.default or '-':16s} {e.doc}"
            print(line if len(line) <= width else line[: width - 3] + "...")
    print("\n`litjudge config --explain KEY` prints one key in full (KEY may be a table, e.g. engine, or a "
          "key's last part, e.g. dtype)")
    return 0
