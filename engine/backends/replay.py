"""Replay of recorded judge outputs, served by item id: recomputes published LLM-vs-human agreement
with no model, through the same planner, store, parsing and metrics as live judges.

Judge names: `replay:NAME` reads `<data root>/ttcw/judge_outputs/NAME.jsonl`; `replay:PATH`
reads a JSONL file of `{"id": item_id, "response": text}`.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable, Iterator, Sequence

from ..data.ttcw import load_recorded
from ..errors import JudgeNotFound
from ..render import plain_layout
from ..requests import JudgeIdentity, JudgeRequest
from .base import Generation, Prepared, WordTokenizer


def replay_source(name: str, data_root: Path) -> Path:
    ref = name.removeprefix("replay:")
    path = Path(ref)
    if path.suffix != ".jsonl":
        path = Path(data_root) / "ttcw" / "judge_outputs" / f"{ref}.jsonl"
    if not path.exists():
        raise JudgeNotFound(f"no recorded outputs for judge {name!r} at {path}")
    return path


class ReplayBackend:
    name = "replay"

    def __init__(self, judge_name: str, data_root: Path):
        self.judge_name = judge_name
        self.path = replay_source(judge_name, data_root)
        self.records = load_recorded(self.path)
        self.checksum = hashlib.sha256(self.path.read_bytes()).hexdigest()
        self._tok = WordTokenizer()

    def identity(self) -> JudgeIdentity:
        return JudgeIdentity(f"replay:{self.path.stem}:sha256:{self.checksum[:16]}", "none", "replay")

    def tokenizer(self):
        return self._tok

    def render(self, request: JudgeRequest) -> str:
        return plain_layout(request.messages)

    def encode(self, prompt: str) -> list[int]:
        return self._tok.encode(prompt)

    def context_window(self) -> int:
        return 1 << 30

    def describe(self) -> dict:
        return {"backend": "replay", "source": str(self.path), "sha256": self.checksum, "records": len(self.records)}

    def generate(self, batch: Sequence[Prepared], on_done: Callable[[Generation], None] | None = None
                 ) -> Iterator[Generation]:
        for p in batch:
            item = p.request.meta.item_id
            if item in self.records:
                g = Generation(p.key, self.records[item], prompt_tokens=p.prompt_tokens)
            else:
                g = Generation(p.key, "", error=f"no recorded response for {item}")
            if on_done:
                on_done(g)
            yield g

    def close(self) -> None:
        pass
