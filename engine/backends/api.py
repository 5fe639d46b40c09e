"""API judges behind the same request interface, store and metrics as local ones.

Judge names: `openai:MODEL`, `openai-compatible:URL:MODEL` (vLLM's `vllm serve`, SGLang, llama.cpp
server...), `anthropic:MODEL`.

How a verdict is constrained (every answer then goes through the same exact parser; what does not
parse is stored as unparsed and counted):
- openai-compatible: vLLM's `structured_outputs` extra body (a choice of labels, or the verdict
  grammar): the very constraint the offline backend applies. `api.structured = "json_schema"` sends a
  JSON-schema response format instead; "none" sends no constraint.
- openai: a JSON-schema response format ({"verdict": ...}).
- anthropic: tool use: one tool `verdict` whose input schema is the verdict language's JSON schema,
  forced with tool_choice, so the verdict arrives as structured tool input. (A prefilled assistant
  turn would constrain nothing: the model could still write anything after it.)
Distribution mode asks for the top log-probabilities of the first answer token where the server
gives them (OpenAI-style `logprobs`), with no constraint, so they are not renormalised.

Reliability: at most `api.concurrency` requests in flight; retries with exponential backoff and
full jitter on 429, 5xx, timeouts and connection errors (counted); a budget cap on tokens and
estimated cost (requests past the cap are not sent, stay unstored, and a re-run resumes them).
A request that still has no answer after its retries (or is refused for the key, the model or the
account: 401, 403, 404) is not a verdict: it is not stored, the run reports it unanswered and
exits non-zero, and a re-run sends it again. Only a request the server rejects as invalid (400,
413, 422) is stored, as a failure with the server's reason.
Keys are read from the environment only and scrubbed from every error text this backend returns.
"""
from __future__ import annotations

import json
import math
import os
import random
import threading
import time
from array import array
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from litjudge.grammars.analysis import Analyzed
from litjudge.grammars.compile import json_schema, vllm_structured_fields

from ..core.backend import Capabilities, JudgeSpec
from ..core.config import ApiConfig, RunConfig
from ..core.errors import BackendUnavailable, ConfigError
from ..core.requests import Generation, JudgeIdentity, JudgeRequest, Prepared
from .api_batch import BatchRunner
from .base import BackendBase, WordTokenizer
from .local.render import plain_layout
from .prices import BATCH_LIMIT, cost, invocation_spend, prices

DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "openai-compatible": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def parse_judge(name: str) -> tuple[str, str, str]:
    """`provider:...` -> (provider, base_url or "", model)."""
    provider, _, rest = name.partition(":")
    if provider == "openai-compatible":
        url, _, model = rest.rpartition(":")
        if not url.startswith(("http://", "https://")) or not model:
            raise ConfigError(f"expected openai-compatible:URL:MODEL (e.g. openai-compatible:http://127.0.0.1:8000/v1:"
                              f"my-model), got {name!r}", key="judge")
        return provider, url, model
    if not rest:
        raise ConfigError(f"expected {provider}:MODEL, got {name!r}", key="judge")
    return provider, "", rest


# How each provider's answers are constrained under `[api] structured = "auto"`.
DEFAULT_STRUCTURED = {"openai": "json_schema", "openai-compatible": "vllm", "anthropic": "tool"}


class _Accounting:
    """One judge's tokens, estimated cost (at batch prices in batch mode) and retries, shared by its
    worker threads; the budget caps hold for the whole invocation's spend (`Spend`: every API judge
    of the run or sweep), so two judges under one cap never spend twice it."""

    def __init__(self, cfg: ApiConfig, provider: str = "openai"):
        self.cfg, self.lock = cfg, threading.Lock()
        self.prices = prices(provider, cfg.price_in_per_mtok, cfg.price_out_per_mtok)
        self.prompt_tokens = self.completion_tokens = self.requests = self.retries = self.errors = 0
        self.skipped_for_budget = 0
        self.spend = invocation_spend()

    @property
    def cost_usd(self) -> float:
        return cost(self.prices, self.prompt_tokens, self.completion_tokens, batch=self.cfg.batch)

    def over_budget(self) -> bool:
        spend = self.spend
        with spend.lock:
            return bool((self.cfg.max_tokens_total and spend.tokens >= self.cfg.max_tokens_total)
                        or (self.cfg.max_cost_usd and spend.dollars >= self.cfg.max_cost_usd))

    def add(self, prompt: int, completion: int) -> None:
        with self.lock:
            self.prompt_tokens += prompt
            self.completion_tokens += completion
            self.requests += 1
        self.spend.add(prompt + completion, cost(self.prices, prompt, completion, batch=self.cfg.batch))

    def as_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "estimated_cost_usd": round(self.cost_usd, 6),
                "retries": self.retries, "failed_after_retries": self.errors,
                "not_sent_over_budget": self.skipped_for_budget,
                "budget": {"max_tokens_total": self.cfg.max_tokens_total, "max_cost_usd": self.cfg.max_cost_usd}}


