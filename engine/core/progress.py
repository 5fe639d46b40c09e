"""A progress bar for long work: requests/s, prompt tokens/s, prefix-cache hit rate, ETA."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from .requests import Generation


@dataclass
class Throughput:
    """Running counters the progress bar and the manifest read."""

    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    extra: dict[str, float] = field(default_factory=dict)

    def add(self, g: Generation) -> None:
        self.requests += 1
        self.prompt_tokens += g.prompt_tokens
        self.cached_tokens += g.cached_tokens
        self.output_tokens += g.output_tokens

    @property
    def cache_hit_rate(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


class RunProgress:
    def __init__(self, total: int, label: str, enabled: bool = True):
        from tqdm import tqdm

        self.stats = Throughput()
        self.start = time.perf_counter()
        self.bar = tqdm(total=total, desc=label, unit="req", dynamic_ncols=True, file=sys.stderr,
                        disable=not enabled or total == 0, mininterval=0.5)

    def update(self, g: Generation, note: str = "") -> None:
        self.stats.add(g)
        dt = max(time.perf_counter() - self.start, 1e-9)
        self.bar.set_postfix_str(f"{self.stats.requests / dt:.2f} req/s, {self.stats.prompt_tokens / dt:,.0f} "
                                 f"prompt tok/s, cache hit {100 * self.stats.cache_hit_rate:.0f}%"
                                 + (f"; {note}" if note else ""), refresh=False)
        self.bar.update(1)

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def close(self) -> None:
        self.bar.close()
