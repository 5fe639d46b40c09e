"""Tiny causal LMs with random weights and the default judge's tokenizer and chat template, built
in a test's folder: real vLLM engines where the model's answers are not the point (plumbing, a
grammar's language under sampling), at a twentieth of SmolLM2's compute per token."""
from __future__ import annotations

import shutil
from pathlib import Path

from litjudge.engine.backends.local.models import resolve_judge

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


def tiny_causal_lm(folder: Path, arch: str = "llama", max_positions: int = 2048) -> Path:
    """`folder` holding a 2-layer `arch` model (hidden 128, one 64-wide KV head, tied embeddings;
    seeded), SmolLM2's vocabulary, tokenizer and chat template."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    src = resolve_judge("smollm2-135m").path
    for name in TOKENIZER_FILES:
        shutil.copy(f"{src}/{name}", folder / name)
    cfg = AutoConfig.for_model(arch, vocab_size=49152, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                               num_attention_heads=2, num_key_value_heads=1, head_dim=64,
                               max_position_embeddings=max_positions, tie_word_embeddings=True)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16).save_pretrained(folder)
    return folder