class ApiBackend(BackendBase):
    """One class for the three providers; each registers under its own name (subclasses below)."""

    name = "openai"
    capabilities = Capabilities(frozenset({"label", "analyze", "distribution"}))

    @classmethod
    def resolve(cls, name: str, config: RunConfig, prefix: str = "") -> JudgeSpec:
        """An API model is known only by name (and server): the provider may change it underneath."""
        provider, url, model = parse_judge(name)
        if config.api.batch and provider not in BATCH_LIMIT:
            raise ConfigError(f"api.batch: provider batches are OpenAI's and Anthropic's (openai:MODEL, anthropic:MODEL); "
                              f"judge {name!r} is {provider}", key="api.batch")
        base_url = config.api.base_url or url or None
        return JudgeSpec(name, cls.name, model, f"api:{provider}:{base_url or 'default'}:{model}", f"api-{provider}",
                         True, config.engine, config.api, (("provider", provider), ("base_url", base_url)))

    @classmethod
    def plan(cls, spec: JudgeSpec) -> ApiBackend:
        return cls(spec, planning=True)

    def __init__(self, spec: JudgeSpec, planning: bool = False):
        """`planning`: only plan (render, key, count); no API key needed, nothing is sent."""
        self.spec, self.cfg = spec, spec.api
        self.provider, self.model, self.base_url = spec.detail("provider"), spec.target, spec.detail("base_url")
        cfg = self.cfg
        key_env = cfg.key_env or DEFAULT_KEY_ENV[self.provider]
        key = os.environ.get(key_env)
        if not key:
            if self.provider != "openai-compatible" and not planning:
                raise BackendUnavailable(f"judge {spec.name!r} needs an API key in the environment variable {key_env}")
            key = "EMPTY"                    # local servers (vllm serve) accept any key; planning sends nothing
        self._key = key
        self.structured = cfg.structured if cfg.structured != "auto" else DEFAULT_STRUCTURED[self.provider]
        self.account = _Accounting(cfg, self.provider)
        self._tok = WordTokenizer()
        try:
            self.client: Any
            self._retryable: tuple[type[Exception], ...]
            self._status_error: type[Exception]
            if self.provider == "anthropic":
                import anthropic
                self.client = anthropic.Anthropic(api_key=key, base_url=self.base_url, max_retries=0, timeout=cfg.timeout_s)
                self._retryable = (anthropic.RateLimitError, anthropic.InternalServerError, anthropic.APITimeoutError,
                                   anthropic.APIConnectionError)
                self._status_error = anthropic.APIStatusError
            else:
                import openai
                self.client = openai.OpenAI(api_key=key, base_url=self.base_url, max_retries=0, timeout=cfg.timeout_s)
                self._retryable = (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError,
                                   openai.APIConnectionError)
                self._status_error = openai.APIStatusError
        except ImportError as exc:
            raise BackendUnavailable(f"the {self.provider} SDK is not installed ({exc}); "
                                     "pip install 'litjudge[api]'") from None

    # -- planning ---------------------------------------------------------------------------
    def identity(self) -> JudgeIdentity:
        """The model, its server and how its answer is constrained: `[api] structured` changes what
        the model may say (a grammar, a JSON schema, a tool, or nothing), so a setting other than
        the provider's default is part of every key (the default keeps the keys it always had)."""
        template = "server-side" if self.structured == DEFAULT_STRUCTURED[self.provider] else \
            f"server-side;structured={self.structured}"
        return JudgeIdentity(self.spec.fingerprint, template, self.spec.family)

    def tokenizer(self):
        return self._tok

    def render(self, request: JudgeRequest) -> str:
        # Judged text goes to the provider as message content: its own chat formatting places the turn
        # markers around it and nothing here is tokenized (a self-hosted server's handling is that server's).
        return plain_layout(request.messages) + (request.prefill or "")

    def encode(self, prompt: str) -> list[int]:
        return self._tok.encode(prompt)

    def encode_batch(self, prompts: list[str]) -> list[array]:
        return self._tok.encode_batch(prompts)

    def context_window(self) -> int:
        return 10**9                         # the server checks its own window

    def describe(self) -> dict:
        return {"backend": self.provider, "model": self.model, "base_url": self.base_url,
                "structured_outputs": self.structured, "concurrency": self.cfg.concurrency,
                "sampling": "server defaults (the SDK sends none)" if self.provider == "anthropic" else "as configured",
                "api": self.account.as_dict()}

    def close(self) -> None:
        self.client.close()

    # -- generation -------------------------------------------------------------------------
    ledger: Any = None                   # the run's store, for provider batches (use_ledger)
    pending: dict[str, Prepared] = {}    # the requests of the batch being generated, by key
    progress = ""

    def use_ledger(self, store) -> None:
        """The run's store: where provider batches are recorded (the runner hands it over)."""
        self.ledger = store

    def progress_note(self) -> str:
        return self.progress

    def generate(self, batch: Sequence[Prepared]) -> Iterator[Generation]:
        if self.cfg.batch:
            if self.ledger is None:
                raise BackendUnavailable("provider batches need the run's store to record them in")
            self.pending = {p.key: p for p in batch}
            yield from BatchRunner(self, self.ledger).generate(batch)
            return
        pool = ThreadPoolExecutor(max_workers=self.cfg.concurrency)
        try:
            futures = [pool.submit(self._one, p) for p in batch]
            for f in as_completed(futures):
                g = f.result()
                if g is None:                # over budget: not sent, not stored
                    continue
                yield g
        finally:
            # Ctrl-C or a crash: requests not yet sent are dropped (a re-run resumes them), not waited on.
            pool.shutdown(wait=False, cancel_futures=True)

    def _one(self, p: Prepared) -> Generation | None:
        if self.account.over_budget():
            with self.account.lock:
                self.account.skipped_for_budget += 1
            return None
        delay, attempt = self.cfg.backoff_s, -1
        while True:
            attempt += 1
            try:
                return self._call(p)
            except self._retryable as exc:
                if attempt == self.cfg.max_retries:
                    with self.account.lock:
                        self.account.errors += 1
                    return Generation(p.key, "", error=self._scrub(f"gave up after {attempt + 1} attempts: "
                                                                   f"{_describe(exc)}"), retryable=True)
                with self.account.lock:
                    self.account.retries += 1
                time.sleep(random.uniform(0, delay))          # full jitter
                delay *= 2
            except self._status_error as exc:                 # 4xx other than 429: not retried here
                # A refused key, a missing model or a conflict is the service's state, not the
                # model's answer: left unstored for a re-run. A request the server rejects as
                # invalid (400, 422) would be rejected again: stored as a failure, with the reason.
                status = getattr(exc, "status_code", None)
                with self.account.lock:
                    self.account.errors += 1
                return Generation(p.key, "", error=self._scrub(_describe(exc)),
                                  retryable=status not in (400, 413, 422))

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key and self._key != "EMPTY" else text

    def _messages(self, r: JudgeRequest) -> list[dict[str, str]]:
        msgs = [{"role": m.role, "content": m.content} for m in r.messages]
        if r.prefill:
            msgs.append({"role": "assistant", "content": r.prefill})
        return msgs

    def _call(self, p: Prepared) -> Generation:
        if self.provider == "anthropic":
            return self._anthropic(p)
        return self._openai(p)

    def _openai(self, p: Prepared) -> Generation:
        args = self.openai_body(p)
        extra = {k: args.pop(k) for k in EXTRA_BODY if k in args}
        resp = self.client.chat.completions.create(**args, **({"extra_body": extra} if extra else {}))
        return self.openai_read(p, resp)

    def openai_body(self, p: Prepared) -> dict[str, Any]:
        """The Chat Completions request of one prepared request (as sent online, or as one line of
        a provider batch: the same body either way)."""
        r, s = p.request, p.request.sampling
        args: dict[str, Any] = {"model": self.model, "messages": self._messages(r), "temperature": s.temperature,
                                "max_tokens": p.max_tokens}
        if not s.greedy:
            args.update(top_p=s.top_p, seed=s.engine_seed(r.attempt))
        if r.prefill and self.provider == "openai-compatible":
            args.update(add_generation_prompt=False, continue_final_message=True)
        if r.mode == "distribution":
            args.update(max_tokens=1, logprobs=True, top_logprobs=20)
        elif self.structured == "vllm":
            args["structured_outputs"] = vllm_structured_fields(r.language)
        elif self.structured == "json_schema":
            args["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "verdict", "schema": json_schema(r.language), "strict": True}}
        return args

    def openai_read(self, p: Prepared, resp) -> Generation:
        """A ChatCompletion (online, or one line of a batch's results) as the Generation of `p`."""
        r = p.request
        usage = resp.usage
        self.account.add(usage.prompt_tokens if usage else 0, usage.completion_tokens if usage else 0)
        choice = resp.choices[0]
        text = choice.message.content or ""
        common = dict(prompt_tokens=usage.prompt_tokens if usage else 0,
                      output_tokens=usage.completion_tokens if usage else 0, finish_reason=choice.finish_reason)
        if r.mode == "distribution":
            return _distribution(p.key, r, choice, text, common)
        if self.structured == "json_schema":
            return _from_json(p.key, r, text, common)
        return Generation(p.key, text, **common)

    def _anthropic(self, p: Prepared) -> Generation:
        return self.anthropic_read(p, self.client.messages.create(**self.anthropic_body(p)))

    def anthropic_body(self, p: Prepared) -> dict[str, Any]:
        """The Messages request of one prepared request (online, or a batch's `params`)."""
        r = p.request
        system = "\n\n".join(m.content for m in r.messages if m.role == "system")
        msgs = [m for m in self._messages(r) if m["role"] != "system"]
        # The Messages API of the current SDK (anthropic 2.x) takes no sampling parameters: the
        # server's defaults apply, so repeated requests may differ (the manifest says so).
        args: dict[str, Any] = {"model": self.model, "messages": msgs, "max_tokens": max(p.max_tokens, 16),
                                "tools": [{"name": "verdict", "description": "Record the verdict.",
                                           "input_schema": json_schema(r.language)}],
                                "tool_choice": {"type": "tool", "name": "verdict"}}
        if system:
            args["system"] = system
        return args

    def anthropic_read(self, p: Prepared, resp) -> Generation:
        """A Message (online, or a succeeded batch result) as the Generation of `p`."""
        self.account.add(resp.usage.input_tokens, resp.usage.output_tokens)
        common = dict(prompt_tokens=resp.usage.input_tokens, output_tokens=resp.usage.output_tokens,
                      finish_reason="length" if resp.stop_reason == "max_tokens" else "stop")
        block = next((b for b in resp.content if getattr(b, "type", "") == "tool_use"), None)
        if block is None:
            text = "".join(getattr(b, "text", "") for b in resp.content)
            return Generation(p.key, text, **common)
        return _from_json(p.key, p.request, json.dumps(block.input), common)


# vLLM's server extensions: sent in the body beside OpenAI's fields (the SDK's `extra_body` online)
EXTRA_BODY = ("structured_outputs", "add_generation_prompt", "continue_final_message")


def _from_json(key: str, r: JudgeRequest, text: str, common: dict) -> Generation:
    """{"verdict": ..., "analysis"?: ...} -> the raw text the exact parser reads (unparsable JSON stays raw)."""
    try:
        obj = json.loads(text)
        verdict = str(obj["verdict"])
    except (json.JSONDecodeError, KeyError, TypeError):
        return Generation(key, text, **common)
    if isinstance(r.language, Analyzed):
        analysis = str(obj.get("analysis", ""))
        return Generation(key, f"{analysis}\n{r.language.marker} {verdict}", analysis=analysis, **common)
    return Generation(key, verdict, **common)


def _distribution(key: str, r: JudgeRequest, choice, text: str, common: dict) -> Generation:
    """Label probabilities from the first answer token's top log-probabilities (labels that are
    not among them get 0; label_mass says how much of the mass the labels held)."""
    content = getattr(choice.logprobs, "content", None) if choice.logprobs else None
    if not content:
        return Generation(key, text, error="the server returned no log-probabilities", **common)
    top = {t.token.strip(): math.exp(t.logprob) for t in content[0].top_logprobs}
    labels = r.language.labels() or ()
    probs = {lab: top.get(lab, 0.0) for lab in labels}
    mass = sum(probs.values())
    if mass <= 0:
        return Generation(key, text, error="no label among the top log-probabilities", label_mass=0.0, **common)
    dist = {lab: v / mass for lab, v in probs.items()}
    return Generation(key, max(dist, key=lambda lab: dist[lab]), distribution=dist, label_mass=mass, **common)


def _describe(exc: Exception) -> str:
    """An SDK error as one line, without request headers (where keys live)."""
    status = getattr(exc, "status_code", None)
    return f"{type(exc).__name__}" + (f" (HTTP {status})" if status else "")


class OpenAICompatibleBackend(ApiBackend):
    name = "openai-compatible"


class AnthropicBackend(ApiBackend):
    name = "anthropic"
    capabilities = Capabilities(frozenset({"label", "analyze"}),
                                notes={"distribution": "the Anthropic API gives no log-probabilities"})
