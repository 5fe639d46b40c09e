"""The `ppi` table from an annotation queue's labels (`[ppi] labelled = "annotations:RUN"`): the
items people labelled in `litjudge annotate RUN` were drawn with unequal probabilities (the
queue's design, judges/metrics/active.py), so the uniform PPI++ formula of judges/metrics/ppi.py
would weight them wrongly. The table keeps its columns and takes its estimates from the active
estimator instead: Hansen-Hurwitz weights 1/p over the longest labelled prefix of the draws, the
human-only estimate with lam = 0 and the powered one with lam tuned, this run's judge as the
control variate (any fixed function of the item is a valid one). The target is the quantity over
the queue's clusters; the run must judge every one of them."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl

from litjudge.engine.core.errors import ConfigError

from .metrics import active
from .metrics.draws_needed import Totals, min_draws


@dataclass(frozen=True)
class Annotated:
    """An annotation queue's design and its labels, read by the app (engine/app/annotate/annotations.py)."""

    source: str                          # the annotated run folder (named in messages)
    protocol: str
    clusters: tuple[str, ...]            # every cluster of the queue, in its order (the population)
    probability: tuple[float, ...]       # each one's draw probability
    draws: tuple[int, ...]               # the draw sequence (indices into clusters)
    human: Mapping[str, float]           # item -> the annotators' majority on the 0/1 scale (0.5: a tie)
    floor: float = 0.2
    seed: int = 0
    # the items the queue asks in its quantity (a TTCW test no judge of the annotated run answered is
    # not asked): a later run's rows of other items in the queue's clusters are not its population
    asked: frozenset[str] = frozenset()
    # the labelled draws the queue's page waits for before its active interval (`Queue.min_draws`, of
    # the annotated run's judges): this table never gives an interval the page withholds
    min_draws: int = active.MIN

    def design(self) -> active.Design:
        return active.Design(self.clusters, np.asarray(self.probability, dtype=float),
                             np.asarray(self.draws, dtype=np.int64), self.floor, self.seed)


def human_value(annotated: Annotated, item: str) -> pl.Expr:
    """The annotated majority of each row's item (null where nobody annotated it)."""
    return pl.col(item).cast(pl.Utf8).replace_strict(dict(annotated.human), default=None, return_dtype=pl.Float64)


def labelled_prefix(items: pl.DataFrame, annotated: Annotated, cluster: str) -> tuple[int, list[str], list[str]]:
    """The labelled draws' prefix (a cluster is labelled when every one of its items in this run has
    an annotation), the clusters read in it, and the labelled ones it holds back (drawn after the
    first draw not labelled whole: the design reads no draw past it). Refuses a run that does not
    judge every cluster of the queue: its estimate would be of another population."""
    have = set(items[cluster].cast(pl.Utf8).unique().to_list())
    missing = [c for c in annotated.clusters if c not in have]
    if missing:
        raise ConfigError(f"the annotations of {annotated.source} were drawn over {len(annotated.clusters)} clusters, "
                          f"{len(missing)} of which this run does not judge (e.g. {missing[0][:60]!r}): annotate a "
                          "run of the same data", key="ppi.labelled")
    done = (items.group_by(pl.col(cluster).cast(pl.Utf8)).agg(pl.col("_y").is_not_null().all().alias("ok"))
            .filter(pl.col("ok"))[cluster].to_list())
    index = {c: i for i, c in enumerate(annotated.clusters)}
    k = active.labelled_prefix(annotated.design(), {index[c] for c in done if c in index})
    read = sorted({annotated.clusters[i] for i in annotated.draws[:k]})
    return k, read, sorted(set(done) & set(index) - set(read))


def estimates(items: pl.DataFrame, annotated: Annotated, cluster: str, k: int) -> dict[str, object]:
    """One cell's columns (its rows: `items` with _f, _y, _h): human-only and powered active
    estimates over the first `k` draws, the rectifier, n_eff and the counts."""
    design = annotated.design()
    index = {c: i for i, c in enumerate(annotated.clusters)}
    counted = (items.with_columns(pl.col(cluster).cast(pl.Utf8).replace_strict(index, default=None).alias("_c"))
               .filter(pl.col("_c").is_not_null()))
    per = counted.group_by("_c").agg(pl.col("_f").sum(), pl.col("_y").sum(), pl.len().alias("_m"))
    n = len(annotated.clusters)
    c_idx = per["_c"].to_numpy().astype(np.int64)
    f, m, y = np.zeros(n), np.zeros(n), np.zeros(n)
    f[c_idx], m[c_idx], y[c_idx] = per["_f"].to_numpy(), per["_m"].to_numpy(), per["_y"].to_numpy()
    read = sorted(set(design.draws[:k].tolist()))
    human = {c: float(y[c]) for c in read}
    # the draws the active interval waits for: the page's (the queue's judges'), or more where this
    # run's judge asks more (each item's value as its P(Yes), its Yes counts drawn from it). With this
    # judge's alone, a label-mode judge's 0/1 answers asked 10 where the page waited for 54, and the
    # table printed three intervals the page withheld (an audit).
    p_yes, at = counted["_f"].to_numpy(), counted["_c"].to_numpy().astype(np.int64)
    needs = max(annotated.min_draws, min_draws(design.probability, f, m, Totals.binary(p_yes, at, n),
                                               seed=design.seed))
    powered = active.estimate(design, f, m, human, k, needs=needs)
    alone = active.estimate(design, f, m, human, k, lam=0.0)
    p, drawn = design.probability[design.draws[:k]], design.draws[:k]
    rectifier = float(((y[drawn] - powered.lam * f[drawn]) / p).sum() / (m[drawn] / p).sum()) if k else float("nan")
    labelled_items = int(m[read].sum())
    note = powered.note if powered.note == alone.note else \
        "; ".join(f"{who}: {why}" for who, why in (("human-only", alone.note), ("active", powered.note)) if why)
    # the row's own clusters: a drawn story with no item in it (a test no judge answered there) is
    # neither a labelled nor an unlabelled one of this row (9 and 25 were printed for 8 and 26)
    held = m > 0
    labelled_clusters = int(held[read].sum()) if read else 0
    return {"n_labelled": labelled_items, "n_unlabelled": int(m.sum()) - labelled_items, "clusters": labelled_clusters,
            "unlabelled_clusters": int(held.sum()) - labelled_clusters, "human_only": alone.value,
            "human_low": alone.low, "human_high": alone.high, "ppi": powered.value, "ppi_low": powered.low,
            "ppi_high": powered.high, "lambda": powered.lam, "rectifier": rectifier, "n_eff": powered.n_eff,
            "ci_note": note or None}
