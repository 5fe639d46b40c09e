"""A progress bar for long work: requests/s, prompt tokens/s, prefix-cache hit rate, ETA."""
from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass, field

from tqdm import tqdm as console_tqdm

from .console import terminal
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


def bar_class() -> type[console_tqdm]:
    """tqdm.auto's bar (a widget in a Jupyter notebook) where ipywidgets can draw it, else the
    console's: tqdm's notebook bar fails at its first update when ipywidgets is absent, and
    importing tqdm.auto in a notebook without it prints a TqdmWarning (`litjudge[notebook]`
    installs ipywidgets)."""
    if not importlib.util.find_spec("ipywidgets"):
        return console_tqdm
    from tqdm.auto import tqdm as auto_tqdm
    return auto_tqdm


class RunProgress:
    """The bar appears once there is work (a run whose verdicts are all stored prints none); a
    streamed plan adds to its total chunk by chunk."""

    def __init__(self, total: int, label: str, enabled: bool = True):
        self.stats = Throughput()
        self.start = self.shown = time.perf_counter()
        self.label, self.enabled = label, enabled
        self.bar: console_tqdm | None = None
        if total:
            self.grow(total)

    def grow(self, n: int) -> None:
        if not self.enabled or n <= 0:
            return
        if self.bar is None:
            self.shown = time.perf_counter()            # the rates count from here: not the planning before it
            self.bar = bar_class()(total=n, desc=self.label, unit="req", dynamic_ncols=True, file=terminal(),
                                   mininterval=0.5, disable=False)
        else:
            self.bar.total += n
            self.bar.refresh()

    def update(self, g: Generation, note: str = "") -> None:
        self.stats.add(g)
        if self.bar is None:
            return
        dt = max(time.perf_counter() - self.shown, 1e-9)
        self.bar.set_postfix_str(f"{self.stats.requests / dt:.2f} req/s, {self.stats.prompt_tokens / dt:,.0f} "
                                 f"prompt tok/s, cache hit {100 * self.stats.cache_hit_rate:.0f}%"
                                 + (f"; {note}" if note else ""), refresh=False)
        self.bar.update(1)

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
