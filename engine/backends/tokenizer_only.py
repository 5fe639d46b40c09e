"""A backend that plans without an engine: it renders, tokenizes and keys requests exactly as the
vLLM backend will, so a finished run or sweep resumes without loading weights, and `litjudge plan`
counts tokens in seconds. It cannot generate."""
from __future__ import annotations

from ..models import ResolvedJudge
from ..render import load_renderer
from .base import LocalBackend


class TokenizerOnly(LocalBackend):
    def __init__(self, judge: ResolvedJudge, family: str, max_len: int):
        self.judge, self.name, self._max_len = judge, family, max_len
        self.renderer = load_renderer(judge.path, judge.chat)

    def describe(self) -> dict:
        return {"backend": self.name, "engine_started": False}

    def generate(self, batch, on_done=None):
        raise RuntimeError("TokenizerOnly plans requests; it cannot generate")

    def close(self) -> None:
        pass
