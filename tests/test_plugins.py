"""Plugins by entry point: a distribution installed beside litjudge that declares a protocol
(`litjudge.protocols`), a backend (`litjudge.backends`) or a dataset loader (`litjudge.loaders`)
is usable by name with no change to litjudge; the listings say where each came from; a plugin that
fails to load is one line naming its distribution, and the rest work.

The registry's own behaviour is checked in this process against real distributions (a dist-info
folder on the path is what `importlib.metadata` reads for any installed package); the whole path
is checked in a fresh venv with litjudge's wheel and two plugin wheels built here."""
from __future__ import annotations

import json
import logging
import sys
import textwrap
from pathlib import Path

import pytest

import litjudge
from litjudge.engine.core.errors import ConfigError, PluginError
from litjudge.engine.core.paths import PROJECT_ROOT
from litjudge.engine.core.registry import BUILT_IN, Origin, Registry
from tests.venvs import build_wheel, in_venv, install, litjudge_wheel, scratch_venv

PROTOCOL_BASE = "litjudge.judges.base:Protocol"


def distribution(path: Path, name: str, version: str, entry_points: dict[str, dict[str, str]],
                 modules: dict[str, str] | None = None) -> Path:
    """An installed distribution in folder `path` (put it on sys.path): its dist-info (metadata,
    entry points, an installer's RECORD) and its modules."""
    info = path / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text("".join(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items())
                                                   for group, eps in entry_points.items()))
    (info / "RECORD").write_text("")
    for module, text in (modules or {}).items():
        (path / f"{module}.py").write_text(textwrap.dedent(text))
    return path


TOY = "import sys\nfrom tests.toy_protocol import SingleGrading\nIMPORTED = True\n"


