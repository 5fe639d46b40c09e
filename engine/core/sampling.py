"""How a request is sampled: `Sampling` (a request's decoding settings, part of its key) and
`SamplingConfig` (a run config's `[sampling]`: those plus the number of repeats)."""
from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from typing import Any

from .schema import check_field as _check
from .schema import finite as _finite


@dataclass(frozen=True)
class Sampling:
    """Decoding settings of a request. temperature 0 is greedy; the seed then cannot matter and is
    dropped from the key (normalised before hashing, so greedy repeats share one verdict)."""

    temperature: float = 0.0        # 0: greedy; at most 5
    top_p: float = 1.0              # nucleus mass in (0, 1]
    seed: int | None = 0            # >= 0; each request draws by a seed of its own (from this one, its repeat, its key)
    max_tokens: int | None = None   # None (or 0 in a config): from the verdict language; analyze: analysis + verdict

    def __post_init__(self) -> None:
        if self.max_tokens == 0:
            object.__setattr__(self, "max_tokens", None)
        _check(_finite(self.temperature) and 0.0 <= self.temperature <= 5.0, "temperature",
               f"must be in [0, 5], got {self.temperature}")
        _check(_finite(self.top_p) and 0.0 < self.top_p <= 1.0, "top_p", f"must be in (0, 1], got {self.top_p}")
        _check(self.seed is None or self.seed >= 0, "seed", f"must be >= 0, got {self.seed}")
        _check(self.max_tokens is None or self.max_tokens >= 1, "max_tokens",
               f"must be >= 1 (or 0 / absent: derived from the verdict language), got {self.max_tokens}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def key_fields(self) -> dict[str, Any]:
        """What of these settings a request's key holds; a sampled one also the seed rule, so a verdict
        drawn under an earlier rule is not reused (SEED_RULE)."""
        fields = {"temperature": self.temperature, "top_p": self.top_p if not self.greedy else 1.0,
                  "seed": None if self.greedy else self.seed, "max_tokens": self.max_tokens}
        return fields if self.greedy else {**fields, "seed_rule": SEED_RULE}

    def engine_seed(self, key: str) -> int | None:
        """THE seed rule every backend applies: none when greedy; else the request's own, from its
        content key (which holds this seed, the repeat and the re-ask), so no two requests share a
        random stream. One seed per repeat gave every request of a repeat the same uniforms in vLLM's
        per-request generators (and the same `Decoding.pick`): a sampled Yes/No verdict was Yes
        exactly where P(Yes) passed one threshold shared by every item (SmolLM2: 60 Yes of 60
        questions whose P(Yes) summed to 10.0; tests/test_vllm_backend.py)."""
        return None if self.greedy else stream_seed(key)


# 3: each engine step of a request its own stream too (`Decoding.step`: a list's slots, the verdict
# after an analysis). 2: each request's own seed from its key (engine_seed), a repeat's seed drawn
# from the run's and the repeat (for_repeat). 1, unnamed in keys: seed + repeat for every request of
# a repeat, whose draws were one shared threshold across items (and repeat 1 of seed 0 was repeat 0
# of seed 1).
SEED_RULE = 3


def stream_seed(*parts: object) -> int:
    """A 31-bit seed of its own for what `parts` name (a content key; a generation's seed, round
    and story), the same on every run: what keeps draws independent across requests."""
    text = parts[0] if len(parts) == 1 and isinstance(parts[0], str) else repr(parts)
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16) & 0x7FFFFFFF


@dataclass(frozen=True)
class SamplingConfig(Sampling):
    """`[sampling]` of a run config: a request's decoding settings plus how many samples of each."""

    repeats: int = 1                # independent samples per request (more than 1 needs temperature > 0)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check(self.repeats >= 1, "repeats", f"must be >= 1, got {self.repeats}")
        # Greedy repeats share one key, so they were one verdict counted `repeats` times: a rubric's
        # repeat_agreement read 1.0 and an item's repeats looked like independent samples.
        _check(self.repeats == 1 or not self.greedy, "repeats",
               f"{self.repeats} repeats at temperature 0 are one greedy verdict {self.repeats} times; set "
               "temperature > 0 to sample them, or repeats = 1")

    def for_repeat(self, repeat: int) -> Sampling:
        """The request-level settings of sample number `repeat`, its seed drawn from the run's and the
        repeat (`stream_seed`: seed + repeat made repeat 1 of seed 0 the draws of repeat 0 of seed 1,
        so two runs a seed apart shared most of their verdicts): one object per repeat, made and
        checked once (a million-request plan asked for it a million times)."""
        return _for_repeat(self, repeat)


@functools.lru_cache(maxsize=256)
def _for_repeat(config: SamplingConfig, repeat: int) -> Sampling:
    seed = None if config.greedy else stream_seed(config.seed or 0, repeat)
    return Sampling(config.temperature, config.top_p, seed, config.max_tokens)
