"""Finished runs to annotate, made in a temporary folder by replayed judges (no model, no shared
data); the fixture `run` (a fresh copy a test of `finished`, the session's TTCW run:
tests/conftest.py); and `Served`: `litjudge annotate` as a real uvicorn server in a process of
its own, for tests/test_annotate*.py."""
from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import httpx
import pytest

from litjudge.engine.app.run import prepare
from litjudge.engine.core.config import load_config
from tests.conformance_data import ttcw_dataset
from tests.conftest import PROJECT_ROOT, litjudge

# Judged text a page must show as text, never run (the report's viewer survives the same).
PAYLOADS = ('<script>window.__xss = 1</script>', '<img src=x onerror="window.__xss = 2">', '</textarea><b>bold</b>',
            '"><svg onload="window.__xss = 3">', "{{7*7}} ${7*7} &amp; &lt;")
STORIES = 30
TESTS = 3


def judged(cfg: Path) -> Path:
    """`litjudge run CFG` into the runs folder beside it; returns the run's folder (named as the config)."""
    r = litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(cfg.parent / "runs")})
    assert r.returncode == 0, r.stderr[-3000:]
    return cfg.parent / "runs" / cfg.stem


def fresh(run: Path, tmp_path: Path) -> Path:
    """A fresh copy of a finished run (each test its own annotations.sqlite)."""
    return shutil.copytree(run, tmp_path / "runs" / run.name)


@pytest.fixture(name="run")
def run_fixture(finished: Path, tmp_path: Path) -> Path:
    """`run`: a fresh copy of `finished` (tests/conftest.py: the session's TTCW run) a test."""
    return fresh(finished, tmp_path)


def ttcw_run(folder: Path, stories: int = STORIES, tests: int = TESTS, prefix: str = "s") -> Path:
    """A finished TTCW run of two replayed judges over a simulated dataset whose stories (named
    `prefix` and a number) and one question carry HTML payloads; returns the run folder."""
    folder.mkdir(parents=True, exist_ok=True)
    names = [f"{prefix}{k:02d}" for k in range(stories)]
    majority = {(s, t): (k * 7 + t * 3) % 5 < 2 for k, s in enumerate(names) for t in range(1, tests + 1)}
    card = ttcw_dataset(folder, names, tests, majority)
    data = folder / "ttcw-sim"
    rows = json.loads((data / "stories.json").read_text())
    for k, row in enumerate(rows):
        row["content"] = f"Story {k}.\n{PAYLOADS[k % len(PAYLOADS)]}\nThe end of story {k}."
    (data / "stories.json").write_text(json.dumps(rows))
    asked = json.loads((data / "tests.json").read_text())
    asked[0]["question"] = "Is it <b>fluent</b>? <script>window.__xss = 4</script>"
    (data / "tests.json").write_text(json.dumps(asked))
    judges = []
    for j, bias in (("one", 0), ("two", 1)):
        path = folder / f"{j}.jsonl"
        path.write_text("".join(json.dumps({"id": f"story_{s}_GPT4_test{t}",
                                            "response": "Yes" if (k + t + bias) % 3 == 0 else "No"}) + "\n"
                                for k, s in enumerate(names) for t in range(1, tests + 1)))
        judges.append(f'"replay:{path}"')
    cfg = folder / "r.toml"
    cfg.write_text(f'name = "r"\nprotocol = "ttcw"\ndataset = "{card}"\njudge = [{", ".join(judges)}]\n'
                   'backend = "replay"\nmode = "label"\n')
    return judged(cfg)


def pairwise_run(folder: Path, pairs: int = 16, tie: bool = False, ids: tuple[str, ...] = ()) -> Path:
    """A finished pairwise run of one replayed judge that agrees with itself across orders on
    some pairs and flips on others (with `tie`: ties allowed, and said on every fifth pair); `ids`:
    the pairs' ids (p00, p01, ... unless given)."""
    folder.mkdir(parents=True, exist_ok=True)
    name = (lambda i: ids[i]) if ids else (lambda i: f"p{i:02d}")
    pairs = len(ids) or pairs
    rows = [{"pair_id": name(i), "prompt": f"Write about <i>{i}</i>.", "text_a": f"A text {i} <script>x</script>",
             "text_b": f"B text {i} </textarea>", "label": "ab"[i % 2]} for i in range(pairs)]
    (folder / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in rows))
    answers = {f"{name(i)}/{o}": ("tie" if tie and i % 5 == 4 else "A" if (i % 3 or o == "ab") else "B")
               for i in range(pairs) for o in ("ab", "ba")}
    (folder / "answers.jsonl").write_text("".join(json.dumps({"id": k, "response": v}) + "\n" for k, v in answers.items()))
    cfg = folder / "p.toml"
    cfg.write_text(f'name = "p"\nprotocol = "pairwise"\njudge = "replay:{folder / "answers.jsonl"}"\n'
                   '[dataset]\nloader = "pairs_jsonl"\npath = "pairs.jsonl"\n' + ("[options]\ntie = true\n" if tie else ""))
    return judged(cfg)


