"""mypy over the package as it installs: `python scripts/typecheck.py` (what `make lint` runs).

engine/, judges/ and grammars/ install as litjudge.engine, litjudge.judges and litjudge.grammars
through pyproject's `[tool.setuptools.package-dir]` (no links in the tree). mypy finds modules by
folder name only and cannot follow the editable install's import hook, so `mypy` alone would name
them `engine.core...` and see `litjudge.engine` as missing. This script gives mypy every module of
the package with its installed name (read from the same mapping), and mypy's own configuration
(`[tool.mypy]` in pyproject.toml; every module is held to the check, none `ignore_errors`).
Extra arguments go to mypy (e.g. `--no-error-summary`).

It checks on every core this process may use (at most four; mypy's parallel mode, `--num-workers`):
a fresh clone has no mypy cache, and on two cores of an EPYC Zen 4 the whole check took 6.9 s
on two workers against 21.5 s in one process. `-n 0` asks for the one process.
"""
from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

from mypy import build
from mypy.errors import CompileError
from mypy.main import process_options
from mypy.modulefinder import BuildSource

ROOT = Path(__file__).resolve().parent.parent


def package_dirs() -> dict[str, Path]:
    """Each package the wheel installs -> its folder in the checkout, as setuptools maps it: by the
    package's own `package-dir` entry, else its nearest mapped parent's folder plus the rest of its
    name (litjudge.engine.core -> engine/core), else its name as a path."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped: dict[str, str] = config.get("package-dir", {})
    out = {}
    for name in config["packages"]:
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            parent = ".".join(parts[:cut])
            if parent in mapped:
                out[name] = ROOT / mapped[parent] / "/".join(parts[cut:])
                break
        else:
            out[name] = ROOT / "/".join(parts)
    return out


def sources() -> list[BuildSource]:
    """Every module of the package under its installed name, with the path errors are reported at
    (the packaged cards and configs, litjudge._data.datasets and litjudge._data.runs, hold no modules)."""
    out = []
    for package, folder in package_dirs().items():
        for path in sorted(folder.glob("*.py")):
            module = package if path.stem == "__init__" else f"{package}.{path.stem}"
            out.append(BuildSource(str(path.relative_to(ROOT)), module, None, str(ROOT)))
    return out


def workers() -> int:
    """mypy's worker processes: one per core this process may use, at most four (mypy's parallel
    mode gains little past that); none on one core, where its coordinator alone is faster."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(cores, 4) if cores > 1 else 0


def main(argv: list[str]) -> int:
    # the caller's -n/--num-workers, later on the line, overrides the default
    _, options = process_options(["--config-file", str(ROOT / "pyproject.toml"), "--num-workers", str(workers()), *argv],
                                 require_targets=False)
    try:
        result = build.build(sources(), options, stdout=sys.stdout, stderr=sys.stderr)
    except CompileError as exc:
        print("\n".join(exc.messages), file=sys.stderr)
        return 2
    for line in result.errors:
        print(line)
    errors = sum(": error:" in line for line in result.errors)
    if options.error_summary:
        print(f"Found {errors} error{'s' * (errors != 1)}" if errors else
              f"Success: no issues found in {len(sources())} source files")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
