"""`litjudge export RUN --to DIR`: a finished run as a Hub-ready Hugging Face dataset folder."""
from __future__ import annotations

from pathlib import Path

from ..export import export


def cmd_export(args) -> int:
    done = export(Path(args.run_dir), Path(args.to), prompts=args.prompts)
    rows = ", ".join(f"{name} ({n} rows)" for name, n in done.configs.items())
    print(f"Exported {args.run_dir} -> {args.to}: {rows}")                  # the folders as written
    print(f"  load: datasets.load_dataset({str(done.folder)!r})  (a table: load_dataset(DIR, NAME))")
    print("  publish: huggingface_hub.HfApi().upload_folder(folder_path=DIR, repo_id=\"you/NAME\", "
          "repo_type=\"dataset\")")
    return 0
