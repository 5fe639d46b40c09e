"""Provider batches for API judges (`[api] batch = true`): OpenAI's Batch API (a JSONL file of
Chat Completions requests uploaded through the Files API, `POST /v1/batches`, polled, the output
and error files downloaded) and Anthropic's Message Batches (`POST /v1/messages/batches`, polled,
results streamed as JSONL). Every request's `custom_id` is its content key, so results land in the
store exactly as online results do, through the same parsers.

Restarts. Before a batch is submitted its keys are recorded in the run's store (the ledger,
status `submitting`, under an id of ours that OpenAI also receives as batch metadata); once the
provider accepts it, its id (status `open`). A re-run (after Ctrl-C, kill -9, a reboot) polls the
open batches instead of submitting their keys again and collects the finished ones; it submits only
keys that are in no open batch. A `submitting` record (a crash between our record and the
provider's answer) is looked up among the provider's batches and adopted if it was accepted, else
dropped and its keys submitted again. OpenAI: by our id in the batch's metadata. Anthropic batches
carry no metadata: the batch created within ADOPT_WINDOW_S after our record, with as many requests,
that no record of this store names. If that guess were wrong, polling would find none of our keys
in its results: they come back as gaps and the next run submits them (late, never twice).

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

import io
import json
import os
import re
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from ..core.console import say
from ..core.errors import BackendUnavailable
from ..core.hooks import hooks
from ..core.requests import Generation, Prepared
from ..core.store import BatchRecord, Store
from .prices import BATCH_LIMIT, cost

STORED_FAILURES = (400, 413, 422)          # the request itself is invalid: a failure, stored with its reason
TERMINAL_OPENAI = ("completed", "failed", "expired", "cancelled")
ADOPT_WINDOW_S = 600.0     # a crashed submission's Anthropic batch was created within this long of our record


class BatchRunner:
    """Submits, polls and collects one API judge's provider batches, through its backend's request
    builders and readers (`openai_body` / `openai_read`, `anthropic_body` / `anthropic_read`)."""

    def __init__(self, backend, ledger: Store):
        self.b, self.ledger = backend, ledger
        self.fingerprint = backend.spec.fingerprint
        self.limit = backend.cfg.batch_max_requests or BATCH_LIMIT.get(backend.provider, 50_000)

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
        in_flight = {k for rec in self.ledger.batches(self.fingerprint, ("open",)) for k in rec.keys}
        fresh = [p for p in batch if p.key not in in_flight]
        affordable = self.within_budget(fresh, [p for p in batch if p.key in in_flight])
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
        """What the provider's SDK raises when it cannot answer (connection, timeout, HTTP errors)."""
        return (*self.b._retryable, self.b._status_error, OSError)

    def unreachable(self, doing: str, exc: BaseException) -> None:
        say(f"litjudge: {self.b.spec.name}: the provider did not answer while {doing} ({type(exc).__name__}: "
            f"{str(exc)[:160]}): its requests are left unanswered; run again to resume")

    def within_budget(self, fresh: Sequence[Prepared], in_flight: Sequence[Prepared]) -> list[Prepared]:
        """The first requests of `fresh` whose WORST-CASE spend fits the budget (`max_tokens_total`,
        `max_cost_usd`): a batch is paid for once submitted, so each request counts its prompt and
        its full `max_tokens` at the batch price, on top of what this invocation already spent (every
        API judge of the run or sweep) and of this judge's batches already in flight. (Online, a
        request is sent only while the spend so far is under the cap; a batch cannot be stopped
        halfway, so it is capped before it is sent.)"""
        cfg, account = self.b.cfg, self.b.account
        if not cfg.max_tokens_total and not cfg.max_cost_usd:
            return list(fresh)

        def worst(p: Prepared) -> tuple[int, float]:
            return p.prompt_tokens + p.max_tokens, cost(account.prices, p.prompt_tokens, p.max_tokens, batch=True)

        tokens = account.spend.tokens + sum(worst(p)[0] for p in in_flight)      # the invocation's spend so far
        dollars = account.spend.dollars + sum(worst(p)[1] for p in in_flight)
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
        self.ledger.record_batch(local, self.fingerprint, self.b.provider, [p.key for p in part])
        if self.b.provider == "anthropic":
            made = self.b.client.messages.batches.create(
                requests=[{"custom_id": p.key, "params": self.b.anthropic_body(p)} for p in part])
        else:
            lines = "".join(json.dumps({"custom_id": p.key, "method": "POST", "url": "/v1/chat/completions",
                                        "body": self.b.openai_body(p)}) + "\n" for p in part)
            upload = self.b.client.files.create(file=("litjudge-batch.jsonl", io.BytesIO(lines.encode())),
                                                purpose="batch")
            made = self.b.client.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions",
                                                completion_window="24h", metadata={"litjudge_id": local})
        hooks().batch_submitted(recorded=False)     # a patch point: the provider accepted, our ledger not told
        self.ledger.set_batch(local, "open", made.id)
        say(f"litjudge: {self.b.spec.name}: submitted provider batch {made.id} ({len(part)} requests)")
        hooks().batch_submitted(recorded=True)

    def adopt_submitting(self) -> None:
        """Records left `submitting` by a crash: adopt the batch the provider accepted, or drop the record."""
        for rec in self.ledger.batches(self.fingerprint, ("submitting",)):
            if self.b.provider == "anthropic":
                found = self.anthropic_batch_of(rec)
            else:
                found = next((b.id for b in self.b.client.batches.list(limit=100)
                              if (b.metadata or {}).get("litjudge_id") == rec.local_id), None)
            self.ledger.set_batch(rec.local_id, "open" if found else "cancelled", found)

    def anthropic_batch_of(self, rec: BatchRecord) -> str | None:
        """The Anthropic batch a crashed submission made: created within ADOPT_WINDOW_S after the
        record (a minute of clock skew allowed), as many requests, named by no record of ours; the
        earliest such."""
        known = {r.batch_id for r in self.ledger.batches(None, ("submitting", "open", "collected", "cancelled"))}
        candidates = []
        for b in self.b.client.messages.batches.list(limit=100):
            created = b.created_at.timestamp()
            counts = b.request_counts
            total = counts.processing + counts.succeeded + counts.errored + counts.canceled + counts.expired
            if (b.id not in known and total == len(rec.keys)
                    and rec.created - 60 <= created <= rec.created + ADOPT_WINDOW_S):
                candidates.append((created, b.id))
        return min(candidates)[1] if candidates else None

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
        by_key: dict[str, Generation | None] = {k: None for k in rec.keys}
        if self.b.provider == "anthropic":
            batch = self.b.client.messages.batches.retrieve(rec.batch_id)
            if batch.processing_status != "ended":
                return None
            out = [self.anthropic_result(line) for line in self.b.client.messages.batches.results(rec.batch_id)]
        else:
            batch = self.b.client.batches.retrieve(rec.batch_id)
            if batch.status not in TERMINAL_OPENAI:
                return None
            out = []
            malformed = 0
            for file_id in (batch.output_file_id, batch.error_file_id):
                if file_id:
                    for line in self.b.client.files.content(file_id).text.splitlines():
                        try:
                            record = json.loads(line) if line.strip() else None
                            out.append(self.openai_result(record) if isinstance(record, dict) else None)
                        except (json.JSONDecodeError, ValueError, TypeError, AttributeError, KeyError):
                            malformed += 1
            if malformed:
                say(f"litjudge: {self.b.spec.name}: {malformed} malformed line(s) in the results of batch "
                    f"{rec.batch_id}: their requests are asked again in a new batch")
        for g in out:
            if g is not None and g.key in by_key:
                by_key[g.key] = g
        gap = f"no result in provider batch {rec.batch_id} (ended {getattr(batch, 'status', 'ended')})"
        return [g or Generation(k, "", error=gap, retryable=True) for k, g in by_key.items()]

    def prepared(self, key: str) -> Prepared | None:
        return self.b.pending.get(key)

    def openai_result(self, line: dict[str, Any]) -> Generation | None:
        key, resp, err = str(line.get("custom_id")), line.get("response") or {}, line.get("error")
        p = self.prepared(key)
        if p is None:
            return None
        status = resp.get("status_code")
        if status == 200 and not err:
            from openai.types.chat import ChatCompletion

            return self.b.openai_read(p, ChatCompletion.model_validate(resp["body"]))
        reason = (err or (resp.get("body") or {}).get("error") or {}).get("message") or f"HTTP {status}"
        return Generation(key, "", error=f"provider batch: {reason}"[:300], retryable=status not in STORED_FAILURES)

    def anthropic_result(self, line) -> Generation | None:
        p = self.prepared(line.custom_id)
        if p is None:
            return None
        result = line.result
        if result.type == "succeeded":
            return self.b.anthropic_read(p, result.message)
        if result.type == "errored":
            kind = getattr(result.error.error, "type", "error")
            message = getattr(result.error.error, "message", kind)
            return Generation(p.key, "", error=f"provider batch: {kind}: {message}"[:300],
                              retryable=kind != "invalid_request_error")
        return Generation(p.key, "", error=f"provider batch: {result.type}", retryable=True)


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


