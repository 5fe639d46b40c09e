"""The backend registry: name -> class (lazy "module:Class", so importing litjudge never imports
vLLM or torch), with the judge-name prefix that selects it. A new backend is one line here, or an entry point of
another distribution (below)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.registry import Registry

if TYPE_CHECKING:                      # the base class is imported only when an entry loads (it may need torch)
    from ..core.backend import Backend

# The class every registered backend subclasses, checked when its entry loads (built-in or plugin):
# the one line to change when the backends' common base class does.
BACKEND_BASE = "litjudge.engine.core.backend:Backend"
# Another distribution adds a backend under the entry-point group `litjudge.backends`
# (`name = "module:Class"`); its judges are named `NAME:...` (the prefix is the entry point's name).
BACKENDS: Registry[type[Backend]] = Registry("backend", base=BACKEND_BASE, group="litjudge.backends",
                              plugin_meta=lambda name: {"prefix": f"{name}:"}, unique=("prefix",))
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
