"""A run folder belongs to one run: one config and one dataset. A run (or sweep) about to write
into a folder that holds the finished run of another config or other data is refused in one line
naming the folder and the overwrite switch, never silently replaced; `litjudge.judge()` without a
name gets a folder of its own per config and data (`default_name`).

"The same run" means the same claim:
- the config's identity: the validated config (as the manifest records it) without its runtime
  settings, which change speed, memory, location or how much is judged but not what a verdict is:
  `name`, `source`, `limit` (a longer run of the same data resumes a shorter one; a shorter one than a
  finished run's is refused where the folder holds judged tables, as it would rewrite them to fewer
  items: `holds_judged_tables`), `data_root` and
  the dataset's file path (the data's own bytes are compared instead), `[cluster]`, `[engine]` but
  its `dtype` (part of a verdict's content key), `[api]` but `structured` (what is asked of the
  provider); and without what only aggregation reads (`[ppi]`, the missing-answer policy, the
  protocol's aggregate-only options, `Declaration.post_options`): changed, the run reads its stored
  verdicts again into the same folder, nothing generated, and its manifest records the new settings
  (a sweep's `[sweep.post]` and `rank_by` too: it ranks again);
  Everything else counts: protocol, judges, mode, the other options, sampling, the dataset's card,
  loader and column and value mapping, truncation, re-asks, tasks, [generate];
- the data's sha256, of each data file the run reads (a folder or a hub dataset is named by the config).
A run of the same claim resumes in the folder (the crash and resume path); the protocol's own
version is not part of it, so a run resumes across a litjudge upgrade.

`DataRead` is also what the manifest records of the data: the file hashed before anything reads it,
and checked unchanged (inode, size, modification time) before the run's outputs are written, so a
file replaced while the run read it is one error, not a manifest naming bytes that were not judged.
"""
from __future__ import annotations

import fnmatch
import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from litjudge.judges import PROTOCOLS

from ..core.config import RunConfig
from ..core.console import say
from ..core.errors import ConfigError, DataError
from ..core.manifest import config_dict, data_identity
from ..core.paths import file_identity
from ..core.settings import PPIConfig
from ..data.cards import DatasetCard

RUNTIME = ("name", "source", "limit", "data_root", "cluster")
SWEEP_CLAIM = ("axes", "cells")      # a sweep's matrix; its post settings and rank_by are aggregation only
# read only by aggregation, so compared at their defaults: a run's stored verdicts answer them again
AGGREGATION = {"ppi": config_dict(PPIConfig()), "missing": "drop"}
DATASET_LOCATION = ("path", "root", "base", "name", "title")   # where an inline dataset is, not what it holds


@dataclass(frozen=True)
class DataRead:
    """A data file (or folder) as the run found it before reading it."""

    identity: dict[str, Any]            # path, bytes and sha256 (the manifest's `data`; a folder's: `files` too)
    stamp: tuple[int, ...] | None       # a file's `file_identity` (its rewrite shows); None for a folder

    @classmethod
    def of(cls, location: Path) -> DataRead:
        stamp = _stamp(location)
        return cls(data_identity(location), stamp)

    @property
    def sha256(self) -> str:
        """A data file's sha256, the claim's ("": a folder, whose hash the manifest records for
        reparse, is named by the config in the claim)."""
        return "" if "files" in self.identity else str(self.identity.get("sha256", ""))

    def check_unchanged(self) -> None:
        """One DataError when the file was replaced or rewritten since it was hashed."""
        if self.stamp is not None and _stamp(Path(self.identity["path"])) != self.stamp:
            raise DataError("the data file changed while the run read it (replaced or rewritten): its verdicts are "
                            "stored, but its tables would mix two versions; run again to judge the file as it is now",
                            path=self.identity["path"])


def data_reads(config: RunConfig, tasks: list[tuple[str, DatasetCard, Path]]) -> dict[str, DataRead]:
    """Each task's data (name, card, location) hashed as it is before anything reads it (a generated
    or hub dataset is not: it is the config's). Its rows are then read once before the folder is
    claimed, by `PreparedRun.check_first_unit` (a table's maps checked on its first row as the
    loader reads it, this run's own mistakes first, whatever the folder holds)."""
    if config.generate.enabled:
        return {}
    return {name: DataRead.of(location) for name, card, location in tasks if not card.hub}


def _stamp(location: Path) -> tuple[int, ...] | None:
    try:
        identity = file_identity(location)
    except OSError:
        return (-1,)                                      # gone: unlike any file's
    return identity if location.is_file() else None