@pytest.fixture
def group(request, monkeypatch, tmp_path) -> str:
    """An entry-point group of this test's own (the group's entries are read once per process)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    return f"litjudge.test_{request.node.name}"


def test_a_plugin_is_imported_only_when_used_and_names_its_distribution(group, tmp_path):
    distribution(tmp_path, "toy-plugin", "1.2.0", {group: {"single": "toy_single:SingleGrading"}}, {"toy_single": TOY})
    registry: Registry = Registry("protocol", base=PROTOCOL_BASE, group=group)
    registry.add("builtin", "tests.toy_protocol:SingleGrading")
    assert "builtin" in registry and "toy_single" not in sys.modules          # a built-in name reads no metadata
    assert registry.names() == ["builtin", "single"] and "toy_single" not in sys.modules   # listed by name only
    assert registry.origin("single") == Origin("toy-plugin", "1.2.0") and str(registry.origin("single")) == "toy-plugin 1.2.0"
    assert registry.origin("builtin") is BUILT_IN and str(BUILT_IN) == "built-in"
    assert registry.get("single").declared.name == "single" and sys.modules["toy_single"].IMPORTED
    assert registry.check_plugins() == []
    with pytest.raises(ConfigError, match=r"unknown protocol 'singel' \(did you mean 'single'\?\)"):
        registry.get("singel")


def test_a_plugin_that_fails_to_load_is_one_line_and_the_rest_work(group, tmp_path):
    """An import error, and an entry that is not what the registry holds: each one line naming the
    distribution, raised where the name is used, listed as a warning; the other plugin works."""
    distribution(tmp_path, "good-plugin", "0.1", {group: {"single": "toy_single:SingleGrading"}}, {"toy_single": TOY})
    distribution(tmp_path, "broken-plugin", "2.0", {group: {"broken": "broken_mod:Thing", "wrong": "wrong_mod:Thing"}},
                 {"broken_mod": "import frobnicate_not_installed\n", "wrong_mod": "class Thing:\n    pass\n"})
    registry: Registry = Registry("protocol", base=PROTOCOL_BASE, group=group)
    assert registry.names() == ["broken", "single", "wrong"]                 # nothing imported yet
    problems = registry.check_plugins()
    assert problems == [
        "protocol 'broken' of broken-plugin 2.0 could not be loaded (broken_mod:Thing: ModuleNotFoundError: No module "
        "named 'frobnicate_not_installed'); fix or uninstall broken-plugin",
        "protocol 'wrong' of broken-plugin 2.0 (wrong_mod:Thing) is not a subclass of litjudge.judges.base.Protocol; "
        "fix or uninstall broken-plugin"]
    assert registry.names() == ["single"] and "broken" not in registry
    for name, line in zip(("broken", "wrong"), problems):
        with pytest.raises(PluginError) as refused:
            registry.get(name)
        assert str(refused.value) == line and "\n" not in line
    assert registry.get("single").declared.name == "single"


def test_a_plugin_protocol_with_a_misspelt_report_panel_is_one_line_where_it_is_registered(group, tmp_path):
    """A plugin protocol naming report panels that are not registered is refused as it loads (not when
    a report is drawn): one line naming the distribution, the protocol and the wrong name."""
    typo = ("import dataclasses\nfrom tests.toy_protocol import SingleGrading\n\n"
            "class Typo(SingleGrading):\n"
            "    declared = dataclasses.replace(SingleGrading.declared, name='typo',\n"
            "                                   report='litjudge.engine.app.report.panels:ttcw_panel')\n")
    distribution(tmp_path, "typo-plugin", "0.3", {group: {"typo": "typo_mod:Typo"}}, {"typo_mod": typo})
    registry: Registry = Registry("protocol", base=PROTOCOL_BASE, group=group)
    with pytest.raises(PluginError) as refused:
        registry.get("typo")
    line = str(refused.value)
    assert line.startswith("protocol 'typo' of typo-plugin 0.3 could not be loaded") and "\n" not in line, line
    assert ("protocol 'typo': report 'litjudge.engine.app.report.panels:ttcw_panel' names no registered report "
            "panels (did you mean 'litjudge.engine.app.report.panels:ttcw_panels'?)") in line, line
    assert line.endswith("fix or uninstall typo-plugin"), line


def test_a_name_two_distributions_or_a_built_in_claim_is_refused(group, tmp_path):
    distribution(tmp_path / "a", "plugin-a", "1.0", {group: {"same": "toy_single:SingleGrading",
                                                            "builtin": "toy_single:SingleGrading"}})
    distribution(tmp_path / "b", "plugin-b", "3.1", {group: {"same": "toy_single:SingleGrading"}})
    sys.path[:0] = [str(tmp_path / "a"), str(tmp_path / "b")]
    try:
        registry: Registry = Registry("protocol", base=PROTOCOL_BASE, group=group)
        registry.add("builtin", "tests.toy_protocol:SingleGrading")
        assert registry.names() == ["builtin"] and registry.origin("builtin") is BUILT_IN
        with pytest.raises(PluginError, match=r"^protocol 'same' is declared by plugin-a 1.0 and plugin-b 3.1 "
                                              r"\(entry point group [\w.]+\): uninstall one of them$"):
            registry.get("same")
        assert registry.check_plugins()[0] == (f"protocol 'builtin' of plugin-a 1.0 (entry point group {group}) is ignored: "
                                               "litjudge's own protocol 'builtin' keeps the name; rename it in the plugin")
    finally:
        sys.path[:] = [p for p in sys.path if p not in (str(tmp_path / "a"), str(tmp_path / "b"))]


def test_a_plugin_backend_cannot_take_a_built_in_prefix(group, tmp_path):
    """A plugin backend's judges are named `NAME:...`; a name whose prefix a built-in backend serves
    (vllm-reward serves `reward:`) would take that backend's judges, and is refused."""
    from litjudge.engine.backends.registry import BACKENDS

    distribution(tmp_path, "sly-plugin", "1.0", {group: {"reward": "sly:Backend", "echo": "sly:Backend"}})
    registry: Registry = Registry("backend", group=group, plugin_meta=lambda name: {"prefix": f"{name}:"}, unique=("prefix",))
    registry.add("vllm-reward", "litjudge.engine.backends.vllm_pooling:RewardBackend", prefix="reward:")
    assert registry.names() == ["echo", "vllm-reward"] and registry.meta("echo") == {"prefix": "echo:"}
    assert registry.check_plugins()[0] == (f"backend 'reward' of sly-plugin 1.0 (entry point group {group}) is ignored: "
                                           "its prefix 'reward:' is backend 'vllm-reward''s; rename it in the plugin")
    assert BACKENDS.unique == ("prefix",) and BACKENDS.meta("vllm-reward")["prefix"] == "reward:"


