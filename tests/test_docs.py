"""Docs that cannot rot: the README stays short and names every protocol as registered, the
configuration reference lists exactly the keys the loader accepts, the site builds with
`mkdocs build --strict` and references nothing outside itself, and every example of the README
and the site runs (tests/docs_examples.py)."""
import dataclasses
import html
import os
import re
import resource
import subprocess
import sys
import time
import typing
from pathlib import Path

import pytest

from litjudge.engine.app import config_reference
from litjudge.engine.app.ensemble import EnsembleConfig, load_ensemble
from litjudge.engine.app.sweep import MATRIX_TOP, SweepSpec, load_sweep
from litjudge.engine.core.config import TASK_KEYS, RunConfig, load_config
from litjudge.engine.core.errors import ConfigError
from litjudge.engine.core.schema import extra_keys
from litjudge.engine.data.cards import DatasetCard, dataset_card
from litjudge.judges import PROTOCOLS
from tests.chromium import CHROMIUM, page_value
from tests.conftest import DATA, PROJECT_ROOT, litjudge
from tests.docs_examples import Interpreter, example_env, run_page

README = PROJECT_ROOT / "README.md"
PAGES = [README, *sorted((PROJECT_ROOT / "docs").rglob("*.md"))]
REFUSED = ("unknown key", "not a matrix axis", "not an aggregate-only option", "is shared by every task")


def test_the_readme_is_read_in_five_minutes():
    assert len(README.read_text(encoding="utf-8")) <= 8000


def test_the_readme_protocol_table_is_the_registry():
    """Each registered protocol is a row of the README's table, with the data kind it reads and its modes."""
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+)` \|.*$", README.read_text(), re.M)}
    for name in PROTOCOLS.names():
        declared = PROTOCOLS.get(name).declared
        assert name in rows, f"README: no row for protocol {name}"
        cells = [c.strip() for c in rows[name].strip("|").split("|")]
        assert declared.reads in cells, f"README: protocol {name} reads {declared.reads}: {cells}"
        assert ", ".join(declared.modes) in cells, f"README: protocol {name} modes {declared.modes}: {cells}"


def test_the_readme_names_the_python_run_folder_as_it_is_made(tmp_path):
    """The README's Python example named `runs/out/pairwise-python/...`; the folder `litjudge.judge`
    makes is `pairwise-python-<hash>`."""
    import litjudge
    from tests.test_python_api import COLUMNS, VALUES, pairs, recording

    rows = pairs()
    result = litjudge.judge(rows, protocol="pairwise", judge=recording(tmp_path, rows), columns=COLUMNS,
                            values=VALUES, out=tmp_path / "out", progress=False)
    (named,) = re.findall(r"result\.report\(\)\s+# runs/out/(\S+)/report/report\.html", README.read_text())
    assert re.fullmatch(re.escape(named).replace("<hash>", "[0-9a-f]{8}"), result.run_dir.name), (named, result.run_dir)


def test_the_console_page_s_table_names_every_command():
    """docs/console.md's table of commands omitted `export` and `protocols`: each command of the
    parser is a row of it."""
    import argparse

    from litjudge.engine.app.console.cli import build_parser

    (commands,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    page = (PROJECT_ROOT / "docs" / "console.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `(?:data \w+`, `)?([\w-]+)", page, re.M))
    assert set(commands.choices) - rows == set(), sorted(set(commands.choices) - rows)


