"""A run's generation stage (`[generate]`): generators write the items, then the run's tasks judge
them, in one resumable run.

Each generator's engine starts once (only if some turn is not stored yet) and serves all its
turns: turn 1 of every conversation, then turn 2 of the conversations that go on (the answer so
far is part of the next prompt), and so on. Every turn is a request like a verdict: keyed by
content (so a re-run, or a run killed midway, generates only what is missing), stored in the
run's store, its answer constrained and parsed exactly. The generator that judges first keeps
its engine for the judging stage, so no model loads twice.

Outputs: RUN/generated/items.jsonl (generic rated-items layout; the tasks' dataset), and the
tables `generation` (per generator x level: turns asked, parsed, malformed, uses) and
`generation_duplicates` (uses written twice for one object).
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import polars as pl

from litjudge.judges import PROTOCOLS
from litjudge.judges.generation import GENERATION, Conversation, across_levels, duplicates

from .. import backends as registry
from ..core.backend import Backend, JudgeSpec
from ..core.config import GENERATED, RunConfig
from ..core.errors import ConfigError, DataError
from ..core.requests import JudgeRequest, Message, RequestMeta
from ..core.runner import LazyBackend, run_judge
from ..core.session import Spend
from ..core.store import Store
from ..core.verdicts import verdict_frame
from .outputs import guarded, write_text

ITEMS_FILE = "items.jsonl"
GENERATION_SCHEMA = {"generator": pl.Utf8, "level": pl.Utf8, "conversations": pl.Int64, "turns": pl.Int64,
                     "parsed": pl.Int64, "malformed": pl.Int64, "uses": pl.Int64, "duplicates_across_levels": pl.Int64}
DUPLICATE_SCHEMA = {"group": pl.Utf8, "use": pl.Utf8, "count": pl.Int64, "levels": pl.Utf8, "across_levels": pl.Boolean,
                    "generators": pl.Utf8, "item_ids": pl.Utf8}


@dataclass
class GenerationOutcome:
    items_file: Path
    tables: dict[str, pl.DataFrame]
    engines: dict[str, Backend] = field(default_factory=dict)     # live engines handed to the judging stage
    summary: list[dict[str, Any]] = field(default_factory=list)   # per generator, for the manifest


def items_path(run_dir: Path) -> Path:
    return run_dir / "generated" / ITEMS_FILE


def with_generated_dataset(config: RunConfig, run_dir: Path) -> RunConfig:
    """The run's config with its tasks reading the items the stage writes (an inline card), and,
    for a protocol that measures self-preference (`Declaration.self_preference`: listwise), each
    judge that also generated matched to its own items."""
    gen = config.generate
    protocols = sorted(({t.get("protocol", config.protocol) for t in config.tasks} | {config.protocol}) - {""})
    card = {"name": GENERATED, "title": f"items written by {', '.join(gen.generators)} ({gen.protocol})",
            "loader": "rated_items_jsonl", "path": str(items_path(run_dir).resolve()),
            "protocols": protocols, "category_order": list(gen.levels), "labels": False,
            "source": f"litjudge [generate] of run {config.name}"}
    own = {j: j for j in config.judges if j in gen.generators}

    def options(protocol: str, opts: dict[str, Any]) -> dict[str, Any]:
        option = PROTOCOLS.get(protocol).declared.self_preference if own and protocol in PROTOCOLS else ""
        return {option: own, **opts} if option else opts

    tasks = [{**t, "dataset": card, "options": options(t.get("protocol", config.protocol),
                                                           dict(t.get("options", config.options)))}
             for t in config.tasks]
    if not config.protocol:
        return replace(config, tasks=tasks)
    return replace(config, tasks=tasks, dataset=card, options=options(config.protocol, dict(config.options)))


def generator_specs(config: RunConfig) -> list[JudgeSpec]:
    """The generators of a `[generate]` config, resolved (none without one): a run opens the shared
    cache when one of them, or a judge, is a model."""
    return [registry.resolve(g, config) for g in config.generate.generators] if config.generate.enabled else []


def turn_request(conv: Conversation, turn: int, answers: list[str], generator: str, config: RunConfig,
                 language) -> JudgeRequest:
    """Turn `turn` of a conversation: its user turns so far, each answered by the generator's own
    earlier (stored) answer."""
    messages: list[Message] = []
    for k in range(turn):
        messages += [Message("user", conv.turns[k]), Message("assistant", answers[k])]
    messages.append(Message("user", conv.turns[turn]))
    meta = RequestMeta(f"generate:{config.generate.protocol}", conv.conv_id, (
        ("group", conv.group), ("category", conv.category), ("turn", turn), ("generator", generator)))
    return JudgeRequest(tuple(messages), language, "label", config.generate.sampling(), meta)


@dataclass
class _Turns:
    """One generator's progress through the conversations: each one's answers so far (raw text, the
    next turn's history), the decoded value of its latest parsed answer, and its malformed turns."""
    answers: dict[str, list[str]]
    values: dict[str, Any] = field(default_factory=dict)
    malformed: dict[str, int] = field(default_factory=dict)
    generated: int = 0

    def finished(self, conv: Any) -> bool:
        return len(self.answers[conv.conv_id]) == len(conv.turns)


def _converse(name: str, spec: Any, convs: list, config: RunConfig, language: Any, store: Store, engine: LazyBackend,
              progress: bool, spend: Spend, cache: Store | None) -> _Turns:
    """Every conversation of one generator, turn by turn: a turn is asked once the previous one parsed.
    `cache`: the shared verdict cache, as a judge's (a recorded generator's turns never enter it)."""
    planner = registry.planner(spec)            # tokenizer loaded once for every turn
    state = _Turns({c.conv_id: [] for c in convs}, malformed={c.conv_id: 0 for c in convs})
    for turn in range(max(len(c.turns) for c in convs)):
        todo = [c for c in convs if len(c.turns) > turn and len(state.answers[c.conv_id]) == turn]
        if not todo:
            break
        run = f"{config.name}/generate/{name}/turn{turn + 1}"
        requests = ((run, turn_request(c, turn, state.answers[c.conv_id], name, config, language)) for c in todo)
        state.generated += run_judge(spec, planner, engine.start, requests, store, spend=spend, truncation="error",
                                     progress=progress, engine=engine,
                                     cache=None if spec.capabilities.recorded else cache).generated
        frame = verdict_frame(store, run, name).select("item_id", "status", "raw", "value")
        for conv_id, status, raw, value in frame.iter_rows():
            if status == "ok":
                state.answers[conv_id].append(raw)
                state.values[conv_id] = value           # decoded once, by the store's reader
            else:
                state.malformed[conv_id] += 1
    return state


def _level_rows(name: str, levels: list[str], convs: list, state: _Turns, items: list[dict[str, Any]]) -> list[dict]:
    """The generation table's rows of one generator: per level, conversations, turns, parsed, malformed, uses."""
    rows = []
    for level in levels:
        mine = [c for c in convs if c.category == level]
        rows.append({"generator": name, "level": level, "conversations": len(mine),
                     "turns": sum(len(state.answers[c.conv_id]) + state.malformed[c.conv_id] for c in mine),
                     "parsed": sum(len(state.answers[c.conv_id]) for c in mine),
                     "malformed": sum(state.malformed[c.conv_id] for c in mine),
                     "uses": sum(1 for i in items if i["source"] == name and i["category"] == level)})
    return rows


def generate(config: RunConfig, run_dir: Path, store: Store, *, spend: Spend, progress: bool = True,
             keep: str | None = None, judging: bool = False, cache: Store | None = None) -> GenerationOutcome:
    """Run every generator's conversations turn by turn, store every turn, write the items.
    `keep`: the generator whose engine the judging stage reuses (it runs last and stays open);
    `spend`: the invocation's API spend (`Session.spend`), which API generators count against.
    `judging`: tasks judge the items next, so none is an error, said before the folder's items are
    replaced (an empty file was written over a finished run's, and the run then stopped at "no items").
    `cache`: the shared verdict cache: a turn another folder generated is not generated again."""
    gen = config.generate
    protocol = GENERATION.get(gen.protocol)()
    convs = protocol.conversations(gen, config.limit)
    language = protocol.language(gen)
    order = [g for g in gen.generators if g != keep] + [g for g in gen.generators if g == keep]
    specs = {name: registry.resolve(name, config) for name in order}      # every generator checked before any work
    turns = max((len(c.turns) for c in convs), default=0)
    for name, spec in specs.items():
        if spec.capabilities.recorded and turns > 1:
            # a recording answers by conversation id: every turn would be served its one answer
            raise ConfigError(f"generator {name!r} is recorded: it holds one answer per conversation id, which all "
                              f"{turns} turns of {gen.protocol!r} would share; generate with a model (or give the "
                              "generated items as a dataset)", where=config.source or "config",
                              parameter="generate.generators")
    outcome = GenerationOutcome(items_path(run_dir), {})
    items: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    for name in order:
        engine = LazyBackend(partial(registry.create, specs[name], config.cluster))
        try:
            state = _converse(name, specs[name], convs, config, language, store, engine, progress, spend, cache)
        finally:
            if name == keep and engine.live is not None:
                outcome.engines[name] = engine.live
            else:
                engine.close()
        outcome.summary.append({"generator": name, "generated": state.generated, "engine_starts": engine.starts})
        items += [i for c in convs if state.finished(c) for i in protocol.items(c, name, state.values[c.conv_id])]
        rows += _level_rows(name, gen.levels, convs, state, items)
    dups = duplicates(items)
    across = across_levels(items)
    for row in rows:
        row["duplicates_across_levels"] = sum(1 for i in items if i["item_id"] in across and i["source"] == row["generator"]
                                              and i["category"] == row["level"])
    outcome.tables = {"generation": pl.DataFrame(rows, schema=GENERATION_SCHEMA),
                      "generation_duplicates": pl.DataFrame(dups, schema=DUPLICATE_SCHEMA)}
    if judging and not items:
        why = "; ".join(generation_warnings(outcome)) or "no conversation was generated"
        raise DataError(f"the generation stage wrote no items to judge ({why}); the folder's items are kept as they "
                        "were (--generate-only shows the generation table)", path=str(outcome.items_file))
    outcome.items_file.parent.mkdir(parents=True, exist_ok=True)
    write_text(outcome.items_file, "".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items))
    return outcome


