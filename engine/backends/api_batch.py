"""Provider batches for API judges (`[api] batch = true`), for every provider whose class has them
(`Provider.batch_limit`; its batch format is its own: OpenAI's Batch API, Anthropic's Message
Batches, engine.backends.providers). Every request's `custom_id` is its content key, so results land
in the store exactly as online results do, through the same parsers.

Restarts. Before a batch is submitted its keys are recorded in the run's store (the ledger,
status `submitting`, under an id of ours that OpenAI also receives as batch metadata); once the
provider accepts it, its id (status `open`). A re-run (after Ctrl-C, kill -9, a reboot) polls the
open batches instead of submitting their keys again and collects the finished ones; it submits only
keys that are in no open batch. A `submitting` record (a crash between our record and the
provider's answer) is looked up among the provider's batches (`Provider.adopt`: OpenAI by our id in
the batch's metadata; Anthropic, whose batches carry none, by time and size) and adopted if it was
accepted, else dropped and its keys submitted again. If a guess were wrong, polling would find none
of our keys in its results: they come back as gaps and the next run submits them (late, never twice).

Per-request results. Succeeded: the model's answer, parsed as online. Rejected as invalid (HTTP
400/413/422, `invalid_request_error`): stored as a failure with the provider's reason (it would be
rejected again). Anything else (expired after 24 h, cancelled, the provider's own errors, 429, 5xx):
not a verdict, not stored: the run reports them unanswered, and the next run submits them in a new
batch. Prices: the provider's batch rate (engine/backends/prices.py).

Budgets. `max_cost_usd` and `max_tokens_total` hold before anything is sent: a request is
submitted only if its worst case (prompt plus its full max_tokens, at the batch price) still fits
beside what the run spent and the batches in flight; the rest are not sent, counted in the
manifest, and the run exits 3 (unanswered), as online.
"""
from __future__ import annotations

import logging
import os
import re
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

from ..core.console import say
from ..core.errors import BackendUnavailable
from ..core.hooks import hooks
from ..core.requests import Generation, Prepared
from ..core.store import BatchRecord, Store
from .prices import cost
from .providers import BatchLine, Provider
from .registry import BACKENDS

if TYPE_CHECKING:                      # api.py imports this module
    from .api import ApiBackend

CANCEL_TIMEOUT_S = 60.0


