"""A judge named by hub id, `org/name[@revision]`, resolves through the Hugging Face cache with
HF_HOME and HF_HUB_OFFLINE honoured, and its snapshot's commit is pinned in the key and the
manifest. No network here: the test lays out a real hub cache (blobs, snapshots, refs/main)
holding the default judge, and runs it by repo id offline."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from litjudge.engine.backends.local.models import resolve_judge
from tests.conftest import PROJECT_ROOT, litjudge, write_config

REPO = "litjudge-test/smollm2-135m"
COMMIT = "3f1c0d6a9e8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d"


@pytest.fixture(scope="module")
def hub_home(tmp_path_factory) -> Path:
    """$HF_HOME with hub/models--ORG--NAME/{blobs,snapshots/COMMIT,refs/main}, as the hub writes it."""
    home = tmp_path_factory.mktemp("hf_home")
    model = home / "hub" / ("models--" + REPO.replace("/", "--"))
    (model / "refs").mkdir(parents=True)
    (model / "refs" / "main").write_text(COMMIT)
    snapshot = model / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    (model / "blobs").mkdir()
    source = Path(resolve_judge("smollm2-135m").path)
    for f in source.iterdir():
        if f.name.startswith("litjudge-"):
            continue
        digest = hashlib.sha256(f.read_bytes()).hexdigest()
        (model / "blobs" / digest).symlink_to(f)
        (snapshot / f.name).symlink_to(Path("..") / ".." / "blobs" / digest)
    return home


def offline(home: Path) -> dict[str, str]:
    return {"HF_HOME": str(home), "HF_HUB_OFFLINE": "1"}


def resolve_offline(home: Path, *names: str) -> list[dict]:
    """resolve_judge in a fresh process (the hub library reads HF_HOME and HF_HUB_OFFLINE at import)."""
    code = ("import json, sys\nfrom engine.backends.local.models import resolve_judge\nfrom engine.core.errors import LitjudgeError\n"
            "for name in sys.argv[1:]:\n    try:\n        r = resolve_judge(name)\n"
            "        print(json.dumps({'path': r.path, 'fingerprint': r.fingerprint, 'chat': r.chat}))\n"
            "    except LitjudgeError as exc:\n        print(json.dumps({'error': str(exc)}))\n")
    r = subprocess.run([sys.executable, "-c", code, *names], cwd=PROJECT_ROOT, capture_output=True, text=True,
                       env={**os.environ, **offline(home)}, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


def test_hub_ids_resolve_to_the_cached_snapshot_offline(hub_home):
    by_main, by_commit, by_ref, unknown, absent = resolve_offline(
        hub_home, REPO, f"{REPO}@{COMMIT}", f"{REPO}@main", f"{REPO}@{'0' * 40}", "nobody/nothing")
    snapshot = hub_home / "hub" / ("models--" + REPO.replace("/", "--")) / "snapshots" / COMMIT
    for got in (by_main, by_commit, by_ref):
        assert got == {"path": str(snapshot), "fingerprint": f"hub:{REPO}@{COMMIT}", "chat": True}
    for got in (unknown, absent):
        assert "not in the Hugging Face cache (HF_HUB_OFFLINE is set)" in got["error"]
        assert "\n" not in got["error"]


@pytest.mark.slow
def test_a_hub_judge_runs_offline_and_its_commit_is_in_the_manifest(hub_home, tmp_path):
    cfg = write_config(tmp_path / "hub.toml", f'name = "hub"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\njudge = "{REPO}"\n'
                       'limit = 1\n[engine]\nmax_model_len = 2048\nkv_cache_gib = 1\n[options]\ntests = [1]\n')
    r = litjudge("run", str(cfg), "--quiet", env={**offline(hub_home), "LITJUDGE_RUNS_DIR": str(tmp_path / "runs")})
    assert r.returncode == 0, r.stderr[-3000:]
    manifest = json.loads((tmp_path / "runs" / "hub" / "manifest.json").read_text())
    (judge,) = manifest["judges"]
    assert judge["judge"] == REPO and judge["fingerprint"] == f"hub:{REPO}@{COMMIT}"
    assert manifest["verdicts"]["rows"] >= 1


def test_a_malformed_repo_id_is_said_to_be_one_not_an_unreachable_hub():
    """A hostile pass: `org/` and `org/na me` were "not in the Hugging Face cache and the hub is not
    reachable: HFValidationError", of names no repo could have."""
    from litjudge.engine.backends.local.models import resolve_judge
    from litjudge.engine.core.errors import JudgeNotFound

    for name in ("org/", "org/na me"):
        with pytest.raises(JudgeNotFound, match=rf"hub model '{name}': not a repo id \(") as refused:
            resolve_judge(name)
        assert "reachable" not in str(refused.value) and "\n" not in str(refused.value)
