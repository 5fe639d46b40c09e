"""A rubric question's column in the data: which of a row's values `human = ...` and
`reference = ...` name (a field, a column [dataset.columns] renamed, or another column of yours)."""
from __future__ import annotations

from typing import Any

from litjudge.engine.core.errors import ConfigError, did_you_mean
from litjudge.engine.data.items import ITEM_FIELDS, RatedItem
from litjudge.engine.data.pairs import PAIR_FIELDS, Pair
from litjudge.engine.data.readers import missing_value

from .base import Context


def column(ctx: Context, row: RatedItem | Pair, name: str) -> Any:
    """A question's column in a text's (or pair's) row: a field, a column [dataset.columns] renamed (by
    your name for it), or another column. None for a missing value (null, NaN, a blank string); an
    absent column, or a field's name that [dataset.columns] reads from another column, is one line."""
    renamed = {c: f for f, c in ctx.card.columns.items() if not str(c).startswith("=")}
    own = ITEM_FIELDS if isinstance(row, RatedItem) else PAIR_FIELDS
    field, source = renamed.get(name, name), ctx.card.columns.get(name, name)
    if name in own and name not in renamed and source != name:   # it read that column, not yours of this name
        raise ConfigError(f"column {name!r} is litjudge's field {name}, which [dataset.columns] reads from your column "
                          f"{source!r}: name that column here; a column of yours named {name!r} is not read (rename "
                          "it)", where=ctx.config.source or "config", key=_question_key(ctx, name))
    if field in own:
        value = getattr(row, field)
    elif name in row.extra:
        value = row.extra[name]
    else:
        have = [c for f in own if getattr(row, f) not in (None, "") and ((c := ctx.card.columns.get(f, f)) in renamed
                                                                          or f not in ctx.card.columns)] + list(row.extra)
        unit = f"item {row.item_id!r}" if isinstance(row, RatedItem) else f"pair {row.pair_id!r}"
        raise ConfigError(f"column {name!r} is not in the data: {unit} has no such column{did_you_mean(name, have)} "
                          f"(columns: {', '.join(map(str, have))[:300]})", where=ctx.config.source or "config",
                          key=_question_key(ctx, name))
    return None if missing_value(value) else value


def _question_key(ctx: Context, column: str) -> str:
    return next((f"options.questions[{n}]" for n, q in enumerate(ctx.options.questions)
                 if column in (q.human, q.reference)), "options.questions")
