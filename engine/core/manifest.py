"""What a run records about itself so that it can be reproduced and compared."""
from __future__ import annotations

import dataclasses
import hashlib
import os
import platform
import subprocess
import sys
import tomllib
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from .paths import PROJECT_ROOT, sha256_file


def package_version(distribution: str) -> str | None:
    """An installed distribution's version (None: not installed). Only an installer's record counts
    (a RECORD file, PEP 627): a `NAME.egg-info` folder a build left in a source tree is no
    installation, and from the checkout root (on the path first) it would shadow the real one."""
    return next((d.version for d in metadata.distributions(name=distribution) if d.read_text("RECORD") is not None),
                None)


@cache
def litjudge_version() -> str:
    """litjudge's version (`litjudge --version`, `litjudge.__version__`, every manifest): the
    installed distribution's metadata; where there is none (the code put on the path by hand), the
    version the checkout's pyproject.toml declares."""
    return package_version("litjudge") or checkout_version(PROJECT_ROOT)


def checkout_version(root: Path) -> str:
    """The version litjudge's pyproject.toml in `root` declares; "0+unknown" when there is none."""
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    except (OSError, tomllib.TOMLDecodeError, KeyError):
        return "0+unknown"
    return str(project.get("version", "0+unknown")) if project.get("name") == "litjudge" else "0+unknown"


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=PROJECT_ROOT,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "") if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"python": sys.version.split()[0], "platform": platform.platform(),
                            "cpu_count": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    torch_version = package_version("torch")
    if torch_version:
        info["torch"] = torch_version
    torch = sys.modules.get("torch")      # loaded by a local engine; a run without one (API, replay) has no GPU
    if torch is not None and torch.cuda.is_available():   # of its own, and importing torch costs it a second
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def config_dict(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj):
        return {f.name: config_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [config_dict(x) for x in obj]
    if isinstance(obj, dict):
        return {k: config_dict(v) for k, v in obj.items()}
    return obj


# A data folder past this size is named and counted, not hashed (TTCW's is 4.8 MB: 10 ms).
FOLDER_HASH_LIMIT = 1 << 30


def data_identity(location: Path) -> dict[str, Any]:
    """Where a run's data was read from, its size and sha256, so a result can be traced to the
    exact bytes judged and `reparse` can say the labels changed (a TTCW folder's experts' labels
    edited were read in silence). A folder's sha256 is over its files' relative paths and
    contents, hidden ones left out; past FOLDER_HASH_LIMIT bytes it is only counted."""
    out: dict[str, Any] = {"path": str(location)}
    if location.is_file():
        out.update(bytes=location.stat().st_size, sha256=sha256_file(location).hexdigest())
    elif location.is_dir():
        files = sorted(p for p in location.rglob("*") if p.is_file()
                       and not any(part.startswith(".") for part in p.relative_to(location).parts))
        out.update(files=len(files), bytes=sum(p.stat().st_size for p in files))
        if out["bytes"] <= FOLDER_HASH_LIMIT:
            digest = hashlib.sha256()
            for p in files:
                digest.update(p.relative_to(location).as_posix().encode() + b"\0" + sha256_file(p).digest())
            out["sha256"] = digest.hexdigest()
    return out