@dataclass(frozen=True)
class Claim:
    """What a run folder holds: its kind, the config's identity and the data's sha256s."""

    kind: str
    config: dict[str, Any]
    data: tuple[str, ...] = ()
    limit: int | None = None            # a run's (or tasks') limit: not the run's identity, but never shrunk unasked
    settings: str = ""                  # what only aggregation reads (AGGREGATION), for command-line overrides
    units: int | None = None            # the units a finished run judged (what a limit counts; the most of its tasks')

    @property
    def digest(self) -> str:
        body = json.dumps({"kind": self.kind, "config": self.config, "data": self.data}, sort_keys=True,
                          separators=(",", ":"), ensure_ascii=False, default=str)
        return hashlib.sha256(body.encode("utf-8")).hexdigest()


def config_identity(config: dict[str, Any], *, data_hashed: bool = True) -> dict[str, Any]:
    """A recorded or new config (`manifest.config_dict`) without its runtime settings, and with the
    settings only aggregation reads at their defaults (see the module: a folder named by this
    identity's digest keeps its name for a run that never set them)."""
    out = {k: v for k, v in config.items() if k not in RUNTIME}
    out.update(AGGREGATION, options=_requested(config.get("protocol"), config.get("options")))
    if isinstance(config.get("tasks"), list):
        out["tasks"] = [{k: v for k, v in t.items() if k != "missing"}
                        | ({"options": _requested(t.get("protocol", config.get("protocol")), t["options"])}
                           if "options" in t else {}) if isinstance(t, dict) else t for t in config["tasks"]]
    engine = config.get("engine") or {}
    per_judge = {j: t.get("dtype") for j, t in (engine.get("judges") or {}).items() if isinstance(t, dict)}
    out["engine"] = {"dtype": engine.get("dtype", "auto"), "judges": {j: d for j, d in per_judge.items() if d}}
    out["api"] = {"structured": (config.get("api") or {}).get("structured", "auto")}
    dataset = config.get("dataset")
    if isinstance(dataset, dict) and data_hashed:
        out["dataset"] = {k: v for k, v in dataset.items() if k not in DATASET_LOCATION}
    return out


def _requested(protocol: Any, options: Any) -> Any:
    """A protocol's options without those only its aggregation reads (`post_options`)."""
    if not isinstance(options, dict) or not isinstance(protocol, str) or protocol not in PROTOCOLS:
        return options
    post = PROTOCOLS.get(protocol).declared.post_options
    return {k: v for k, v in options.items() if k not in post}


def _hashes_data(kind: str, config: dict[str, Any]) -> bool:
    """Whether a claim compares the data's bytes: a one-task run or a sweep reading data it did not
    generate (a multi-task run and a [generate] run are compared by their config alone)."""
    return kind in ("run", "sweep") and not (config.get("generate") or {}).get("generators")


def cells_data(config: RunConfig, preps: list[Any]) -> list[DataRead]:
    """The data files a sweep's cells (their PreparedRuns) read, each once, hashed before any is read."""
    tasks = {str(loc): (str(loc), p.card, loc) for p in preps for loc in (p.context().dataset_path,)}
    return list(data_reads(config, list(tasks.values())).values())


def sweep_claim(run_dir: Path, config: dict[str, Any], reads: list[DataRead], **extra: Any) -> Claim:
    """A sweep's claim, its data's sha256s in it as a run's are (a sweep edited to read changed data
    replaced its tables unsaid); a sweep folder of before 2026-12-03 recorded none and keeps its claim."""
    old = recorded_claim(run_dir)
    return claim_of("sweep", sweep_config(config, extra.get("axes")),
                    [] if old is not None and old.kind == "sweep" and not old.data else reads, **extra)


