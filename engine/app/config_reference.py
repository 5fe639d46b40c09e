"""The configuration reference: every key a run, sweep, ensemble or dataset config accepts, with its
type, default, allowed values and one-line doc, read from the dataclasses the loader builds
(`engine/core/config.py` and the tables it holds, the sweep's and the ensemble's tables, dataset
cards, each protocol's options) by `field_docs`. One source for the docs site's reference page and
`litjudge config --explain KEY`; a test checks that it lists exactly the keys the loader accepts."""
from __future__ import annotations

import dataclasses
import inspect
import typing
from dataclasses import dataclass
from typing import Any

from litjudge.judges import PROTOCOLS

from ..core.config import TASK_KEYS, RunConfig
from ..core.errors import ConfigError, did_you_mean
from ..core.schema import extra_keys
from ..data.cards import DatasetCard
from .ensemble import EnsembleConfig
from .field_docs import allowed_values, default_of, describe_type, field_docs, show_default
from .sweep import MATRIX_TABLES, MATRIX_TOP, SweepSpec

# Keys the loader sets itself (a config file cannot): they are not part of the reference.
SET_BY_LOADER = {RunConfig: ("source",), EnsembleConfig: ("source",), DatasetCard: ("base",)}
# Values a class cannot be built without, so that one field at a time can be given a probe.
REQUIRED: dict[type, dict[str, Any]] = {
    RunConfig: {"name": "x", "protocol": "p", "dataset": "d"},
    DatasetCard: {"name": "x", "title": "x", "loader": "x", "path": "x"},
    EnsembleConfig: {"runs": [{"config": "x"}]},
}


@dataclass(frozen=True)
class Entry:
    """One key of the reference."""

    key: str                 # as a config writes it, tables joined by dots: "engine.dtype", "options.threshold"
    type: str
    default: str
    allowed: str             # the validator's words ("" when any value of the type is taken)
    doc: str
    section: str             # the table it belongs to, e.g. "[engine]"
    value: Any = None        # the default as a Python value (dataclasses.MISSING when required)


@dataclass(frozen=True)
class Section:
    """A table of a config: its title, what it is for (the class's docstring) and its keys."""

    title: str
    kind: str                # "run", "dataset", "protocol options", "sweep", "ensemble"
    doc: str
    entries: tuple[Entry, ...]


def _first_paragraph(text: str | None) -> str:
    return " ".join((text or "").strip().split("\n\n")[0].split())


def _table_type(annotation: Any) -> type | None:
    """The dataclass a field holds (`CascadeOptions | None` holds CascadeOptions), if any."""
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):     # a class (a hint is never an instance)
        return annotation
    for arg in typing.get_args(annotation):
        if isinstance(arg, type) and dataclasses.is_dataclass(arg):
            return arg
    return None


def _entries(cls: type, prefix: str, section: str) -> tuple[list[Entry], list[tuple[str, type]]]:
    """The keys of table `cls` under `prefix`, and the tables nested in it (key, dataclass)."""
    hints, docs = typing.get_type_hints(cls), field_docs(cls)
    out, nested = [], []
    for f in dataclasses.fields(cls):
        if not f.init or f.name in SET_BY_LOADER.get(cls, ()):
            continue
        value, table = default_of(f), _table_type(hints[f.name])
        doc = docs.get(f.name) or (_first_paragraph(table.__doc__).split(": ", 1)[-1] if table else "")
        out.append(Entry(prefix + f.name, describe_type(hints[f.name]), show_default(value),
                         allowed_values(cls, f.name, REQUIRED.get(cls, {})), doc, section, value))
        if table is not None:
            nested.append((prefix + f.name, table))
    out += [Entry(prefix + name, describe_type(key.type), show_default(key.default), "", key.doc, section, key.default)
            for name, key in extra_keys(cls).items()]
    return out, nested


def _table(cls: type, key: str, kind: str, title: str = "") -> list[Section]:
    """The section of table `cls` (at `key`) and, after it, one per table nested in it."""
    title = title or (f"[{key}]" if key else "top level")
    entries, nested = _entries(cls, f"{key}." if key else "", title)
    sections = [Section(title, kind, _first_paragraph(cls.__doc__), tuple(entries))]
    for child_key, child in nested:
        sections += _table(child, child_key, kind)
    return sections


def _tasks() -> Section:
    """`[[tasks]]`: a name, and any of the keys a task may set for itself (as at the top level)."""
    top = {e.key: e for e in _entries(RunConfig, "", "")[0]}
    entries = [Entry("tasks[].name", "str", "required", "letters, digits, '-' and '_' only",
                     "the task's name: its folder under the run's outputs", "[[tasks]]", dataclasses.MISSING)]
    entries += [Entry(f"tasks[].{k}", top[k].type, "the run's", top[k].allowed,
                      f"this task's own `{k}` (as the top-level key): {top[k].doc}", "[[tasks]]", top[k].value)
                for k in TASK_KEYS]
    return Section("[[tasks]]", "run", "Several tasks in one run, each with its own protocol, dataset and options; "
                   "the judges, engine and cluster are shared, so each judge's engine starts once.", tuple(entries))


def _protocol_sections() -> list[Section]:
    """`[options]`, one section per registered protocol, from its options dataclass."""
    sections = []
    for name in PROTOCOLS.names():
        protocol = PROTOCOLS.get(name)
        declared = protocol.declared
        entries, nested = _entries(declared.options, "options.", f"[options] ({name})")
        entries = [dataclasses.replace(e, doc=e.doc + " (aggregate-only: a sweep varies it under [sweep.post] at "
                                       "no model cost)") if e.key.removeprefix("options.") in declared.post_options
                   else e for e in entries]
        doc = _first_paragraph(inspect.getmodule(protocol).__doc__)
        sections.append(Section(f"[options] ({name})", "protocol options", f"Protocol `{name}`: {doc}", tuple(entries)))
        sections += [_listed(key, table, name) for key, table in nested]
    return sections


