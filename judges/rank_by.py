"""What a sweep ranks by: a protocol's rankable estimate and, asked explicitly, one group of its
table, parsed against the protocol's declaration."""
from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from .contract import Declaration


@dataclass(frozen=True)
class RankBy:
    """What a sweep ranks by: a protocol's rankable estimate (`table.metric`) and, only when asked
    explicitly, one group of its table (`col=value,...`; "" = the protocol's pooled row)."""

    name: str
    group: str = ""

    @property
    def table(self) -> str:
        return self.name.partition(".")[0]

    @property
    def metric(self) -> str:
        return self.name.partition(".")[2]

    def where(self) -> dict[str, str]:
        """The explicit group as column -> value ({} for the pooled estimate)."""
        return group_columns(self.group)

    def __str__(self) -> str:
        return f"{self.name}@{self.group}" if self.group else self.name


def group_columns(group: str) -> dict[str, str]:
    """A tidy group (`col=value,...`, as tables' rows and `rank_by` name them) as column -> value; a
    part without '=' (the pooled row, "all") names no column."""
    return dict(part.split("=", 1) for part in group.split(",") if "=" in part)


def units_where(frame: pl.DataFrame, rank: RankBy) -> pl.DataFrame | None:
    """The rows of a unit frame in `rank`'s explicit group (None: a column it names is not there)."""
    for column, value in rank.where().items():
        if column not in frame.columns:
            return None
        frame = frame.filter(pl.col(column).cast(pl.Utf8) == value)
    return frame


def parse_rank_by(protocol: str, declared: Declaration, text: str) -> RankBy:
    """`table.metric` (the pooled estimate) or `table.metric@col=value[,col=value]` (one group,
    asked explicitly, in the form its table's tidy rows carry); ValueError naming what is rankable."""
    name, _, group = text.partition("@")
    rankable = declared.rank_metrics
    if name not in rankable:
        raise ValueError(f"protocol {protocol!r} cannot rank by {name!r}: a sweep ranks by one of "
                         f"{', '.join(rankable)} (each has a direction: higher or lower is better)")
    if not group and rankable[name] is None:
        raise ValueError(f"{name!r} has a value per group and no pooled one: name the group, e.g. "
                         f"{name}@COLUMN=VALUE")
    if group and not all(part.count("=") == 1 and part.split("=")[0] for part in group.split(",")):
        raise ValueError(f"the group after '@' is COLUMN=VALUE[,COLUMN=VALUE], got {group!r}")
    if not group:
        return RankBy(name, group)
    # a row is named by every column its table groups by, in the table's order (the form its
    # tidy rows carry): another order, or a column left out, matched no row, and the ranking was
    # empty ("data without human labels?")
    where = RankBy(name, group).where()
    named = [part.split("=")[0] for part in group.split(",")]
    twice = next((c for c in named if named.count(c) > 1), None)
    if twice:
        raise ValueError(f"the group after '@' names {twice!r} twice ({group!r}): a row has one value of each column")
    columns = declared.metric_tables.get(name.partition(".")[0], ())
    unknown = [c for c in where if c not in columns]
    if unknown or len(where) != len(group.split(",")):
        raise ValueError(f"{name.partition('.')[0]} has no column {unknown[0] if unknown else group!r} to pick a "
                         f"row by (its rows: {', '.join(columns) or 'one pooled row'})")
    missing = [c for c in columns if c not in where]
    if missing:
        raise ValueError(f"{name}@{group} names no {', '.join(missing)}: a row of {name.partition('.')[0]} is "
                         f"named by each of {', '.join(columns)} (e.g. {name}@" + ",".join(
                             f"{c}={where.get(c, 'VALUE')}" for c in columns) + ")")
    chosen = ",".join(f"{c}={where[c]}" for c in columns)
    # the pooled row named explicitly ("@order=mean of both") is the pooled estimate: its units are
    # every row's (filtered by a value no verdict holds, it had none: no interval, 0 clusters)
    return RankBy(name, "" if chosen == rankable[name] else chosen)
