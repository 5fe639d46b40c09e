"""A loopback server implementing the provider batch endpoints as OpenAI and Anthropic document
them, for the batch tests: OpenAI's Files (multipart upload with purpose=batch, content download)
and Batches (create with metadata, retrieve, list, cancel; status validating -> in_progress ->
completed over successive polls; output and error files), and Anthropic's Message Batches (create,
retrieve with processing_status in_progress -> ended and a results_url, results as JSONL, cancel,
list). Answers are what tests/fake_api.py answers online (the first allowed label), so a batch run
and an online run give the same verdicts. Faults per request (by its position in the batch):
"invalid" (a 400 / invalid_request_error), "server" (a 500 / api_error), "missing" (no line at all),
"malformed" (OpenAI: the output line cut short, not JSON), "twice" (OpenAI: its answer's line twice,
and an error line for it too);
`expire=True` ends every batch expired with no results."""
from __future__ import annotations

import itertools
import json
import threading
import time
from email.parser import BytesParser
from email.policy import default as email_policy
from http.server import BaseHTTPRequestHandler

from tests.fake_api import FakeAPI, Loopback


class FakeBatchAPI(Loopback):
    def __init__(self, polls_to_finish: int = 2, faults: dict[int, str] | None = None, expire: bool = False,
                 fault_batches: int = 1, port: int = 0, failed_polls: int = 0):
        self.polls_to_finish, self.faults, self.expire = polls_to_finish, faults or {}, expire
        self.failed_polls = failed_polls       # each batch's first polls answered 500 (the batch runs on)
        self.fault_batches = fault_batches     # faults apply to the first this many batches (a re-run's new one succeeds)
        self.answers = FakeAPI()               # the online answering rules, reused (its server is never started)
        self.answers.server.server_close()
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.created: list[str] = []           # batch ids, in creation order (each submission once)
        self.requests_seen: list[str] = []     # every custom_id submitted
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _send(self, code: int, obj=None, raw: bytes | None = None):
                data = raw if raw is not None else json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json" if raw is None else "application/binary")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                with api.lock:
                    code, obj = api.post(self.path, self.headers, self._body())
                self._send(code, obj)

            def do_GET(self):
                with api.lock:
                    code, obj, raw = api.get(self.path)
                self._send(code, obj, raw)

        self._serve(Handler, port)

    # -- routes -----------------------------------------------------------------------------
    def post(self, path: str, headers, body: bytes):
        path = path.split("?")[0]
        if path == "/v1/files":
            form = BytesParser(policy=email_policy).parsebytes(
                f"Content-Type: {headers['Content-Type']}\r\n\r\n".encode() + body)
            fields = {part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
                      for part in form.iter_parts()}
            fid = f"file-{next(self.ids)}"
            self.files[fid] = fields["file"]
            assert fields["purpose"] == b"batch"
            return 200, {"id": fid, "object": "file", "bytes": len(fields["file"]), "created_at": int(time.time()),
                         "filename": "batch.jsonl", "purpose": "batch", "status": "processed"}
        if path == "/v1/batches":
            req = json.loads(body)
            lines = [json.loads(x) for x in self.files[req["input_file_id"]].decode().splitlines() if x.strip()]
            bid = f"batch_{next(self.ids)}"
            self.batches[bid] = {"kind": "openai", "lines": lines, "polls": 0, "cancelled": False,
                                 "metadata": req.get("metadata") or {}, "created_at": int(time.time())}
            self.created.append(bid)
            self.requests_seen += [x["custom_id"] for x in lines]
            return 200, self.openai_batch(bid)
        if path.startswith("/v1/batches/") and path.endswith("/cancel"):
            bid = path.split("/")[3]
            self.batches[bid]["cancelled"] = True
            return 200, self.openai_batch(bid)
        if path == "/v1/messages/batches":
            req = json.loads(body)
            bid = f"msgbatch_{next(self.ids)}"
            self.batches[bid] = {"kind": "anthropic", "lines": req["requests"], "polls": 0, "cancelled": False,
                                 "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            self.created.append(bid)
            self.requests_seen += [x["custom_id"] for x in req["requests"]]
            return 200, self.anthropic_batch(bid)
        if path.startswith("/v1/messages/batches/") and path.endswith("/cancel"):
            bid = path.split("/")[4]
            self.batches[bid]["cancelled"] = True
            return 200, self.anthropic_batch(bid)
        return 404, {"error": {"message": f"no route {path}"}}

    def get(self, path: str):
        path = path.split("?")[0]
        if path == "/v1/batches":
            return 200, {"object": "list", "data": [self.openai_batch(b) for b in self.batches
                                                    if self.batches[b]["kind"] == "openai"], "has_more": False}, None
        if path.startswith("/v1/batches/"):
            bid = path.split("/")[3]
            self.batches[bid]["polls"] += 1
            if self.batches[bid]["polls"] <= self.failed_polls:
                return 500, {"error": {"message": "injected", "type": "fault"}}, None
            return 200, self.openai_batch(bid), None
        if path.startswith("/v1/files/") and path.endswith("/content"):
            return 200, None, self.files[path.split("/")[3]]
        if path == "/v1/messages/batches":
            data = [self.anthropic_batch(b) for b in reversed(self.batches) if self.batches[b]["kind"] == "anthropic"]
            return 200, {"data": data, "has_more": False, "first_id": data[0]["id"] if data else None,
                         "last_id": data[-1]["id"] if data else None}, None
        if path.startswith("/v1/messages/batches/") and path.endswith("/results"):
            bid = path.split("/")[4]
            return 200, None, self.anthropic_results(bid).encode()
        if path.startswith("/v1/messages/batches/"):
            bid = path.split("/")[4]
            self.batches[bid]["polls"] += 1
            return 200, self.anthropic_batch(bid), None
        return 404, {"error": {"message": f"no route {path}"}}, None

    # -- batch state ------------------------------------------------------------------------
    def ended(self, bid: str) -> bool:
        b = self.batches[bid]
        return b["cancelled"] or b["polls"] >= self.polls_to_finish

    def openai_batch(self, bid: str) -> dict:
        b = self.batches[bid]
        status = ("cancelled" if b["cancelled"] else "expired" if self.expire and self.ended(bid)
                  else "completed" if self.ended(bid) else "in_progress" if b["polls"] else "validating")
        out = err = None
        if status == "completed":
            out, err = self.openai_files(bid)
        n = len(b["lines"])
        return {"id": bid, "object": "batch", "endpoint": "/v1/chat/completions", "errors": None,
                "input_file_id": "file-x", "completion_window": "24h", "status": status, "output_file_id": out,
                "error_file_id": err, "created_at": b["created_at"], "metadata": b["metadata"],
                "request_counts": {"total": n, "completed": n if status == "completed" else 0, "failed": 0}}

    def fault(self, bid: str, i: int) -> str | None:
        return self.faults.get(i) if self.created.index(bid) < self.fault_batches else None

    def openai_files(self, bid: str) -> tuple[str, str | None]:
        b = self.batches[bid]
        if "files" not in b:
            ok, bad = [], []
            for i, line in enumerate(b["lines"]):
                fault = self.fault(bid, i)
                if fault == "missing":
                    continue
                if fault in ("invalid", "server"):
                    code = 400 if fault == "invalid" else 500
                    bad.append({"id": f"r{i}", "custom_id": line["custom_id"], "response": {
                        "status_code": code, "body": {"error": {"message": f"injected {fault}", "type": fault}}},
                        "error": None})
                    continue
                ok.append({"id": f"r{i}", "custom_id": line["custom_id"], "error": None,
                           "response": {"status_code": 200, "request_id": f"req{i}", "body": self.answers.chat(line["body"])}})
                if fault == "twice":             # answered, then a second line for it: an error
                    bad.append({"id": f"r{i}b", "custom_id": line["custom_id"], "response": {
                        "status_code": 400, "body": {"error": {"message": "injected duplicate", "type": "invalid"}}},
                        "error": None})
                    ok.append(ok[-1])
            fid_ok, fid_bad = f"file-{next(self.ids)}", f"file-{next(self.ids)}" if bad else None
            garbled = [i for i, x in enumerate(ok) if self.fault(bid, int(x["id"][1:])) == "malformed"]
            self.files[fid_ok] = "".join((json.dumps(x)[:40] if i in garbled else json.dumps(x)) + "\n"
                                         for i, x in enumerate(ok)).encode()
            if fid_bad:
                self.files[fid_bad] = "".join(json.dumps(x) + "\n" for x in bad).encode()
            b["files"] = (fid_ok, fid_bad)
        return b["files"]

    def anthropic_batch(self, bid: str) -> dict:
        b = self.batches[bid]
        ended = self.ended(bid)
        n = len(b["lines"])
        return {"id": bid, "type": "message_batch", "processing_status": "ended" if ended else "in_progress",
                "request_counts": {"processing": 0 if ended else n, "succeeded": n if ended else 0, "errored": 0,
                                   "canceled": 0, "expired": 0},
                "ended_at": b["created_at"] if ended else None, "created_at": b["created_at"],
                "expires_at": b["created_at"], "archived_at": None, "cancel_initiated_at": None,
                "results_url": f"{self.url}/v1/messages/batches/{bid}/results" if ended else None}

    def anthropic_results(self, bid: str) -> str:
        b = self.batches[bid]
        out = []
        for i, line in enumerate(b["lines"]):
            fault = self.fault(bid, i)
            if fault == "missing":
                continue
            if b["cancelled"] or self.expire:
                result = {"type": "canceled" if b["cancelled"] else "expired"}
            elif fault in ("invalid", "server"):
                kind = "invalid_request_error" if fault == "invalid" else "api_error"
                result = {"type": "errored", "error": {"type": "error", "error": {"type": kind,
                                                                                  "message": f"injected {fault}"}}}
            else:
                result = {"type": "succeeded", "message": self.answers.messages(line["params"])}
            out.append({"custom_id": line["custom_id"], "result": result})
        return "".join(json.dumps(x) + "\n" for x in out)
