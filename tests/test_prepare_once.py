"""Two processes preparing the same judge at once (two runs, or a run beside the tests) once shared
one temporary folder (models/NAME.tmp): one deleted the other's GGUF mid-conversion. Preparation now
takes a lock per judge: the second process waits, then uses the folder the first finished. Real
processes and real locks, on a judge made of small chunk wheels (tests/test_registry_chunks.py) whose
conversion is a stand-in that writes a model folder slowly, checking its files are still there."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from tests.conftest import PROJECT_ROOT
from tests.test_registry_chunks import fake_model

CHILD = """
import json, os, sys, time
from pathlib import Path
from litjudge.engine.backends.local import models
from tests.test_registry_chunks import fake_model

here = Path(sys.argv[1])
model = fake_model(here / f"scratch-{os.getpid()}")            # the RegistryModel; the wheels are in the cache
models.ALIASES[model.alias] = model

def convert(model, tmp, gguf):
    with open(here / "conversions.log", "a") as log:
        log.write(f"{os.getpid()}\\n")
    (tmp / "config.json").write_text("{}")
    deadline = time.monotonic() + 60
    while not (here / "release").exists() and time.monotonic() < deadline:
        assert gguf.exists() and (tmp / "config.json").exists(), "another process deleted this one's files"
        time.sleep(0.05)
    gguf.unlink()
    (tmp / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    (tmp / "model.safetensors").write_bytes(b"0" * 1000)
    (tmp / models.MARKER).write_text(json.dumps({"alias": model.alias, "checksum": models.folder_checksum(tmp)}))

models._convert = convert
judge = models.resolve_judge(model.alias)
print(json.dumps({"path": judge.path, "fingerprint": judge.fingerprint}))
"""


def test_two_preparations_of_one_judge_at_once(tmp_path):
    cache = tmp_path / "cache"
    fake_model(cache / "wheels")                               # the chunk wheels, as if downloaded
    (tmp_path / "child.py").write_text(CHILD)
    env = {**os.environ, "LITJUDGE_CACHE": str(cache), "LITJUDGE_MODEL_CACHE": str(cache),
           "PYTHONPATH": str(PROJECT_ROOT)}
    log = tmp_path / "conversions.log"

    def start(name: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, str(tmp_path / "child.py"), str(tmp_path)], cwd=PROJECT_ROOT, env=env,
                                stdout=(tmp_path / f"{name}.out").open("w"), stderr=(tmp_path / f"{name}.err").open("w"))

    first = start("first")
    deadline = time.monotonic() + 120
    while not log.exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)                                        # the first is converting
    second = start("second")
    while time.monotonic() < deadline and second.poll() is None and "waiting" not in (tmp_path / "second.err").read_text() \
            and len(log.read_text().split()) < 2:
        time.sleep(0.05)                                        # the second waits at the lock (or, unlocked, converts too)
    (tmp_path / "release").touch()
    codes = first.wait(120), second.wait(120)
    out = [(tmp_path / f"{n}.out").read_text() + (tmp_path / f"{n}.err").read_text() for n in ("first", "second")]
    assert codes == (0, 0), out
    assert len(log.read_text().split()) == 1, out                               # converted once
    judges = [json.loads((tmp_path / f"{n}.out").read_text()) for n in ("first", "second")]
    assert judges[0] == judges[1] and judges[0]["path"] == str(cache / "models" / "fake-qwen")
    assert "judge fake-qwen is being prepared by another process; waiting" in out[1]
    assert sorted(p.name for p in (cache / "models").iterdir()) == ["fake-qwen", "fake-qwen.lock"]   # no temporary left
