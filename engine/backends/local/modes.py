"""The verdict modes, written once for every local engine (vLLM, transformers), as programs of steps.

Each request runs as a small generator: it yields the next step (or a tuple of steps to run
together), receives the result, and finally returns the `Generation`. Its local variables are its
typed state, so no engine keeps a phase string or a dict per request. The driver interleaves the
programs of a whole batch on one engine, so prefix-sharing requests run side by side.

- label: the verdict, constrained to the language;
- listwise (label mode of a `Listwise` language): slot by slot, line k a choice among the lines
  `k. id : s` for the ids not yet listed and scores not above the last, continuing the model's own
  tokens: every id exactly once, by construction, for any N;
- analyze: a free analysis stopped at the marker (bounded), then, as a continuation of the same
  assistant turn (the prefix cache serves it), a label set's most probable label after the marker
  (each scored whole with its space, as `litjudge budgets` reads it; sampled by its probability
  when sampling; their probabilities kept as `analysis_distribution`), or a listwise constrained;
- distribution: label probabilities read unconstrained at the decision point (one next-token step
  when every label is one distinct token, else one per prefix the labels' tokens share; with the
  end token after each label where a label starts another: `label_logprobs`).
"""
from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from litjudge.grammars.analysis import Analyzed
from litjudge.grammars.compile import slot_lines
from litjudge.grammars.listwise import Listwise

from ...core.distribution import normalise
from ...core.planner import analysis_tokens
from ...core.requests import Generation, Prepared
from .label_tokens import LabelTokens, label_reading
from .steps import (
    Constrained,
    Decoding,
    FreeText,
    NextTokenLogprobs,
    Prompt,
    Step,
    StepEngine,
    StepResult,
)

Single = Generator[Step, StepResult, Generation]                 # one step at a time
Program = Generator[Step | tuple[Step, ...], Any, Generation]   # a tuple of steps receives a tuple of results


@dataclass(frozen=True)
class ModeContext:
    """What the programs need to know of the judge: its tokenizer, end-of-sequence id and window.
    `labels(prompt, labels)` gives each label's tokens after a prompt (PromptRenderer.label_tokens:
    from the template's last special token on, the judged text's special tokens split)."""

    labels: Callable[[str, Sequence[str]], LabelTokens]
    eos_token_id: int | None
    max_len: int


def program(p: Prepared, ctx: ModeContext) -> Program:
    """The program of one request's mode (the language says label vs listwise vs analysis)."""
    mode, lang = p.request.mode, p.request.language
    start = Prompt(p.token_ids, p.prompt)
    if mode == "distribution":
        return distribution(p, ctx)
    if mode == "analyze":
        if not isinstance(lang, Analyzed):
            raise ValueError("analyze mode needs an Analyzed language")
        return analyze(p, lang, ctx)
    if mode != "label":
        raise ValueError(f"mode {mode!r} is not a decoding mode")
    if isinstance(lang, Listwise):
        return listwise(p, lang, start, ctx)
    return label(p)


def label(p: Prepared) -> Single:
    r = yield Constrained(Prompt(p.token_ids, p.prompt), p.max_tokens, Decoding.of(p.request.sampling, p.key),
                          language=p.request.language)
    return Generation(p.key, r.text, prompt_tokens=p.prompt_tokens, cached_tokens=r.cached_tokens,
                      output_tokens=len(r.token_ids), finish_reason=r.finish_reason)


def listwise(p: Prepared, lang: Listwise, prompt: Prompt, ctx: ModeContext, analysis: str | None = None,
             output_tokens: int = 0, cached: int = 0, prompted: int = 0) -> Single:
    decoding = Decoding.of(p.request.sampling, p.key)
    lines: list[str] = []
    cap = lang.hi
    while True:
        listed = {line.split(" ", 2)[1] for line in lines}
        choices = slot_lines(lang, len(lines) + 1, [i for i in lang.ids if i not in listed], cap)
        step = decoding.step(len(lines) + (analysis is not None))          # each slot draws by its own stream
        r = yield Constrained(prompt, max(len(c) for c in choices) + 2, step, choices=tuple(choices))
        lines.append(r.text.rstrip("\n"))
        output_tokens += len(r.token_ids)
        cached += r.cached_tokens
        prompted += len(prompt.tokens)            # every slot is a prompt of its own (mostly cached)
        if len(lines) == len(lang.ids) or r.finish_reason != "stop" or not r.text.endswith("\n"):
            body = "\n".join(lines)               # complete, or a slot that did not finish (truncated)
            raw = body if analysis is None else analysis + Analyzed.tail_prefix_of(p.request.language) + body
            return Generation(p.key, raw, analysis=analysis, prompt_tokens=prompted, cached_tokens=cached,
                              output_tokens=output_tokens, finish_reason=r.finish_reason)
        prompt = prompt.extend([t for t in r.token_ids if t != ctx.eos_token_id], r.text)
        cap = int(lines[-1].rsplit(" ", 1)[1])


