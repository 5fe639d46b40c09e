"""`litjudge reparse RUN`: the exact parsers applied again to every stored raw output, then the
tables rebuilt from the store with the run's own recorded config. No model is touched. A run of
several tasks is rebuilt task by task (its store is shared, each task has its own folder)."""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import polars as pl

from litjudge.grammars import language_from_spec
from litjudge.judges import PROTOCOLS
from litjudge.judges.base import Protocol

from ..core.backend import JudgeSpec
from ..core.console import say
from ..core.errors import StoreError
from ..core.manifest import data_identity
from ..core.run_lock import run_folder_lock
from ..core.runner import parse_result
from ..core.store import Store
from ..data.cards import dataset_card
from .annotate.annotations import load_annotations
from .manifest import RunManifest, recorded_config
from .outputs import read_manifest, write_outputs
from .results_file import results, tasks_results, write_results
from .run import PreparedRun, aggregate_store, by_judge, run_id, verdict_counts


def reparse(run_dir: Path) -> dict[str, int]:
    """Re-parse every stored output, then rebuild the tables of the run (or of each of its tasks),
    under the run folder's lock (a run or another reparse writing them is waited for by no one)."""
    with run_folder_lock(run_dir):
        return _reparse(run_dir)


def _reparse(run_dir: Path) -> dict[str, int]:
    manifest = read_manifest(run_dir, rewriting=True)
    if manifest.kind in ("sweep", "ensemble"):
        raise StoreError(f"{run_dir}: a {manifest.kind}, not a run: "
                         + ("its cells' tables are built from the store by `litjudge run` of the sweep config again "
                            "(nothing is generated twice)" if manifest.kind == "sweep" else
                            "rebuild it with `litjudge ensemble` (or run its config again)"))
    store = Store.open(run_dir / "store.sqlite", create=False)
    try:
        counts = reparse_store(store)
        if manifest.kind == "tasks":
            for task in manifest.tasks:
                folder = run_dir / task.task
                rebuild(folder, read_manifest(folder, rewriting=True), store, task.task)
            write_results(run_dir, tasks_results([(t.task, json.loads((run_dir / t.task / "results.json").read_text()))
                                                  for t in manifest.tasks], manifest.raw))
        elif manifest.kind != "generation":       # a generation-only run has no tables to rebuild
            rebuild(run_dir, manifest, store)
    finally:
        store.close()
    return counts


def reparse_store(store: Store) -> dict[str, int]:
    """Every stored output through the runner's own `parse_result`. A row stored before failures
    had a column of their own (empty output, unparsed, with a reason) is read as a failure."""
    changed = total = 0
    with store.db:
        for r in list(store.results()):
            total += 1
            legacy = r.failure is None and r.raw == "" and r.status == "unparsed" and r.reason is not None
            status, label, value, reason = parse_result(r.raw, r.distribution, language_from_spec(r.language),
                                                        r.reason if legacy else r.failure, r.cut)
            if (status, label, reason) != (r.status, r.label, r.reason):
                changed += 1
            store.replace_parse(r.key, status, label, value, reason)
    return {"results": total, "changed": changed}


def data_changed_warning(folder: Path, manifest: RunManifest, protocol: Protocol) -> None:
    """Say so when the run's data file is no longer the bytes it judged (its sha256 in the
    manifest), and which labels the rebuilt tables read: the file's as it is now where the
    protocol loads the data to aggregate, else those stored with the run's requests (it said "as
    they are now" of a rubric whose tables kept every old label)."""
    recorded = manifest.data
    if not recorded.get("sha256"):
        return
    path = Path(recorded["path"])
    now = data_identity(path).get("sha256") if path.exists() else None
    if now != recorded["sha256"]:
        state = f"now {now[:12]}" if now else "it is gone"
        read = ("the rebuilt tables read its labels as they are now" if protocol.declared.labels_when_aggregating else
                "the rebuilt tables keep the human labels stored with the run's requests, as they were then; run the "
                "config again to read the file as it is (stored verdicts are reused, none generated again)")
        kind = "folder" if path.is_dir() else "file"
        say(f"litjudge: warning: {folder}: the data {kind} {path} changed since the run (sha256 {recorded['sha256'][:12]} "
              f"then, {state}): {read}", logging.WARNING)


def rebuild(folder: Path, manifest: RunManifest, store: Store, task: str = "") -> None:
    """One run's (or task's) tables from the store. Tables the protocol does not compute (items
    skipped before planning, the generation stage's) are kept as they were."""
    config = recorded_config(folder, manifest)
    protocol = PROTOCOLS.get(config.protocol)()
    data_changed_warning(folder, manifest, protocol)
    specs = tuple(JudgeSpec(j["judge"], j.get("backend", ""), "", j.get("fingerprint", ""), "")
                  for j in manifest.judges)
    prep = PreparedRun(config, protocol, protocol.options(config),
                    dataset_card(config.dataset, config.source, config.protocol), specs, load_annotations(config))
    verdicts, tables, warnings = aggregate_store(prep, store, {s.name: run_id(config, task, s.name) for s in specs})
    for path in sorted((folder / "tables").glob("*.parquet")):
        if path.stem not in tables:
            try:
                tables[path.stem] = pl.read_parquet(path)
            except (pl.exceptions.PolarsError, OSError):     # damaged, and not the protocol's to rebuild
                say(f"litjudge: warning: {path} is unreadable and not rebuilt by the protocol: dropped", logging.WARNING)
    record = {**manifest.raw, "verdicts": verdict_counts(verdicts), "verdicts_by_judge": by_judge(verdicts),
              "warnings": warnings, "reparsed": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    write_outputs(folder, tables, verdicts, record, store)
    write_results(folder, results(protocol, prep.options, tables, record))
