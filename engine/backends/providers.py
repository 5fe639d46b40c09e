"""API providers as strategy classes: each owns its wire format (request body, reply parsing,
provider-batch format), the environment variable of its key, how it constrains a verdict by
default, what it can honour and what a batch costs. The API backend (engine.backends.api) does the
rest the same way for every provider: concurrency, retries with backoff, budgets, accounting,
planning, the batch ledger. A new provider is one `Provider` subclass and one registry line,
`BACKENDS.add(NAME, api_backend(TheProvider), prefix="NAME:")`.

Built in: OpenAI (Chat Completions, a JSON-schema response format; the Batch API), any
OpenAI-compatible server (vLLM's `structured_outputs`, the very constraint the offline backend
applies; no batches) and Anthropic (Messages, the verdict as the forced input of one tool; Message
Batches), in engine.backends.openai_provider and engine.backends.anthropic_provider.
"""
from __future__ import annotations

import functools
import importlib
import json
import math
import os
import ssl
import sys
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from litjudge.grammars.analysis import Analyzed

from ..core.backend import Capabilities
from ..core.errors import BackendUnavailable, ConfigError
from ..core.requests import Generation, JudgeRequest, Prepared
from . import deadline

STORED_FAILURES = (400, 413, 422)      # the request itself is invalid: a failure, stored with its reason
LABEL_MODES = Capabilities(frozenset({"label", "analyze", "distribution"}))


@dataclass(frozen=True)
class BatchLine:
    """One request's outcome in a finished provider batch: the provider's reply (read like an online
    one), or an error and whether a new batch may ask again (not for a request the provider rejects
    as invalid)."""

    key: str
    reply: Any = None
    error: str = ""
    retryable: bool = True


@dataclass(frozen=True)
class BatchResults:
    """A finished batch: its requests' outcomes, the lines that could not be read, how it ended."""

    lines: list[BatchLine]
    malformed: int = 0
    ended: str = "ended"


class Provider(ABC):
    """One API's client and formats, created per judge with its key and endpoint (`base_url`: None
    for the provider's own). Class facts: `name` (judges are named NAME:MODEL; its registry name),
    `key_env` (the variable holding its key; `[api] key_env` overrides it), `key_required` (False: a
    local server takes any key), `structured` (how a verdict is constrained under `[api] structured
    = "auto"`), `capabilities`, `batch_rate` (the share of the online price a batch request costs),
    `batch_limit` (requests per provider batch; 0: no batches), `sampling` (what the manifest says
    of the sampling parameters)."""

    name: ClassVar[str]
    title: ClassVar[str]
    key_env: ClassVar[str]
    key_required: ClassVar[bool] = True
    structured: ClassVar[str] = "none"
    capabilities: ClassVar[Capabilities] = LABEL_MODES
    batch_rate: ClassVar[float] = 1.0
    # tokens the provider may bill beyond a request's bytes: role markers and chat formatting (and a
    # forced tool's own prompt); a budget's worst case counts them
    billed_overhead: ClassVar[int] = 32
    batch_limit: ClassVar[int] = 0
    sampling: ClassVar[str] = "as configured"

    def __init__(self, key: str, base_url: str | None, timeout: float, retries: int = 0):
        """`retries`: the client's own retries (none for judging: the backend retries, and counts)."""
        self.key, self.base_url, self.timeout, self.retries = key, base_url, timeout, retries

    @classmethod
    def parse(cls, rest: str, name: str) -> tuple[str, str]:
        """(base URL or "", model) from a judge name after its `NAME:` prefix."""
        if not rest:
            raise ConfigError(f"expected {cls.name}:MODEL, got {name!r}", parameter="judge")
        return "", rest

    # -- online -----------------------------------------------------------------------------------
    @property
    @abstractmethod
    def faults(self) -> tuple[type[BaseException], ...]:
        """What its client raises when a request fails (connection, timeout, an HTTP error)."""

    @abstractmethod
    def classify(self, fault: BaseException) -> tuple[bool, int | None]:
        """(worth retrying: 429, 5xx, a timeout, a lost connection; the HTTP status if any)."""

    def maybe_billed(self, fault: BaseException) -> bool:
        """Whether a failed attempt may still be billed: one that timed out reached the server, which
        may finish and bill it (a hostile pass: 16 timed-out generations, 9 times the cap, counted 0)."""
        return False

    @abstractmethod
    def body(self, p: Prepared, model: str, structured: str) -> dict[str, Any]:
        """The request of one prepared request: sent online, or one request of a provider batch."""

    @abstractmethod
    def send(self, body: dict[str, Any]) -> Any:
        """Send one request; its reply."""

    @abstractmethod
    def read(self, p: Prepared, reply: Any, structured: str) -> Generation:
        """A reply (online, or a batch's) as the Generation of `p`, with its token counts."""

    def close(self) -> None:
        """Release the client's connections."""
        return None

    # -- provider batches (batch_limit > 0) -------------------------------------------------------
    def submit(self, requests: list[tuple[str, dict[str, Any]]], local_id: str) -> str:
        """Submit (custom id, body) requests as one batch tagged with our `local_id`; its batch id."""
        raise ConfigError(f"the {self.title} API has no provider batches", parameter="api.batch")

    def adopt(self, local_id: str, size: int, created: float, known: set[str]) -> str | None:
        """The batch a crashed submission made (our `local_id`, `size` requests, recorded at
        `created`; `known`: batch ids our records name), if the provider accepted it."""
        return None

    def results(self, batch_id: str) -> BatchResults | None:
        """None while the batch runs; its results once it has ended."""
        return None

    def cancel(self, batch_id: str) -> None:
        """Cancel an open batch."""
        raise ConfigError(f"the {self.title} API has no provider batches to cancel")


