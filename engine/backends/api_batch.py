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
"""
from __future__ import annotations

import io
import json
import os
import signal
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from ..core.console import say
from ..core.errors import BackendUnavailable
from ..core.requests import Generation, Prepared
from ..core.store import BatchRecord, Store
from .prices import BATCH_LIMIT

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
        wanted = {p.key: p for p in batch}
        self.adopt_submitting()
        in_flight = {k for rec in self.ledger.batches(self.fingerprint, ("open",)) for k in rec.keys}
        fresh = [p for p in batch if p.key not in in_flight]
        for start in range(0, len(fresh), self.limit):
            if self.b.account.over_budget():
                with self.b.account.lock:
                    self.b.account.skipped_for_budget += len(fresh) - start
                break
            self.submit(fresh[start:start + self.limit])
        yield from self.collect(wanted)

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
        if os.environ.get("LITJUDGE_FAULT_KILL_BEFORE_RECORD"):    # the provider accepted, our ledger not told
            os.kill(os.getpid(), signal.SIGKILL)
        self.ledger.set_batch(local, "open", made.id)
        say(f"litjudge: {self.b.spec.name}: submitted provider batch {made.id} ({len(part)} requests)")
        if os.environ.get("LITJUDGE_FAULT_KILL_AFTER_SUBMIT"):     # fault injection for the restart test
            os.kill(os.getpid(), signal.SIGKILL)

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
        """Poll the open batches holding wanted keys until each has ended; yield their results."""
        while True:
            waiting = [rec for rec in self.ledger.batches(self.fingerprint, ("open",))
                       if any(k in wanted for k in rec.keys)]
            if not waiting:
                return
            ended = 0
            for rec in waiting:
                results = self.poll(rec)
                if results is None:
                    continue
                ended += 1
                for g in results:
                    if g.key in wanted:
                        yield g
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
            for file_id in (batch.output_file_id, batch.error_file_id):
                if file_id:
                    text = self.b.client.files.content(file_id).text
                    out += [self.openai_result(json.loads(line)) for line in text.splitlines() if line.strip()]
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


def judge_of(fingerprint: str) -> tuple[str, str | None, str]:
    """(provider, base URL or None, model) from an API judge's fingerprint `api:PROVIDER:URL:MODEL`."""
    _, provider, rest = fingerprint.split(":", 2)
    url, _, model = rest.rpartition(":")
    return provider, (None if url == "default" else url), model


def client_for(fingerprint: str):
    """An SDK client for the judge that owns a batch (its key from the provider's usual variable)."""
    provider, url, _ = judge_of(fingerprint)
    key_env = {"anthropic": "ANTHROPIC_API_KEY"}.get(provider, "OPENAI_API_KEY")
    key = os.environ.get(key_env)
    if not key:
        raise BackendUnavailable(f"cancelling {provider} batches needs the API key in {key_env}")
    if provider == "anthropic":
        import anthropic
        return anthropic.Anthropic(api_key=key, base_url=url, max_retries=2)
    import openai
    return openai.OpenAI(api_key=key, base_url=url, max_retries=2)


def cancel_open(ledger: Store) -> list[str]:
    """Cancel every open provider batch of a run (`litjudge status RUN --cancel-batches`)."""
    done = []
    for rec in ledger.batches(states=("open",)):
        client = client_for(rec.fingerprint)
        if rec.provider == "anthropic":
            client.messages.batches.cancel(rec.batch_id)
        else:
            client.batches.cancel(rec.batch_id)
        ledger.set_batch(rec.local_id, "cancelled")
        done.append(str(rec.batch_id))
    return done