def generation_warnings(generation: GenerationOutcome | None) -> list[str]:
    """What the user must know of the generated items: malformed turns, uses in two levels."""
    if generation is None:
        return []
    t, d = generation.tables["generation"], generation.tables["generation_duplicates"]
    out = []
    if t["malformed"].sum():
        out.append(f"{t['malformed'].sum()} generation turn(s) did not parse: their conversations wrote no items "
                   "(tables/generation)")
    across = d.filter(pl.col("across_levels")).height
    if across:
        out.append(f"{across} use(s) were written at two or more levels of one object: the oracle levels overlap "
                   "(tables/generation_duplicates)")
    return out


def drop_judged_of_other_items(run_dir: Path, config: RunConfig, items: str | None) -> None:
    """The outputs of a judged run (the folder's own, or each task's folder) whose items were not
    `items` (their sha256): removed. The store keeps every verdict: a run without --generate-only
    writes them again, of the items it then judges."""
    for folder in [run_dir, *(run_dir / str(t.get("name", "")) for t in config.tasks if t.get("name"))]:
        try:
            old = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
            judged = old["dataset"]["data"]["sha256"] if old.get("kind", "run") == "run" else None
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if judged and judged != items:
            if folder == run_dir:             # its tables and manifest are the generation's next
                for name in ("verdicts.parquet", "log.jsonl", "results.json"):
                    guarded(partial((folder / name).unlink, missing_ok=True), folder / name)
                shutil.rmtree(folder / "report", ignore_errors=True)
            else:
                shutil.rmtree(folder, ignore_errors=True)
