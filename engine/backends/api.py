"""API judges behind the same request interface, store and metrics as local ones: one backend
class for every provider (engine.backends.providers: each provider's wire format, key variable,
default constraint and prices are its own class), made by `api_backend(TheProvider)`.

Judge names: `openai:MODEL`, `openai-compatible:URL:MODEL` (vLLM's `vllm serve`, SGLang, llama.cpp
server...), `anthropic:MODEL`, and `NAME:...` for a provider added as a plugin. Every answer goes
through the same exact parser; what does not parse is stored as unparsed and counted.

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
import logging
import os
import random
import threading
import time
from array import array
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed, wait
from dataclasses import replace
from typing import Any, ClassVar

from ..core.backend import Backend, JudgeSpec
from ..core.config import ApiConfig, RunConfig
from ..core.console import say
from ..core.errors import BackendUnavailable, ConfigError
from ..core.requests import Generation, JudgeIdentity, JudgeRequest, Prepared
from ..core.session import Spend
from ..core.store import Store
from .anthropic_provider import Anthropic
from .api_batch import BatchRunner
from .base import WordTokenizer
from .local.render import plain_layout
from .openai_provider import OpenAI, OpenAICompatible
from .prices import cost, prices
from .providers import STORED_FAILURES, Provider

SALVAGE_WAIT_S = 5.0      # after Ctrl-C, how long the replies in flight are waited for (then stored)


class _Accounting:
    """One judge's tokens, estimated cost (at batch prices in batch mode) and retries, shared by its
    worker threads; the budget caps hold for the whole invocation's spend (`Spend`: every API judge
    of the run or sweep, given by `ApiBackend.attach`), so two judges under one cap never spend
    twice it. Until attached, the judge counts alone."""

    def __init__(self, cfg: ApiConfig, provider: type[Provider]):
        self.cfg, self.lock = cfg, threading.Lock()
        self.prices = prices(provider, cfg.price_in_per_mtok, cfg.price_out_per_mtok)
        self.prompt_tokens = self.completion_tokens = self.requests = self.retries = self.errors = 0
        self.skipped_for_budget = self.maybe_billed = self.maybe_billed_prompt = self.maybe_billed_completion = 0
        self.last_error: str | None = None       # why the last request left unanswered was (said with the count)
        self.spend = Spend()

    @property
    def cost_usd(self) -> float:
        return cost(self.prices, self.prompt_tokens, self.completion_tokens, batch=self.cfg.batch)

    def over_budget(self) -> bool:
        tokens, dollars = self.spend.held()
        return bool((self.cfg.max_tokens_total and tokens >= self.cfg.max_tokens_total)
                    or (self.cfg.max_cost_usd and dollars >= self.cfg.max_cost_usd))

    def held_back(self) -> bool:
        """Whether the caps are spent: the request is then not sent (counted as held back)."""
        if not self.over_budget():
            return False
        with self.lock:
            self.skipped_for_budget += 1
        return True

    def add_maybe_billed(self, prompt: int, completion: int) -> None:
        """An attempt that failed after the server had it (timed out, its connection lost, its reply
        cut short, a gateway's 502 / 504), at its worst case: spent against the caps (the server may
        finish and bill it), not a request answered."""
        with self.lock:
            self.maybe_billed += 1
            self.maybe_billed_prompt += prompt
            self.maybe_billed_completion += completion
        self.spend.add(prompt + completion, cost(self.prices, prompt, completion, batch=self.cfg.batch))

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
                "not_sent_over_budget": self.skipped_for_budget, "maybe_billed_attempts": self.maybe_billed,
                "maybe_billed_usd_at_most": round(cost(self.prices, self.maybe_billed_prompt, self.maybe_billed_completion,
                                                       batch=self.cfg.batch), 6),
                **({"last_unanswered_error": self.last_error} if self.last_error else {}),
                "budget": {"max_tokens_total": self.cfg.max_tokens_total, "max_cost_usd": self.cfg.max_cost_usd}}


class ApiBackend(Backend):
    """An API judge of `provider` (a class per provider: `api_backend(TheProvider)`)."""

    provider: ClassVar[type[Provider]]

    @classmethod
    def resolve(cls, name: str, config: RunConfig, prefix: str = "") -> JudgeSpec:
        """An API model is known only by name (and server): the provider may change it underneath."""
        provider = cls.provider
        url, model = provider.parse(name.removeprefix(prefix), name)
        if config.api.batch and not provider.batch_limit:
            raise ConfigError(f"the {provider.title} API has no provider batches (judge {name!r}); leave "
                              "api.batch out for it", parameter="api.batch")
        unpriced = [k for k in ("price_in_per_mtok", "price_out_per_mtok") if not getattr(config.api, k)]
        if config.api.max_cost_usd and unpriced:
            # one price alone counted the other side's tokens as $0 against the cap (a hostile pass)
            raise ConfigError(f"caps dollars, and judge {name!r} has no {' or '.join(unpriced)} to turn its tokens "
                              "into dollars (it capped nothing of them): set api.price_in_per_mtok and "
                              "api.price_out_per_mtok, or cap tokens with api.max_tokens_total",
                              parameter="api.max_cost_usd")
        base_url = config.api.base_url or url or None
        return JudgeSpec(name, cls.name, model, f"api:{provider.name}:{base_url or 'default'}:{model}",
                         f"api-{provider.name}", True, config.engine, config.api,
                         (("provider", provider.name), ("base_url", base_url)))

    @classmethod
    def plan(cls, spec: JudgeSpec) -> ApiBackend:
        return cls(spec, planning=True)

    @classmethod
    def cost(cls, spec: JudgeSpec, prompt_tokens: float, output_tokens: float) -> float | None:
        api = spec.api
        return cost(prices(cls.provider, api.price_in_per_mtok, api.price_out_per_mtok), prompt_tokens,
                    output_tokens, batch=api.batch)

    def __init__(self, spec: JudgeSpec, planning: bool = False):
        """`planning`: only plan (render, key, count); no API key needed, nothing is sent."""
        self.spec, self.cfg = spec, spec.api
        self.model, self.base_url = spec.target, spec.detail("base_url")
        cfg, provider = self.cfg, self.provider
        key_env = cfg.key_env or provider.key_env
        key = os.environ.get(key_env)
        if not key:
            if provider.key_required and not planning:
                raise BackendUnavailable(f"judge {spec.name!r} needs an API key in the environment variable {key_env}")
            key = "EMPTY"                    # local servers (vllm serve) accept any key; planning sends nothing
        self._key = key
        self.structured = cfg.structured if cfg.structured != "auto" else provider.structured
        self.account = _Accounting(cfg, provider)
        self._said_no_usage = False
        self._left: list[Future] = []           # replies received, not handed over when generate stopped
        self._tok = WordTokenizer()
        self.api = provider(key, self.base_url, cfg.timeout_s)

    # -- planning ---------------------------------------------------------------------------
    def identity(self) -> JudgeIdentity:
        """The model, its server and how its answer is constrained: `[api] structured` changes what
        the model may say (a grammar, a JSON schema, a tool, or nothing), so a setting other than
        the provider's default is part of every key (the default keeps the keys it always had)."""
        template = "server-side" if self.structured == self.provider.structured else \
            f"server-side;structured={self.structured}"
        return JudgeIdentity(self.spec.fingerprint, template, self.spec.family)

    def tokenizer(self):
        return self._tok

    def render(self, request: JudgeRequest) -> str:
        # Judged text goes to the provider as message content: its own chat formatting places the turn
        # markers around it and nothing here is tokenized (a self-hosted server's handling is that server's).
        if request.mode == "distribution" and request.language.prefixed:
            # the labels are read from the first answer token's top log-probabilities: P("1") would hold P("10")
            labels = request.language.labels() or ()
            first = next(a for a in labels if any(b != a and b.startswith(a) for b in labels))
            raise ConfigError(f"judge {self.spec.name!r}: distribution mode through an API reads each label from the "
                              f"first answer token, which cannot tell {first!r} from a label it starts; use mode "
                              "\"label\", or a local judge", parameter="mode", value="distribution")
        return plain_layout(request.messages) + (request.prefill or "")

    def encode(self, prompt: str) -> list[int]:
        return self._tok.encode(prompt)

    def encode_batch(self, prompts: list[str]) -> list[array]:
        return self._tok.encode_batch(prompts)

    def context_window(self) -> int:
        return 10**9                         # the server checks its own window

    def describe(self) -> dict:
        return {"backend": self.provider.name, "model": self.model, "base_url": self.base_url,
                "structured_outputs": self.structured, "concurrency": self.cfg.concurrency,
                "sampling": self.provider.sampling, "api": self.account.as_dict()}

    def close(self) -> None:
        self.api.close()

    # -- generation -------------------------------------------------------------------------
    ledger: Store | None = None          # the run's store, for provider batches (attach)
    pending: dict[str, Prepared] = {}    # the requests of the batch being generated, by key
    progress = ""

    def attach(self, store: Store, spend: Spend) -> None:
        """The run's store (where provider batches are recorded) and the invocation's spend (what the
        budget caps hold for), handed over by the runner before `generate`."""
        self.ledger = store
        self.account.spend = spend

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
        futures, handed = [], set()
        try:
            futures = [pool.submit(self._one, p) for p in batch]
            for f in as_completed(futures):
                handed.add(f)
                g = f.result()
                if g is None:                # over budget: not sent, not stored
                    continue
                yield g
        finally:
            # Ctrl-C or a crash: requests not yet sent are dropped (a re-run resumes them), not waited on;
            # replies already here are kept for the runner to store (`salvaged`: they were paid for and lost)
            pool.shutdown(wait=False, cancel_futures=True)
            self._left = [f for f in futures if f not in handed and not f.cancelled()]

    def salvaged(self) -> list[Generation]:
        """The replies that had arrived, and those in flight that arrive within SALVAGE_WAIT_S (paid
        for: a re-run asked them again, 12 of 80 in a hostile pass); a second Ctrl-C stops waiting."""
        left, self._left = self._left, []
        if any(not f.done() for f in left):
            say(f"litjudge: keeping the replies in flight (up to {SALVAGE_WAIT_S:.0f} s; Ctrl-C again leaves them)",
                logging.WARNING)
        done, _ = wait(left, timeout=SALVAGE_WAIT_S)
        return [g for f in done if not f.cancelled() and f.exception() is None and (g := f.result()) is not None]

    def body(self, p: Prepared) -> dict[str, Any]:
        """The provider's request of one prepared request (as sent online, or in a provider batch)."""
        return self.api.body(p, self.model, self.structured)

    def read(self, p: Prepared, reply: Any) -> Generation:
        """A provider's reply (online, or a batch's) as the Generation of `p`, its tokens counted: a
        reply without token usage (a server that leaves it out) counts its worst case against the
        caps (they held nothing: 0 tokens a reply); a reply without a choice is a failed request, its
        worst case counted too (it was an internal error)."""
        try:
            g = self.api.read(p, reply, self.structured)
            if not isinstance(g.raw, str):        # a content of parts (a list) was parsed later: an internal error
                raise TypeError(f"its content is a {type(g.raw).__name__}, not text")
        except (IndexError, KeyError, AttributeError, TypeError, ValueError) as exc:
            g = Generation(p.key, "", error=f"the server's reply holds no answer ({type(exc).__name__}: "
                                            f"{str(exc)[:80]})", retryable=True)
        prompt, output = _count(g.prompt_tokens), _count(g.output_tokens)
        if prompt and output is not None:
            tokens = (prompt, output)
        else:
            # no usage, a part of it, or counts that are no counts (negative ones lowered the spend
            # past the caps; a missing one was an internal error): the worst case is counted
            tokens = self.worst_case(p)
            g = replace(g, prompt_tokens=prompt or 0, output_tokens=output or 0)
            if not self._said_no_usage:
                self._said_no_usage = True
                say(f"litjudge: warning: judge {self.spec.name}: the server's replies carry no token usage (or "
                    "counts that are not counts): each counts its worst case (its request's bytes and max_tokens) "
                    "against the budget", logging.WARNING)
        self.account.add(*tokens)
        return g

    def worst_case(self, p: Prepared) -> tuple[int, int]:
        """The most tokens `p` can be billed, prompt and output: its request as sent, one token per
        UTF-8 byte (a byte-level tokenizer's most; the judge's own count is of words) and what the
        provider adds (`Provider.billed_overhead`: roles, a tool's prompt), and the request's max_tokens."""
        body = self.body(p)
        sent = len(json.dumps(body, ensure_ascii=False).encode())
        out = max(p.max_tokens, *(int(body.get(k) or 0) for k in ("max_tokens", "max_completion_tokens")))
        return sent + self.provider.billed_overhead, out

    def _one(self, p: Prepared) -> Generation | None:
        if self.account.held_back():
            return None
        delay, attempt = self.cfg.backoff_s, -1
        while True:
            attempt += 1
            try:
                return self.read(p, self.api.send(self.body(p)))
            except self.api.faults as exc:
                retry, status = self.api.classify(exc)
                last = not retry or attempt == self.cfg.max_retries
                if self.api.maybe_billed(exc):
                    self.account.add_maybe_billed(*self.worst_case(p))
                    if not last and self.account.held_back():      # no more attempts past the cap
                        return None
                with self.account.lock:
                    if last:
                        self.account.errors += 1
                    else:
                        self.account.retries += 1
                if not retry:
                    # A refused key, a missing model or a conflict is the service's state, not the
                    # model's answer: left unstored for a re-run. A request the server rejects as
                    # invalid (400, 422) would be rejected again: stored as a failure, with the reason.
                    return self._failed(p, _describe(exc, status), retryable=status not in STORED_FAILURES)
                if last:
                    return self._failed(p, f"gave up after {attempt + 1} attempts: {_describe(exc, status)}", True)
                time.sleep(random.uniform(0, delay))          # full jitter
                delay *= 2

    def _failed(self, p: Prepared, error: str, retryable: bool) -> Generation:
        """A request that failed; one left unanswered (retryable: not stored) is the last said why."""
        error = self._scrub(error)
        if retryable:
            with self.account.lock:
                self.account.last_error = error
        return Generation(p.key, "", error=error, retryable=retryable)

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key and self._key != "EMPTY" else text


