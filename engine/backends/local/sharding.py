"""How a plan is spread over several engines (replicas) without losing the prefix cache.

Requests that share a long prompt prefix (one story's tests, a pair's two orders, the cells of a
sweep that ask about the same text) form a prefix group, and a group always goes to one replica,
so that replica's prefix cache serves it. Groups are dealt to replicas balancing prompt tokens
(largest first, to the least loaded), and a replica that runs out of work takes unstarted groups
from the replica with the most tokens left (work stealing). Pure data: no Ray in here.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from ...core.planner import common_prefix
from ...core.requests import Prepared

SHARED_FRACTION = 0.5     # a request joins the previous group when it shares half its prompt with it
MIN_SHARED_TOKENS = 64    # ... and at least this many tokens (a shared chat header alone is not enough)


def prefix_groups(prepared: Sequence[Prepared]) -> list[list[Prepared]]:
    """Consecutive requests of a prefix-sorted plan that share a long prefix, grouped."""
    groups: list[list[Prepared]] = []
    prev: Sequence[int] = ()
    for p in prepared:
        shared = common_prefix(prev, p.token_ids)
        if groups and shared >= MIN_SHARED_TOKENS and shared >= SHARED_FRACTION * min(len(prev), p.prompt_tokens):
            groups[-1].append(p)
        else:
            groups.append([p])
        prev = p.token_ids
    return groups


def tokens(group: Sequence[Prepared]) -> int:
    return sum(p.prompt_tokens for p in group)


@dataclass
class Shards:
    """Per replica, the prefix groups not yet dispatched (a deque each), kept balanced by tokens."""

    queues: dict[int, deque[list[Prepared]]] = field(default_factory=dict)

    @classmethod
    def deal(cls, groups: Sequence[list[Prepared]], replicas: Sequence[int]) -> Shards:
        """Largest group first to the replica with the fewest tokens; each queue then runs in the
        plan's prefix order again, so neighbouring groups stay neighbours."""
        load = {r: 0 for r in replicas}
        chosen: dict[int, list[tuple[int, list[Prepared]]]] = {r: [] for r in replicas}
        order = sorted(range(len(groups)), key=lambda i: -tokens(groups[i]))
        for i in order:
            r = min(load, key=lambda x: (load[x], x))
            chosen[r].append((i, groups[i]))
            load[r] += tokens(groups[i])
        return cls({r: deque(g for _, g in sorted(chosen[r], key=lambda t: t[0])) for r in replicas})

    def left(self, replica: int) -> int:
        return sum(tokens(g) for g in self.queues.get(replica, ()))

    def take(self, replica: int, max_requests: int) -> list[Prepared]:
        """The next chunk for `replica`: its own groups first, then groups stolen from the back of
        the most loaded queue. Whole groups only; at least one group when any work is left."""
        chunk: list[Prepared] = []
        while len(chunk) < max_requests:
            own = self.queues.get(replica)
            if own:
                chunk += own.popleft()
                continue
            donors = [r for r, q in self.queues.items() if q and r != replica]
            if not donors:
                break
            richest = max(donors, key=self.left)
            chunk += self.queues[richest].pop()
        return chunk

    def give_back(self, groups: Sequence[list[Prepared]], replicas: Sequence[int]) -> None:
        """Work of a lost replica, dealt again to the living ones (their queues, balanced)."""
        for group in groups:
            r = min(replicas, key=lambda x: (self.left(x), x))
            self.queues.setdefault(r, deque()).append(group)

    def drop(self, replica: int) -> list[list[Prepared]]:
        return list(self.queues.pop(replica, deque()))

    @property
    def empty(self) -> bool:
        return not any(self.queues.values())