def sweep_config(config: dict[str, Any], axes: Any) -> dict[str, Any]:
    """A sweep's base config as its manifest records it and its claim compares it: without its matrix
    axes, which each cell sets (the base's defaults there, `judge = "smollm2-135m"` in a sweep of
    replayed judges, named a judge it never ran)."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in config.items()}
    for axis in axes if isinstance(axes, list) else []:
        head, _, tail = str(axis).partition(".")
        if tail and isinstance(out.get(head), dict):
            out[head].pop(tail, None)
        elif not tail:
            out.pop(head, None)
    return out


def _recorded_shas(recorded: Any) -> tuple[str, ...]:
    """A manifest's data files' sha256s; none where one is missing or a folder (the config names those)."""
    if not isinstance(recorded, list) or not recorded or not all(
            isinstance(d, dict) and d.get("sha256") and "files" not in d for d in recorded):
        return ()
    return tuple(str(d["sha256"]) for d in recorded)


def claim_of(kind: str, config: dict[str, Any], reads: list[DataRead], **extra: Any) -> Claim:
    """The claim of a run about to start (`extra`: a sweep's axes and cells, SWEEP_CLAIM)."""
    hashed = _hashes_data(kind, config) and bool(reads) and all(r.sha256 for r in reads)
    return Claim(kind, {**config_identity(config, data_hashed=hashed), **extra},
                 tuple(r.sha256 for r in reads) if hashed else (), _limit(kind, config), _settings(config))


def _settings(config: dict[str, Any]) -> str:
    return _canonical({k: config.get(k) for k in AGGREGATION})


# The kinds of folder whose judging a `limit` cuts (an ensemble's reads finished runs whole).
LIMITED_KINDS = ("run", "tasks", "sweep")


def _limit(kind: str, config: dict[str, Any]) -> int | None:
    limit = config.get("limit") if kind in LIMITED_KINDS else None
    return limit if isinstance(limit, int) else None


def recorded_claim(run_dir: Path) -> Claim | None:
    """The claim of the finished run a folder holds (None: no finished run, or a manifest that
    cannot be read, which a new run then writes again)."""
    try:
        m = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(m, dict) or not isinstance(m.get("config"), dict):
        return None
    kind = m.get("kind", "run")
    recorded = m.get("data") if kind == "sweep" else [(m.get("dataset") or {}).get("data")]
    shas = _recorded_shas(recorded) if _hashes_data(kind, m["config"]) else ()
    extra = {k: m.get(k) for k in SWEEP_CLAIM} if kind == "sweep" else {}
    config = sweep_config(m["config"], m.get("axes")) if kind == "sweep" else m["config"]
    return Claim(kind, {**config_identity(config, data_hashed=bool(shas)), **extra}, shas,
                 _limit(kind, config), _settings(config),
                 m["units"] if kind in LIMITED_KINDS and isinstance(m.get("units"), int) else None)


def holds_another(run_dir: Path, new: Claim) -> bool:
    """Whether the folder holds a finished run of another claim than `new`."""
    old = recorded_claim(run_dir)
    return old is not None and not _same(old, new)


def claim(run_dir: Path, new: Claim, *, overwrite: bool, switch: str) -> None:
    """Refuse (one ConfigError naming the folder and `switch`) to write `new` into a folder that
    holds a finished run of another claim, unless overwrite is asked for."""
    refuse_foreign(run_dir, switch)
    old = recorded_claim(run_dir)
    if old is None or overwrite:
        return
    other = _other(switch)
    if _same(old, new):
        if _shorter(new, old) and holds_judged_tables(run_dir):
            every = old.limit is None or (old.units is not None and old.units < old.limit)
            raise ConfigError(f"holds a finished run of {'every item' if every else f'the first {old.limit}'}"
                              f", and limit {new.limit} would rewrite its tables to the first {new.limit}: to write the "
                              f"limited run elsewhere, {other}; or {switch} to replace its tables (its stored verdicts "
                              "are kept)", where=str(run_dir))
        return
    raise ConfigError(f"holds the results of another run ({difference(old, new)}); a run folder keeps one config "
                      f"and one dataset: {other}, or {switch} to replace that run's tables (its stored verdicts "
                      "are kept and reused where they match)", where=str(run_dir))


# Files only a run of litjudge's writes: a folder holding one is a run's (begun, finished, or its store
# moved aside by --rebuild-store), never the user's own.
RUN_MARKS = ("store.sqlite", "store.sqlite-*", "manifest.json", "history.jsonl", "store.sqlite.corrupt-*")


def _other(switch: str) -> str:
    return ("give the config another `name` (or --out another folder)" if switch.startswith("--")
            else "give this call another name= (or out=)")


def refuse_foreign(run_dir: Path, switch: str) -> None:
    """One ConfigError when the folder is the user's own (`not_a_run`), before a run's lock (which
    would write .lock into it) or anything else is written there."""
    if foreign := not_a_run(run_dir):
        raise ConfigError(f"is a folder of yours, not a litjudge run's (it holds {', '.join(foreign[:4])}"
                          f"{', ...' if len(foreign) > 4 else ''}), and a run writes its files there (results.json, "
                          f"tables/, log.jsonl): {_other(switch)}", where=str(run_dir))


def not_a_run(run_dir: Path) -> list[str]:
    """What a folder holds when no run of litjudge's has begun in it (no RUN_MARKS): a folder of
    the user's, whose results.json or tables/ a run would overwrite. Hidden files (.lock,
    .gitkeep, a temporary being written) and judge()'s rows alone (input/data.jsonl) are no such
    thing. [] for a run's folder, an empty one or none."""
    if not run_dir.is_dir():
        return []
    # one listing, read once: another thread's run making its store between a check for the marks
    # and the listing had its store.sqlite listed as a file of the user's
    held = list(run_dir.iterdir())
    if any(fnmatch.fnmatch(p.name, mark) for p in held for mark in RUN_MARKS):
        return []
    return sorted(p.name + ("/" if p.is_dir() else "") for p in held if not p.name.startswith(".") and not _only_rows(p))


def _only_rows(path: Path) -> bool:
    """judge()'s rows, written before the run's store: `input/` holding data.jsonl alone, or being
    written (empty, or a hidden temporary beside it): another thread's judge() of the same folder,
    caught between its mkdir and its rename, read as a folder of the user's."""
    return path.name == "input" and path.is_dir() and all(p.name == "data.jsonl" or p.name.startswith(".")
                                                          for p in path.iterdir())


def _shorter(new: Claim, old: Claim) -> bool:
    """`new` judges fewer items than `old` did: a limit below the units it judged (a limit of 100 on a
    full run of 12 pairs judges the same 12), or, where its manifest does not say, below its limit."""
    if new.limit is None:
        return False
    if old.units is not None:
        return new.limit < old.units
    return old.limit is None or new.limit < old.limit


def holds_judged_tables(run_dir: Path) -> bool:
    """Whether the folder holds tables built from verdicts (verdicts.parquet beside them: the run's
    own, or a task's in RUN/<task>/; a sweep's ranking), what a shorter limit would rewrite. A generation-only run's
    tables describe the items it wrote, not verdicts: a judging run of any limit loses nothing."""
    verdicts = [run_dir / "verdicts.parquet", *run_dir.glob("*/verdicts.parquet")]
    return any(v.is_file() and (v.parent / "tables").is_dir() for v in verdicts) or \
        (run_dir / "sweep_ranking.parquet").is_file()          # a sweep's, from its cells' verdicts


def _same(old: Claim, new: Claim) -> bool:
    """The same run: kind, config and data (a [generate] stage run alone is the start of the same
    config's run, which judges what it generated)."""
    resumed = old.kind == "generation" and new.kind in ("run", "tasks")
    if (old.kind != new.kind and not resumed) or _canonical(old.config) != _canonical(new.config):
        return False
    return not (old.data and new.data) or old.data == new.data


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


def difference(old: Claim, new: Claim) -> str:
    """What differs, as a user reads it: "protocol 'ttcw', this one 'pairwise'", "other data"."""
    if old.kind != new.kind:
        return f"a {old.kind}, and this is a {new.kind}"
    keys = [k for k in sorted(set(old.config) | set(new.config))
            if _canonical(old.config.get(k)) != _canonical(new.config.get(k))]
    parts = []
    for key in keys[:3]:
        was, now = old.config.get(key), new.config.get(key)
        short = all(isinstance(v, (str, int, float, bool, type(None))) for v in (was, now))
        parts.append(f"{key} {was!r}, this one {now!r}" if short else f"another {key}")
    if old.data and new.data and old.data != new.data:
        parts.append(f"other data (sha256 {old.data[0][:12]}..., this one {new.data[0][:12]}...)")
    return "; ".join(parts) or "another config"


def default_name(prefix: str, new: Claim) -> str:
    """A folder name of its own for this config and data (`pairwise-python-1a2b3c4d`)."""
    return f"{prefix}-{new.digest[:8]}"


def folder_for(run_dir: Path, new: Claim, *, derive: str, overwrite: bool) -> Path:
    """Where a run goes: its folder, or, when `derive` names what made this run another (command-line
    overrides such as "--judge, --mode") and its folder holds the run without them, a folder of its
    own beside it (`ttcw-binary-1a2b3c4d`), said in one line; the same command again finds it. An
    override of what only aggregation reads (`--missing`) goes beside too: the config's folder keeps
    its tables (a config's own change of them re-aggregates in place)."""
    old = recorded_claim(run_dir)
    if not derive or overwrite or old is None or _same(old, new) and old.settings == new.settings:
        return run_dir
    derived = run_dir.with_name(default_name(run_dir.name, new))
    say(f"litjudge: {run_dir} holds another run; this one ({derive}) goes to {derived}", logging.WARNING)
    return derived


def lost_store_note(run_dir: Path) -> list[str]:
    """A store emptied (0 bytes) although the last manifest lists finished verdicts: say so now,
    before everything is computed again, rather than quietly starting over."""
    store, manifest = run_dir / "store.sqlite", run_dir / "manifest.json"
    if not (store.exists() and store.stat().st_size == 0 and manifest.exists()):
        return []
    try:
        rows = json.loads(manifest.read_text()).get("verdicts", {}).get("rows", 0)
    except (json.JSONDecodeError, OSError, AttributeError):
        return []
    if not rows:
        return []
    note = (f"{store} is empty although {manifest.name} lists {rows} finished verdicts: the store was lost, "
            "so every verdict is computed again")
    say(f"litjudge: warning: {note}", logging.WARNING)
    return [note]
