"""A later run's human labels from an annotation queue (`[ppi] labelled = "annotations:RUN"`): the
queue of RUN reopened with its stored settings (the same clusters, probabilities and draws), each
item's label the majority of its annotators' standing answers on the quantity's 0/1 scale (an even
split counts 0.5, the mean of the two sides), checked at the edge before any model work."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from types import MappingProxyType

from litjudge.judges.ppi_annotated import Annotated

from ...core.config import RunConfig
from ...core.errors import ConfigError
from .estimate import latest
from .labels import FILE
from .queue_store import Options, open_queue


def annotated_folder(config: RunConfig) -> Path:
    """The annotated run folder, relative to the config file (else the working folder)."""
    given = Path(config.ppi.annotations).expanduser()
    base = Path(config.source).resolve().parent if config.source and Path(config.source).is_file() else Path.cwd()
    return given if given.is_absolute() else base / given


def majority(scores: list[float]) -> float:
    share = sum(scores) / len(scores)
    return 1.0 if share > 0.5 else 0.0 if share < 0.5 else 0.5


def load_annotations(config: RunConfig) -> Annotated | None:
    """The labels `config.ppi` names (None unless labelled = "annotations:RUN"); a missing or empty
    store, another protocol's queue or an answer outside the protocol's is one line."""
    if not config.ppi.annotations:
        return None
    folder = annotated_folder(config)
    where, key = config.source or "config", "ppi.labelled"
    if folder.name == FILE:                  # the store itself named: its run folder is meant
        raise ConfigError(f'give the run folder that holds {FILE}: labelled = "annotations:{folder.parent}"',
                          where=where, key=key)
    if not (folder / FILE).is_file():
        raise ConfigError(f"no annotation store in {folder} ({FILE}): label its items with `litjudge annotate "
                          f"{folder}` first", where=where, key=key)
    queue, labels = open_queue(folder, Options())
    try:
        rows = labels.rows()
    finally:
        labels.close()
    if queue.protocol != config.protocol:
        raise ConfigError(f"the annotations of {folder} are of a {queue.protocol} run; this run's protocol is "
                          f"{config.protocol}", where=where, key=key)
    if not rows:
        raise ConfigError(f"the annotation store of {folder} holds no label yet: annotate first "
                          f"(`litjudge annotate {folder}`)", where=where, key=key)
    bad = next((r for r in rows if r.label not in queue.labels), None)
    if bad is not None:
        raise ConfigError(f"the annotations of {folder} answer item {bad.item[:60]!r} with {bad.label[:40]!r}, not an "
                          f"answer of protocol {queue.protocol} ({', '.join(queue.labels)})", where=where, key=key)
    votes: dict[str, list[float]] = {}
    for (_, item), (cluster, label) in latest([asdict(r) for r in rows]).items():
        votes.setdefault(item, []).append(queue.score(cluster, label))
    d = queue.design
    return Annotated(str(folder), queue.protocol, d.clusters, tuple(float(p) for p in d.probability),
                     tuple(int(c) for c in d.draws), MappingProxyType({i: majority(v) for i, v in votes.items()}),
                     d.floor, d.seed, frozenset(q.item for c in queue.clusters for q in c.questions if q.counted),
                     queue.min_draws)
