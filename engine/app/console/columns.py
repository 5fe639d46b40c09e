"""Listings in aligned columns (`litjudge judges`, `litjudge protocols`): each column as wide as its
widest cell, so a long name (an alias, a plugin's backend) never pushes the cells after it out of line."""
from __future__ import annotations

from collections.abc import Sequence

GAP = "  "


def aligned(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """The header and the rows as lines, every column starting at the same place (the last not padded)."""
    table = [[str(c) for c in header], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in table if i < len(r)) for i in range(max(len(r) for r in table))]
    return [GAP.join(cell.ljust(widths[i]) if i < len(row) - 1 else cell for i, cell in enumerate(row)).rstrip()
            for row in table]
