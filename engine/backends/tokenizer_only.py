"""A backend that plans without an engine: it renders, tokenizes and keys requests exactly as the
local backend of its judge will, so a finished run or sweep resumes without loading weights, and
`litjudge plan` counts tokens in seconds. It cannot generate."""
from __future__ import annotations

from ..core.backend import Capabilities, JudgeSpec
from .base import LocalBackend, context_window
from .local.render import load_renderer


class TokenizerOnly(LocalBackend):
    name = "tokenizer-only"
    capabilities = Capabilities(frozenset(), generates=False)

    def __init__(self, spec: JudgeSpec):
        self.spec = spec
        self.renderer = load_renderer(spec.target, spec.chat)
        self._max_len = context_window(spec)

    def describe(self) -> dict:
        return {"backend": self.spec.backend, "engine_started": False}

    def generate(self, batch):
        raise RuntimeError("TokenizerOnly plans requests; it cannot generate")
