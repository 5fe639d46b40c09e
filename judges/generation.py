"""Generation protocols: the items a study judges, written by models (the generation half of the
AUT study, Al Rabeyah et al. 2024, prompts from Goes et al. 2023).

Method (AUT): each generator writes a list of `uses` alternative uses of at most `max_words` words
for each object at three levels: `common` and `creative` (one prompt each), and `highly_creative`
(a detailed prompt, then up to four increasingly forceful follow-ups in the same conversation; the
answer to the last turn is the level's list). Every turn is constrained to a numbered list
(`grammars.UseList`), so every turn parses. The items: group = object, category = level (the
oracle order: common < creative < highly creative), source = generator (for self-preference).
Uses written twice across levels of one object are reported: the paper's levels must not overlap.
"""
from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from litjudge.engine.core.config import GenerateConfig
from litjudge.engine.core.errors import ConfigError
from litjudge.engine.core.paths import paper_prompt
from litjudge.engine.core.registry import Registry
from litjudge.grammars import UseList, VerdictLanguage


@dataclass(frozen=True)
class Conversation:
    """One list to write: the user turns in order (the answer to the last one is the list)."""

    conv_id: str
    group: str
    category: str
    turns: tuple[str, ...]


class GenerationProtocol(ABC):
    name: str

    @abstractmethod
    def conversations(self, cfg: GenerateConfig, limit: int | None) -> list[Conversation]:
        """Every conversation each generator holds (the first `limit` groups when set)."""

    @abstractmethod
    def language(self, cfg: GenerateConfig) -> VerdictLanguage:
        """The language every turn's answer is constrained to."""

    @abstractmethod
    def items(self, conv: Conversation, generator: str, answer: Any) -> list[dict[str, Any]]:
        """A finished conversation's parsed last answer -> rated-item records (generic fields)."""


class AUTGeneration(GenerationProtocol):
    name = "aut"

    @staticmethod
    def phrase(obj: str, cfg: GenerateConfig) -> str:
        """How the prompt names the object: the configured phrase, else 'a'/'an' + the name."""
        return cfg.phrases.get(obj) or ("an " if obj[:1].lower() in "aeiou" else "a ") + obj

    def conversations(self, cfg: GenerateConfig, limit: int | None) -> list[Conversation]:
        prompts = paper_prompt("aut_generation")
        followups = tuple(paper_prompt("aut_generation", "highly_creative_followups")[: cfg.followups])
        out = []
        for obj in cfg.objects[: limit or None]:
            for level in cfg.levels:
                if level not in prompts:
                    raise ConfigError(f"no AUT prompt for level {level!r} (known: common, creative, highly_creative)",
                                      parameter="generate.levels")
                first = (prompts[level].replace("[an object]", self.phrase(obj, cfg))
                         .replace("[this object]", "this object")
                         .replace("list of 5", f"list of {cfg.uses}").replace("5 words", f"{cfg.max_words} words"))
                turns = (first, *followups) if level == "highly_creative" else (first,)
                out.append(Conversation(f"{obj}/{level}", obj, level, turns))
        return out

    def language(self, cfg: GenerateConfig) -> VerdictLanguage:
        return UseList(cfg.uses, cfg.max_words)

    def items(self, conv: Conversation, generator: str, answer: Any) -> list[dict[str, Any]]:
        return [{"group": conv.group, "item_id": f"{conv.group}/{generator}/{conv.category}/{k}", "text": use,
                 "category": conv.category, "source": generator} for k, use in enumerate(answer, start=1)]


GENERATION: Registry[type[GenerationProtocol]] = Registry("generation protocol")
GENERATION.add("aut", AUTGeneration)


def normalised(text: str) -> str:
    """The form two uses are compared in: lower case, letters and digits, single spaces."""
    return " ".join(re.sub(r"[^a-z0-9 ]", " ", text.lower()).split())


def _same_use(items: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The items by (group, use as normalised): a use written more than once has several."""
    seen: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for item in items:
        seen.setdefault((item["group"], normalised(item["text"])), []).append(item)
    return seen


def duplicates(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Uses written more than once for one group (object), in any levels or by any generators:
    one row per repeated use, with its levels, generators and item ids. `across_levels` marks the
    ones that put the same use in two categories of the oracle."""
    rows = []
    for (group, use), same in _same_use(items).items():
        if len(same) > 1:
            levels = sorted({i["category"] for i in same})
            rows.append({"group": group, "use": use, "count": len(same), "levels": ", ".join(levels),
                         "across_levels": len(levels) > 1,
                         "generators": ", ".join(sorted({i["source"] for i in same})),
                         "item_ids": ", ".join(i["item_id"] for i in same)})
    return rows


def across_levels(items: list[dict[str, Any]]) -> set[str]:
    """The ids of the items whose use was written at another level of their group too (from the
    items, not the table's joined ids: an object named "salt, pepper" split them wrongly)."""
    return {i["item_id"] for same in _same_use(items).values() if len({i["category"] for i in same}) > 1 for i in same}