class BatchRunner:
    """Submits, polls and collects one API judge's provider batches, through its backend's request
    builder and reader (`body`, `read`) and its provider's batch format (`submit`, `adopt`,
    `results`). `backend` is the judge's ApiBackend."""

    def __init__(self, backend: Any, ledger: Store):
        self.b, self.ledger = backend, ledger
        self.api: Provider = backend.api
        self.fingerprint = backend.spec.fingerprint
        self.limit = backend.cfg.batch_max_requests or self.api.batch_limit

    # -- the whole cycle --------------------------------------------------------------------
    def generate(self, batch: Sequence[Prepared]) -> Iterator[Generation]:
        """Adopt, submit what is new and fits the budget, collect. The provider unreachable or
        failing (down, a closed port, gone while polling) is no verdict and no crash: what was not
        answered is reported unanswered (exit 3), the ledger keeps every accepted batch, and the
        next run resumes from it."""
        wanted = {p.key: p for p in batch}
        try:
            self.adopt_submitting()
        except self.provider_faults as exc:
            return self.unreachable("looking up a crashed submission", exc)
        open_batches = self.ledger.batches(self.fingerprint, ("open",))
        in_flight = {k for rec in open_batches for k in rec.keys}
        fresh = [p for p in batch if p.key not in in_flight]
        # an open batch this invocation submitted is reserved in its spend already; a crashed run's is not
        unreserved = {k for rec in open_batches if rec.local_id not in self.b.account.spend.reserved for k in rec.keys}
        affordable = self.within_budget(fresh, [p for p in batch if p.key in unreserved])
        with self.b.account.lock:
            self.b.account.skipped_for_budget += len(fresh) - len(affordable)
        for start in range(0, len(affordable), self.limit):
            try:
                self.submit(affordable[start:start + self.limit])
            except self.provider_faults as exc:
                self.unreachable("submitting a batch", exc)
                break
        yield from self.collect(wanted)

    @property
    def provider_faults(self) -> tuple[type[BaseException], ...]:
        """What the provider's client raises when it cannot answer (connection, timeout, HTTP errors)."""
        return (*self.api.faults, OSError)

    def unreachable(self, doing: str, exc: BaseException) -> None:
        say(f"litjudge: {self.name}: the provider did not answer while {doing} ({type(exc).__name__}: "
            f"{str(exc)[:160]}): its requests are left unanswered; run again to resume", logging.WARNING)

    @property
    def name(self) -> str:
        return self.b.spec.name

    def within_budget(self, fresh: Sequence[Prepared], in_flight: Sequence[Prepared]) -> list[Prepared]:
        """The first requests of `fresh` whose WORST-CASE spend fits the budget (`max_tokens_total`,
        `max_cost_usd`): a batch is paid for once submitted, so each request counts its prompt and
        its full `max_tokens` at the batch price, on top of what this invocation already spent and
        holds for the batches it submitted (every API judge of the run or sweep: `Spend.held`) and
        of this judge's batches in flight from an earlier run (`in_flight`). (Online, a
        request is sent only while the spend so far is under the cap; a batch cannot be stopped
        halfway, so it is capped before it is sent.)"""
        cfg, account = self.b.cfg, self.b.account
        if not cfg.max_tokens_total and not cfg.max_cost_usd:
            return list(fresh)

        def worst(p: Prepared) -> tuple[int, float]:     # its bytes, not its words (a batch went 24% past the cap)
            prompt, out = self.b.worst_case(p)
            return prompt + out, cost(account.prices, prompt, out, batch=True)

        flying = [worst(p) for p in in_flight]                                  # each request's body built once
        held_tokens, held_dollars = account.spend.held()            # spent and reserved, every API judge's
        tokens = held_tokens + sum(t for t, _ in flying)
        dollars = held_dollars + sum(d for _, d in flying)
        kept = []
        for p in fresh:
            t, d = worst(p)
            if (cfg.max_tokens_total and tokens + t > cfg.max_tokens_total) or (
                    cfg.max_cost_usd and dollars + d > cfg.max_cost_usd):
                break
            tokens, dollars = tokens + t, dollars + d
            kept.append(p)
        return kept

    def submit(self, part: Sequence[Prepared]) -> None:
        local = f"litjudge-{uuid.uuid4().hex}"
        worst = [self.b.worst_case(p) for p in part]
        self.b.account.spend.reserve(local, sum(a + b for a, b in worst),
                                     sum(cost(self.b.account.prices, a, b, batch=True) for a, b in worst))
        self.ledger.record_batch(local, self.fingerprint, self.api.name, [p.key for p in part])
        made = self.api.submit([(p.key, self.b.body(p)) for p in part], local)
        hooks().batch_submitted(recorded=False)     # a patch point: the provider accepted, our ledger not told
        self.ledger.set_batch(local, "open", made)
        say(f"litjudge: {self.name}: submitted provider batch {made} ({len(part)} requests)")
        hooks().batch_submitted(recorded=True)

    def adopt_submitting(self) -> None:
        adopt_submitting(self.api, self.ledger, self.fingerprint)

    def collect(self, wanted: dict[str, Prepared]) -> Iterator[Generation]:
        """Poll the open batches holding wanted keys until each has ended; yield their results.
        A batch that also holds keys this run does not want (a re-run with a smaller --limit) stays
        open in the ledger until a run that wants them has stored them: results the provider
        returned are never thrown away to be paid for again."""
        handled: set[str] = set()
        while True:
            waiting = [rec for rec in self.ledger.batches(self.fingerprint, ("open",))
                       if rec.local_id not in handled and any(k in wanted for k in rec.keys)]
            if not waiting:
                return
            ended = 0
            for rec in waiting:
                try:
                    results = self.poll(rec)
                except self.provider_faults as exc:
                    self.unreachable(f"polling batch {rec.batch_id}", exc)
                    return
                if results is None:
                    continue
                ended += 1
                handled.add(rec.local_id)
                self.b.account.spend.release(rec.local_id)           # its results counted as read
                for g in results:
                    if g.key in wanted:
                        yield g
                others = {k for k in rec.keys if k not in wanted}
                if others and len(self.ledger.finished_keys(others)) < len(others):
                    continue                     # kept open for the run that wants the rest
                self.ledger.set_batch(rec.local_id, "collected")
            if ended < len(waiting):
                ages = ", ".join(f"{r.batch_id} {time.time() - r.created:.0f} s" for r in waiting)
                self.b.progress = f"{len(waiting) - ended} provider batch(es) open ({ages})"
                time.sleep(self.b.cfg.batch_poll_s)

    # -- one batch --------------------------------------------------------------------------
    def poll(self, rec: BatchRecord) -> list[Generation] | None:
        """The batch's results once it has ended (None while it runs); every key of the batch is
        accounted for: a result, a stored failure, or a retryable gap."""
        results = self.api.results(str(rec.batch_id))
        if results is None:
            return None
        if results.malformed:
            say(f"litjudge: {self.name}: {results.malformed} malformed line(s) in the results of batch "
                f"{rec.batch_id}: their requests are asked again in a new batch", logging.WARNING)
        by_key: dict[str, Generation | None] = {k: None for k in rec.keys}
        ours = [line for line in results.lines if line.key in by_key and self.b.pending.get(line.key) is not None]
        chosen = _one_line_per_key(ours)
        if len(chosen) < len(ours):
            say(f"litjudge: {self.name}: {len(ours) - len(chosen)} duplicate line(s) in the results of batch "
                f"{rec.batch_id} (a request answered twice): each request's answer is read once", logging.WARNING)
        for line in chosen:
            by_key[line.key] = (self.b.read(self.b.pending[line.key], line.reply) if line.reply is not None else
                                Generation(line.key, "", error=line.error, retryable=line.retryable))
        gap = f"no result in provider batch {rec.batch_id} (ended {results.ended})"
        return [g or Generation(k, "", error=gap, retryable=True) for k, g in by_key.items()]


