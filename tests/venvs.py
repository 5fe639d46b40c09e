"""Scratch environments for the tests that install litjudge as a user does (test_install,
test_packaging, test_plugins): a venv of this interpreter whose third-party packages are this
environment's, read by path (so nothing is downloaded and its editable litjudge is not on that
path: a `.pth` line adds a folder, not the `.pth` files in it), with wheels installed by this
environment's pip (`--no-deps --no-index`, a few seconds each)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from litjudge.engine.core.paths import PROJECT_ROOT

# What a copy of the checkout leaves out: environments, build output, caches, run outputs.
NOT_SOURCE = shutil.ignore_patterns(".venv", ".git", "build", "dist", "site", "*.egg-info", "out", "__pycache__",
                                    ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache")


def site_packages(venv: Path) -> Path:
    return Path(sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})["purelib"])


def scratch_venv(folder: Path) -> Path:
    """A new venv in `folder` that sees this environment's third-party packages (by path, after its own)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    (site_packages(folder) / "zz_shared_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return folder


def install(venv: Path, *wheels: Path) -> None:
    """Install wheels into the scratch venv (theirs only: the dependencies are shared)."""
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target",
                    str(site_packages(venv)), *map(str, wheels)], check=True, capture_output=True, timeout=300)


def pip_install(venv: Path, *requirements: str) -> None:
    """Install into the scratch venv as a user's `pip install` does (its own site-packages, its console
    scripts in bin/), dependencies not followed (they are the shared ones) and nothing downloaded.
    --ignore-installed: the shared site-packages' editable litjudge is outside the venv, untouched."""
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", "--no-deps",
                    "--no-index", "--ignore-installed", *requirements], check=True, capture_output=True, timeout=300,
                   env=user_env())


def build_wheel(source: Path, out: Path) -> Path:
    """The wheel of a source folder (setuptools from this environment, no download)."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                    str(source)], check=True, capture_output=True, timeout=300)
    return max(out.glob("*.whl"), key=lambda p: p.stat().st_mtime)


def source_copy(folder: Path) -> Path:
    """The checkout's source as a fresh copy (no stale build/ of an earlier build can slip into a wheel)."""
    shutil.copytree(PROJECT_ROOT, folder, ignore=NOT_SOURCE, symlinks=True)
    return folder


def litjudge_wheel(folder: Path) -> Path:
    """litjudge's own wheel, built from a copy of the checkout."""
    return build_wheel(source_copy(folder / "source"), folder / "dist")


def user_env() -> dict[str, str]:
    """This process's environment without what would point a scratch venv back at the checkout."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LITJUDGE_RUNS_DIR")}


def in_venv(venv: Path, cwd: Path, *args: str, timeout: float = 600, program: str = "python",
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python ARGS` (or another of the venv's programs, e.g. its `litjudge` console script) in the
    scratch venv, from `cwd` (e.g. `-m litjudge run cfg.toml`), with `env` added to the environment."""
    return subprocess.run([str(venv / "bin" / program), *args], cwd=cwd, env={**user_env(), **(env or {})},
                          capture_output=True, text=True, timeout=timeout)