def test_a_built_in_entry_of_the_wrong_kind_is_litjudges_own_bug():
    registry: Registry = Registry("protocol", base=PROTOCOL_BASE)
    registry.add("odd", "litjudge.engine.core.errors:ConfigError")
    with pytest.raises(TypeError, match=r"protocol 'odd' of built-in \(litjudge.engine.core.errors:ConfigError\) is not "
                                        r"a subclass of litjudge.judges.base.Protocol"):
        registry.get("odd")


def test_the_three_registries_read_their_groups():
    from litjudge.engine.backends.registry import BACKEND_BASE, BACKENDS
    from litjudge.engine.data.loaders import LOADERS
    from litjudge.judges import PROTOCOLS

    assert (PROTOCOLS.group, BACKENDS.group, LOADERS.group) == ("litjudge.protocols", "litjudge.backends", "litjudge.loaders")
    assert PROTOCOLS.base == PROTOCOL_BASE and BACKENDS.base == BACKEND_BASE
    for name in ("ttcw", "pairwise", "listwise", "classification", "reference_likert"):
        assert PROTOCOLS.origin(name) is BUILT_IN


# -- the whole path: wheels installed into a fresh venv ----------------------------------------------------

PLUGIN_BACKEND = '''
"""A backend whose judge `constant:TEXT` answers TEXT to every request."""
from litjudge.engine.backends.local.render import plain_layout
from litjudge.engine.core.backend import Backend, Capabilities, JudgeSpec
from litjudge.engine.core.requests import Generation, JudgeIdentity


class Constant(Backend):
    name = "constant"
    capabilities = Capabilities(frozenset({"label"}))

    @classmethod
    def resolve(cls, name, config, prefix=""):
        return JudgeSpec(name, cls.name, name.removeprefix(prefix), f"constant:{name}", "constant", False)

    @classmethod
    def plan(cls, spec):
        return cls(spec)

    def __init__(self, spec):
        self.spec = spec

    def identity(self):
        return JudgeIdentity(self.spec.fingerprint, "plain", self.spec.family)

    def render(self, request):
        return plain_layout(request.messages)

    def encode(self, prompt):
        return [len(w) for w in prompt.split()]

    def context_window(self):
        return 1 << 20

    def generate(self, batch):
        return (Generation(p.key, self.spec.target, prompt_tokens=p.prompt_tokens) for p in batch)
'''

PLUGIN_LOADER = '''
"""A data format: `id<TAB>score<TAB>text` per line, read as rated items."""
from litjudge.engine.data.items import ItemSet, RatedItem


def read_items(location, card):
    rows = [line.split("\\t") for line in location.read_text().splitlines() if line]
    return ItemSet(tuple(RatedItem(i, "all", text, human_score=float(score)) for i, score, text in rows))
'''


def plugin_source(folder: Path, name: str, version: str, package: str, files: dict[str, str],
                  entry_points: dict[str, dict[str, str]]) -> Path:
    """A plugin distribution's source folder: pyproject.toml with its entry points, and its package."""
    (folder / package).mkdir(parents=True)
    for file, text in files.items():
        (folder / package / file).write_text(text)
    groups = "".join(f'[project.entry-points."{group}"]\n' + "".join(f'"{k}" = "{v}"\n' for k, v in eps.items())
                     for group, eps in entry_points.items())
    (folder / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "{name}"\nversion = "{version}"\nrequires-python = ">=3.11"\ndependencies = ["litjudge"]\n'
        f'{groups}[tool.setuptools]\npackages = ["{package}"]\n')
    return folder


