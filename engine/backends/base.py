"""What backends share: planning through the judge's own renderer and tokenizer (`LocalBackend`),
decoding through the modes written once in `engine.backends.local.modes` (`StepBackend`), and the spec of a
local-weights judge. Backends only translate; the runner owns the rest."""
from __future__ import annotations

import dataclasses
import zlib
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..core.backend import Backend, Capabilities, JudgeSpec
from ..core.config import RunConfig
from ..core.errors import ConfigError
from ..core.paths import path_version
from ..core.requests import IDS, Generation, JudgeIdentity, JudgeRequest, Prepared, joined
from .hardware import choose_dtype
from .local.models import ALIASES, ResolvedJudge, check_model_folder, model_max_len, resolve_judge
from .local.modes import ModeContext, drive
from .local.pieces import MAX_PIECES
from .local.render import PromptRenderer
from .local.steps import Step, StepResult


class WordTokenizer:
    """For backends without a local tokenizer (replay, APIs): whitespace words as token ids, so
    counts are estimates and shared leading words still sort together. A newline is whitespace, so
    a prompt's words are its lines' words joined: each distinct line is counted once (kept by
    content, like the local tokenizers' pieces)."""

    def __init__(self) -> None:
        self._lines: dict[str, bytes] = {}           # a line's ids, packed

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [zlib.crc32(w.encode()) for w in text.split()]

    def encode_batch(self, texts: list[str]) -> list[array]:
        lines = self._lines
        if len(lines) > MAX_PIECES:
            lines.clear()
        out: list[array] = []
        for text in texts:
            parts = []
            for line in text.split("\n"):
                got = lines.get(line)
                if got is None:
                    got = lines[line] = array(IDS, self.encode(line)).tobytes()
                parts.append(got)
            out.append(joined(parts))
        return out


def key_family(base: str, dtype: str) -> str:
    """The backend family in request keys: bfloat16 is the default and keeps the plain name; another
    dtype computes other numbers, so its results get keys of their own."""
    return base if dtype == "bfloat16" else f"{base}-{dtype}"


def local_spec(name: str, config: RunConfig, backend: str, family_base: str, prefix: str = "") -> JudgeSpec:
    """A local-weights judge (alias, model folder, hub id), its weights resolved and hashed once;
    `dtype = "auto"` resolved by the hardware here, so the key family names the dtype that runs."""
    engine = config.engine.for_judge(name, config.source or "config")
    choice = choose_dtype(engine.dtype)
    engine = dataclasses.replace(engine, dtype=choice.dtype)
    resolved: ResolvedJudge = resolve_judge(name.removeprefix(prefix))
    return JudgeSpec(name, backend, resolved.path, resolved.fingerprint, key_family(family_base, engine.dtype),
                     resolved.chat, engine, config.api, (("dtype_reason", choice.reason),))


def context_window(spec: JudgeSpec) -> int:
    """max_model_len as configured (never past the model's own: vLLM would refuse it only once its
    engine starts), else the model's own capped at 8192."""
    own = model_max_len(spec.target)
    if spec.engine.max_model_len and spec.engine.max_model_len > own:
        raise ConfigError(f"max_model_len {spec.engine.max_model_len} is longer than judge {spec.name!r}'s own context "
                          f"({own} tokens: its config's max_position_embeddings)", parameter="engine.max_model_len")
    return spec.engine.max_model_len or min(own, 8192)


class LocalBackend(Backend):
    """Local weights: the judge's own prompt rendering, tokenizer and context window."""

    spec: JudgeSpec
    renderer: PromptRenderer
    _max_len: int

    @classmethod
    def resolve(cls, name: str, config: RunConfig, prefix: str = "") -> JudgeSpec:
        return local_spec(name, config, cls.name, cls.name, prefix)

    @classmethod
    def source_version(cls, name: str, config: RunConfig, prefix: str = "") -> tuple[Any, ...]:
        """A model folder named by its path: that folder's files as they are now (an alias's
        converted folder is checked by its checksum; a hub id pins its revision). A folder that is
        no model is refused here, from its top level, before its every file is listed: `judge =
        "~"` listed the home folder for 7 s before that line, and `"/"` stopped in /proc on a line
        about a folder not being writable."""
        ref = name.removeprefix(prefix)
        path = Path(ref).expanduser()
        if ref in ALIASES or not path.exists():
            return ()                                   # as resolve_judge reads it
        if path.is_dir():
            check_model_folder(path)
        return path_version(path)

    def identity(self) -> JudgeIdentity:
        return JudgeIdentity(self.spec.fingerprint, self.renderer.template_hash, self.spec.family)

    def tokenizer(self):
        return self.renderer.tokenizer

    def render(self, request: JudgeRequest) -> str:
        return self.renderer.render(request.messages, request.prefill)

    def encode(self, prompt: str) -> list[int]:
        return self.renderer.encode(prompt)

    def encode_batch(self, prompts: list[str]) -> list[array]:
        return self.renderer.encode_batch(prompts)

    def tokenization(self) -> dict:
        """How the plan's prompts were tokenized: each distinct piece once, or whole (and why)."""
        return self.renderer.pieces.figures()

    def context_window(self) -> int:
        return self._max_len


class StepBackend(LocalBackend):
    """A local engine that runs steps (`submit` / `poll`); the verdict modes come from the core, so
    every step engine offers the same three."""
    capabilities = Capabilities(frozenset({"label", "analyze", "distribution"}),
                                notes={"reward": "reward mode needs a reward-model judge, reward:MODEL"})

    def submit(self, step: Step) -> int:
        raise NotImplementedError

    def poll(self) -> Iterator[tuple[int, StepResult]]:
        raise NotImplementedError

    def generate(self, batch: Sequence[Prepared]) -> Iterator[Generation]:
        ctx = ModeContext(self.renderer.label_tokens, self.renderer.tokenizer.eos_token_id, self._max_len)
        return drive(batch, self, ctx)
