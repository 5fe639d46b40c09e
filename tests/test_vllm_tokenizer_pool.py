"""vLLM's pool of tokenizer copies (engine/backends/local/vllm_tokenizer_pool.py): empty at the
engine's start, a copy made for each thread that borrows one, the construction tables shared."""
import copy
import threading

from transformers import AutoTokenizer
from vllm.renderers import hf

from litjudge.engine import backends
from litjudge.engine.backends.local.vllm_tokenizer_pool import SharedList, shared_tokenizer_tables

TEXT = "The lights buzzed as Laura blinked awake."


def test_the_pool_copies_on_demand_and_shares_the_tables():
    shared_tokenizer_tables()
    shared_tokenizer_tables()                                   # wrapped once per process
    assert hf.maybe_make_thread_pool.litjudge_wrapped
    original = AutoTokenizer.from_pretrained(backends.model_spec("gemma3-270m").target)
    expected = original.encode(TEXT)
    pooled = hf.maybe_make_thread_pool(copy.copy(original), 2)
    assert type(original._merges) is list                       # the cached tokenizer itself is left as it was
    twin = copy.deepcopy(pooled)
    assert isinstance(pooled._merges, SharedList) and twin._merges is pooled._merges
    assert twin._tokenizer is not pooled._tokenizer              # a Rust tokenizer of its own
    got: list = []
    threads = [threading.Thread(target=lambda: got.append(pooled.encode(TEXT))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [expected] * 2 and pooled.decode(expected) == original.decode(expected)