@pytest.fixture(scope="module")
def plugged(tmp_path_factory) -> Path:
    """A fresh venv with litjudge's wheel, a plugin adding a protocol with its own metric table (the
    toy protocol of tests/toy_protocol.py), a backend and a data format, and a plugin whose import fails."""
    root = tmp_path_factory.mktemp("plugins")
    toy = plugin_source(root / "toy", "litjudge-toy-plugin", "0.3.1", "toy_plugin",
                        {"__init__.py": "", "protocol.py": (PROJECT_ROOT / "tests" / "toy_protocol.py").read_text(),
                         "backend.py": PLUGIN_BACKEND, "loader.py": PLUGIN_LOADER},
                        {"litjudge.protocols": {"single": "toy_plugin.protocol:SingleGrading"},
                         "litjudge.backends": {"constant": "toy_plugin.backend:Constant"},
                         "litjudge.loaders": {"scores_tsv.items": "toy_plugin.loader:read_items"}})
    broken = plugin_source(root / "broken", "litjudge-broken-plugin", "0.0.1", "broken_plugin",
                           {"__init__.py": "import frobnicate_not_installed\n"},
                           {"litjudge.protocols": {"broken": "broken_plugin:Broken"}})
    venv = scratch_venv(root / "venv")
    install(venv, litjudge_wheel(root), build_wheel(toy, root / "dist"), build_wheel(broken, root / "dist"))
    return venv


BROKEN_LINE = ("protocol 'broken' of litjudge-broken-plugin 0.0.1 could not be loaded (broken_plugin:Broken: "
               "ModuleNotFoundError: No module named 'frobnicate_not_installed'); fix or uninstall litjudge-broken-plugin")


def test_the_plugins_run_through_the_console(plugged, tmp_path):
    """`litjudge protocols` and `litjudge judges` list the plugins with their distribution (the broken
    one as one warning line), and `litjudge run` runs the plugin's protocol on the plugin's data format
    with the plugin's backend and a recording, as it runs a built-in one; the manifest has the version."""
    listed = in_venv(plugged, tmp_path, "-m", "litjudge", "protocols")
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert listed.stderr.strip() == f"litjudge: warning: {BROKEN_LINE}"
    lines = {line.split()[0]: line for line in listed.stdout.splitlines() if line.strip()}
    assert lines["single"].split() == ["single", "1", "items", "label", "litjudge-toy-plugin", "0.3.1"]
    assert lines["scores_tsv"].split() == ["scores_tsv", "items", "litjudge-toy-plugin", "0.3.1"]
    assert lines["pairwise"].split()[-1] == "built-in" and "broken" not in lines
    judges = in_venv(plugged, tmp_path, "-m", "litjudge", "judges")
    assert judges.returncode == 0 and judges.stderr == "", judges.stderr[-2000:]
    backend = next(line for line in judges.stdout.splitlines() if line.startswith("constant "))
    assert backend.split() == ["constant", "constant:NAME", "litjudge-toy-plugin", "0.3.1"]

    (tmp_path / "items.tsv").write_text("s1\t1\tThe cat sat.\ns2\t4\tRain wrote its name on the glass.\n"
                                        "s3\t5\tThe lighthouse kept the sea's secrets.\n")
    (tmp_path / "rec.jsonl").write_text("".join(json.dumps({"id": i, "response": r}) + "\n"
                                                for i, r in (("s1", "2"), ("s2", "3"), ("s3", "5"))))
    (tmp_path / "plug.toml").write_text('name = "plug"\nprotocol = "single"\njudge = ["constant:3", "replay:rec.jsonl"]\n'
                                        '[dataset]\nloader = "scores_tsv"\npath = "items.tsv"\n')
    run = in_venv(plugged, tmp_path, "-m", "litjudge", "run", "plug.toml", "--quiet")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "broken" not in run.stderr                                    # a plugin nobody names stays silent
    out = tmp_path / "runs" / "out" / "plug"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["litjudge"] == "0.2.0" and manifest["protocol"] == {"name": "single", "version": "1"}
    assert [j["backend"] for j in manifest["judges"]] == ["constant", "replay"] and manifest["verdicts"]["rows"] == 6

    (tmp_path / "broken.toml").write_text('name = "b"\nprotocol = "broken"\njudge = "replay:rec.jsonl"\n'
                                          '[dataset]\nloader = "scores_tsv"\npath = "items.tsv"\n')
    refused = in_venv(plugged, tmp_path, "-m", "litjudge", "run", "broken.toml")
    assert (refused.returncode, refused.stderr.strip()) == (2, f"litjudge: error: {BROKEN_LINE}")


