"""Central rankings of several orders of the same items (permutation self-consistency, Tang et al.
2023): the Kemeny ranking minimises the total number of pairwise disagreements (Kendall tau
distance) with the input rankings.

Exact by enumeration up to `EXACT_MAX` items (8! = 40,320 orders); beyond that, a documented
approximation: the Borda ranking (mean position), improved by swapping adjacent items while that
lowers the total distance (a local optimum; Kemeny is NP-hard in general).

>>> kemeny([["a", "b", "c"], ["a", "c", "b"], ["b", "a", "c"]])
['a', 'b', 'c']
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence
from itertools import combinations, permutations

EXACT_MAX = 8


def pairwise_wins(rankings: Sequence[Sequence[Hashable]]) -> dict[tuple[Hashable, Hashable], int]:
    """wins[(x, y)]: how many rankings put x before y."""
    wins: dict[tuple[Hashable, Hashable], int] = {}
    for r in rankings:
        pos = {item: i for i, item in enumerate(r)}
        for x, y in combinations(r, 2):
            first, second = (x, y) if pos[x] < pos[y] else (y, x)
            wins[(first, second)] = wins.get((first, second), 0) + 1
    return wins


def disagreements(order: Sequence[Hashable], wins: dict[tuple[Hashable, Hashable], int]) -> int:
    """Total Kendall distance of `order` to the rankings behind `wins`."""
    return sum(wins.get((y, x), 0) for i, x in enumerate(order) for y in order[i + 1:])


def kemeny(rankings: Sequence[Sequence[Hashable]]) -> list[Hashable]:
    """The central ranking (ties between equally good orders broken by the Borda order)."""
    if not rankings:
        return []
    items = list(rankings[0])
    if any(sorted(map(str, r)) != sorted(map(str, items)) for r in rankings):
        raise ValueError("every ranking must order the same items")
    wins = pairwise_wins(rankings)
    borda = sorted(items, key=lambda x: (sum(r.index(x) for r in map(list, rankings)), str(x)))
    if len(items) <= EXACT_MAX:
        return list(min(permutations(borda), key=lambda order: disagreements(order, wins)))
    order, improved = borda, True
    while improved:
        improved = False
        for i in range(len(order) - 1):
            x, y = order[i], order[i + 1]
            if wins.get((y, x), 0) > wins.get((x, y), 0):
                order[i], order[i + 1] = y, x
                improved = True
    return order
