"""Backends, registered lazily by name ("module:attr"), so importing litjudge never imports vLLM."""
from __future__ import annotations

from ..registry import Registry

BACKENDS: Registry = Registry("backend")
BACKENDS.add("vllm", "engine.backends.vllm_backend:VLLMBackend")
BACKENDS.add("transformers", "engine.backends.hf_backend:TransformersBackend")
BACKENDS.add("replay", "engine.backends.replay:ReplayBackend")
