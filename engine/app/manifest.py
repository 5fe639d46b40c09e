"""A run folder's manifest as the code reads it: one typed object, built once from manifest.json (or
from the dict a run has just written), so every reader names fields, not keys.

The file itself stays a plain JSON record of everything a run knew (config, machine, each judge's
figures with backend-specific details); `raw` keeps it whole for the two places that rewrite it
(`reparse`) or echo it (the history).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.config import RunConfig
from ..core.schema import build

# The run's `[api] key_env` (the variable's name, never the key) is also noted in its store's meta table
# when it starts: `status --cancel-batches` finds it for a run killed before its manifest was written
# (the usual case for open provider batches).
KEY_ENV_NOTE = "api_key_env"


@dataclass(frozen=True)
class VerdictCounts:
    """How many verdict rows a run (or one judge of it) holds, and how many did not parse or are missing."""

    rows: int = 0
    unparsed: int = 0
    missing: int = 0

    @classmethod
    def of(cls, d: Any) -> VerdictCounts:
        d = d if isinstance(d, dict) else {}
        return cls(int(d.get("rows", 0) or 0), int(d.get("unparsed", 0) or 0), int(d.get("missing", 0) or 0))

    @property
    def parsed(self) -> int:
        return self.rows - self.unparsed - self.missing


@dataclass(frozen=True)
class TaskEntry:
    """One task of a multi-task run: its name, protocol, dataset and folder."""

    task: str
    protocol: str = ""
    dataset: str = ""
    folder: str = ""


@dataclass(frozen=True)
class RunManifest:
    """What a run, a multi-task run, a sweep, an ensemble or a generation-only run recorded.

    `kind`: "run" (one task), "tasks", "sweep", "ensemble" or "generation". `judges`: each judge's
    entry as the runner recorded it (judge, backend, plan, generated, unanswered, seconds, and the
    backend's own details: api, cluster, throughput). `config`: the validated run config, which
    `recorded_config` rebuilds into a RunConfig."""

    kind: str = "run"
    protocol: str = ""
    protocol_version: str = ""
    mode: str = ""
    dataset: str = ""
    data: dict[str, Any] = field(default_factory=dict)       # the data files' identity when the run read them
    config: dict[str, Any] = field(default_factory=dict)
    judges: tuple[dict[str, Any], ...] = ()
    tasks: tuple[TaskEntry, ...] = ()
    warnings: tuple[str, ...] = ()
    unanswered: int = 0
    verdicts: VerdictCounts = VerdictCounts()
    verdicts_by_judge: dict[str, VerdictCounts] = field(default_factory=dict)
    missing_policy: str = "drop"
    generation: tuple[dict[str, Any], ...] = ()
    items_path: str = ""                                     # a generation-only run's items file
    sharing: dict[str, int] = field(default_factory=dict)     # a sweep's requests shared across cells
    generated_now: int = 0
    stage_seconds: dict[str, float] = field(default_factory=dict)   # the run's own stages (aggregate, ...)
    litjudge: str | None = None
    vllm: str | None = None
    git_commit: str | None = None
    machine: dict[str, Any] = field(default_factory=dict)
    created: str | None = None
    seconds: float | None = None
    interrupted: bool = False
    failed: str = ""                                         # a history line's: the error that stopped it
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, d: dict[str, Any]) -> RunManifest:
        """The typed view of a manifest record (every field optional: older and partial records read too)."""
        config, protocol, dataset = _table(d, "config"), _table(d, "protocol"), _table(d, "dataset")
        return cls(
            kind=d.get("kind") or "run",
            protocol=str(protocol.get("name") or config.get("protocol", "")),
            protocol_version=str(protocol.get("version", "")),
            mode=str(config.get("mode", "")),
            dataset=str(dataset.get("card", "")),
            data=_table(dataset, "data"),
            config=config,
            judges=_rows(d, "judges"),
            tasks=tuple(TaskEntry(t["task"], t.get("protocol", ""), t.get("dataset", ""), t.get("folder", ""))
                        for t in _rows(d, "tasks") if "task" in t),
            warnings=tuple(str(w) for w in d.get("warnings") or ()),
            unanswered=int(d.get("unanswered") or 0),
            verdicts=VerdictCounts.of(d.get("verdicts")),
            verdicts_by_judge={k: VerdictCounts.of(v) for k, v in _table(d, "verdicts_by_judge").items()},
            missing_policy=str(d.get("missing_policy") or "drop"),
            generation=_rows(d, "generation"),
            items_path=str(_table(d, "items").get("path", "")),
            sharing=_table(d, "sharing"),
            generated_now=int(d.get("generated_now") or 0),
            stage_seconds=_table(d, "stage_seconds"),
            litjudge=d.get("litjudge"), vllm=d.get("vllm"), git_commit=d.get("git_commit"),
            machine=_table(d, "machine"),
            created=d.get("created"),
            seconds=d.get("seconds"),
            interrupted=bool(d.get("interrupted")),
            failed=str(d.get("failed") or ""),
            raw=d,
        )

    @property
    def api_key_env(self) -> str:
        """The environment variable that held the API key of the run's API judges ("" for none)."""
        return str((self.config.get("api") or {}).get("key_env", "") or "")

    @property
    def judge_names(self) -> list[str]:
        return [j["judge"] for j in self.judges]

    @property
    def machine_name(self) -> str | None:
        """The GPU, else the CPU, the run ran on."""
        return self.machine.get("gpu") or self.machine.get("cpu")


def _table(d: dict[str, Any], key: str) -> dict[str, Any]:
    """A sub-table of the record, {} where it is absent or not a table."""
    value = d.get(key)
    return dict(value) if isinstance(value, dict) else {}


def _rows(d: dict[str, Any], key: str) -> tuple[dict[str, Any], ...]:
    """A list of tables in the record (what is not a table is left out)."""
    value = d.get(key)
    return tuple(x for x in value if isinstance(x, dict)) if isinstance(value, list) else ()


def recorded_config(run_dir: Path, manifest: RunManifest) -> RunConfig:
    """The run config a finished run recorded in its manifest, validated again."""
    cfg = dict(manifest.config)
    source = cfg.pop("source", "")
    return build(RunConfig, cfg, str(run_dir / "manifest.json"), source=source)
