"""A finished run as a Hugging Face dataset folder, ready for the Hub (`litjudge export RUN --to DIR`).

    DIR/README.md                 the dataset card: a YAML header the Hub reads, then what ran
    DIR/data/verdicts.parquet     one row per verdict: the item's fields (item_id and what the protocol
                                  recorded of it: story, test, pair, order, question, human answer...)
                                  beside the verdict (status, label, value, raw output, probabilities)
    DIR/data/<table>.parquet      each of the run's tables that has rows (an empty one is named in the card)

The header's `configs` name each file, so `datasets.load_dataset(DIR)` gives the verdicts (the
default config) and `load_dataset(DIR, "overall")` a table, each one split ("train", the split the
Hub and `load_dataset` take by default); `license` comes from the data card (the Hub's identifier
where the card names a known license, else `other` with the card's words in the body). The body
names the judges, the protocol and its version, litjudge's version and commit, and the manifest's
hashes (the data file's sha256, each judge's weights fingerprint and chat-template hash, your
prompt template's sha256), the rubric's questions, the mode and sampling, and the headline metrics
as the run's results.json gives them. It names no absolute path of the user's disk: data files
relative to the run config's folder, any other path (a replay file, a local model's folder, also in
the tables' `judge` column) as `<local path>/NAME` (public.py). Columns are typed for the Hub:
`value` in its type (text where the verdicts mix kinds, as a rubric's Yes / 3 / A), `distribution`
(and `analysis_distribution`) a list of floats beside its labels (never a null-typed column). Publishing is one call,
made by `export --push-to-hub REPO` (push_to_hub here) or by hand:

    from huggingface_hub import HfApi
    HfApi().upload_folder(folder_path="DIR", repo_id="you/NAME", repo_type="dataset")

Judged texts are not copied unless asked (`--prompts`: each verdict's prompt as it was sent): they
may not be yours to publish (the data card's license says).
"""
from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from litjudge.judges import PROTOCOLS

from ..core.errors import BackendUnavailable, ConfigError, StoreError
from ..core.paths import run_folder_hint
from ..core.run_lock import run_folder_lock
from ..core.verdicts import answered_and_unread
from .export_card import MARKER, card
from .manifest import RunManifest
from .outputs import file_mode, guarded, read_logged_prompts, read_manifest, read_table
from .public import config_folder, public_names
from .runs import run_tables


@dataclass(frozen=True)
class Exported:
    folder: Path
    configs: dict[str, int]                  # config name -> rows
    answered: int = 0                        # verdicts the judges answered (read or not)
    unread: int = 0                          # of them, those no verdict could be read from (status unparsed)


def verdict_rows(run_dir: Path, prompts: bool = False, protocol: str = "",
                 tables: dict[str, pl.DataFrame] | None = None) -> pl.DataFrame:
    """A run's verdicts, one row per verdict, as Result.verdicts gives them (with `answer`, the
    verdict in the text's frame, where `protocol` and its `tables` give one), with each prompt as
    sent when asked and logged."""
    path = run_dir / "verdicts.parquet"
    if not path.exists():
        raise StoreError(f"{run_dir}: no verdicts.parquet; `litjudge reparse {run_dir}` rebuilds it from the store")
    verdicts = with_answer(protocol, read_table(path), tables or {})
    if not prompts:
        return verdicts
    log = run_dir / "log.jsonl"
    if not log.exists():
        raise ConfigError("the run logged no prompts (log.jsonl): export it without --prompts", where=str(run_dir))
    logged = read_logged_prompts(log)
    return verdicts.with_columns(pl.col("key").replace_strict(logged, default=None, return_dtype=pl.Utf8).alias("prompt"))


