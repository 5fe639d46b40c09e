"""Reward-model judges (`reward:MODEL`): a sequence-classification model (Bradley-Terry reward
model) scores each (prompt, text) conversation with one logit; in the pairwise protocol the higher
score wins and P(a beats b) = sigmoid(r_a - r_b). Runs on vLLM's pooling runner (`classify`, raw
logits: no activation), through the same planner, store and metrics as generative judges."""
from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..core.backend import Capabilities, JudgeSpec
from ..core.config import RunConfig
from ..core.errors import ConfigError
from ..core.requests import Generation, Prepared
from .base import LocalBackend, local_spec
from .local.render import PromptRenderer
from .local.vllm_gc import close_engine
from .tokenizer_only import TokenizerOnly
from .vllm_backend import start_llm

CHUNK = 32          # texts per classify call: results are stored after each chunk
CLASSIFIERS = ("ForSequenceClassification", "ForRewardModeling", "RewardModel")   # what vLLM's classify runs


def _architectures(folder: str) -> list[str]:
    """The model's declared architectures (config.json), [] where it declares none (not checked)."""
    try:
        found = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8")).get("architectures")
    except (OSError, ValueError, AttributeError):
        return []
    return [str(a) for a in found] if isinstance(found, list) else []


class RewardBackend(LocalBackend):
    name = "vllm-reward"
    capabilities = Capabilities(frozenset({"reward"}), notes={m: "a reward model scores texts; it gives no labels"
                                                             for m in ("label", "analyze", "distribution")})

    @classmethod
    def plan(cls, spec: JudgeSpec) -> TokenizerOnly:
        return TokenizerOnly(spec)

    @classmethod
    def resolve(cls, name: str, config: RunConfig, prefix: str = "") -> JudgeSpec:
        """A reward judge's model is a sequence classifier (a hostile pass: a chat model's engine
        started, then vLLM's "Classification API is not supported by this model" was an internal
        error, leaving a run folder of a log and an empty store)."""
        spec = local_spec(name, config, cls.name, cls.name, prefix)
        architectures = _architectures(spec.target)
        if architectures and not any(a.endswith(CLASSIFIERS) for a in architectures):
            raise ConfigError(f"judge {name!r}: its model ({', '.join(architectures)}) is a text generator, not a "
                              "sequence-classification (reward) model; name a reward model after reward:, or judge "
                              "with it in label, analyze or distribution mode", where=config.source or "config",
                              parameter="judge")
        return spec

    def __init__(self, spec: JudgeSpec):
        self.spec = spec
        _, self.llm, _, kwargs = start_llm(spec, runner="pooling")
        self._max_len = kwargs["max_model_len"]
        self.renderer = PromptRenderer(self.llm.get_tokenizer(), spec.chat)

    def describe(self) -> dict:
        return {"backend": self.name, "engine_started": True, "dtype": self.spec.engine.dtype,
                "dtype_reason": self.spec.detail("dtype_reason", "set in the config"),
                "max_model_len": self._max_len, "runner": "pooling (classify, raw logits)"}

    def close(self) -> None:
        close_engine(self)

    def generate(self, batch: Sequence[Prepared]) -> Iterator[Generation]:
        from vllm import PoolingParams
        from vllm.inputs import TokensPrompt

        params = PoolingParams(use_activation=False)
        for start in range(0, len(batch), CHUNK):
            chunk = batch[start:start + CHUNK]
            outs = self.llm.classify([TokensPrompt(prompt_token_ids=list(p.token_ids)) for p in chunk],
                                     pooling_params=params, use_tqdm=False)
            for p, o in zip(chunk, outs):
                scores = list(o.outputs.probs)
                yield (Generation(p.key, f"{float(scores[0]):.6f}", prompt_tokens=p.prompt_tokens,
                                  cached_tokens=o.num_cached_tokens or 0) if len(scores) == 1 else
                       Generation(p.key, "", error=f"expected one reward logit, got {len(scores)}"))
