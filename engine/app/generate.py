"""Candidate generation for the reference-based pipeline (plot -> story by the model under test ->
reference-based judging), with the TTCW paper's length-matching loop (`story_generation` in the
paper prompts): write from the plot, then expand until within `tolerance` words of the target
length, at most `max_rounds` rounds. All plots advance together, one batched vLLM call per round.

The output is a dataset in the generic reference format (one JSONL line per story; the group's
reference is the dataset's story of `reference_source`), so it can be judged like any other.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..backends.local.modes import run_steps
from ..backends.local.steps import Decoding, FreeText, Prompt
from ..core.errors import ConfigError, DataError
from ..core.paths import paper_prompt
from ..core.requests import Message
from ..core.sampling import stream_seed
from ..data.ttcw import load_ttcw


@dataclass
class Draft:
    group: int
    plot: str
    target_words: int
    story: str = ""
    rounds: int = 0

    @property
    def words(self) -> int:
        return len(self.story.split())


def check_output(out: Path) -> None:
    """One line, before any story is generated, where `out` cannot be written: the stories are
    written once, at the end (a folder, a file in the way of its folder, a folder not writable)."""
    if out.is_dir():
        raise ConfigError("is a folder: give the dataset's file name (e.g. stories.jsonl)", where=str(out),
                          parameter="--out")
    existing = next(p for p in (out.parent, *out.parent.parents) if p.exists())
    if not existing.is_dir():
        raise ConfigError(f"{existing} is a file, in the way of the folder the dataset goes in", where=str(out),
                          parameter="--out")
    if not os.access(existing, os.W_OK) or out.exists() and not os.access(out, os.W_OK):
        raise ConfigError(f"cannot be written ({existing if not out.exists() else out} is not writable)",
                          where=str(out), parameter="--out")


def generate_candidates(backend, ttcw_folder: Path, out: Path, *, reference_source: str = "GPT4",
                        limit: int = 0, target_words: int = 0, tolerance: int = 200, max_rounds: int = 20,
                        temperature: float = 0.7, seed: int = 0, max_tokens: int = 3000) -> list[Draft]:
    """Generate one story per TTCW plot group with `backend` (a local step engine) and write the dataset."""
    prompts = paper_prompt("story_generation")
    data = load_ttcw(ttcw_folder, require_labels=False)
    refs = {s.group: s for s in data.stories if s.source == reference_source and s.judgeable}
    if not refs:
        raise DataError(f"no stories of source {reference_source!r} with text", path=str(ttcw_folder))
    drafts: list[Draft] = []
    for g, r in sorted(refs.items()):
        assert r.text is not None                 # refs holds judgeable stories only
        drafts.append(Draft(g, r.plot, target_words or len(r.text.split())))
    drafts = drafts[: limit or None]
    for rnd in range(max_rounds + 1):
        todo = [d for d in drafts if rnd == 0 or (d.words < d.target_words - tolerance and d.rounds < max_rounds)]
        if not todo:
            break
        texts = []
        for d in todo:
            if rnd == 0:
                ask = prompts["initial"].format(word_count=d.target_words, plot=d.plot)
            else:
                ask = prompts["expand"].format(word_count=d.target_words, current_word_count=d.words, story=d.story)
            texts.append(backend.renderer.render([Message("user", ask)]))
        outs = run_steps(backend, [FreeText(Prompt(tuple(backend.encode(t)), t), max_tokens,
                                            Decoding(temperature, 1.0, stream_seed(seed, rnd, d.group)))
                                   for t, d in zip(texts, todo, strict=True)])      # a random stream each story
        for d, o in zip(todo, outs, strict=True):
            d.story, d.rounds = o.text.strip(), d.rounds + (rnd > 0)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as fh:
        for d in drafts:
            ref = refs[d.group]
            fh.write(json.dumps({"group": d.group, "item_id": ref.story_id, "text": ref.text, "human_score": 0.0,
                                 "reference": True, "source": reference_source}, ensure_ascii=False) + "\n")
            fh.write(json.dumps({"group": d.group, "item_id": f"{d.group}_generated", "text": d.story,
                                 "human_score": 0.0, "reference": False, "source": "generated",
                                 "rounds": d.rounds, "words": d.words, "target_words": d.target_words},
                                ensure_ascii=False) + "\n")
    return drafts
