"""A judge folder is hashed once, then its checksum is remembered against every file's identity and
change time (engine/backends/local/checksum.py): never stale, whatever is done to the files, and
never written into the model folder."""
from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path

import pytest

from litjudge.engine.backends.local import checksum
from litjudge.engine.backends.local.checksum import MARKER, folder_checksum
from litjudge.engine.core.paths import cache_dir, sha256_file
from tests.audit_events import Watched


def judge_folder(root: Path) -> Path:
    folder = root / "judge"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "tokenizer.json").write_text('{"version": "1.0"}')
    (folder / "model.safetensors").write_bytes(os.urandom(1 << 20))
    (folder / MARKER).write_text("{}")                   # not hashed: it holds the checksum
    (folder / "notes.txt").write_text("not hashed")
    return folder


def hashed_now(folder: Path) -> str:
    """The checksum read from every byte, remembering nothing (what the memo must always equal)."""
    digest = hashlib.sha256()
    for p in sorted(q for q in folder.iterdir() if q.suffix in checksum.HASHED and q.name != MARKER and q.is_file()):
        digest.update(os.fsencode(p.name))
        sha256_file(p, digest)
    return digest.hexdigest()


@pytest.fixture(autouse=True)
def own_cache(monkeypatch, tmp_path):
    """The memos go to a cache folder of the test's own: the session's is shared with every
    process of both workers, whose memos are written beside a test's, through temporary files
    the globs would read."""
    monkeypatch.setenv("LITJUDGE_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def settled(monkeypatch):
    """Files written by the test count as settled at once (else each would wait RACY_S)."""
    monkeypatch.setattr(checksum, "RACY_S", 0.0)


def test_the_second_time_reads_no_weights_and_gives_the_same_checksum(tmp_path, settled):
    folder = judge_folder(tmp_path)
    before = sorted(p.name for p in folder.iterdir())
    first = folder_checksum(folder)
    assert first == hashed_now(folder)
    with Watched(folder, ("open",)) as opened:
        again = folder_checksum(folder)
    assert again == first and opened.seen == []
    assert sorted(p.name for p in folder.iterdir()) == before                   # nothing written beside the weights
    memo = list((cache_dir() / "checksums").glob("*.json"))
    assert any(json.loads(m.read_text())["folder"] == str(folder.resolve()) for m in memo)


def test_a_byte_changed_with_its_size_and_time_put_back_is_seen(tmp_path, settled):
    folder = judge_folder(tmp_path)
    weights = folder / "model.safetensors"
    first = folder_checksum(folder)
    st = weights.stat()
    data = bytearray(weights.read_bytes())
    data[12345] ^= 0xFF
    time.sleep(0.05)                      # the change time moves on a kernel whose clock ticks coarsely
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))                   # size and mtime as they were
    assert weights.stat().st_size == st.st_size and weights.stat().st_mtime_ns == st.st_mtime_ns
    changed = folder_checksum(folder)
    assert changed != first and changed == hashed_now(folder)
    (folder / "model.safetensors").rename(folder / "old.bin")                # a file replaced by another
    (folder / "model.safetensors").write_bytes(bytes(data))
    assert folder_checksum(folder) == hashed_now(folder)
    (folder / "extra.safetensors").write_bytes(b"x")                         # a file added
    assert folder_checksum(folder) == hashed_now(folder) != changed


def test_files_written_just_before_hashing_are_not_remembered(tmp_path):
    """Within RACY_S of their last change a second write could leave every time as it was."""
    folder = judge_folder(tmp_path)
    assert folder_checksum(folder) == hashed_now(folder)
    memos = cache_dir() / "checksums"
    assert not any(json.loads(m.read_text())["folder"] == str(folder.resolve()) for m in memos.glob("*.json"))


def test_a_damaged_or_foreign_memo_is_hashed_again(tmp_path, settled):
    folder = judge_folder(tmp_path)
    right = folder_checksum(folder)
    memo = checksum._memo_path(folder)
    for damage in ("{not json", "[]", json.dumps({"folder": "/elsewhere", "files": [], "checksum": "0" * 64}),
                   json.dumps({**json.loads(memo.read_text() if memo.exists() else "{}"), "folder": "/elsewhere",
                               "checksum": "0" * 64}), ""):
        memo.write_text(damage)
        assert folder_checksum(folder) == right, damage
    assert json.loads(memo.read_text())["checksum"] == right                  # written again, whole


def test_an_unwritable_cache_folder_only_means_hashing_again(tmp_path, settled, monkeypatch):
    folder = judge_folder(tmp_path)
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would be")
    monkeypatch.setattr(checksum, "cache_dir", lambda: blocked)
    assert folder_checksum(folder) == hashed_now(folder) == folder_checksum(folder)


def test_threads_hashing_one_folder_agree_and_leave_one_whole_memo(tmp_path, settled):
    folder = judge_folder(tmp_path)
    results, errors = [], []

    def work():
        try:
            results.append(folder_checksum(folder))
        except Exception as exc:       # noqa: BLE001 (a thread's failure, reported below)
            errors.append(exc)
    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and set(results) == {hashed_now(folder)}
    memo = checksum._memo_path(folder)
    assert json.loads(memo.read_text())["checksum"] == results[0]
    assert not list(memo.parent.glob(".tmp-*"))


def test_a_folder_a_dead_link_or_a_name_that_is_not_utf8_among_the_files_is_no_error(tmp_path, settled):
    """Each raised deep in the hashing (IsADirectoryError, FileNotFoundError, UnicodeEncodeError):
    only regular files are hashed, their names as the file system has them."""
    folder = judge_folder(tmp_path)
    plain = folder_checksum(folder)
    (folder / "sub.json").mkdir()
    (folder / "gone.safetensors").symlink_to(tmp_path / "nowhere")
    assert folder_checksum(folder) == plain
    odd = os.fsdecode(b"\xff.json")
    (folder / odd).write_text("{}")
    assert folder_checksum(folder) == hashed_now(folder) != plain
    assert folder_checksum(folder) == hashed_now(folder)                       # and remembered as such
