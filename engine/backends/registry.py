"""The backend registry: name -> class (lazy "module:Class", so importing litjudge never imports
vLLM or torch), with the judge-name prefix that selects it. A new backend is one line here."""
from __future__ import annotations

from ..core.registry import Registry

BACKENDS: Registry = Registry("backend", base="litjudge.engine.core.backend:Backend")
# `needs`: (the modules it imports, the extra that installs them), checked before any work starts.
BACKENDS.add("vllm", "litjudge.engine.backends.vllm_backend:VLLMBackend", needs=(("vllm",), "scripts/install.sh"))
BACKENDS.add("transformers", "litjudge.engine.backends.transformers_backend:TransformersBackend",
             needs=(("outlines",), "hf"))
BACKENDS.add("vllm-reward", "litjudge.engine.backends.vllm_pooling:RewardBackend", prefix="reward:")
BACKENDS.add("replay", "litjudge.engine.backends.replay:ReplayBackend", prefix="replay:")
BACKENDS.add("openai", "litjudge.engine.backends.api:OpenAIBackend", prefix="openai:", needs=(("openai",), "api"))
BACKENDS.add("openai-compatible", "litjudge.engine.backends.api:OpenAICompatibleBackend", prefix="openai-compatible:",
             needs=(("openai",), "api"))
BACKENDS.add("anthropic", "litjudge.engine.backends.api:AnthropicBackend", prefix="anthropic:",
             needs=(("anthropic",), "api"))
BACKENDS.add("tokenizer-only", "litjudge.engine.backends.tokenizer_only:TokenizerOnly")
# replicas of any of the above, on Ray
BACKENDS.add("cluster", "litjudge.engine.backends.cluster:ClusterBackend", needs=(("ray",), "ray"))

# Backends a judge without a prefix may name through `backend = ...` (the others need their prefix).
PLAIN = ("vllm", "transformers")