def client_for(fingerprint: str, key_env: str = ""):
    """An SDK client for the judge that owns a batch, its key from the run's `[api] key_env` (or
    the provider's usual variable)."""
    provider, url, _ = judge_of(fingerprint)
    key_env = key_env or {"anthropic": "ANTHROPIC_API_KEY"}.get(provider, "OPENAI_API_KEY")
    key = os.environ.get(key_env)
    if not key:
        raise BackendUnavailable(f"cancelling {provider} batches needs the API key in {key_env}")
    if provider == "anthropic":
        import anthropic
        return anthropic.Anthropic(api_key=key, base_url=url, max_retries=2)
    import openai
    return openai.OpenAI(api_key=key, base_url=url, max_retries=2)


class _Adopter:
    """What `BatchRunner.adopt_submitting` needs of a backend: its provider, client and name."""

    def __init__(self, provider: str, client, name: str):
        self.provider, self.client = provider, client
        self.spec = type("Spec", (), {"name": name})()


def sdk_faults() -> tuple[type[BaseException], ...]:
    """The provider SDKs' own errors (connection, timeout, HTTP status: each SDK's APIError) and
    the OS's, for the SDKs that are installed."""
    faults: list[type[BaseException]] = [OSError]
    for name in ("openai", "anthropic"):
        try:
            faults.append(__import__(name).APIError)
        except ImportError:
            continue
    return tuple(faults)


