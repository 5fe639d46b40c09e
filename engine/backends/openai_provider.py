"""OpenAI's Chat Completions API and the servers that speak it (`vllm serve`, SGLang, llama.cpp's
server...), through the `openai` SDK.

How a verdict is constrained: OpenAI: a JSON-schema response format ({"verdict": ...});
OpenAI-compatible: vLLM's `structured_outputs` extra body (a choice of labels, or the verdict
grammar): the very constraint the offline backend applies. `[api] structured` chooses another
("json_schema", "vllm", "none"). Distribution mode asks for the top log-probabilities of the first
answer token, with no constraint, so they are not renormalised.

Batches (OpenAI only): a JSONL file of Chat Completions requests uploaded through the Files API,
`POST /v1/batches` with our id in its metadata, polled; the output and error files downloaded.
"""
from __future__ import annotations

import io
import json
from typing import Any

from litjudge.grammars.compile import json_schema, vllm_structured_fields

from ..core.errors import ConfigError
from ..core.requests import Generation, Prepared
from .providers import (
    STORED_FAILURES,
    BatchLine,
    BatchResults,
    SdkProvider,
    chat_messages,
    from_json,
    from_top_logprobs,
)

# vLLM's server extensions: sent in the body beside OpenAI's fields (the SDK's `extra_body` online)
EXTRA_BODY = ("structured_outputs", "add_generation_prompt", "continue_final_message")
TERMINAL = ("completed", "failed", "expired", "cancelled")


JSON_WRAPPER_TOKENS = 16      # {"verdict": ...} (and an analysis's quotes and escapes) beyond the verdict's own


class OpenAI(SdkProvider):
    name, title, key_env = "openai", "OpenAI", "OPENAI_API_KEY"
    structured = "json_schema"
    batch_rate, batch_limit = 0.5, 50_000     # half price; 50,000 requests per batch (as documented, Nov 2026)

    sdk_module = "openai"

    def client_of(self, sdk: Any) -> Any:
        return sdk.OpenAI(api_key=self.key, base_url=self.base_url, max_retries=self.retries, timeout=self.timeout,
                          http_client=self.http_client(sdk))

    def body(self, p: Prepared, model: str, structured: str) -> dict[str, Any]:
        r, s = p.request, p.request.sampling
        args: dict[str, Any] = {"model": model, "messages": chat_messages(r), "temperature": s.temperature,
                                "max_tokens": p.max_tokens}
        if not s.greedy:
            args.update(top_p=s.top_p, seed=s.engine_seed(p.key))
        if r.prefill:
            args.update(self.continued())
        if r.mode == "distribution":
            args.update(max_tokens=1, logprobs=True, top_logprobs=20)
        elif structured == "vllm":
            args["structured_outputs"] = vllm_structured_fields(r.language)
        elif structured == "json_schema":
            args["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "verdict", "schema": json_schema(r.language), "strict": True}}
            # the verdict comes wrapped, {"verdict": "A"}: 6-7 tokens where the label's bound was 3, so
            # every reply was cut short and stored unparsed (a new user's server that honours max_tokens)
            args["max_tokens"] = p.max_tokens + JSON_WRAPPER_TOKENS
        return args

    def continued(self) -> dict[str, Any]:
        """What makes the server continue a prefilled assistant turn (OpenAI's API: nothing)."""
        return {}

    def send(self, body: dict[str, Any]) -> Any:
        body = dict(body)
        extra = {k: body.pop(k) for k in EXTRA_BODY if k in body}
        return self.client.chat.completions.create(**body, extra_headers=self.attempt(),
                                                   **({"extra_body": extra} if extra else {}))

    def read(self, p: Prepared, reply: Any, structured: str) -> Generation:
        usage = reply.usage
        choice = reply.choices[0]
        text = choice.message.content or ""
        common = dict(prompt_tokens=usage.prompt_tokens if usage else 0,
                      output_tokens=usage.completion_tokens if usage else 0, finish_reason=choice.finish_reason)
        if p.request.mode == "distribution":
            content = choice.logprobs.content if choice.logprobs else None
            if not content:
                return Generation(p.key, text, error="the server returned no log-probabilities", **common)
            return from_top_logprobs(p.key, p.request, ((t.token, t.logprob) for t in content[0].top_logprobs),
                                     text, common)
        if structured == "json_schema":
            return from_json(p.key, p.request, text, common)
        return Generation(p.key, text, **common)

    # -- the Batch API ----------------------------------------------------------------------------
    def submit(self, requests: list[tuple[str, dict[str, Any]]], local_id: str) -> str:
        lines = "".join(json.dumps({"custom_id": key, "method": "POST", "url": "/v1/chat/completions", "body": body})
                        + "\n" for key, body in requests)
        upload = self.client.files.create(file=("litjudge-batch.jsonl", io.BytesIO(lines.encode())), purpose="batch")
        made = self.client.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions",
                                          completion_window="24h", metadata={"litjudge_id": local_id})
        return made.id

    def adopt(self, local_id: str, size: int, created: float, known: set[str]) -> str | None:
        """By our id in the batch's metadata."""
        return next((b.id for b in self.client.batches.list(limit=100)
                     if (b.metadata or {}).get("litjudge_id") == local_id), None)

    def results(self, batch_id: str) -> BatchResults | None:
        batch = self.client.batches.retrieve(batch_id)
        if batch.status not in TERMINAL:
            return None
        lines, malformed = [], 0
        for file_id in (batch.output_file_id, batch.error_file_id):
            for text in self.client.files.content(file_id).text.splitlines() if file_id else ():
                try:
                    record = json.loads(text) if text.strip() else None
                    if isinstance(record, dict):
                        lines.append(self._line(record))
                except (json.JSONDecodeError, ValueError, TypeError, AttributeError, KeyError):
                    malformed += 1
        return BatchResults(lines, malformed, batch.status)

    def _line(self, record: dict[str, Any]) -> BatchLine:
        key, resp, err = str(record.get("custom_id")), record.get("response") or {}, record.get("error")
        status = resp.get("status_code")
        if status == 200 and not err:
            return BatchLine(key, self.sdk.types.chat.ChatCompletion.model_validate(resp["body"]))
        reason = (err or (resp.get("body") or {}).get("error") or {}).get("message") or f"HTTP {status}"
        return BatchLine(key, error=f"provider batch: {reason}"[:300], retryable=status not in STORED_FAILURES)

    def cancel(self, batch_id: str) -> None:
        self.client.batches.cancel(batch_id)


class OpenAICompatible(OpenAI):
    """A server speaking OpenAI's API (`vllm serve`, SGLang, llama.cpp's server), named
    openai-compatible:URL:MODEL; a local server takes any key; no provider batches."""

    name, title = "openai-compatible", "OpenAI-compatible"
    key_required = False
    structured = "vllm"
    batch_rate, batch_limit = 1.0, 0

    @classmethod
    def parse(cls, rest: str, name: str) -> tuple[str, str]:
        url, _, model = rest.rpartition(":")
        if not url.startswith(("http://", "https://")) or not model:
            raise ConfigError(f"expected openai-compatible:URL:MODEL (e.g. openai-compatible:http://127.0.0.1:8000/v1:"
                              f"my-model), got {name!r}", parameter="judge")
        return url, model

    def continued(self) -> dict[str, Any]:
        return {"add_generation_prompt": False, "continue_final_message": True}