def test_the_plugins_run_from_python(plugged, tmp_path):
    """`litjudge.judge` with the plugin's protocol and backend; the broken plugin's name raises
    PluginError with the same one line."""
    script = textwrap.dedent("""
        import litjudge
        rows = [{"id": f"s{i}", "story": f"story {i}", "score": float(i)} for i in range(4)]
        r = litjudge.judge(rows, protocol="single", judge=["constant:4", "constant:2"], progress=False,
                           columns={"item_id": "id", "group": "=all", "text": "story", "human_score": "score"})
        print(r.verdicts.height, sorted(r.tables["agreement"]["judge"].to_list()), sorted(set(r.verdicts["value"].to_list())))
        try:
            litjudge.judge(rows, protocol="broken", judge="constant:4", progress=False)
        except litjudge.PluginError as exc:
            print(exc)
    """)
    r = in_venv(plugged, tmp_path, "-c", script, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    first, second = r.stdout.splitlines()
    assert first == "8 ['constant:2', 'constant:4'] [2, 4]"
    assert second == BROKEN_LINE


# -- a plugin loader's data is untrusted input ----------------------------------------------------------

UNTRUSTED_LOADER = '''
from litjudge.engine.data.pairs import Pair


def pairs(location, card):           # labels in another case: "A", " B "
    return [Pair(f"p{i}", "Write.", f"first {i}", f"second {i}", "A" if i % 3 else " B ") for i in range(12)]


def tuples(location, card):          # rows as tuples, not Pair
    return [(f"p{i}", "Write.", "first", "second", "a") for i in range(12)]


def odd(location, card):             # a label no case makes one
    return [Pair("p0", "Write.", "first", "second", "maybe")]


def crashes(location, card):
    raise KeyError("story")


def twice(location, card):           # one id for two pairs: their verdicts would merge
    return [Pair("p0", "Write.", f"first {i}", f"second {i}", "a") for i in range(2)]
'''


def test_a_plugin_loaders_labels_are_normalised_and_its_wrong_types_name_it(tmp_path):
    """Labels "A" for "a" scored 0.000 in both orders with exit 0; tuples for pairs were blamed on
    litjudge ("internal error ... please report it"). Now the labels read as the built-in readers
    read them, and a wrong type or label, or the loader's own exception, is one line naming the
    loader, its distribution and what is expected (exit 2)."""
    import os
    import subprocess

    import polars as pl

    plugin = distribution(tmp_path / "dist", "untrusted-plugin", "0.4", {"litjudge.loaders": {
        "caseplug.pairs": "untrusted_loader:pairs", "tupleplug.pairs": "untrusted_loader:tuples",
        "oddplug.pairs": "untrusted_loader:odd", "crashplug.pairs": "untrusted_loader:crashes",
        "twiceplug.pairs": "untrusted_loader:twice"}},
        {"untrusted_loader": UNTRUSTED_LOADER})
    (tmp_path / "data.txt").write_text("read by the plugin\n")
    (tmp_path / "rec.jsonl").write_text("".join(json.dumps({"id": f"p{i}/{o}", "response": "A" if o == "ab" else "B"})
                                                + "\n" for i in range(12) for o in ("ab", "ba")))    # text a, both orders
    env = {**os.environ, "PYTHONPATH": str(plugin), "LITJUDGE_RUNS_DIR": str(tmp_path / "runs")}  # the session's settings

    def run(loader: str) -> subprocess.CompletedProcess:
        (tmp_path / f"{loader}.toml").write_text(f'name = "{loader}"\nprotocol = "pairwise"\njudge = "replay:rec.jsonl"\n'
                                                 f'[dataset]\nloader = "{loader}"\npath = "data.txt"\n')
        return subprocess.run([sys.executable, "-m", "litjudge", "run", f"{loader}.toml", "--quiet"], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=300)

    done = run("caseplug")
    assert done.returncode == 0, done.stderr[-3000:]
    accuracy = pl.read_parquet(tmp_path / "runs" / "caseplug" / "tables" / "accuracy.parquet")
    by_order = dict(zip(accuracy["order"], accuracy["accuracy"], strict=True))
    assert by_order["ab"] == by_order["ba"] == pytest.approx(8 / 12), accuracy          # 0.000 before
    who = "dataset loader '{}.pairs' of untrusted-plugin 0.4"
    for loader, says in (
            ("tupleplug", "returned a tuple (('p0', 'Write.', 'first', 'second', 'a')) as pair 1, where an iterable of "
                          "litjudge.engine.data.pairs.Pair is expected"),
            ("oddplug", "gave pair 'p0' the label 'maybe', which is none of ['a', 'b', 'tie'] (any case) or None (not known)"),
            ("crashplug", "failed: KeyError: 'story'"),
            ("twiceplug", "gave pair 2 ('p0'): duplicate pair_id 'p0' (first as pair 1)")):
        refused = run(loader)
        assert (refused.returncode, refused.stderr.strip()) == (
            2, f"litjudge: error: {who.format(loader)} {says}; fix or uninstall untrusted-plugin"), refused.stderr[-3000:]


def test_a_plugin_loaders_rows_are_checked_as_a_files_rows():
    """A hostile pass: a loader's NaN human score was counted in the agreement table's `items` and
    left out of the Spearman beside it, a duplicate id merged two items, a number was judged as a
    text; the same data in a file is refused. Now each is refused as the file's row is, naming it."""
    from litjudge.engine.core.errors import PluginError
    from litjudge.engine.core.registry import Origin
    from litjudge.engine.data.items import ItemSet, RatedItem
    from litjudge.engine.data.plugin_data import Loader, from_plugin
    from litjudge.engine.data.reference import GroupStory, StoryGroup

    def said(kind: str, data) -> str:
        with pytest.raises(PluginError) as e:
            from_plugin(Loader(f"toy.{kind}", Origin("toy-plugin", "0.1")), lambda: data)
        return str(e.value).removeprefix(f"dataset loader 'toy.{kind}' of toy-plugin 0.1 ").removesuffix(
            "; fix or uninstall toy-plugin")

    def items(*rows) -> ItemSet:
        return ItemSet(tuple(RatedItem(i, "all", text, human_score=score) for i, text, score in rows))

    assert said("items", items(("i0", "t", 1.0), ("i1", "t", float("nan")))) == \
        "gave item 2 ('i1'): field 'human_score' must be a finite number, got nan"
    assert said("items", items(("i0", "t", 1.0), ("i0", "u", 2.0))) == \
        "gave item 2 ('i0'): duplicate item_id 'i0' (first as item 1)"
    assert said("items", items(("i0", 3, 1.0))) == "gave item 1 ('i0'): field 'text' should be text, got 3"
    assert said("items", items(("i0", " ", None))) == "gave item 1 ('i0'): field 'text' is empty"
    story = GroupStory("r", "g", "model", "text", float("inf"))
    assert said("groups", [StoryGroup("g", story, ())]) == \
        "gave story 1 ('r'): field 'human_score' must be a finite number, got inf"
    fine = items(("i0", "t", None), ("i1", "t", 2))
    assert from_plugin(Loader("toy.items", Origin("toy-plugin", "0.1")), lambda: fine) == fine


BOOM_BACKEND = PLUGIN_BACKEND.replace("class Constant(Backend):", "class Boom(Backend):").replace(
    'name = "constant"', 'name = "boom"').replace(
    '''        return (Generation(p.key, self.spec.target, prompt_tokens=p.prompt_tokens) for p in batch)''',
    '''        if self.spec.target == "raise":
            raise RuntimeError("backend exploded")
        return (Generation(p.key, None if self.spec.target == "none" else 3) for p in batch)


class Narrow(Boom):
    name = "narrow"

    def generate(self):
        return ()''')


@pytest.mark.parametrize("judge, said", [
    ("boom:raise", "backend 'boom' of boom-plugin 0.1: its generate raised RuntimeError: backend exploded; fix or "
                   "uninstall boom-plugin"),
    ("narrow:x", "backend 'narrow' of boom-plugin 0.1: its generate raised TypeError: Narrow.generate() takes 1 "
                 "positional argument but 2 were given; fix or uninstall boom-plugin"),
    ("boom:none", "backend 'boom' (judge boom:none) answered key "),
    ("boom:int", "backend 'boom' (judge boom:int) answered key ")])
def test_a_plugin_backends_failure_names_it(judge, said, tmp_path, monkeypatch):
    """A hostile pass: a plugin backend that raised, or took other arguments, was litjudge's
    "internal error ... a bug, please report it"; one whose raw was None counted 6 verdicts
    generated and stored none. Now one line naming the plugin, or the backend's contract."""
    from litjudge.engine.backends.registry import BACKENDS
    from tests.test_cli_probe import pairs_run

    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "boom_backend.py").write_text(BOOM_BACKEND)
    for name, cls in (("boom", "Boom"), ("narrow", "Narrow")):
        BACKENDS.add(name, f"boom_backend:{cls}", origin=Origin("boom-plugin", "0.1"), prefix=f"{name}:")
    try:
        cfg = pairs_run(tmp_path / "d")
        cfg.write_text(cfg.read_text().replace(f'judge = "replay:{tmp_path / "d" / "answers.jsonl"}"', f'judge = "{judge}"'))
        with pytest.raises(litjudge.LitjudgeError) as caught:
            litjudge.run(cfg, out=tmp_path / "runs", progress=False)
    finally:
        for name in ("boom", "narrow"):
            BACKENDS.remove(name)
    assert str(caught.value).startswith(said) and "\n" not in str(caught.value), str(caught.value)
    if judge in ("boom:none", "boom:int"):
        assert f"with a raw of {'NoneType None' if judge == 'boom:none' else 'int 3'}" in str(caught.value)


def test_another_packages_damaged_entry_points_are_a_warning_not_every_runs_failure(group, tmp_path, caplog):
    """A line without '=' in any installed distribution's entry_points.txt (a package litjudge has
    nothing to do with) made every run an internal error naming nothing: its entries are skipped,
    said once, and the other distributions' plugins still load."""
    from litjudge.engine.core.registry import entry_points

    distribution(tmp_path, "good-plugin", "1.0", {group: {"toy": "toy_mod:SingleGrading"}})
    broken = distribution(tmp_path / "b", "broken-meta", "0.1", {}) / "broken_meta-0.1.dist-info"
    (broken / "entry_points.txt").write_text("[console_scripts]\nbroken\n")
    sys.path.insert(0, str(tmp_path / "b"))
    try:
        with caplog.at_level(logging.WARNING, logger="litjudge"):
            found = entry_points(group)
    finally:
        sys.path.remove(str(tmp_path / "b"))
    assert [ep.name for ep in found] == ["toy"]
    said = [r.getMessage() for r in caplog.records if "broken-meta" in r.getMessage()]
    assert len(said) == 1 and "cannot be read" in said[0] and "its plugins, if any, are not loaded" in said[0]