def analyze(p: Prepared, lang: Analyzed, ctx: ModeContext) -> Program:
    decoding = Decoding.of(p.request.sampling, p.key)
    first = yield FreeText(Prompt(p.token_ids, p.prompt), analysis_tokens(lang, p.max_tokens), decoding,
                           stop=(lang.marker,))
    analysis = first.text.rstrip()
    labels = lang.inner.labels()
    if labels:        # the label most probable after the marker (sampled by it): as `budgets` reads it
        tail = analysis + lang.tail_prefix
        lt = ctx.labels(p.prompt, [tail, *(tail + label for label in labels)])      # one tokenization of the tail
        scores, _ = yield from label_logprobs({x: tuple(lt.extend(p.token_ids, tail + x)) for x in labels},
                                              lt.extend(p.token_ids, tail), ctx, ended=lang.inner.prefixed)
        label = decoding.pick(scores)
        dist, mass = normalise(scores)
        return Generation(p.key, tail + label, analysis=analysis, analysis_distribution=dist if mass > 0 else None,
                          label_mass=mass, prompt_tokens=p.prompt_tokens,
                          cached_tokens=first.cached_tokens, output_tokens=len(first.token_ids) + 1,
                          finish_reason=cut_or(first, "stop"))
    tail = analysis + lang.tail_prefix
    tail_tokens = ctx.labels(p.prompt, [tail]).extend(p.token_ids, tail)
    prompt = Prompt(tuple(tail_tokens), p.prompt + tail)
    if isinstance(lang.inner, Listwise):
        ranked = yield from listwise(p, lang.inner, prompt, ctx, analysis, len(first.token_ids), first.cached_tokens,
                                     p.prompt_tokens)
        return replace(ranked, finish_reason=cut_or(first, ranked.finish_reason))
    size = max(1, min(p.max_tokens, ctx.max_len - len(tail_tokens)))
    r = yield Constrained(prompt, size, decoding.step(1), language=lang.inner)
    return Generation(p.key, tail + r.text, analysis=analysis, prompt_tokens=p.prompt_tokens,
                      cached_tokens=first.cached_tokens, output_tokens=len(first.token_ids) + len(r.token_ids),
                      finish_reason=cut_or(first, r.finish_reason))


def cut_or(analysis: Any, finish_reason: str | None) -> str | None:
    """"length" where the analysis reached analysis_tokens (the verdict then forced after the marker:
    stored as cut, and said, not as a verdict of a finished analysis), else the verdict's own."""
    return "length" if analysis.finish_reason == "length" else finish_reason


def distribution(p: Prepared, ctx: ModeContext) -> Program:
    labels = p.request.language.labels()
    if not labels:
        raise ValueError("distribution mode needs a finite label set")
    lt = ctx.labels(p.prompt, labels)
    scores, cached = yield from label_logprobs({x: tuple(lt.extend(p.token_ids, x)) for x in labels},
                                               p.token_ids, ctx, ended=p.request.language.prefixed)
    dist, mass = normalise(scores)
    return Generation(p.key, "", distribution=dist, label_mass=mass, prompt_tokens=p.prompt_tokens,
                      cached_tokens=cached, output_tokens=1)


def label_logprobs(answers: dict[str, tuple[int, ...]], prompt: Sequence[int], ctx: ModeContext, ended: bool
                   ) -> Generator[tuple[Step, ...], Any, tuple[dict[str, float], int]]:
    """Each label's logprob after `prompt`, and the prompt's cached tokens: `answers` the prompt's
    tokens with each label's (a label merging with the prompt's last token, "Verdict: " + "Yes" ->
    ":" " Yes", starts before it); with the end token after it when `ended` (a label starts
    another: "1", "10"; else P("1") would hold P("10")). Read as next-token logprobs along the
    labels' shared prefixes, all in one batch: one step when every label is one distinct token, one
    per prefix else ("1" -> "0" or the end), each a prompt the prefix cache serves (a label scored as
    prompt tokens recomputed the whole prompt: 30 s for four 559-token prompts of a 1-10 scale, 0.7 s
    this way, EPYC Zen 4)."""
    reading = label_reading(answers, prompt, ended, ctx.eos_token_id)
    points = list(reading.nexts)
    results: tuple[StepResult, ...] = yield tuple(NextTokenLogprobs(Prompt(at, ""), reading.nexts[at])
                                              for at in points)
    read = dict(zip(points, results))
    return ({x: sum(read[ids[:k]].logprobs.get(ids[k], float("-inf")) for k in range(reading.point, len(ids)))
             for x, ids in reading.spelled.items()}, read[min(points, key=len)].cached_tokens)   # the prompt's own


@dataclass
class _Pending:
    """The steps one program is waiting on: their results fill in as they finish."""

    program: Program
    results: list
    grouped: bool                     # it yielded a tuple of steps, so it receives a tuple


def drive(prepared: Iterable[Prepared], engine: StepEngine, ctx: ModeContext) -> Iterator[Generation]:
    """Run every request's program on `engine`, all submitted at once in the given (prefix-sorted)
    order; yield each Generation the moment its program returns."""
    waiting: dict[int, tuple[_Pending, int]] = {}           # handle -> (its program's pending steps, slot)

    def advance(prog: Program, sent) -> Generation | None:
        try:
            step = prog.send(sent)
        except StopIteration as done:
            return done.value
        steps = step if isinstance(step, tuple) else (step,)
        pending = _Pending(prog, [None] * len(steps), isinstance(step, tuple))
        for slot, s in enumerate(steps):
            waiting[engine.submit(s)] = (pending, slot)
        return None

    for p in prepared:
        advance(program(p, ctx), None)
    while waiting:
        for handle, result in engine.poll():
            pending, slot = waiting.pop(handle)
            pending.results[slot] = result
            if any(r is None for r in pending.results):
                continue
            done = advance(pending.program, tuple(pending.results) if pending.grouped else pending.results[0])
            if done is not None:
                yield done


def run_steps(engine: StepEngine, steps: Sequence[Step]) -> list[StepResult]:
    """Run plain steps (no mode), all at once; results in the order given. For generation tasks
    that are not verdicts (candidate stories, free-form baselines)."""
    handles = {engine.submit(s): i for i, s in enumerate(steps)}
    out: list[StepResult | None] = [None] * len(steps)
    while handles:
        for handle, result in engine.poll():
            out[handles.pop(handle)] = result
    return out  # type: ignore[return-value]