def with_p_text(run: Path, text_a=lambda i: 0.9 if i % 2 else 0.6) -> Path:
    """A pairwise run's verdicts with P(text) as if read after an analysis (text a's of pair i, from
    its index; P(A) of order ba is text b's): a pair the picks decide a or b then has an agreement to
    be unsure of, where one judge's picks alone leave every pair sure (decided a tie or agreed on)."""
    import polars as pl

    v = pl.read_parquet(run / "verdicts.parquet")
    share = pl.Series([float(text_a(int(k))) for k in v["pair_id"].str.slice(1).cast(pl.Int64)])
    p_a = pl.when(pl.col("order") == "ab").then(share).otherwise(1 - share)
    v.with_columns(pl.struct(p_a.alias("A"), (1 - p_a).alias("B")).alias("analysis_distribution")).write_parquet(
        run / "verdicts.parquet")
    return run


class Served:
    """`litjudge annotate RUN ARGS` in a process of its own (a real uvicorn server), until `kill`."""

    def __init__(self, run: Path, *args: str, host: str = "127.0.0.1", port: int | None = None,
                 sigint_ignored: bool = False):
        """`sigint_ignored`: started as a shell's background job is (`nohup litjudge annotate ... &`)."""
        path = os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))
        ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None
        self.proc = subprocess.Popen([sys.executable, "-m", "litjudge", "annotate", str(run), "--host", host,
                                      "--port", str(port or 0), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env={**os.environ, "PYTHONPATH": path}, cwd=run.parent,
                                     preexec_fn=ignore)
        # a test that fails before its kill left its server serving after the session (found by `ps`)
        atexit.register(lambda proc=self.proc: proc.poll() is None and proc.kill())
        self.printed = self._until("Open ")
        self.url = self.printed.splitlines()[-1].split("Open ", 1)[1].strip()
        self.token = self.url.split("token=", 1)[1].split("&")[0] if "token=" in self.url else None
        self.port = port or urllib.parse.urlsplit(self.url).port     # port 0: the one the server took
        self.host = "127.0.0.1" if host == "0.0.0.0" else host           # bound to all: asked on loopback
        self.base = f"http://{self.host}:{self.port}"
        self._wait_listening()

    def until(self, marker: str, timeout: float = 120) -> str:
        """stdout after what was read, up to the line starting with `marker`."""
        return self._until(marker, timeout)

    def _until(self, marker: str, timeout: float = 120) -> str:
        """stdout up to the line starting with `marker` (read by a thread: a line the text layer has
        buffered is invisible to select)."""
        lines: queue.Queue[str] | None = getattr(self, "_lines", None)
        if lines is None:                      # one reader for the process's life: later calls read on
            lines = self._lines = queue.Queue()
            assert self.proc.stdout is not None
            stdout = self.proc.stdout
            threading.Thread(target=lambda: [lines.put(x) for x in iter(stdout.readline, "")] and None,
                             daemon=True).start()
        out, deadline = "", time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                if self.proc.poll() is not None:
                    break
                continue
            out += line
            if line.startswith(marker):
                return out
        err = self.proc.stderr.read() if self.proc.stderr and self.proc.poll() is not None else ""
        raise AssertionError(f"no {marker!r} line from litjudge annotate: {out}{err[-3000:]}")

    def _wait_listening(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                socket.create_connection((self.host, self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("the annotation server never listened")

    def client(self, token: bool = True) -> httpx.Client:
        headers = {"X-Litjudge-Token": self.token} if token and self.token else {}
        return httpx.Client(base_url=self.base, headers=headers, timeout=30)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if getattr(self, "stderr", None) is not None:          # stopped before
            return
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(30)
        self.stderr = self.proc.stderr.read() if self.proc.stderr else ""
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream:
                stream.close()

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc) -> None:
        self.kill()


def lapse_locks(run: Path) -> None:
    """Every lock of the run's queue runs out, as its seconds passing would make it: a lock is a
    wall-clock expiry in RUN/annotations.sqlite, moved here into the past from another connection,
    as another process's would be (no test sleeps through a lock, nor races one against a stall)."""
    with contextlib.closing(sqlite3.connect(run / "annotations.sqlite", timeout=10)) as db:
        db.execute("UPDATE locks SET expires = expires - 1e9")
        db.commit()


class InThread:
    """`litjudge.annotate(run, ...)`: the same uvicorn server, served from a thread of the test's
    own process (no interpreter to start: most tests need no process of their own)."""

    def __init__(self, run: Path, host: str = "127.0.0.1", **options):
        import litjudge

        self.app = litjudge.annotate(run, host=host, port=0, **options)     # a free port, taken at once
        self.url, self.token = self.app.url, self.app.token
        self.port = self.app.server.config.port
        self.base = f"http://{'127.0.0.1' if host == '0.0.0.0' else host}:{self.port}"

    client = Served.client

    def kill(self) -> None:
        self.app.stop()

    def __enter__(self) -> InThread:
        return self

    def __exit__(self, *exc) -> None:
        self.kill()


POINTS = ("Flat: nothing <em>seen</em>.", "A few generic images.", "Some concrete images.", "Mostly vivid.",
          "Vivid throughout.")


GENRES = ("comedy", "tragedy", "science fiction")


def rubric_run(folder: Path, texts: int = 24, per_group: int = 4, pairwise: bool = False,
               first: str = "binary", genre: bool = False) -> Path:
    """A finished rubric run of two replayed judges over texts carrying HTML payloads: a binary
    question, a 5-point one with an anchor per point (`first` says which comes first: the page's
    headline; "genre" a categorical question of GENRES), with `pairwise` a pairwise question with
    ties over each group's texts two by two, with `genre` the categorical one last."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"item_id": f"t{i:02d}", "group": f"g{i // per_group}",
             "text": f"Text {i}.\n{PAYLOADS[i % len(PAYLOADS)]}\nThe end of text {i}."} for i in range(texts)]
    (folder / "texts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    binary = ('[[options.questions]]\nid = "natural"\ntext = "Does the <b>dialogue</b> sound natural?"\n'
              'scale = "binary"\n')
    points = ('[[options.questions]]\nid = "vivid"\ntext = "How vivid is the imagery?"\nscale = "points"\n'
              f'points = {json.dumps(list(POINTS))}\n')
    tie = ('[[options.questions]]\nid = "surprise"\ntext = "Which ending surprises more?"\nscale = "pairwise"\n'
           'tie = true\n' if pairwise else "")
    categorical = f'[[options.questions]]\nid = "genre"\ntext = "Which genre?"\nscale = "categorical"\n' \
                  f'categories = {json.dumps(list(GENRES))}\n'
    questions = (binary + points if first == "binary" else points + binary) + tie
    questions = categorical + questions if first == "genre" else questions + (categorical if genre else "")
    judges = []
    for j, bias in (("one", 0), ("two", 1)):
        out = []
        for i, r in enumerate(rows):
            out += [{"id": f"{r['item_id']}/natural", "response": "Yes" if (i + bias) % 3 else "No"},
                    {"id": f"{r['item_id']}/vivid", "response": str(1 + (i * 2 + bias) % 5)},
                    *([{"id": f"{r['item_id']}/genre", "response": GENRES[(i + bias) % 3]}]
                      if genre or first == "genre" else [])]
            for b in rows[i + 1:] if pairwise else ():
                if b["group"] == r["group"]:
                    out += [{"id": f"{r['item_id']}|{b['item_id']}/surprise/{o}",
                             "response": ("A", "B", "tie")[(i + bias + (o == "ba")) % 3]} for o in ("ab", "ba")]
        path = folder / f"{j}.jsonl"
        path.write_text("".join(json.dumps(x) + "\n" for x in out))
        judges.append(f'"replay:{path}"')
    cfg = folder / "rb.toml"
    cfg.write_text(f'name = "rb"\nprotocol = "rubric"\njudge = [{", ".join(judges)}]\nmode = "label"\n'
                   '[dataset]\nloader = "rated_items_jsonl"\npath = "texts.jsonl"\n' + questions)
    return judged(cfg)


def listwise_run(folder: Path, groups: int = 4, per_group: int = 6, categories: bool = True) -> Path:
    """A finished listwise run (one comprehensive list per group) of a recording scoring the items
    by a fixed rule, over items with HTML payloads and, with `categories`, a category each."""
    folder.mkdir(parents=True, exist_ok=True)
    cats = ("Bad", "Medium", "Good")
    rows = [{"group": f"g{g}", "item_id": f"g{g}i{i}", "text": f"Use {i} of g{g}: {PAYLOADS[(g + i) % len(PAYLOADS)]}",
             **({"category": cats[i % 3]} if categories else {})} for g in range(groups) for i in range(per_group)]
    (folder / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    order = f'category_order = {json.dumps(list(cats))}\n' if categories else ""
    cfg = folder / "lw.toml"
    body = ('name = "lw"\nprotocol = "listwise"\nmode = "label"\n[dataset]\nloader = "rated_items_jsonl"\n'
            f'path = "items.jsonl"\n{order}[options]\ncriterion = "Score each of the {{n}} uses 1 to 5."\n'
            'item_kind = "uses"\n')
    cfg.write_text(f'judge = "replay:{folder / "lw.jsonl"}"\n' + body)
    (folder / "lw.jsonl").write_text(json.dumps({"id": "placeholder", "response": "x"}) + "\n")
    prep = prepare(load_config(cfg))
    answers = {}
    for req in prep.protocol.build(prep.context(prep.specs[0])).requests:
        ids = list(req.language.ids)
        ranked = sorted(ids, key=lambda c: -(sum(map(ord, c)) % 5))
        answers[req.meta.item_id] = "\n".join(f"{k}. {c} : {1 + sum(map(ord, c)) % 5}" for k, c in enumerate(ranked, 1))
    (folder / "lw.jsonl").write_text("".join(json.dumps({"id": k, "response": v}) + "\n" for k, v in answers.items()))
    return judged(cfg)
