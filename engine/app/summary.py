"""One typed summary of what a run's judges did, read from its manifest, with the one formula for
verdicts per second and the prefix-cache hit rate (the console, `report`'s text and the report's
header all print these), and the run folder's history: every invocation appends its figures to
RUN/history.jsonl, so a re-run that generated nothing does not hide the figures of the one that
did (the manifest is the latest invocation's; the history keeps them all).

>>> rate(0.0023)
'0.0023'
>>> rate(12.345)
'12.3'
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from ..core.errors import LitjudgeError
from ..core.manifest import git_commit
from ..core.runner import JudgeRun
from .manifest import RunManifest

HISTORY = "history.jsonl"


def rate(value: float | None) -> str:
    """A rate with 3 significant digits (0.0023, 0.512, 12.3, 1,234), never a misleading 0.00."""
    if value is None:
        return "n/a"
    if value == 0:
        return "0"
    if value >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


@dataclass(frozen=True)
class JudgeFigures:
    """One judge of one invocation: what was planned, generated, how long, how much the prefix
    cache served."""

    judge: str
    requests: int
    distinct: int
    generated: int
    seconds: float
    prompt_tokens: int
    cached_tokens: int
    # an API judge's: requests answered, their estimated cost, and at most what attempts left without an
    # answer may be billed (the manifest holds the latest invocation's alone: a re-run wrote 0 over it)
    api_requests: int = 0
    api_usd: float = 0.0
    api_maybe_billed_usd: float = 0.0

    @property
    def verdicts_per_s(self) -> float | None:
        """Verdicts generated per second of this judge's work (None when it generated none)."""
        return self.generated / self.seconds if self.generated and self.seconds > 0 else None

    @property
    def cache_hit(self) -> float | None:
        """Share of the prompt tokens the prefix cache served (None when nothing was prefilled)."""
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None

    @classmethod
    def from_manifest(cls, j: dict[str, Any]) -> JudgeFigures:
        t, plan, api = j.get("throughput") or {}, j.get("plan") or {}, j.get("api") or {}
        return cls(j["judge"], int(plan.get("requests", 0)), int(plan.get("distinct_requests", 0)),
                   int(j.get("generated") or 0), float(j.get("seconds") or 0.0), int(t.get("prompt_tokens") or 0),
                   int(t.get("cached_tokens") or 0), int(api.get("requests") or 0),
                   float(api.get("estimated_cost_usd") or 0.0), float(api.get("maybe_billed_usd_at_most") or 0.0))

    def line(self) -> str:
        hit = "n/a" if self.cache_hit is None else f"{100 * self.cache_hit:.0f}%"
        spent = (f", API {self.api_requests} answered, ~${self.api_usd:.4g}"
                 + (f" (+ at most ${self.api_maybe_billed_usd:.4g} unanswered)" if self.api_maybe_billed_usd else "")
                 if self.api_requests or self.api_maybe_billed_usd else "")
        return (f"{self.requests} requests ({self.distinct} distinct), {self.generated} generated, "
                f"{rate(self.verdicts_per_s)} verdicts/s, cache hit {hit}" + spent)


def figures(manifest: RunManifest) -> list[JudgeFigures]:
    return [JudgeFigures.from_manifest(j) for j in manifest.judges]


def append_history(run_dir: Path, manifest: RunManifest) -> None:
    """One line per invocation: when, how long, and each judge's figures (an interrupted one is a
    line too, `interrupted: true`, and a failed one `failed: <its error's first line>`, with each
    judge's figures so far)."""
    record = {"created": manifest.created or time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "seconds": manifest.seconds, "git_commit": manifest.git_commit,
              "judges": [asdict(f) for f in figures(manifest)],
              **({"interrupted": True} if manifest.interrupted else {}),
              **({"failed": manifest.failed} if manifest.failed else {})}
    with (run_dir / HISTORY).open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")


def append_stopped(run_dir: Path, seconds: float, judge_runs: list[JudgeRun], stop: BaseException) -> None:
    """The history line of an invocation that stopped before its end: interrupted (Ctrl-C, SIGTERM) or
    failed (a litjudge error: its first line), with the figures of the judges it had begun."""
    how = {"failed": str(stop).splitlines()[0]} if isinstance(stop, LitjudgeError) else {"interrupted": True}
    append_history(run_dir, RunManifest.of({
        "seconds": round(seconds, 2), "git_commit": git_commit(), **how,
        "judges": [{"judge": j.judge, "plan": j.plan.summary(), "generated": j.generated, "seconds": j.seconds,
                    **j.backend} for j in judge_runs]}))


def _is_task(run_dir: Path) -> bool:
    """A task's folder of a run of several tasks (its manifest names its task)."""
    try:
        return bool(json.loads((run_dir / "manifest.json").read_text(encoding="utf-8")).get("task"))
    except (OSError, ValueError, AttributeError):
        return False


def history(run_dir: Path) -> list[dict[str, Any]]:
    """The run folder's invocations, oldest first (a damaged line, JSON or not, is skipped). A task
    of a run of several tasks: the run's (one line an invocation, its judges judging every task),
    and the task's own lines, written there before 2026-12-05."""
    paths = [run_dir.parent / HISTORY, run_dir / HISTORY] if _is_task(run_dir) else [run_dir / HISTORY]
    out = [r for path in paths if path.exists() for r in _records(path)]
    return sorted(out, key=lambda r: str(r.get("created") or "")) if len(paths) > 1 else out


def _records(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
            judges = record.get("judges", []) if isinstance(record, dict) else None
            if isinstance(judges, list) and all(_figures_record(j) for j in judges):
                out.append(record)
        except (json.JSONDecodeError, RecursionError):
            continue                            # a damaged line (a crash mid-write, a hand edit)
    return out


def _figures_record(j: Any) -> bool:
    """A history entry's judge: the JudgeFigures fields (the API ones may be missing: lines written
    before they were kept), the judge a string, the rest numbers."""
    names = {f.name for f in fields(JudgeFigures)}
    needed = {n for n in names if not n.startswith("api_")}
    return (isinstance(j, dict) and needed <= set(j) <= names and isinstance(j["judge"], str)
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for n, v in j.items() if n != "judge"))


def totals(run_dir: Path) -> dict[str, JudgeFigures]:
    """Per judge, summed over every invocation of the run folder: the work it took in all."""
    out: dict[str, JudgeFigures] = {}
    for record in history(run_dir):
        for j in record.get("judges", []):
            f = JudgeFigures(**j)
            prev = out.get(f.judge)
            out[f.judge] = f if prev is None else JudgeFigures(
                f.judge, f.requests, f.distinct, prev.generated + f.generated, prev.seconds + f.seconds,
                prev.prompt_tokens + f.prompt_tokens, prev.cached_tokens + f.cached_tokens,
                prev.api_requests + f.api_requests, prev.api_usd + f.api_usd,
                prev.api_maybe_billed_usd + f.api_maybe_billed_usd)
    return out
