"""Prefill FLOPs of a decoder-only transformer, attention included.

Why: on a CPU both vLLM and a one-prompt-at-a-time transformers loop are compute-bound, so a
speed ratio can never exceed the ratio of the work each must do. Counting that work (weights and
attention, for the tokens each actually computes) turns "is the 10x target reachable here?" into
arithmetic, printed by `litjudge bench` beside the measured times.

Counted per computed prompt token: 2 x non-embedding parameters (the matmuls) plus attention,
4 x query heads x head dim x context length x layers (QK^T and AV; a token at 0-based position i
attends to i + 1 positions). Norms, rotary and the element-wise ops are left out (a few percent),
so every FLOP/s derived from this is a slight underestimate.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class DecoderShape:
    layers: int
    hidden: int
    heads: int
    head_dim: int
    kv_heads: int
    intermediate: int
    vocab: int

    @classmethod
    def from_config(cls, folder: str | Path) -> DecoderShape:
        """Read a model folder's config through transformers (its defaults, and the text config of
        multimodal checkpoints)."""
        from transformers import AutoConfig

        cfg = AutoConfig.from_pretrained(str(folder)).get_text_config()
        heads = cfg.num_attention_heads
        return cls(layers=cfg.num_hidden_layers, hidden=cfg.hidden_size, heads=heads,
                   head_dim=getattr(cfg, "head_dim", None) or cfg.hidden_size // heads,
                   kv_heads=getattr(cfg, "num_key_value_heads", None) or heads,
                   intermediate=cfg.intermediate_size, vocab=cfg.vocab_size)

    @property
    def layer_params(self) -> int:
        """Attention projections (q, k, v, o) and a gated MLP (gate, up, down); norms left out."""
        q = self.hidden * self.heads * self.head_dim
        kv = 2 * self.hidden * self.kv_heads * self.head_dim
        o = self.heads * self.head_dim * self.hidden
        return q + kv + o + 3 * self.hidden * self.intermediate

    @property
    def matmul_flops_per_token(self) -> int:
        return 2 * self.layers * self.layer_params

    def attention_flops(self, prompt_tokens: int, cached_tokens: int = 0) -> int:
        """Attention of the positions cached_tokens .. prompt_tokens - 1 over their causal context."""
        span = prompt_tokens * (prompt_tokens + 1) // 2 - cached_tokens * (cached_tokens + 1) // 2
        return 4 * self.heads * self.head_dim * self.layers * span

    def prefill_flops(self, prompt_tokens: int, cached_tokens: int = 0) -> int:
        """The work to prefill one prompt whose first `cached_tokens` come from a prefix cache, up
        to the last position's logits (one LM-head row: engines compute logits only there)."""
        computed = prompt_tokens - cached_tokens
        if computed <= 0:
            return 0
        return (self.matmul_flops_per_token * computed + self.attention_flops(prompt_tokens, cached_tokens)
                + 2 * self.hidden * self.vocab)
