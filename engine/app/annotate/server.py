"""The annotation app (starlette, served by uvicorn): one page, and a small JSON API that accepts
only clusters of the queue, the items of that cluster and the protocol's labels. Every request
carries the token when the app is bound beyond loopback (403 without it); on loopback it must name
the app's own address (`Host`: a page elsewhere reaching it through a name it resolves to
127.0.0.1 is refused); a request from a page of another origin is refused (403), and a submission
is JSON (`Content-Type: application/json`, 415 else), which a browser sends from another origin only
after asking the app, which never agrees; bodies are bounded (413); a bad request is one line (400).
Measured before: a page on another origin undid an annotator's labels with a no-cors `text/plain`
POST."""
from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import unicodedata
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

import polars as pl
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ...core.errors import StoreError
from ...core.paths import FileIdentity, file_identity
from ..outputs import read_table
from .estimate import estimates
from .export import csv_text, jsonl, records
from .labels import KeyReused, Labels, Locked, verdicts_fingerprint
from .page import page
from .queue import Queue

MAX_BODY = 64 * 1024                  # bytes of one request body: a submission is a few hundred
# fullmatch: "$" would let a final newline in. An apostrophe (O'Brien: a new user's name was refused)
# but not first, where a CSV export's guard puts one and an import takes it off (export.uncell)
NAME = re.compile(r"(?!['’])[\w .@+'’-]{1,64}")
NAME_RULE = "a name of 1-64 letters, digits, spaces or . @ + - _ ' (an apostrophe not first)"     # what NAME takes, said
KEY = re.compile(r"[\w.:-]{8,128}")
TOKEN_HEADER = "x-litjudge-token"



@dataclass(frozen=True)
class Settings:
    per_item: int = 1                 # annotators per cluster
    lock_seconds: float = 600.0       # how long a cluster shown to one annotator is kept from the others
    token: str | None = None          # required on every request when set
    hosts: frozenset[str] = frozenset()   # the Host headers the app answers (empty: any; beyond loopback the token guards)


def loopback_hosts(host: str, port: int) -> frozenset[str]:
    """The names a loopback-bound app is reached by (its own address among them), with its port."""
    bound = f"[{host}]" if ":" in host else host
    return frozenset(f"{h}:{port}".lower() for h in (bound, "127.0.0.1", "localhost", "[::1]"))


class BadRequest(Exception):
    """A request the app refuses: one line, status 400."""

    status = 400


class TooLarge(BadRequest):
    status = 413


class Guard:
    """ASGI middleware: the token, the host and the origin (403), a submission's JSON type (415)
    and the body bound (413) before any route runs."""

    def __init__(self, app: ASGIApp, token: str | None, hosts: frozenset[str] = frozenset(),
                 kept: Callable[[], str | None] = lambda: None):
        self.app, self.token, self.hosts, self.kept = app, token, hosts, kept

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            status, line = refusal
            await PlainTextResponse(line + "\n", status_code=status)(scope, receive, send)
            return
        await self.app(scope, receive, send)     # a body without a length is bounded as it is read (`body`)

    def _refusal(self, scope: Scope) -> tuple[int, str] | None:
        """(status, line) of a request refused before any route runs; None for one that passes."""
        headers = {k.lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        if self.token is not None and not self._has_token(scope, headers):
            return 403, "a token is required: open the URL litjudge annotate printed (it ends in ?token=...)"
        host = headers.get(b"host", "")
        if self.hosts and host.lower() not in self.hosts:
            return 403, f"this app answers {min(self.hosts)}, not {host[:80]!r}: open the URL litjudge annotate printed"
        origin = headers.get(b"origin")
        if (origin is not None and origin.lower() not in {f"http://{h}" for h in (self.hosts or {host.lower()})}) \
                or headers.get(b"sec-fetch-site") == "cross-site":
            return 403, "a request from another site's page: open the URL litjudge annotate printed"
        if scope.get("method") == "POST" and headers.get(b"content-type", "").split(";")[0].strip().lower() \
                != "application/json":
            return 415, "a submission is JSON: Content-Type: application/json"
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY):
            return 413, f"request body over {MAX_BODY} bytes"
        return None

    def _has_token(self, scope: Scope, headers: dict[bytes, str]) -> bool:
        assert self.token is not None
        given = headers.get(TOKEN_HEADER.encode(), "")
        if not given:
            query = scope.get("query_string", b"").decode("latin-1")
            given = next((v for k, _, v in (p.partition("=") for p in query.split("&")) if k == "token"), "")
        # the queue's token as its store keeps it now: another start's --new-token revoked the one this
        # server started with (it went on opening every page until this server was restarted)
        return hmac.compare_digest(given.encode(), (self.kept() or self.token).encode())