def _parts(run_dir: Path, manifest: RunManifest, prompts: bool) -> dict[str, pl.DataFrame]:
    """Config name -> rows: the verdicts, then each table (a run of several tasks: each task's, prefixed)."""
    if manifest.kind == "tasks":
        out: dict[str, pl.DataFrame] = {}
        for task in manifest.tasks:
            for name, df in _parts(run_dir / task.task, read_manifest(run_dir / task.task), prompts).items():
                out[f"{task.task}-{name}"] = df
        return out
    if manifest.kind != "run":
        said = {"sweep": "a sweep folder holds its cells' verdicts in its store, not in run folders: export a run "
                         "of the cell you want (its config without [matrix])",
                "ensemble": "an ensemble folder: export one of its member runs (a folder holding verdicts.parquet)"}
        raise ConfigError(said.get(manifest.kind, f"a {manifest.kind} folder: export a run folder (one holding "
                                   "verdicts.parquet)"), where=str(run_dir))
    tables = run_tables(run_dir, manifest)
    return {"verdicts": verdict_rows(run_dir, prompts, manifest.protocol, tables), **tables}


def with_answer(protocol: str, verdicts: pl.DataFrame, tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """The verdicts with `answer`, the verdict in the text's frame, as the protocol reads it (its
    `human_view`, the report's item viewer's): pairwise "a" / "b" / "tie" naming the text picked
    whichever order it was shown in (`label` / `value` name the position shown: A is the text shown
    first), TTCW "Yes" / "No"; and `human`, the humans' answer in the same frame, where the verdicts
    carry none of their own (TTCW's expert majority is in per_item, not in a request). Unchanged
    where the protocol gives no answer of its own."""
    if "answer" in verdicts.columns or not verdicts.height or protocol not in PROTOCOLS:
        return verdicts
    indexed = verdicts.with_row_index("_row")
    view = PROTOCOLS.get(protocol)().viewed(indexed, tables)
    if "_row" not in view.columns or view.height != verdicts.height:
        return verdicts
    view = view.sort("_row")
    added = [view[c].cast(pl.Utf8).alias(name) for c, name in (("answer", "answer"), ("truth", "human"))
             if c in view.columns and name not in verdicts.columns and view[c].null_count() < view.height]
    return verdicts.with_columns(added)


def export(run_dir: str | Path, to: str | Path, prompts: bool = False) -> Exported:
    """Write the Hub-ready folder `to` (new, empty, or an earlier export, which it replaces). The files
    are written in a staging folder of export's own inside `to` (one filesystem: moved into place by
    rename), marked as export's; a refusal of the disk is one line naming `--to`, and leaves `to` as
    it was (a folder export made is taken away again)."""
    run_dir, to = Path(run_dir).expanduser(), Path(to).expanduser().resolve()   # "--to ." names its folder
    if not run_dir.is_dir():
        raise ConfigError(f"not a run folder ({run_folder_hint(by_name=True)})", where=str(run_dir))
    # a reparse rewriting the run (its tables and card of one version), another export into `to`
    with run_folder_lock(run_dir), _target_lock(to):
        if to.is_dir():
            _finish_interrupted(to)
        return _export(run_dir, to, prompts)


@contextlib.contextmanager
def _target_lock(to: Path) -> Iterator[None]:
    """The folder holding `to` (its nearest existing one: the same for every export into `to`, made
    or not) locked while an export checks and writes it: two exports into one folder each took the
    other's staging folder for a killed one's."""
    held = next((p for p in (*to.parents, to) if p.is_dir()), None)
    if held is None:
        yield
        return
    fd = os.open(held, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _finish_interrupted(to: Path) -> None:
    """An export killed mid-way, made whole: between its two renames it left the new data/ under the
    earlier card (another run's name over this run's rows, which `load_dataset` read in silence):
    the staged card follows its data; killed with the earlier data/ moved out and the new not in,
    the earlier is put back. Then the staging folder goes."""
    for stale in [p for p in to.glob(f"{STAGING}*") if _is_staging(p)]:
        if not (stale / "data").exists() and (stale / "README.md").exists() and (to / "data").is_dir():
            os.replace(stale / "README.md", to / "README.md")
        elif (stale / "old-data").is_dir() and not (to / "data").exists():
            os.replace(stale / "old-data", to / "data")
        _remove_staging(stale)


def _export(run_dir: Path, to: Path, prompts: bool) -> Exported:
    manifest = read_manifest(run_dir)
    if to.exists() and (not to.is_dir() or (_holds_more_than_staging(to) and MARKER not in _text(to / "README.md"))):
        raise ConfigError("exists and is not an earlier export: give a new (or empty) folder", where=str(to))
    if foreign := _not_exported(to):
        raise ConfigError(f"data/ holds files the earlier export did not write ({', '.join(foreign[:4])}), which "
                          "replacing it would delete: move them out of data/, or give a new folder", where=str(to))
    blocker = next((p for p in to.parents if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise ConfigError(f"{blocker} is a file, not a folder: give --to a folder's path", where=str(to))
    base = _config_base(manifest, run_dir)
    every = {name: hub_typed(public_judges(df, base)) for name, df in _parts(run_dir, manifest, prompts).items()}
    parts = {name: df for name, df in every.items() if df.height}     # a split needs rows: empty tables left out
    if not parts:
        raise ConfigError("the run has no verdicts to export", where=str(run_dir))
    made = next((p for p in (*reversed(to.parents), to) if not p.exists()), None)   # the first folder export makes
    try:
        guarded(lambda: _write(to, parts, card(manifest, parts, run_dir, [n for n in every if n not in parts], base)),
                to, "--to")
    except BaseException:
        if made is not None:                     # what export made, and only while it is empty
            for folder in (to, *to.parents):
                if not folder.is_relative_to(made):
                    break
                try:
                    folder.rmdir()
                except OSError:
                    break
        raise
    return Exported(to, {name: df.height for name, df in parts.items()}, *_answers(parts))


def _answers(parts: dict[str, pl.DataFrame]) -> tuple[int, int]:
    """The answers the exported verdicts hold (a run of tasks: every task's), and how many of them
    could not be read as a verdict."""
    read = [answered_and_unread(df) for name, df in parts.items() if name.endswith("verdicts")]
    return sum(a.height for a, _ in read), sum(u.height for _, u in read)


def public_judges(df: pl.DataFrame, base: Path | None) -> pl.DataFrame:
    """The `judge` column with its paths made public (a replay file, a local model's folder)."""
    if "judge" not in df.columns or df.schema["judge"] != pl.Utf8 or not df.height:
        return df
    names = public_names([n for n in df["judge"].unique().to_list() if n is not None], base)
    return df.with_columns(pl.col("judge").replace_strict(names, default=None, return_dtype=pl.Utf8))


def hub_typed(df: pl.DataFrame) -> pl.DataFrame:
    """Columns the Hub reads with a type: a null-typed column takes the type it would have had
    (`distribution` and `analysis_distribution` a list of floats, any other text); a struct of label
    probabilities becomes the list of floats beside `<column>_labels` (the labels in the same order)."""
    out = df
    for column in ("distribution", "analysis_distribution"):
        if column not in out.columns:
            continue
        dtype = out.schema[column]
        if isinstance(dtype, pl.Struct):
            labels = [f.name for f in dtype.fields]
            out = out.with_columns(
                pl.when(pl.col(column).is_null()).then(None).otherwise(
                    pl.concat_list([pl.col(column).struct.field(n).cast(pl.Float64) for n in labels])
                ).alias(column),
                pl.when(pl.col(column).is_null()).then(None).otherwise(
                    pl.lit(pl.Series([labels], dtype=pl.List(pl.Utf8)))).alias(f"{column}_labels"))
        elif dtype == pl.Null:              # no verdict had any: the same columns, empty (one schema for every export)
            out = out.with_columns(pl.col(column).cast(pl.List(pl.Float64)),
                                   pl.lit(None, pl.List(pl.Utf8)).alias(f"{column}_labels"))
    nulls = [c for c, t in out.schema.items() if t == pl.Null]
    return out.with_columns(pl.col(c).cast(pl.Utf8) for c in nulls) if nulls else out


def push_to_hub(folder: Path, repo: str) -> str:
    """Upload an export to the Hub as a dataset repo (created when new); its URL. One line when the
    Hub cannot be reached, refuses the token, or huggingface_hub is missing."""
    try:
        from huggingface_hub import HfApi
    except ImportError:
        raise BackendUnavailable("--push-to-hub needs huggingface_hub: pip install huggingface_hub") from None
    try:
        api = HfApi()
        api.create_repo(repo, repo_type="dataset", exist_ok=True)
        info = api.upload_folder(folder_path=str(folder), repo_id=repo, repo_type="dataset",
                                 ignore_patterns=[f"{STAGING}*"], commit_message="litjudge export")
    except Exception as exc:  # noqa: BLE001  (the Hub's and the network's errors alike: one line, the folder kept)
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise ConfigError(f"could not push to the Hub ({type(exc).__name__}: {reason}); the export is in {folder}: "
                          "check the network and your token (`hf auth login` or HF_TOKEN), then push again",
                          where=f"--push-to-hub {repo}") from None
    return str(getattr(info, "commit_url", "") or f"https://huggingface.co/datasets/{repo}")


STAGING = ".litjudge-export-"      # export's staging folders, inside the target: the prefix of their names
STAGED = ".written-by-litjudge-export"    # the file marking one: only a folder holding it is ever removed


def _holds_more_than_staging(folder: Path) -> bool:
    return any(not _is_staging(p) for p in folder.iterdir())


def _is_staging(path: Path) -> bool:
    return path.name.startswith(STAGING) and (path / STAGED).is_file()


def _remove_staging(path: Path) -> None:
    if _is_staging(path):
        shutil.rmtree(path, ignore_errors=True)


def _write(to: Path, parts: dict[str, pl.DataFrame], readme: str) -> None:
    """The parquet files and the card, staged, then moved into `to` (an earlier export's data/ and
    README.md replaced; nothing else of `to` touched: a clone's .git stays). What an export killed
    mid-way left is removed first (it carries the marker)."""
    to.mkdir(parents=True, exist_ok=True)
    for stale in to.glob(f"{STAGING}*"):
        _remove_staging(stale)
    staging = Path(tempfile.mkdtemp(prefix=STAGING, dir=to))
    old = staging / "old-data"
    try:
        (staging / STAGED).write_text("a staging folder of `litjudge export`; safe to remove\n", encoding="utf-8")
        (staging / "data").mkdir(mode=file_mode(folder=True))
        for name, df in parts.items():          # through memory: the disk's refusal is Python's OSError, errno
            buffer = io.BytesIO()                # and all (polars' own writer words it "Invalid thrift")
            df.write_parquet(buffer)
            (staging / "data" / f"{name}.parquet").write_bytes(buffer.getvalue())
        (staging / "README.md").write_text(readme, encoding="utf-8")
        os.chmod(staging / "README.md", file_mode())
        if (to / "data").exists():
            os.replace(to / "data", old)
        try:
            os.replace(staging / "data", to / "data")
        except OSError:
            if old.exists():
                os.replace(old, to / "data")       # the earlier export stays whole
            raise
        os.replace(staging / "README.md", to / "README.md")
    finally:
        if not (staging / "data").exists() and (staging / "README.md").exists() and (to / "data").is_dir():
            with contextlib.suppress(OSError):    # Ctrl-C between the renames: the card follows its data
                os.replace(staging / "README.md", to / "README.md")
        _remove_staging(staging)


def _not_exported(to: Path) -> list[str]:
    """What an earlier export's data/ holds that its card does not list (its header's data_files):
    a file the user put there, or a card copied into a folder of theirs. Replacing data/ would
    delete it."""
    data = to / "data"
    if not data.is_dir():
        return []
    listed = set(re.findall(r'path:\s*"?data/([^"\n]+?)"?\s*$', _text(to / "README.md"), flags=re.M))
    return sorted(p.name for p in data.iterdir() if p.name not in listed)


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def _config_base(manifest: RunManifest, run_dir: Path) -> Path | None:
    """The run config's folder. A config named relative to the folder the run was started from (its
    `source` "p.toml") is found where results.json, written then, named the data file relative to it:
    the data file's recorded path less that name; else the source resolved from here."""
    try:
        public = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))["dataset"]["data"]["path"]
        recorded = manifest.raw["dataset"]["data"]["path"]
    except (OSError, ValueError, KeyError, TypeError):
        public = recorded = None
    if isinstance(public, str) and isinstance(recorded, str) and public and not public.startswith("<") \
            and not Path(public).is_absolute() and Path(recorded).is_absolute():
        whole, tail = Path(recorded), Path(public)
        if whole.parts[-len(tail.parts):] == tail.parts:
            return Path(*whole.parts[:-len(tail.parts)])
    return config_folder(manifest.raw.get("config"))
