"""The FLOP model behind `litjudge bench`'s bound, checked against torch's own FLOP counter on a
real (tiny, random) Llama and against the default judge's real parameter count."""
import json

import pytest
import torch

from litjudge.engine.app.flops import DecoderShape

TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,
        "num_attention_heads": 4, "head_dim": 16, "num_key_value_heads": 2, "intermediate_size": 96,
        "vocab_size": 101, "tie_word_embeddings": True, "max_position_embeddings": 256}


def test_matches_torch_flop_counter(tmp_path):
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import LlamaConfig, LlamaForCausalLM

    (tmp_path / "config.json").write_text(json.dumps(TINY))
    shape = DecoderShape.from_config(tmp_path)
    model = LlamaForCausalLM(LlamaConfig(**{k: v for k, v in TINY.items() if k != "architectures"})).eval()
    model.config._attn_implementation = "eager"      # plain matmuls: every FLOP visible to the counter
    n = 37
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(torch.arange(1, n + 1).unsqueeze(0), logits_to_keep=1)
    counted = counter.get_total_flops()
    # eager attention multiplies the full n x n score matrix (the causal mask is applied after), our
    # model counts the causal triangle: compare the parts
    full_square = 4 * shape.heads * shape.head_dim * shape.layers * n * n
    causal = shape.attention_flops(n)
    assert shape.prefill_flops(n) - causal + full_square == counted


def test_prefix_cache_only_removes_the_cached_positions():
    shape = DecoderShape(layers=3, hidden=8, heads=2, head_dim=4, kv_heads=1, intermediate=16, vocab=10)
    whole = shape.prefill_flops(100)
    # 60 cached tokens: the remaining 40 still attend to everything before them
    tail = shape.prefill_flops(100, 60)
    head = shape.prefill_flops(60) - 2 * shape.hidden * shape.vocab
    assert head + tail == whole
    assert shape.attention_flops(100, 60) == 4 * 2 * 4 * 3 * sum(range(61, 101))
    assert shape.prefill_flops(100, 100) == 0


def test_default_judge_parameter_count(smollm_path):
    from safetensors import safe_open

    shape = DecoderShape.from_config(smollm_path)
    total = 0
    for f in smollm_path.glob("*.safetensors"):
        with safe_open(str(f), framework="pt") as fh:
            for k in fh.keys():
                if "norm" not in k and "embed_tokens" not in k and "lm_head" not in k:
                    total += _numel(fh.get_slice(k).get_shape())
    assert shape.layers * shape.layer_params == total


def _numel(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


@pytest.fixture
def smollm_path():
    from pathlib import Path

    from litjudge.engine.backends.local.models import resolve_judge

    return Path(resolve_judge("smollm2-135m").path)