def _listed(key: str, table: type, protocol: str) -> Section:
    """A list of tables an option holds (a rubric's `[[options.questions]]`): the keys of each entry."""
    title = f"[[{key}]] ({protocol})"
    entries, _ = _entries(table, f"{key}[].", title)
    return Section(title, "protocol options", _first_paragraph(table.__doc__), tuple(entries))


def _sweep_sections() -> list[Section]:
    """`[matrix]` (axes that need inference) and `[sweep]` with `[sweep.post]` (axes that do not)."""
    axes = [Entry(f"matrix.{axis}", "list", "", "", f"values of the run's `{axis}`: one cell each", "[matrix]", [])
            for axis in MATRIX_TOP]
    axes += [Entry(f'matrix."{table}.NAME"', "list", "", "", f"values of `{table}.NAME` (any key of "
                   f"[{table}]): one cell each", "[matrix]", []) for table in MATRIX_TABLES]
    post = {name: PROTOCOLS.get(name).declared.post_options for name in PROTOCOLS.names()}
    posts = "; ".join(f"{p}: {', '.join(o)}" for p, o in post.items() if o)
    spec = _table(SweepSpec, "sweep", "sweep")
    post_entry = Entry('sweep.post."options.NAME"', "list", "", "an aggregate-only option of the protocol",
                       f"values of an aggregate-only option, tried on every cell's stored verdicts ({posts})",
                       "[sweep]", [])
    return [Section("[matrix]", "sweep", "A run config with a [matrix] is a sweep: every combination of the axes "
                    "is a cell, validated as a full run config before anything runs.", tuple(axes)),
            dataclasses.replace(spec[0], entries=spec[0].entries + (post_entry,))]


def _ensemble_sections() -> list[Section]:
    """An ensemble config: its top level, `[[runs]]`, `[cascade]` and `[jury]`."""
    top = _table(EnsembleConfig, "", "ensemble", title="ensemble top level")
    runs = (Entry("runs[].config", "str", "required", "", "the member's run config: a path relative to this file, "
                  "or a committed config's name", "[[runs]]", dataclasses.MISSING),
            Entry("runs[].KEY", "any", "", "", "any run-config key: overrides the member config's own", "[[runs]]", None))
    assert {s.title for s in top[1:]} == {"[cascade]", "[jury]"}, "the ensemble's tables changed: list them here"
    return [top[0], Section("[[runs]]", "ensemble", "The member runs, each run (resuming) before the ensemble is built.",
                            runs), *top[1:]]


def sections() -> list[Section]:
    """Every table of every kind of config, in the order the reference page lists them."""
    run = _table(RunConfig, "", "run")
    card = _table(DatasetCard, "dataset", "dataset", title="[dataset]")
    return [*run, _tasks(), *card, *_protocol_sections(), *_sweep_sections(), *_ensemble_sections()]


def entries() -> list[Entry]:
    return [e for s in sections() for e in s.entries]


def explain(key: str) -> list[Entry]:
    """The entries a user means by `key`: the key itself (`engine.dtype`, `[engine]` for a table's
    keys, `options.threshold` in every protocol that has it; a list of tables with the keys of its
    tables, `options.questions` with `options.questions[].scale`, which its doc calls "the keys
    below"), else every key ending in it (`dtype`)."""
    key = key.strip().strip("[]").strip()
    everything = entries()
    exact = [e for e in everything if e.key == key]
    found = ([*exact, *(e for e in everything if e.key.startswith(key + "[]."))] if exact else
             [e for e in everything if e.key.startswith(key + ".")] or [e for e in everything if e.key.endswith("." + key)])
    if not found:
        hint = did_you_mean(key, sorted({e.key for e in everything}), n=3) or " (`litjudge config` lists every key)"
        raise ConfigError(f"no config key {key!r}{hint}")
    return found


def as_text(entry: Entry) -> str:
    """One entry as the console prints it."""
    lines = [f"{entry.key}  ({entry.section})", f"  type:    {entry.type}", f"  default: {entry.default or '-'}"]
    if entry.allowed:
        lines.append(f"  allowed: {entry.allowed}")
    return "\n".join([*lines, f"  {entry.doc}" if entry.doc else "  (no doc)"])


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ") or " "


def markdown() -> str:
    """The reference page: one table per section, headed by what it is for."""
    out = ["# Configuration reference", "",
           "Every key a config file accepts, generated from the dataclasses the loader validates with "
           "(`engine/core/config.py` and the tables it holds, `engine/app/sweep.py`, `engine/app/ensemble.py`, "
           "`engine/data/cards.py`, each protocol's options): the doc is the comment beside the field in the code, "
           "*allowed* is the validator's own refusal. `litjudge config --explain KEY` prints the same entry.", ""]
    kind = ""
    for s in sections():
        if s.kind != kind:
            kind = s.kind
            out += [f"## {KIND_TITLES[kind]}", ""]
        out += [f"### {s.title}", "", s.doc, "", "| key | type | default | allowed | doc |", "|---|---|---|---|---|"]
        out += [f"| `{e.key}` | {_cell(e.type)} | {_cell(e.default and f'`{e.default}`')} | {_cell(e.allowed)} | "
                f"{_cell(e.doc)} |" for e in s.entries]
        out.append("")
    return "\n".join(out)


KIND_TITLES = {"run": "Run config", "dataset": "Datasets: an inline [dataset] table, or a card file",
               "protocol options": "Protocol options", "sweep": "Sweep config", "ensemble": "Ensemble config"}
