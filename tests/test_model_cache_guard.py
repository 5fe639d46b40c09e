"""The session's guard of the user's model cache (tests/model_cache_guard.py) on what a hostile pass
found it missed or misread: a write with its size and time put back, a write inside a linked judge
folder, a judge prepared by a newer litjudge, files vanishing while the cache is listed."""
from __future__ import annotations

import json
import os
import threading

from litjudge.engine.backends.local.models import ALIASES, CONVERSION, MARKER
from tests import model_cache_guard as guard


def prepared_cache(root, conversion=CONVERSION):
    for name in ALIASES:
        folder = root / "models" / name
        folder.mkdir(parents=True)
        (folder / MARKER).write_text(json.dumps({"alias": name, "conversion": conversion}))
        (folder / "model.safetensors").write_bytes(b"\0" * 4096)
    (root / "wheels").mkdir()
    return root


def test_a_judge_of_an_older_conversion_is_unprepared_and_of_a_newer_one_prepared(tmp_path):
    assert guard.unprepared(prepared_cache(tmp_path / "now")) == []
    assert guard.unprepared(prepared_cache(tmp_path / "newer", CONVERSION + 1)) == []   # resolve_judge keeps it too
    assert guard.unprepared(prepared_cache(tmp_path / "older", CONVERSION - 1)) == list(ALIASES)
    assert guard.refusal(tmp_path / "empty") is not None and guard.refusal(tmp_path / "now") is None


def test_a_write_with_its_size_and_time_put_back_is_seen(tmp_path):
    cache = prepared_cache(tmp_path)
    weights = cache / "models" / next(iter(ALIASES)) / "model.safetensors"
    before = guard.snapshot(cache)
    st = weights.stat()
    with weights.open("r+b") as fh:
        fh.write(b"\1")
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert guard.changes(before, guard.snapshot(cache)) == [f"changed {weights.relative_to(cache)}"]


def test_a_write_inside_a_linked_judge_folder_is_seen(tmp_path):
    real = prepared_cache(tmp_path / "real")
    cache = tmp_path / "cache"
    (cache / "models").mkdir(parents=True)
    for name in ALIASES:
        (cache / "models" / name).symlink_to(real / "models" / name)
    before = guard.snapshot(cache)
    name = next(iter(ALIASES))
    (real / "models" / name / "new.json").write_text("{}")
    assert f"added models/{name}/new.json" in guard.changes(before, guard.snapshot(cache))


def test_files_vanishing_while_the_cache_is_listed_are_no_error(tmp_path):
    """Another process preparing a judge makes and removes temporary files meanwhile."""
    cache = prepared_cache(tmp_path)
    stop = threading.Event()

    def churn():
        i = 0
        while not stop.is_set():
            tmp = cache / "models" / f"x.tmp-{i % 3}"
            tmp.mkdir(exist_ok=True)
            (tmp / "part.safetensors").write_bytes(b"1")
            (tmp / "part.safetensors").unlink()
            tmp.rmdir()
            i += 1
    worker = threading.Thread(target=churn)
    worker.start()
    try:
        snapshots = [guard.snapshot(cache) for _ in range(300)]
    finally:
        stop.set()
        worker.join()
    assert all(f"models/{name}/model.safetensors" in s for s in snapshots for name in ALIASES)