def cancel_open(ledger: Store, key_env: str = "") -> list[str]:
    """Cancel every open provider batch of a run (`litjudge status RUN --cancel-batches`), after
    adopting the batches a crash left `submitting` (the provider accepted them, our ledger was not
    told: they run on, and are billed, unless found). The provider unreachable is one line."""
    done = []
    try:
        for fingerprint in sorted({r.fingerprint for r in ledger.batches(states=("submitting",))}):
            provider, _, model = judge_of(fingerprint)
            runner = BatchRunner.__new__(BatchRunner)
            runner.b, runner.ledger, runner.fingerprint = _Adopter(provider, client_for(fingerprint, key_env), model), \
                ledger, fingerprint
            runner.adopt_submitting()
        for rec in ledger.batches(states=("open",)):
            client = client_for(rec.fingerprint, key_env)
            if rec.provider == "anthropic":
                client.messages.batches.cancel(rec.batch_id)
            else:
                client.batches.cancel(rec.batch_id)
            ledger.set_batch(rec.local_id, "cancelled")
            done.append(str(rec.batch_id))
    except sdk_faults() as exc:
        raise BackendUnavailable(f"the provider did not answer ({type(exc).__name__}: {str(exc)[:160]}); cancelled "
                                 f"{len(done)} batch(es) before that; the rest are still open: run the command "
                                 "again when it answers") from None
    return done