def _one_line_per_key(lines: list[BatchLine]) -> list[BatchLine]:
    """A batch's result lines, one per request: a provider's output naming a request twice was read
    twice (its tokens counted twice against the caps) and the last line won (an error after an
    answer threw the answer away). The first answer is kept, else the first failure."""
    chosen: dict[str, BatchLine] = {}
    for line in lines:
        held = chosen.get(line.key)
        if held is None or (held.reply is None and line.reply is not None):
            chosen[line.key] = line
    return list(chosen.values())


FINGERPRINT = re.compile(r"^api:(?P<provider>[^:]+):(?P<url>default|[a-z][a-z0-9+.-]*://[^/:]+(?::\d+)?(?:/[^:]*)?)"
                         r":(?P<model>.+)$")


def judge_of(fingerprint: str) -> tuple[str, str | None, str]:
    """(provider, base URL or None, model) from an API judge's fingerprint `api:PROVIDER:URL:MODEL`:
    the URL ends where a scheme://host[:port][/path] does, so a model id with colons (a fine-tune,
    `ft:gpt-4o:org:id`) stays whole (splitting at the last colon sent it into the cancel URL).

    >>> judge_of("api:openai:http://127.0.0.1:8000/v1:ft:gpt-4o:org:x1")
    ('openai', 'http://127.0.0.1:8000/v1', 'ft:gpt-4o:org:x1')
    >>> judge_of("api:anthropic:default:claude-x")
    ('anthropic', None, 'claude-x')
    """
    m = FINGERPRINT.match(fingerprint)
    if m is None:
        raise BackendUnavailable(f"not an API judge's fingerprint: {fingerprint!r}")
    return m["provider"], None if m["url"] == "default" else m["url"], m["model"]


def adopt_submitting(api: Provider, ledger: Store, fingerprint: str) -> None:
    """A judge's records left `submitting` by a crash: adopt the batch the provider accepted
    (`Provider.adopt`), or drop the record."""
    for rec in ledger.batches(fingerprint, ("submitting",)):
        known = {str(r.batch_id) for r in ledger.batches(None, ("submitting", "open", "collected", "cancelled"))
                 if r.batch_id}
        found = api.adopt(rec.local_id, len(rec.keys), rec.created, known)
        ledger.set_batch(rec.local_id, "open" if found else "cancelled", found)


def provider_for(fingerprint: str, key_env: str = "") -> Provider:
    """The provider of the judge that owns a batch, its key from the run's `[api] key_env` (or the
    provider's own variable)."""
    name, url, _ = judge_of(fingerprint)
    provider = cast("type[ApiBackend]", BACKENDS.get(name)).provider   # a batch's judge is an API backend's
    key_env = key_env or provider.key_env
    key = os.environ.get(key_env)
    if not key:
        raise BackendUnavailable(f"cancelling {name} batches needs the API key in {key_env}")
    return provider(key, url, CANCEL_TIMEOUT_S, retries=2)


def cancel_open(ledger: Store, key_env: str = "") -> list[str]:
    """Cancel every open provider batch of a run (`litjudge status RUN --cancel-batches`), after
    adopting the batches a crash left `submitting` (the provider accepted them, our ledger was not
    told: they run on, and are billed, unless found). The provider unreachable is one line."""
    done: list[str] = []
    apis = {fp: provider_for(fp, key_env) for fp in sorted({r.fingerprint for r in ledger.batches(
        states=("submitting", "open"))})}
    faults = tuple({fault for api in apis.values() for fault in api.faults}) + (OSError,)
    try:
        for fingerprint in sorted({r.fingerprint for r in ledger.batches(states=("submitting",))}):
            adopt_submitting(apis[fingerprint], ledger, fingerprint)
        for rec in ledger.batches(states=("open",)):
            apis[rec.fingerprint].cancel(str(rec.batch_id))
            ledger.set_batch(rec.local_id, "cancelled")
            done.append(str(rec.batch_id))
    except faults as exc:
        raise BackendUnavailable(f"the provider did not answer ({type(exc).__name__}: {str(exc)[:160]}); cancelled "
                                 f"{len(done)} batch(es) before that; the rest are still open: run the command "
                                 "again when it answers") from None
    return done