def new_token() -> str:
    return secrets.token_urlsafe(24)


def order_shown(seed: int, annotator: str, cluster: str) -> str:
    """The order a pair is shown to one person, `ab` or `ba`: drawn per person and pair from the
    queue's seed, so it is the same in every tab and after a restart, and a label says it back (a
    hostile pass: an order drawn per showing refused a second tab's answer for good, and a client's
    other order was stored, exported as the order the texts were shown in)."""
    digest = hashlib.sha256(f"{seed}\0{annotator}\0{cluster}".encode()).digest()
    return ("ab", "ba")[digest[0] & 1]


def annotator_name(value: str) -> str:
    """THE form a name is kept in: NFC, a typographic apostrophe as a plain one (a phone's O’Brien and
    a laptop's O'Brien were two annotators of one story, as were a name's composed and decomposed
    accents)."""
    return unicodedata.normalize("NFC", value).replace("\u2019", "'")


def annotator_of(value: Any) -> str:
    name = annotator_name(value) if isinstance(value, str) else None
    if name is None or not NAME.fullmatch(name):
        raise BadRequest(f"annotator: {NAME_RULE}")
    return name


def key_of(value: Any) -> str:
    if not isinstance(value, str) or not KEY.fullmatch(value):
        raise BadRequest("key: an idempotency key of 8-128 letters, digits or . : - _")
    return value


async def body(request: Request) -> dict:
    """The request's JSON object, read up to MAX_BODY bytes (a body without a length is bounded here)."""
    raw, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise TooLarge(f"request body over {MAX_BODY} bytes")
        raw.append(chunk)
    try:
        data = json.loads(b"".join(raw))
    except (ValueError, UnicodeDecodeError, RecursionError) as e:      # 10,000 nested objects: too deep to read
        raise BadRequest("the body is not JSON") from e
    if not isinstance(data, dict):
        raise BadRequest("the body is not a JSON object")
    return data


