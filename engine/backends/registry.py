"""The backend registry: name -> class (lazy "module:Class", so importing litjudge never imports
vLLM or torch), with the judge-name prefix that selects it. A new backend is one line here."""
from __future__ import annotations

from ..core.registry import Registry

BACKENDS: Registry = Registry("backend")
BACKENDS.add("vllm", "engine.backends.vllm_backend:VLLMBackend")
BACKENDS.add("transformers", "engine.backends.transformers_backend:TransformersBackend")
BACKENDS.add("vllm-reward", "engine.backends.vllm_pooling:RewardBackend", prefix="reward:")
BACKENDS.add("replay", "engine.backends.replay:ReplayBackend", prefix="replay:")
BACKENDS.add("openai", "engine.backends.api:ApiBackend", prefix="openai:")
BACKENDS.add("openai-compatible", "engine.backends.api:OpenAICompatibleBackend", prefix="openai-compatible:")
BACKENDS.add("anthropic", "engine.backends.api:AnthropicBackend", prefix="anthropic:")
BACKENDS.add("tokenizer-only", "engine.backends.tokenizer_only:TokenizerOnly")
BACKENDS.add("cluster", "engine.backends.cluster:ClusterBackend")       # replicas of any of the above, on Ray

# Backends a judge without a prefix may name through `backend = ...` (the others need their prefix).
PLAIN = ("vllm", "transformers")