class SdkProvider(Provider):
    """A provider whose client is an official, Stainless-generated SDK (openai, anthropic): the SDK
    imported when a judge is created (a one-line error naming the extra when it is absent), its
    client made by `client_of`, and its errors classified the same way (they share one hierarchy:
    APIError; RateLimitError, InternalServerError and APIConnectionError are worth retrying)."""

    sdk_module: ClassVar[str]

    def __init__(self, key: str, base_url: str | None, timeout: float, retries: int = 0):
        super().__init__(key, base_url, timeout, retries)
        try:
            self.sdk: Any = importlib.import_module(self.sdk_module)
        except ImportError as exc:
            raise BackendUnavailable(f"the {self.name} SDK is not installed ({exc}); "
                                     "pip install 'litjudge[api]'") from None
        self.client: Any = self.client_of(self.sdk)

    @abstractmethod
    def client_of(self, sdk: Any) -> Any:
        """The SDK's client for this judge's key, endpoint, timeout and retries (its HTTP client
        `http_client(sdk)`)."""

    @staticmethod
    def http_client(sdk: Any) -> Any:
        """The SDK's default HTTP client, verifying servers with the process's one TLS context: the
        context its HTTP library would make for it (the system's certificates, or SSL_CERT_FILE /
        SSL_CERT_DIR), made once. Each client made its own: 42-45 ms of reading certificates per
        judge or batch, some 12 s of the suite's API tests (EPYC Zen 3). Its hooks keep each online
        attempt's deadline (`deadline`)."""
        client = sdk.DefaultHttpxClient
        library = _http_library(client)
        if library is None:                      # an HTTP library of unknown kind: the context it makes itself
            return client()
        return client(verify=_tls_context(library, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")),
                      event_hooks=deadline.hooks(library))

    def attempt(self) -> dict[str, str]:
        """The extra headers of one online attempt: its deadline, `timeout_s` from now (taken off
        before the request is sent)."""
        return deadline.attempt_headers(self.timeout)

    @property
    def faults(self) -> tuple[type[BaseException], ...]:
        # a reply that is not JSON (an HTML error page, a body cut short) is raised by the SDK as the
        # decoder's error: it ended the run as an internal error, losing the replies in flight
        return (self.sdk.APIError, json.JSONDecodeError)

    def classify(self, fault: BaseException) -> tuple[bool, int | None]:
        sdk = self.sdk
        retry = (sdk.RateLimitError, sdk.InternalServerError, sdk.APIConnectionError, json.JSONDecodeError)
        return isinstance(fault, retry), status_of(fault)

    def maybe_billed(self, fault: BaseException) -> bool:
        """A timeout; a connection lost once the request was out (not one never made: refused, or no
        such host); a reply cut short or not JSON; a gateway's 502 or 504 (its upstream may have
        finished). A hostile pass: a server dropping each connection after its work was billed 35
        times the cap, counted nothing."""
        if isinstance(fault, self.sdk.APITimeoutError | json.JSONDecodeError):
            return True
        if isinstance(fault, self.sdk.APIConnectionError):
            return not _never_connected(fault)
        return status_of(fault) in GATEWAY_FAILURES

    def close(self) -> None:
        self.client.close()


GATEWAY_FAILURES = (502, 504)      # a proxy's: the server behind it may have done (and billed) the work


def _never_connected(fault: BaseException) -> bool:
    """Whether an SDK's connection error is of a connection never made (the HTTP library's
    ConnectError or ConnectTimeout behind it): such a request was never sent."""
    cause = fault.__cause__ or fault.__context__
    return cause is not None and any(k.__name__ in ("ConnectError", "ConnectTimeout") for k in type(cause).__mro__)


def chat_messages(r: JudgeRequest) -> list[dict[str, str]]:
    """A request's messages as chat-API dicts, its prefill as an assistant turn to continue."""
    msgs = [{"role": m.role, "content": m.content} for m in r.messages]
    if r.prefill:
        msgs.append({"role": "assistant", "content": r.prefill})
    return msgs


def from_json(key: str, r: JudgeRequest, text: str, common: dict) -> Generation:
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


LOGPROB_SLACK = 1e-4       # rounding in a server's log-probabilities (a probability of 1 may read 1e-7)


def from_top_logprobs(key: str, r: JudgeRequest, top: Iterable[tuple[str, float]], text: str,
                      common: dict) -> Generation:
    """Label probabilities from the first answer token's top (token, log-probability) pairs, a label's
    spellings with and without a leading space summed (labels that are not among them get 0;
    label_mass says how much of the mass the labels held). A label set where one label starts
    another is refused at planning (ApiBackend.render): the first token cannot tell them apart."""
    probs_of: dict[str, float] = {}
    for token, logprob in top:              # " Yes" and "Yes" are both the label Yes
        if not (isinstance(logprob, (int, float)) and math.isfinite(logprob) and logprob <= LOGPROB_SLACK):
            # a NaN stored as a verdict broke every later read of the run and the shared cache
            return Generation(key, text, error=f"the server's log-probability of {token[:40]!r} is {logprob!r}, not a "
                                               "probability's (finite, at most 0)", **common)
        probs_of[token.strip()] = probs_of.get(token.strip(), 0.0) + math.exp(logprob)
    total = sum(probs_of.values())
    if total > 1 + LOGPROB_SLACK:
        return Generation(key, text, error=f"the server's top log-probabilities add up to {total:.4g} of probability, "
                                           "more than 1", **common)
    labels = r.language.labels() or ()
    probs = {lab: probs_of.get(lab, 0.0) for lab in labels}
    mass = sum(probs.values())
    if mass <= 0:
        return Generation(key, text, error="no label among the top log-probabilities", label_mass=0.0, **common)
    dist = {lab: v / mass for lab, v in probs.items()}
    return Generation(key, max(dist, key=lambda lab: dist[lab]), distribution=dist, label_mass=mass, **common)


def status_of(fault: BaseException) -> int | None:
    """The HTTP status an SDK error carries, if any."""
    status = getattr(fault, "status_code", None)
    return status if isinstance(status, int) else None


def _http_library(client: type) -> Any:
    """The HTTP library (httpx or its successor) an SDK's client class is built on: the package of
    the first base class whose package makes TLS contexts; None where none does."""
    for base in client.__mro__[1:]:
        package = sys.modules.get(base.__module__.partition(".")[0])
        if callable(getattr(package, "create_ssl_context", None)):
            return package
    return None


@functools.cache
def _tls_context(library: Any, cafile: str | None, capath: str | None) -> ssl.SSLContext:
    """The TLS context `library` (httpx or its successor) makes by default, once per CA settings
    (`cafile`, `capath`: the environment it reads them from, as it reads them)."""
    context: ssl.SSLContext = library.create_ssl_context()
    return context