def refusing(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    """A route whose BadRequest is its one-line answer (400, or 413)."""
    async def call(request: Request) -> Response:
        try:
            return await handler(request)
        except BadRequest as e:
            return PlainTextResponse(f"{e}\n", status_code=e.status)
    return call


class Routes:
    """The page and the JSON API over one queue and its store."""

    def __init__(self, queue: Queue, labels: Labels, settings: Settings):
        self.queue, self.labels, self.settings = queue, labels, settings
        self.items_of = {c.cluster: tuple(q.item for q in c.questions) for c in queue.clusters}
        self.verdicts = labels.path.parent / "verdicts.parquet"
        # the verdicts file as last read (at the start: the queue's own) and what the page says of it
        self.checked: tuple[FileIdentity | None, str | None] = (self._identity(), None)

    def _identity(self) -> FileIdentity | None:
        try:
            return file_identity(self.verdicts)
        except OSError:
            return None

    def cluster_of(self, value: Any) -> str:
        if not isinstance(value, str) or value not in self.labels.first_draw:
            raise BadRequest("cluster: not in this queue")
        return value

    def cluster_json(self, cluster: str, annotator: str) -> dict:
        queue, labels = self.queue, self.labels
        c = queue.clusters[queue.index(cluster)]
        pair = len(c.texts) == 2                       # two texts: shown in a random order, recorded
        shown = order_shown(queue.design.seed, annotator, c.cluster) if pair else ""
        texts = [{"heading": h, "text": t, "id": "ab"[i] if pair else ""} for i, (h, t) in enumerate(c.texts)]
        if shown == "ba":
            texts.reverse()
        return {"done": False, "cluster": c.cluster, "title": c.title, "draw": labels.first_draw[c.cluster],
                "times_drawn": labels.times_drawn[c.cluster], "probability": labels.probability[c.cluster],
                "texts": texts, "shown": shown, "context": c.context, "questions": [q.shown(shown) for q in c.questions],
                "mine": self.mine(annotator)}

    def mine(self, annotator: str) -> int:
        """The stories (or pairs) this annotator has answered, for the page's 'You: N done'."""
        return sum(1 for who in self.labels.done_by(self.items_of).values() if annotator in who)

    async def index(self, request: Request) -> Response:
        return HTMLResponse(page(), headers={"Content-Security-Policy": "default-src 'self'; script-src 'self' "
                                             "'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:",
                                             "X-Content-Type-Options": "nosniff"})

    async def info(self, request: Request) -> Response:
        queue = self.queue
        return JSONResponse({"protocol": queue.protocol, "quantity": queue.quantity, "labels": list(queue.labels),
                             "budget": len(queue.design.draws), "clusters": len(self.labels.order),
                             "per_item": self.settings.per_item, "uncertainty": queue.uncertainty_source,
                             "floor": queue.design.floor, "seed": queue.design.seed, "instructions": queue.instructions,
                             "bounds": list(queue.bounds), "unit": list(queue.unit),
                             "clusters_in_run": len(queue.clusters)})

    async def next_item(self, request: Request) -> Response:
        annotator = annotator_of(request.query_params.get("annotator"))
        cluster = self.labels.next_cluster(annotator, self.items_of, self.settings.per_item, self.settings.lock_seconds)
        if cluster is None:                            # the count too: the last submit is in it
            # stories others hold open come back to the queue when a lock runs out unanswered (a
            # tab closed), so "nothing left" is not final
            held = self.labels.held_for(annotator, self.items_of, self.settings.per_item)
            return JSONResponse({"done": True, "mine": self.mine(annotator),
                                 "skipped": len(self.labels.skipped_open(annotator, self.items_of,
                                                                         self.settings.per_item)),
                                 "held": held, "lock_minutes": round(self.settings.lock_seconds / 60, 1)})
        return JSONResponse(self.cluster_json(cluster, annotator))

    async def label(self, request: Request) -> Response:
        data = await body(request)
        annotator, cluster = annotator_of(data.get("annotator")), self.cluster_of(data.get("cluster"))
        key = key_of(data.get("key"))
        given = data.get("labels")
        if not isinstance(given, dict) or set(given) != set(self.items_of[cluster]):
            raise BadRequest("labels: give one answer for each item of the cluster, and no other item")
        answers = {str(k): self.queue.canonical(k, v) for k, v in given.items()}
        bad = sorted((k, repr(given[k])) for k, v in answers.items() if v is None)
        if bad:
            takes = ", ".join(a.value for a in self.queue.question(bad[0][0]).answers)
            raise BadRequest(f"labels: {bad[0][1][:40]} is not an answer of this protocol ({takes})")
        shown = data.get("shown", "")
        pair = len(self.queue.clusters[self.queue.index(cluster)].texts) == 2
        if shown not in (("ab", "ba") if pair else ("",)):
            raise BadRequest("shown: the order the texts were shown in (ab or ba for a pair, empty otherwise)")
        given = order_shown(self.queue.design.seed, annotator, cluster)
        if pair and shown != given:
            raise BadRequest(f"shown: this pair was shown to {annotator!r} as {given!r} (/api/next), not {shown!r}")
        try:
            fresh = self.labels.submit(key, annotator, cluster, {k: str(v) for k, v in answers.items()}, shown=shown,
                                       per_item=self.settings.per_item)
        except (Locked, KeyReused) as e:
            return PlainTextResponse(f"{e}\n", status_code=409)
        return JSONResponse({"stored": fresh, "duplicate": not fresh})

    async def skip(self, request: Request) -> Response:
        data = await body(request)
        annotator, cluster = annotator_of(data.get("annotator")), self.cluster_of(data.get("cluster"))
        try:
            fresh = self.labels.submit(key_of(data.get("key")), annotator, cluster, {}, kind="skip")
        except KeyReused as e:
            return PlainTextResponse(f"{e}\n", status_code=409)
        return JSONResponse({"stored": fresh, "duplicate": not fresh})

    async def undo(self, request: Request) -> Response:
        data = await body(request)
        cluster, stands, taken = self.labels.undo(annotator_of(data.get("annotator")), self.settings.lock_seconds,
                                                  self.settings.per_item)
        return JSONResponse({"undone": cluster, "earlier_stands": stands == "earlier", "stands": stands,
                             "answers": taken})

    async def unskip(self, request: Request) -> Response:
        data = await body(request)
        back = self.labels.unskip(annotator_of(data.get("annotator")), self.items_of, self.settings.per_item)
        return JSONResponse({"back": back})

    async def estimate(self, request: Request) -> Response:
        out = estimates(self.queue, [asdict(r) for r in self.labels.rows()])
        if out["waiting"] is not None:        # who holds it open: the page said another could answer it (409)
            out["waiting"]["held"] = sorted(self.labels.reading().get(out["waiting"]["cluster"], ()))
        out["stale"] = self._stale()
        return JSONResponse(out)

    def _stale(self) -> str | None:
        """What the page says when the run was judged again under it (its estimate went on, unsaid,
        over the old verdicts): read again once each time the file changes, by what its judges said
        (a file touched or rewritten the same is no new judging)."""
        now = self._identity()
        if now != self.checked[0]:
            try:
                same = verdicts_fingerprint(read_table(self.verdicts)) == self.queue.judged
                said = None if same else ("The run was judged again since this page started: the estimates are of "
                                          "the verdicts it started with, labels are still saved, and the next start "
                                          "refuses this queue")
            except (StoreError, pl.exceptions.PolarsError) as e:      # gone or damaged: said as what it is
                said = (f"The run's verdicts.parquet can no longer be read ({type(e).__name__}): the estimates are of "
                        "the verdicts this page started with; labels are still saved")
            self.checked = (now, said)
        return self.checked[1]

    async def export_jsonl(self, request: Request) -> Response:
        return Response(jsonl(records(self.queue, self.labels)), media_type="application/x-ndjson",
                        headers={"Content-Disposition": 'attachment; filename="annotations.jsonl"'})

    async def export_csv(self, request: Request) -> Response:
        return Response(csv_text(records(self.queue, self.labels)), media_type="text/csv",
                        headers={"Content-Disposition": 'attachment; filename="annotations.csv"'})


def create_app(queue: Queue, labels: Labels, settings: Settings) -> ASGIApp:
    """The ASGI app over one queue and its store, behind the token and body guard."""
    r = Routes(queue, labels, settings)
    routes = [Route("/", r.index), Route("/api/info", refusing(r.info)), Route("/api/next", refusing(r.next_item)),
              Route("/api/label", refusing(r.label), methods=["POST"]),
              Route("/api/skip", refusing(r.skip), methods=["POST"]),
              Route("/api/undo", refusing(r.undo), methods=["POST"]),
              Route("/api/unskip", refusing(r.unskip), methods=["POST"]), Route("/api/estimate", refusing(r.estimate)),
              Route("/api/export.jsonl", r.export_jsonl), Route("/api/export.csv", r.export_csv)]
    return Guard(Starlette(routes=routes), settings.token, settings.hosts, kept=lambda: labels.meta("token"))
