"""`litjudge budgets RUN --budgets 0,32,64,full`: verdicts at several reasoning budgets from one
analysis trace. For every stored analysis of an analyze-mode run, the analysis is cut after each
budget of tokens and the verdict's label distribution is read right after the cut and the marker
(distribution mode, unconstrained at the decision point). The prompt up to the cut is the trace's
own prefix, so the prefix cache serves all but the tail. Each budget is aggregated by the
protocol like a run of its own; the table shows agreement against thinking tokens per judge:
where more reasoning stops helping, from one generation.

The budget requests are ordinary requests (content-keyed, in the run's own store): a re-run
generates nothing, an interrupted one resumes."""
from __future__ import annotations

import dataclasses
from functools import partial
from pathlib import Path

import polars as pl

from litjudge.grammars.analysis import Analyzed
from litjudge.judges.frames import split

from .. import backends as registry
from ..core.errors import ConfigError
from ..core.requests import JudgeRequest, RequestMeta, content_key
from ..core.run_lock import run_folder_lock
from ..core.runner import run_judge
from ..core.session import Spend
from ..core.store import Store
from ..core.verdicts import verdict_frame
from .manifest import recorded_config
from .outputs import read_manifest, write_tables
from .results_file import tidy
from .run import prepare, run_id

FULL = -1


MOST_TOKENS = 10_000_000        # a budget beyond any context window


def parse_budgets(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        part = part.strip()
        if part == "full":
            out.append(FULL)
        elif part.isascii() and part.isdigit():      # not "¹" or "٣": digits int() refuses or reads otherwise
            if int(part) > MOST_TOKENS:              # stored as a 64-bit integer: 10^21 crashed, its plan half cleared
                raise ConfigError(f"--budgets: {part[:30]} tokens is more than any analysis holds (at most "
                                  f"{MOST_TOKENS:,}); 'full' is the whole analysis")
            out.append(int(part))
        else:
            raise ConfigError(f"--budgets takes token counts and 'full', comma-separated; got {part!r}")
    return sorted(set(out), key=lambda b: (b == FULL, b))


def _cutter(spec):
    """analysis -> (its first n tokens as text, tokens kept) with the judge's own tokenizer."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(spec.target)

    def cut(analysis: str, n: int) -> tuple[str, int]:
        ids = tok(analysis, add_special_tokens=False)["input_ids"]
        if n == FULL or n >= len(ids):
            return analysis, len(ids)
        text = tok.decode(ids[:n])
        assert isinstance(text, str)              # one sequence of ids decodes to one text
        return text, n
    return cut


def budget_requests(request: JudgeRequest, analysis: str, budgets: list[int], cut) -> list[tuple[int, int, JudgeRequest]]:
    """(budget, thinking tokens, the request reading the verdict after the cut)."""
    lang = request.language
    if not isinstance(lang, Analyzed):
        raise ConfigError("budgets need an analyze-mode run (its verdicts follow an analysis)")
    out = []
    for b in budgets:
        text, kept = cut(analysis, b)
        meta = RequestMeta(request.meta.protocol, request.meta.item_id,
                           request.meta.fields + (("budget", b), ("thinking_tokens", kept)))
        out.append((b, kept, dataclasses.replace(request, language=lang.inner, mode="distribution", meta=meta,
                                                 prefill=request.prefill + text + lang.tail_prefix, attempt=0)))
    return out


def budgets(run_dir: Path, budgets_: list[int], progress: bool = True,
            spend: Spend | None = None) -> tuple[Path, pl.DataFrame]:
    """Every API judge it asks again counts against one budget, as in a run: `spend`, the
    invocation's (`Session.spend`; None: this call's own). Under the run folder's lock: two at once
    wrote one budgets table and printed each other's rows."""
    with run_folder_lock(run_dir):
        return _budgets(run_dir, budgets_, progress, spend)


def _budgets(run_dir: Path, budgets_: list[int], progress: bool, spend: Spend | None) -> tuple[Path, pl.DataFrame]:
    spend = spend if spend is not None else Spend()
    manifest = read_manifest(run_dir)
    if manifest.kind != "run":
        raise ConfigError(f"budgets read the analyses of one analyze-mode run; this folder is a {manifest.kind} "
                          "(give the folder of a run, or of one task of a multi-task run)", where=str(run_dir))
    config = recorded_config(run_dir, manifest)
    if config.mode != "analyze":
        raise ConfigError(f"budgets need an analyze-mode run; this run's mode is {config.mode!r}", where=str(run_dir))
    prep = prepare(config)
    if "distribution" not in prep.protocol.declared.modes:
        raise ConfigError(f"budgets read each budget's verdict as label probabilities (distribution mode), and protocol "
                          f"{config.protocol!r} aggregates {' and '.join(prep.protocol.declared.modes)} verdicts only",
                          where=str(run_dir))
    dist = prepare(dataclasses.replace(config, mode="distribution"))
    rank = dist.protocol.parse_rank_by(dist.protocol.declared.rank_by)
    store = Store.open(run_dir / "store.sqlite", create=False)
    rows = []
    try:
        for spec in prep.specs:
            planner = registry.planner(spec)
            stored = verdict_frame(store, run_id(config, "", spec.name), spec.name)
            analyses = dict(zip(stored["key"].to_list(), stored["analysis"].to_list(), strict=True))
            cut = _cutter(spec)
            requests = []
            for r in prep.protocol.build(prep.context(spec)).requests:
                analysis = analyses.get(content_key(r, planner.identity()))
                if analysis is not None:
                    requests += [(f"{config.name}/budgets/{spec.name}", q) for _, _, q in
                                 budget_requests(r, analysis, budgets_, cut)]
            if not requests:
                raise ConfigError(f"judge {spec.name!r}: no stored analyses in this run", where=str(run_dir))
            run_judge(spec, planner, partial(registry.create, spec, config.cluster), iter(requests), store,
                      spend=spend, truncation="skip", progress=progress)
            frame = verdict_frame(store, f"{config.name}/budgets/{spec.name}", spec.name)
            for (b,), part in split(frame, "budget").items():
                ctx = dist.context(spec)
                tables = dist.protocol.tables(part.drop("budget", "thinking_tokens"), ctx)
                group = dist.protocol.rank_group(rank, ctx.options)      # the pooled row, never the first
                value = next((r["value"] for r in tidy(tables, dist.protocol.declared, {"judge": spec.name})
                              if r["table"] == rank.table and r["metric"] == rank.metric and r["group"] == group
                              and r.get("judge") == spec.name), None)
                if value is None:
                    continue
                rows.append({"judge": spec.name, "budget": "full" if b == FULL else str(b),
                             "thinking_tokens": float(part.select(pl.col("thinking_tokens").cast(pl.Float64).mean()).item()),
                             "verdicts": part.height, "unparsed": int((part["status"] != "ok").sum()),
                             "metric": f"{rank.name} ({group})", "value": value})
    finally:
        store.close()
    if not rows:            # e.g. data without human labels: no agreement at any budget
        raise ConfigError(f"no budget has a value of {rank.table}.{rank.metric} (the run's data has no human answers to "
                          "agree with?): the budgets' verdicts are stored, and there is no table to show",
                          where=str(run_dir))
    table = pl.DataFrame(rows)
    (run_dir / "budgets").mkdir(exist_ok=True)
    write_tables(run_dir / "budgets", {"budgets": table})
    return run_dir / "budgets", table
