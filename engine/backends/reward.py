"""Reward-model judges (`reward:MODEL`): a sequence-classification model (Bradley-Terry reward
model) scores each (prompt, text) conversation with one logit; in the pairwise protocol the higher
score wins and P(a beats b) = sigmoid(r_a - r_b). Runs on vLLM's pooling runner (`classify`, raw
logits: no activation), through the same planner, store and metrics as generative judges."""
from __future__ import annotations

import os
from typing import Callable, Iterator, Sequence

from ..errors import BackendUnavailable
from ..models import ResolvedJudge
from ..render import PromptRenderer
from ..requests import JudgeIdentity
from .base import Generation, LocalBackend, Prepared
from .vllm_backend import EngineSettings, context_window, vllm_family

CHUNK = 32          # texts per classify call: results are stored after each chunk


class RewardBackend(LocalBackend):
    name = "vllm-reward"

    def __init__(self, judge: ResolvedJudge, settings: EngineSettings = EngineSettings()):
        self.judge, self.settings = judge, settings
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(int(max(1, settings.kv_cache_gib))))
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        try:
            from vllm import LLM
        except ImportError as exc:
            raise BackendUnavailable(f"vLLM is not installed ({exc})") from None
        self._max_len = context_window(judge, settings)
        self.llm = LLM(model=judge.path, runner="pooling", dtype=settings.dtype, enforce_eager=settings.enforce_eager,
                       max_model_len=self._max_len, seed=0, tensor_parallel_size=settings.tensor_parallel_size)
        self.renderer = PromptRenderer(self.llm.get_tokenizer(), judge.chat)

    def identity(self) -> JudgeIdentity:
        return JudgeIdentity(self.judge.fingerprint, self.renderer.template_hash, vllm_family(self.settings.dtype, self.name))

    def describe(self) -> dict:
        return {"backend": self.name, "engine_started": True, "dtype": self.settings.dtype,
                "max_model_len": self._max_len, "runner": "pooling (classify, raw logits)"}

    def close(self) -> None:
        import gc

        del self.llm
        gc.collect()

    def generate(self, batch: Sequence[Prepared], on_done: Callable[[Generation], None] | None = None
                 ) -> Iterator[Generation]:
        from vllm import PoolingParams
        from vllm.inputs import TokensPrompt

        params = PoolingParams(use_activation=False)
        for start in range(0, len(batch), CHUNK):
            chunk = batch[start:start + CHUNK]
            outs = self.llm.classify([TokensPrompt(prompt_token_ids=list(p.token_ids)) for p in chunk],
                                     pooling_params=params, use_tqdm=False)
            for p, o in zip(chunk, outs):
                scores = list(o.outputs.probs)
                g = (Generation(p.key, f"{float(scores[0]):.6f}", prompt_tokens=p.prompt_tokens,
                                cached_tokens=o.num_cached_tokens or 0) if len(scores) == 1 else
                     Generation(p.key, "", error=f"expected one reward logit, got {len(scores)}"))
                if on_done:
                    on_done(g)
                yield g
