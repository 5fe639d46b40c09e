"""A conversion parses each GGUF file once (engine/backends/local/gguf_once.py): inside the block a
file's reader is shared, a rewritten file is parsed again, a writable reader is never shared, and
the library is restored after the block, whatever ended it."""
import threading

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from litjudge.engine.backends.local.gguf_once import one_parse  # noqa: E402


def write(path, value: int):
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_uint32("test.value", value)
    w.add_tensor("t", np.arange(4, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def value(reader) -> int:
    return int(reader.fields["test.value"].parts[-1][0])


def test_each_file_is_parsed_once_inside_the_block_and_the_library_is_restored(tmp_path):
    a, b = write(tmp_path / "a.gguf", 1), write(tmp_path / "b.gguf", 2)
    original = gguf.GGUFReader
    with one_parse():
        first, again, other = gguf.GGUFReader(a), gguf.GGUFReader(str(a)), gguf.GGUFReader(b)
        assert first is again and other is not first and (value(first), value(other)) == (1, 2)
        assert gguf.GGUFReader(a, "r+") is not first                    # a writable reader is its own
        write(a, 3)                                                      # the file rewritten: parsed again
        assert value(gguf.GGUFReader(a)) == 3
    assert gguf.GGUFReader is original and gguf.GGUFReader(a) is not gguf.GGUFReader(a)


def test_the_library_is_restored_when_the_block_fails(tmp_path):
    original = gguf.GGUFReader
    with pytest.raises(RuntimeError, match="conversion failed"), one_parse():
        gguf.GGUFReader(write(tmp_path / "a.gguf", 1))
        raise RuntimeError("conversion failed")
    assert gguf.GGUFReader is original
    with pytest.raises(FileNotFoundError), one_parse():
        gguf.GGUFReader(tmp_path / "missing.gguf")
    assert gguf.GGUFReader is original


def test_two_conversions_at_once_take_turns(tmp_path):
    """Two threads converting at once: the second waits for the first's block, so neither restores
    the library under the other."""
    path = write(tmp_path / "a.gguf", 1)
    original, seen, inside, release = gguf.GGUFReader, [], threading.Event(), threading.Event()

    def first():
        with one_parse():
            inside.set()
            release.wait(10)
            seen.append(value(gguf.GGUFReader(path)))

    def second():
        with one_parse():
            seen.append("second")

    a, b = threading.Thread(target=first), threading.Thread(target=second)
    a.start()
    assert inside.wait(10)
    b.start()
    b.join(0.3)
    assert b.is_alive() and seen == []                       # waiting for the first block
    release.set()
    a.join(10)
    b.join(10)
    assert seen == [1, "second"] and gguf.GGUFReader is original


def test_the_shared_reader_reads_the_same_fields_and_tensors_without_a_memmap(tmp_path):
    """The shared reader holds its map as a plain read-only ndarray (no Python code per slice) and
    reads every field and tensor as the library's own reader does."""
    path = write(tmp_path / "a.gguf", 7)
    own = gguf.GGUFReader(path)
    with one_parse():
        shared = gguf.GGUFReader(path)
    assert type(shared.data) is np.ndarray and not shared.data.flags.writeable
    assert isinstance(shared, gguf.GGUFReader) and list(shared.fields) == list(own.fields)
    for name, field in own.fields.items():
        got = shared.fields[name]
        assert got.types == field.types and all(np.array_equal(x, y) for x, y in zip(got.parts, field.parts))
    assert [t.name for t in shared.tensors] == [t.name for t in own.tensors]
    assert np.array_equal(shared.tensors[0].data, np.arange(4, dtype=np.float32))
    assert type(shared.tensors[0].data) is np.ndarray and type(own.tensors[0].data) is np.memmap
