"""Anthropic's Messages API, through the `anthropic` SDK.

How a verdict is constrained: tool use: one tool `verdict` whose input schema is the verdict
language's JSON schema, forced with tool_choice, so the verdict arrives as structured tool input. (A
prefilled assistant turn would constrain nothing: the model could still write anything after it.)
No log-probabilities, so no distribution mode. The Messages API of the current SDK (anthropic 2.x)
takes no sampling parameters: the server's defaults apply, so repeated requests may differ (the
manifest says so).

Batches: Message Batches (`POST /v1/messages/batches`, polled, results streamed as JSONL). They carry
no metadata: a crashed submission's batch is the one created within ADOPT_WINDOW_S after our record,
with as many requests, that no record of ours names.
"""
from __future__ import annotations

import json
from typing import Any

from litjudge.grammars.compile import json_schema

from ..core.backend import Capabilities
from ..core.requests import Generation, Prepared
from .providers import BatchLine, BatchResults, SdkProvider, chat_messages, from_json

ADOPT_WINDOW_S = 600.0     # a crashed submission's batch was created within this long of our record


class Anthropic(SdkProvider):
    name, title, key_env = "anthropic", "Anthropic", "ANTHROPIC_API_KEY"
    structured = "tool"
    billed_overhead = 512            # a forced tool adds its system prompt (~313-346 tokens, as documented)
    capabilities = Capabilities(frozenset({"label", "analyze"}),
                                notes={"distribution": "the Anthropic API gives no log-probabilities"})
    batch_rate, batch_limit = 0.5, 100_000    # half price; 100,000 requests per batch (as documented, Nov 2026)
    sampling = "server defaults (the SDK sends none)"

    sdk_module = "anthropic"

    def client_of(self, sdk: Any) -> Any:
        return sdk.Anthropic(api_key=self.key, base_url=self.base_url, max_retries=self.retries, timeout=self.timeout,
                             http_client=self.http_client(sdk))

    def body(self, p: Prepared, model: str, structured: str) -> dict[str, Any]:
        r = p.request
        system = "\n\n".join(m.content for m in r.messages if m.role == "system")
        args: dict[str, Any] = {"model": model, "messages": [m for m in chat_messages(r) if m["role"] != "system"],
                                "max_tokens": max(p.max_tokens, 16),
                                "tools": [{"name": "verdict", "description": "Record the verdict.",
                                           "input_schema": json_schema(r.language)}],
                                "tool_choice": {"type": "tool", "name": "verdict"}}
        if system:
            args["system"] = system
        return args

    def send(self, body: dict[str, Any]) -> Any:
        return self.client.messages.create(**body, extra_headers=self.attempt())

    def read(self, p: Prepared, reply: Any, structured: str) -> Generation:
        common = dict(prompt_tokens=reply.usage.input_tokens, output_tokens=reply.usage.output_tokens,
                      finish_reason="length" if reply.stop_reason == "max_tokens" else "stop")
        block = next((b for b in reply.content if b.type == "tool_use"), None)
        if block is None:
            text = "".join(b.text for b in reply.content if b.type == "text")
            return Generation(p.key, text, **common)
        return from_json(p.key, p.request, json.dumps(block.input), common)

    # -- Message Batches --------------------------------------------------------------------------
    def submit(self, requests: list[tuple[str, dict[str, Any]]], local_id: str) -> str:
        made = self.client.messages.batches.create(requests=[{"custom_id": key, "params": body}
                                                             for key, body in requests])
        return made.id

    def adopt(self, local_id: str, size: int, created: float, known: set[str]) -> str | None:
        """The earliest batch created within ADOPT_WINDOW_S after the record (a minute of clock skew
        allowed), of `size` requests, named by no record of ours."""
        candidates = []
        for b in self.client.messages.batches.list(limit=100):
            made = b.created_at.timestamp()
            counts = b.request_counts
            total = counts.processing + counts.succeeded + counts.errored + counts.canceled + counts.expired
            if b.id not in known and total == size and created - 60 <= made <= created + ADOPT_WINDOW_S:
                candidates.append((made, b.id))
        return min(candidates)[1] if candidates else None

    def results(self, batch_id: str) -> BatchResults | None:
        if self.client.messages.batches.retrieve(batch_id).processing_status != "ended":
            return None
        return BatchResults([self._line(line) for line in self.client.messages.batches.results(batch_id)])

    @staticmethod
    def _line(line: Any) -> BatchLine:
        result = line.result
        if result.type == "succeeded":
            return BatchLine(line.custom_id, result.message)
        if result.type == "errored":
            kind = getattr(result.error.error, "type", "error")
            message = getattr(result.error.error, "message", kind)
            return BatchLine(line.custom_id, error=f"provider batch: {kind}: {message}"[:300],
                             retryable=kind != "invalid_request_error")
        return BatchLine(line.custom_id, error=f"provider batch: {result.type}")

    def cancel(self, batch_id: str) -> None:
        self.client.messages.batches.cancel(batch_id)