def test_the_changelog_and_the_version_agree():
    """The CHANGELOG had "[0.2.0] - Unreleased" under "[Unreleased]" while `--version` said 0.2.0:
    one section without a date, [Unreleased], first, naming the version it prepares; every other
    is a release with its date; the installed version is either released or the one in preparation."""
    from litjudge import __version__

    text = (PROJECT_ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## \[([^\]]+)\](?: - (.*))?$", text, re.M)
    assert headings[0] == ("Unreleased", ""), headings[:2]
    for version, date in headings[1:]:
        assert re.fullmatch(r"\d+\.\d+\.\d+", version) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", date), (version, date)
    unreleased = text.split("## [Unreleased]", 1)[1].split("\n## [", 1)[0]
    assert __version__ in {v for v, _ in headings[1:]} or f"Version {__version__} " in unreleased, __version__


# -- the configuration reference -----------------------------------------------------------------

def _walk(cls: type, prefix: str, skip: tuple[str, ...] = ()) -> set[str]:
    """Every key of a config table and of the tables it holds, from its dataclass."""
    keys, hints = set(), typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if not f.init or f.name in skip:
            continue
        keys.add(prefix + f.name)
        # a list of tables (a rubric's [[options.questions]]): the keys of each entry, as KEY[].NAME
        listed = typing.get_origin(hints[f.name]) in (list, tuple)
        inner = [a for a in (hints[f.name], *typing.get_args(hints[f.name])) if dataclasses.is_dataclass(a)]
        if inner:
            keys |= _walk(inner[0], f"{prefix}{f.name}{'[]' if listed else ''}.")
    return keys | {prefix + k for k in extra_keys(cls)}   # keys declared beside the fields (a scale's)


def schema_keys() -> dict[str, set[str]]:
    """The keys the loader's dataclasses accept, per kind of config, walked here on their own. The
    keys that name a placeholder (a matrix axis, a member run's override) are the loader's rules
    for tables whose keys are the user's."""
    return {
        "run": _walk(RunConfig, "", ("source",)) | {f"tasks[].{k}" for k in ("name", *TASK_KEYS)},
        "dataset": _walk(DatasetCard, "dataset.", ("base",)),
        "protocol options": {f"{p}:{k}" for p in PROTOCOLS.names()
                             for k in _walk(PROTOCOLS.get(p).declared.options, "options.")},
        "sweep": _walk(SweepSpec, "sweep.") | {f"matrix.{a}" for a in MATRIX_TOP}
        | {'matrix."options.NAME"', 'matrix."sampling.NAME"', 'sweep.post."options.NAME"'},
        "ensemble": _walk(EnsembleConfig, "", ("source",)) | {"runs[].config", "runs[].KEY"},
    }


def reference_keys() -> dict[str, set[str]]:
    keys: dict[str, set[str]] = {}
    for s in config_reference.sections():
        protocol = _protocol(s) + ":" if s.kind == "protocol options" else ""
        keys.setdefault(s.kind, set()).update(protocol + e.key for e in s.entries)
    return keys


def test_the_reference_lists_every_key_of_every_table():
    assert reference_keys() == schema_keys()


def test_every_key_of_the_reference_has_a_doc_and_a_type():
    undocumented = [e.key for e in config_reference.entries() if not e.doc.strip()]
    assert not undocumented, f"keys without a comment beside their field: {undocumented}"
    assert all(e.type for e in config_reference.entries())


def _sample(entry: config_reference.Entry):
    value = entry.value
    if value is not None and value is not dataclasses.MISSING and not dataclasses.is_dataclass(value) and value != "":
        return list(value) if isinstance(value, tuple) else value
    return {"int": 1, "float": 0.5, "bool": True, "table": {}}.get(entry.type, [] if "list" in entry.type else "x")


def _nested(table: dict, key: str, value) -> dict:
    head, _, rest = key.partition(".")
    if rest:
        table[head] = _nested(dict(table.get(head, {})), rest, value)
    else:
        table[head] = value
    return table


# A placeholder key of the reference, as a config writes it for protocol ttcw.
PLACEHOLDERS = {'matrix."options.NAME"': {"matrix": {"options.variant": ["default"]}},
                'matrix."sampling.NAME"': {"matrix": {"sampling.temperature": [0.0]}},
                'sweep.post."options.NAME"': {"sweep": {"post": {"options.threshold": [0.5]}}}}


# The least an entry of a list of tables needs, beside the key a probe gives it.
LISTED_ENTRY = {"questions": {"id": "q", "text": "Is it vivid?"}}


def _protocol(section: config_reference.Section) -> str:
    """The protocol a section of protocol options belongs to: "[options] (rubric)" -> "rubric"."""
    return section.title.rsplit("(", 1)[-1].rstrip(")")


def _load(kind: str, key: str, value, where: Path, protocol: str = "ttcw") -> None:
    """A config setting `key` to `value`, through the loader of its kind."""
    base = {"name": "x", "protocol": protocol, "dataset": "ttcw-demo"}
    if kind == "run" and key.startswith("tasks[]."):
        task = key.removeprefix("tasks[].")
        load_config(where, table={**base, "tasks": [{"name": "t", **({} if task == "name" else {task: value})}]})
    elif kind == "run":
        load_config(where, table=_nested(dict(base), key, value))
    elif kind == "dataset":
        dataset_card(_nested({"path": "x.csv"}, key.removeprefix("dataset."), value), str(where))
    elif kind == "protocol options":
        name, listed, field = key.removeprefix("options.").partition("[].")
        option = {name: [{**LISTED_ENTRY[name], field: value}]} if listed else {name: value}
        config = load_config(where, table={**base, "options": option})
        PROTOCOLS.get(protocol)().options(config)
    elif kind == "sweep":
        head, _, name = key.partition(".")
        table = PLACEHOLDERS.get(key) or {head: {name: [value] if head == "matrix" else value}}
        load_sweep(where, table={**base, **table})
    else:
        runs = [{"config": "demo", **({"mode": "label"} if key == "runs[].KEY" else {})}]
        table = {"runs": runs, "jury": {}}
        if not key.startswith("runs"):
            head = key.split(".")[0]
            table = _nested(table, key, value) if head == "name" else {
                **table, head: {"judges": ["smollm2-135m"], **({key.split(".")[1]: value} if "." in key else {})}}
        load_ensemble(where, table=table)


def test_the_loader_accepts_every_key_of_the_reference_and_refuses_one_it_lacks(tmp_path):
    where = tmp_path / "config.toml"
    refused = []
    for s in config_reference.sections():
        protocol = _protocol(s) if s.kind == "protocol options" else "ttcw"
        for e in s.entries:
            try:
                _load(s.kind, e.key, _sample(e), where, protocol)
            except ConfigError as exc:
                if any(r in str(exc) for r in REFUSED):
                    refused.append(f"{e.key}: {exc}")
    assert not refused
    for kind, key in (("run", "engine.dtyp"), ("run", "tasks[].judge"), ("dataset", "dataset.colums"),
                      ("protocol options", "options.treshold"), ("sweep", "sweep.rankby"), ("ensemble", "cascade.tagret")):
        with pytest.raises(ConfigError, match="|".join(REFUSED)):
            _load(kind, key, 1, where)


def test_config_explain_prints_the_reference_entry():
    done = litjudge("config", "--explain", "engine.dtype")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == config_reference.as_text(config_reference.explain("engine.dtype")[0])
    assert "allowed: one of ['auto', 'bfloat16', 'float16', 'float32']" in done.stdout
    typo = litjudge("config", "--explain", "engine.dtyp")
    assert typo.returncode == 2
    assert typo.stderr.startswith("litjudge: error: no config key 'engine.dtyp' (did you mean 'engine.dtype'")


# -- the site -------------------------------------------------------------------------------------

EXTERNAL = re.compile(r"""<(?:script|img|iframe|source)\b[^>]*\bsrc=["'](?:https?:)?//|<link\b[^>]*\bhref=["'](?:https?:)?//"""
                      r"""|url\(["']?(?:https?:)?//|@import\s+["']?(?:https?:)?//""", re.I)


def test_the_site_builds_strict_and_loads_nothing_from_elsewhere(tmp_path):
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=900, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    pages = sorted(site.rglob("*.html"))
    for protocol in PROTOCOLS.names():
        assert (site / "protocols" / f"{protocol}.html").exists(), f"no page for protocol {protocol}"
    loading = [f"{p.relative_to(site)}: {m.group(0)}" for p in [*pages, *site.rglob("*.css"), *site.rglob("*.js")]
               for m in EXTERNAL.finditer(p.read_text(encoding="utf-8", errors="replace"))]
    assert not loading, loading[:10]
    reference = (site / "reference" / "config.html").read_text(encoding="utf-8")
    missing = [e.key for e in config_reference.entries() if f"<code>{html.escape(e.key, quote=False)}</code>" not in reference]
    assert not missing, missing
    # 404.html named every page and asset from the server's root (`/index.html`): from the file system none was found
    page404 = (site / "404.html").read_text(encoding="utf-8")
    links = re.findall(r'\b(?:href|src)="([^"#?]+)', page404)
    assert links and not [u for u in links if u.startswith("/")], [u for u in links if u.startswith("/")][:5]
    assert not [u for u in links if "://" not in u and not (site / u).exists()]
    _api_reference_has_parameter_tables((site / "reference" / "api.html").read_text(encoding="utf-8"))
    if CHROMIUM:                                      # search works from the file system, with nothing fetched
        said = page_value(f"{(site / 'index.html').as_uri()}?q=replay", "/\\d+ matching documents/.test("
                          "document.querySelector('.md-search-result__meta')?.textContent)",
                          "document.querySelector('.md-search-result__meta').textContent")
        found = re.search(r"(\d+) matching documents", said)
        assert found and int(found.group(1)) >= 3, said
        assert _keys_broken_across_lines(site) == []


def _api_reference_has_parameter_tables(page: str) -> None:
    """The API reference gave judge()'s parameters as one paragraph and omitted `Result.tables`,
    `verdicts` and `manifest` and the exported configs: each is now a row of a table."""
    import inspect

    import litjudge

    tables = [html.unescape(re.sub(r"<[^>]+>", " ", t)) for t in re.findall(r"<table>.*?</table>", page, re.S)]

    def row_of(name: str) -> bool:
        return any(re.search(rf"(^|\s){re.escape(name)}\s", t) for t in tables)
    for function in (litjudge.judge, litjudge.run, litjudge.load):
        for name, p in inspect.signature(function).parameters.items():
            shown = f"**{name}" if p.kind is p.VAR_KEYWORD else name
            assert row_of(shown), f"{function.__name__}(): no row for {shown}"
    for name in ("run_dir", "kind", "manifest", "tables", "verdicts", "tasks"):
        assert row_of(name), f"Result: no row for {name}"
    for cls in (litjudge.EngineConfig, litjudge.SamplingConfig, litjudge.ApiConfig, litjudge.ClusterConfig):
        assert f"litjudge.{cls.__name__}" in page
        for field in dataclasses.fields(cls):
            if field.init:
                assert row_of(field.name), f"{cls.__name__}: no row for {field.name}"


WRAP_PROBE = """<script>window.addEventListener('load', () => {
  const broken = [...document.querySelectorAll('td:first-child > code')].filter(c => c.getClientRects().length > 1)
    .map(c => c.textContent);
  const out = document.createElement('pre'); out.id = 'broken-keys'; out.textContent = JSON.stringify(broken);
  document.body.appendChild(out);
});</script></body>"""


def _keys_broken_across_lines(site: Path) -> list[str]:
    """The config reference's key names that a browser 900 pixels wide breaks across lines (it broke
    `engine.max_model_len` mid-word): the page as built, with a script measuring each key's lines."""
    import json

    probe = site / "reference" / "broken-keys.html"
    probe.write_text((site / "reference" / "config.html").read_text(encoding="utf-8").replace("</body>", WRAP_PROBE, 1),
                     encoding="utf-8")
    return json.loads(page_value(probe.as_uri(), "document.getElementById('broken-keys') !== null",
                                 "document.getElementById('broken-keys').textContent", {"width": 900, "height": 1200}))


# -- the examples ---------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("docs-cache") / "verdicts.sqlite"


@pytest.fixture(scope="module")
def examples(tmp_path_factory, shared_cache):
    """One Python process runs every page's Python blocks and `litjudge` lines (imports paid once,
    and one local engine serves every example asking for the same judge). The pages run on one
    worker (their xdist group) and the process ends with them: one per worker, each holding its
    engine to the session's end, took 4-6 GiB apiece and the suite ran out of memory."""
    python = Interpreter(tmp_path_factory.mktemp("docs-interpreter"), example_env(shared_cache))
    yield python
    python.close()


def _children_cpu() -> float:
    """CPU seconds (user + system) of the finished processes this one started: the examples' work."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _page_id(path: Path) -> str:
    return str(path.relative_to(PROJECT_ROOT))


def _slow(path: Path) -> bool:
    return "<!-- docs-examples: slow -->" in path.read_text(encoding="utf-8")


@pytest.mark.xdist_group("docs-examples")
@pytest.mark.parametrize("page", [pytest.param(p, id=_page_id(p), marks=[pytest.mark.slow] if _slow(p) else [])
                                  for p in PAGES])
def test_the_examples_run(page, tmp_path, shared_cache, examples):
    started, cpu = time.monotonic(), _children_cpu() + examples.cpu()
    result = run_page(page, PROJECT_ROOT, tmp_path, example_env(shared_cache),
                      have_data=(DATA / "ttcw" / "stories.json").exists(), python=examples)
    print(f"{_page_id(page)}: {len(result.ran)} examples run, {len(result.skipped)} skipped, "
          f"{time.monotonic() - started:.1f} s, {_children_cpu() + examples.cpu() - cpu:.1f} s of CPU")
    assert not result.failures, "\n\n".join(result.failures)
