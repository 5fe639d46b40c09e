"""A new API provider is one class: "Quill", a made-up API with a wire format of its own (not
OpenAI's, not Anthropic's), its own key variable, default constraint, batch format and batch price,
written here as a `Provider` subclass, served by a loopback server in this file, registered with one
line, and judging the demo online and in provider batches through the same backend, store, budgets
and parser as the built-in providers."""
from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from litjudge.engine.app.run import run
from litjudge.engine.backends import BACKENDS
from litjudge.engine.backends.api import api_backend
from litjudge.engine.backends.providers import BatchLine, BatchResults, Provider
from litjudge.engine.core.config import load_config
from litjudge.engine.core.requests import Generation, Prepared
from tests.conftest import write_config

KEY = "quill-secret-DO-NOT-LEAK"


# -- the provider: the one class ----------------------------------------------------------------
class Quill(Provider):
    """POST /judge {"model", "text", "allowed"?, "limit"} -> {"answer", "used": [in, out]};
    batches: POST /jobs {"tag", "items": [{"ref", "ask"}]}, GET /jobs[/ID], POST /jobs/ID/stop."""

    name, title, key_env = "quill", "Quill", "QUILL_API_KEY"
    structured = "allowed"                     # its own constraint: the allowed answers
    batch_rate, batch_limit = 0.25, 100        # a quarter of the price, 100 requests per job

    faults = (urllib.error.URLError, TimeoutError, ConnectionError)

    def classify(self, fault: BaseException) -> tuple[bool, int | None]:
        status = fault.code if isinstance(fault, urllib.error.HTTPError) else None
        return status is None or status == 429 or status >= 500, status

    def call(self, method: str, path: str, payload: Any = None) -> Any:
        request = urllib.request.Request(f"{self.base_url}{path}", method=method,
                                         data=None if payload is None else json.dumps(payload).encode(),
                                         headers={"Authorization": f"Quill {self.key}"})
        with urllib.request.urlopen(request, timeout=self.timeout) as reply:
            return json.loads(reply.read())

    def body(self, p: Prepared, model: str, structured: str) -> dict[str, Any]:
        allowed = p.request.language.labels() if structured == "allowed" else None
        return {"model": model, "text": p.prompt, "allowed": allowed, "limit": p.max_tokens}

    def send(self, body: dict[str, Any]) -> Any:
        return self.call("POST", "/judge", body)

    def read(self, p: Prepared, reply: Any, structured: str) -> Generation:
        return Generation(p.key, reply["answer"], prompt_tokens=reply["used"][0], output_tokens=reply["used"][1])

    def submit(self, requests: list[tuple[str, dict[str, Any]]], local_id: str) -> str:
        return self.call("POST", "/jobs", {"tag": local_id, "items": [{"ref": k, "ask": b} for k, b in requests]})["id"]

    def adopt(self, local_id: str, size: int, created: float, known: set[str]) -> str | None:
        return next((job["id"] for job in self.call("GET", "/jobs") if job["tag"] == local_id), None)

    def results(self, batch_id: str) -> BatchResults | None:
        job = self.call("GET", f"/jobs/{batch_id}")
        if job["state"] != "done":
            return None
        return BatchResults([BatchLine(r["ref"], r["reply"]) for r in job["results"]])

    def cancel(self, batch_id: str) -> None:
        self.call("POST", f"/jobs/{batch_id}/stop", {})


# -- its server, on loopback ------------------------------------------------------------------------
class QuillServer:
    """Answers the first allowed answer ("Yes" when nothing is allowed); a job is done on its second poll."""

    def __init__(self):
        self.judged: list[dict] = []
        self.jobs: dict[str, dict] = {}
        self.keys: set[str] = set()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, obj):
                data = json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                server.keys.add(self.headers["Authorization"])
                if self.path == "/jobs":
                    return self.reply([{"id": i, "tag": j["tag"]} for i, j in server.jobs.items()])
                job = server.jobs[self.path.rsplit("/", 1)[1]]
                job["polls"] += 1
                done = job["polls"] >= 2
                self.reply({"state": "done" if done else "running", "results": [
                    {"ref": item["ref"], "reply": server.judge(item["ask"])} for item in job["items"]] if done else []})

            def do_POST(self):
                server.keys.add(self.headers["Authorization"])
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path == "/judge":
                    return self.reply(server.judge(body))
                if self.path == "/jobs":
                    job_id = f"job{len(server.jobs) + 1}"
                    server.jobs[job_id] = {**body, "polls": 0}
                    return self.reply({"id": job_id})
                self.reply({})

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"

    def judge(self, ask: dict) -> dict:
        self.judged.append(ask)
        return {"answer": (ask["allowed"] or ["Yes"])[0], "used": [len(ask["text"].split()), 1]}

    def __enter__(self):
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def quill(monkeypatch):
    BACKENDS.add("quill", api_backend(Quill), prefix="quill:")        # the one registration line
    monkeypatch.setenv("QUILL_API_KEY", KEY)
    with QuillServer() as server:
        yield server
    BACKENDS.remove("quill")


@pytest.mark.parametrize("batch", [False, True])
def test_a_third_provider_judges_online_and_in_batches(quill, tmp_path, runs_dir, batch):
    cfg = write_config(tmp_path / "quill.toml", f'name = "quill"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\n'
                                                f'judge = "quill:muse-1"\n[api]\nbase_url = "{quill.url}"\n'
                                                f'batch = {str(batch).lower()}\nbatch_poll_s = 0.05\n'
                                                'price_in_per_mtok = 4.0\nprice_out_per_mtok = 4.0\n')
    out = run(load_config(cfg), progress=False)
    assert out.verdicts.height == 12 and set(out.verdicts["label"]) == {"Yes"}     # parsed by the binary grammar
    assert len(quill.judged) == 12 and all(ask["allowed"] == ["Yes", "No"] for ask in quill.judged)
    assert len(quill.jobs) == (1 if batch else 0) and quill.keys == {f"Quill {KEY}"}
    api = out.manifest.judges[0]["api"]
    tokens = api["prompt_tokens"] + api["completion_tokens"]
    assert api["requests"] == 12 and api["estimated_cost_usd"] == pytest.approx(4.0 * tokens / 1e6 * (0.25 if batch else 1))
    assert out.manifest.judges[0]["backend"] == "quill"
    assert all(KEY.encode() not in p.read_bytes() for p in (runs_dir / "quill").rglob("*") if p.is_file())
    again = run(load_config(cfg), progress=False)                               # resumed: nothing sent again
    assert again.verdicts.height == 12 and len(quill.judged) == 12