def _describe(exc: BaseException, status: int | None) -> str:
    """An SDK error as one line, without request headers (where keys live): its kind, its HTTP status
    and the server's reason (its body's error message; a rejected request's reason was dropped)."""
    head = f"{type(exc).__name__}" + (f" (HTTP {status})" if status else "")
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, dict) else body
    reason = error.get("message") if isinstance(error, dict) else error
    reason = " ".join(str(reason).split())[:200] if reason else ""
    return f"{head}: {reason}" if reason else head


MAX_COUNT = 2 ** 53     # more tokens than any reply holds (10**20 ended the run storing it: no SQLite integer)


def _count(n: Any) -> int | None:
    """A token count a server reported, or None where it is none (missing, negative, not a whole
    number, past any real count)."""
    return n if isinstance(n, int) and not isinstance(n, bool) and 0 <= n < MAX_COUNT else None


def api_backend(provider: type[Provider]) -> type[ApiBackend]:
    """The API backend of `provider`: what the registry holds under the provider's name."""
    return type(f"{provider.__name__}Backend", (ApiBackend,), {
        "name": provider.name, "capabilities": replace(provider.capabilities, remote=True),
        "provider": provider,
        "__module__": __name__, "__doc__": f"API judges named {provider.name}:... ({provider.title})"})


OpenAIBackend = api_backend(OpenAI)
OpenAICompatibleBackend = api_backend(OpenAICompatible)
AnthropicBackend = api_backend(Anthropic)
