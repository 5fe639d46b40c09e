"""Small loopback servers speaking the subsets of the OpenAI Chat Completions and Anthropic
Messages APIs that litjudge's API backends use, driven by the real SDKs in the tests. They answer
deterministically (the first allowed label, or "Yes"), record what they received, and can inject
faults: HTTP 429, HTTP 500, or a reply slower than the client's timeout, on chosen request numbers."""
from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def free_port() -> int:
    """A loopback port free now, for a server started later at a known address (it may be taken
    meanwhile: `refusing_port` where nothing is to listen there)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def refusing_port() -> Iterator[int]:
    """A loopback port that refuses every connection while the block runs: bound, never listening,
    so no other process of the session takes it meanwhile (a port found free and let go could be
    taken by the other worker's next server); let go at the end, for a server to start there."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def interrupted_run(config: Path, server: Loopback, after: int, env: dict[str, str], cwd: Path | None = None
                    ) -> tuple[int, str]:
    """`litjudge run CONFIG --quiet` in a process of its own, sent Ctrl-C once `server` has received
    `after` requests (within 120 s): its exit code and what it printed to stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "litjudge", "run", str(config), "--quiet"], cwd=cwd,
                            env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while len(server.received) < after and time.time() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err


class Loopback:
    """A ThreadingHTTPServer on 127.0.0.1 serving `handler` from a thread while in a `with` block
    (the fake providers' shared part: their routes are their own)."""

    def _serve(self, handler: type[BaseHTTPRequestHandler], port: int) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


class FakeAPI(Loopback):
    def __init__(self, faults: dict[int, object] | None = None, answer: str | None = None, port: int = 0,
                 reply: str = "full"):
        # request number (1-based) -> 400 | 401 | 429 | 500 | 502 | 504 | "timeout" | "not json" | "trickle" | "drop"
        self.faults = faults or {}
        self.answer = answer
        # "full"; "no usage" (token counts left out); "partial usage" (no completion_tokens); "negative
        # usage"; "no choices" ([]); "odd" (a huge count, choices as a dict, a content list, in turn)
        self.reply = reply
        self.received: list[dict] = []
        self.headers: list[dict] = []
        self.lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with api.lock:
                    api.received.append(body)
                    api.headers.append(dict(self.headers))
                    n = len(api.received)
                fault = api.faults.get(n)
                if fault == "timeout":
                    time.sleep(3)
                elif fault == "drop":                  # the work done, the connection lost before the reply
                    self.close_connection = True
                    return None
                elif fault in (401, 429, 500, 502, 504):
                    return self._send(fault, {"error": {"message": "injected", "type": "fault"}})
                elif fault == "not json":             # a proxy's error page, or a body cut short
                    return self._send(200, None, raw=b'{"id": "chatcmpl-fake", "choi')
                elif fault == 400:
                    return self._send(400, {"error": {"message": "injected: <b>bad</b> request", "type": "invalid"}})
                if self.path.endswith("/chat/completions"):
                    return self._send(200, api.chat(body), trickle=fault == "trickle")
                if self.path.endswith("/messages"):
                    return self._send(200, api.messages(body))
                self._send(404, {"error": {"message": "no such route"}})

            def _send(self, code, obj, raw: bytes | None = None, trickle: bool = False):
                data = json.dumps(obj).encode() if raw is None else raw
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    for k in range(24 if trickle else 0):    # a byte every 0.25 s: no wait is long, the reply is
                        self.wfile.write(data[k:k + 1])      # 6 s in all
                        self.wfile.flush()
                        time.sleep(0.25)
                    self.wfile.write(data[24:] if trickle else data)
                except (BrokenPipeError, ConnectionResetError):
                    pass                     # the client timed out and left

        self._serve(Handler, port)

    def _label(self, allowed: list[str] | None) -> str:
        return self.answer or (allowed[0] if allowed else "Yes")

    def chat(self, body: dict) -> dict:
        allowed = (body.get("structured_outputs") or {}).get("choice")
        schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
        if schema:
            text = json.dumps({"verdict": self._label(schema["properties"]["verdict"].get("enum"))})
        else:
            text = self._label(allowed)
        prompt = sum(len(m["content"].split()) for m in body["messages"])
        # max_tokens honoured, as a provider does: cut to that many pieces (a word, or a punctuation
        # mark: {"verdict": "Yes"} is 9, as a real tokenizer makes it 6-7), finish_reason "length"
        pieces = re.findall(r"\w+|[^\w\s]|\s+", text)
        cut = len([x for x in pieces if not x.isspace()]) > int(body.get("max_tokens") or 10**9)
        if cut:
            kept, n = [], 0
            for x in pieces:
                n += not x.isspace()
                if n > int(body["max_tokens"]):
                    break
                kept.append(x)
            text = "".join(kept)
        out = {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": body["model"],
               "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                            "finish_reason": "length" if cut else "stop"}],
               "usage": {"prompt_tokens": prompt, "completion_tokens": 1, "total_tokens": prompt + 1}}
        if self.reply == "no usage":
            del out["usage"]
        elif self.reply == "partial usage":
            del out["usage"]["completion_tokens"]
        elif self.reply == "negative usage":
            out["usage"] = {"prompt_tokens": -1_000_000, "completion_tokens": -5, "total_tokens": -1_000_005}
        elif self.reply == "no choices":
            out["choices"] = []
        elif self.reply == "odd":                    # in turn: a count past any real one, choices as a dict,
            odd = len(self.received) % 3             # a content of parts
            if odd == 0:
                out["usage"]["completion_tokens"] = 10 ** 20
            elif odd == 1:
                out["choices"] = {"0": out["choices"][0]}
            else:
                out["choices"][0]["message"]["content"] = [{"type": "text", "text": text}]
        return out

    def messages(self, body: dict) -> dict:
        tool = body["tools"][0]
        allowed = tool["input_schema"]["properties"]["verdict"].get("enum")
        prompt = sum(len(m["content"].split()) for m in body["messages"])
        return {"id": "msg_fake", "type": "message", "role": "assistant", "model": body["model"],
                "content": [{"type": "tool_use", "id": "toolu_fake", "name": tool["name"],
                             "input": {"verdict": self._label(allowed)}}],
                "stop_reason": "tool_use", "stop_sequence": None,
                "usage": {"input_tokens": prompt, "output_tokens": 5}}
