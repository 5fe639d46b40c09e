"""vLLM's pool of tokenizer copies (engine/backends/local/vllm_tokenizer_pool.py): it starts with
the engine's own tokenizer, which one thread's calls borrow without a copy; a thread borrowing while
that one is out gets a deep copy of its own; the construction tables are shared."""
import copy
import threading

from transformers import AutoTokenizer
from vllm.renderers import hf
from vllm.tokenizers import hf as pool_module

from litjudge.engine import backends
from litjudge.engine.backends.local.vllm_tokenizer_pool import SharedList, shared_tokenizer_tables

TEXT = "The lights buzzed as Laura blinked awake."


def test_one_thread_borrows_the_engines_own_tokenizer_and_a_second_gets_a_copy():
    shared_tokenizer_tables()
    shared_tokenizer_tables()                                   # wrapped once per process
    assert hf.maybe_make_thread_pool.litjudge_wrapped
    original = AutoTokenizer.from_pretrained(backends.model_spec("gemma3-270m").target)
    expected = original.encode(TEXT)
    rust = original._tokenizer
    used: list = []                                            # the Rust tokenizer of each call, in order
    inside, release = threading.Event(), threading.Event()

    class Held(type(original)):
        """Records which Rust tokenizer a call ran on; a call from a thread named "held" waits inside."""

        def encode(self, *args, **kwargs):
            used.append(self._tokenizer)
            if threading.current_thread().name == "held":
                inside.set()
                assert release.wait(60)
            return super().encode(*args, **kwargs)

    original.__class__ = Held
    pooled = hf.maybe_make_thread_pool(copy.copy(original), 2)
    assert pool_module.copy is copy                             # vLLM's own deep copies again after the start
    assert type(original._merges) is list                       # the cached tokenizer itself is left as it was
    assert pooled.encode(TEXT) == expected and pooled.encode(TEXT) == expected
    assert used == [rust, rust]                                 # one thread: the engine's own, no copy
    twin = copy.deepcopy(pooled)
    assert isinstance(pooled._merges, SharedList) and twin._merges is pooled._merges
    assert twin._tokenizer is not pooled._tokenizer              # a Rust tokenizer of its own
    got: list = []
    held = threading.Thread(target=lambda: got.append(pooled.encode(TEXT)), name="held")
    held.start()
    assert inside.wait(60)                                      # the engine's own tokenizer is out now
    got.append(pooled.encode(TEXT))                             # so this thread's call gets a copy
    release.set()
    held.join()
    assert used[2] is rust and used[3] is not rust and got == [expected] * 2
    assert pooled.decode(expected) == original.decode(expected)
