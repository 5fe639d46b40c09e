"""The warm path: a run whose every verdict is stored plans without vLLM, torch or transformers
(the context window from config.json, the tokenizer from tokenizer.json), with the same context
window, prompts, token ids and request keys as the engine's own tokenizer gives."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import litjudge
from litjudge.engine.backends.local.file_tokenizer import file_tokenizer
from litjudge.engine.backends.local.models import _config_max_len, model_max_len, resolve_judge
from litjudge.engine.backends.local.render import PromptRenderer, load_renderer
from litjudge.engine.core.requests import Message
from tests.conftest import PROJECT_ROOT, run_on

DEMO = PROJECT_ROOT / "runs" / "demo.toml"
HEAVY = ("vllm", "torch", "transformers")


@pytest.fixture(scope="module")
def default_judge():
    return resolve_judge("smollm2-135m")


def _transformers_max_len(path) -> int:
    """model_max_len as it was computed before config.json was read directly."""
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(path)
    cfg = getattr(cfg, "text_config", cfg)
    return int(getattr(cfg, "max_position_embeddings", 4096))


def test_the_context_window_is_the_one_transformers_reads(default_judge, tmp_path):
    folder = default_judge.path
    assert _config_max_len(PROJECT_ROOT / "nowhere" / "config.json") is None
    assert model_max_len(folder) == _config_max_len(Path(folder) / "config.json") \
        == _transformers_max_len(folder) == 8192
    composite = tmp_path / "composite"                  # a multimodal config: its text model's window
    composite.mkdir()
    (composite / "config.json").write_text(json.dumps({"model_type": "gemma3", "text_config": {
        "model_type": "gemma3_text", "max_position_embeddings": 32768}}))
    assert model_max_len(str(composite)) == _transformers_max_len(composite) == 32768
    unstated = tmp_path / "unstated"                    # not in the file: the config class's default, as before
    unstated.mkdir()
    (unstated / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert _config_max_len(unstated / "config.json") is None
    assert model_max_len(str(unstated)) == _transformers_max_len(unstated)


MESSAGES = [
    [Message("user", "Is this story original?\n\nOnce upon a time.")],
    [Message("system", "You judge stories."), Message("user", "Story:\n  a <|im_end|> b\n\nAnswer Yes or No.")],
    [Message("user", "Which is better, A or B?\n\nA: x\nB: y"), Message("assistant", "A")],
]


def test_the_file_tokenizer_renders_and_tokenizes_as_transformers(default_judge):
    from transformers import AutoTokenizer

    light, full = file_tokenizer(default_judge.path), AutoTokenizer.from_pretrained(default_judge.path)
    assert light is not None
    assert light.backend_tokenizer.to_str() == full.backend_tokenizer.to_str()
    assert (light.eos_token_id, light.chat_template, light.special_tokens_map) == \
        (full.eos_token_id, full.chat_template, full.special_tokens_map)
    ours, theirs = PromptRenderer(light, chat=True), PromptRenderer(full, chat=True)
    assert ours.template_hash == theirs.template_hash
    for _ in range(4):                                  # past the checks after which a layout is filled
        for messages in MESSAGES:
            for prefill in ("", "Answer:"):
                text = ours.render(messages, prefill)
                assert text == theirs.render(messages, prefill) and type(text) is type(theirs.render(messages, prefill))
                assert ours.encode_batch([text]) == theirs.encode_batch([text])
                assert ours.label_tokens(text, ["Yes", "No"]) == theirs.label_tokens(text, ["Yes", "No"])
    assert ours.pieces.figures() == theirs.pieces.figures()
    assert type(load_renderer(default_judge.path, True).tokenizer).__name__ == "FileTokenizer"


def test_the_trusted_model_types_keep_their_configs_tokenizer_class():
    """transformers loads a trusted type's folder by its tokenizer_config's class: none of them is
    one whose hub class it overrides, nor a Mistral-format one (a newer transformers adding one
    fails here, not in a plan's keys)."""
    from transformers.models.auto.tokenization_auto import MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS, TOKENIZER_MAPPING_NAMES

    from litjudge.engine.backends.local.file_tokenizer import TRUSTED_TYPES

    assert not TRUSTED_TYPES & MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS
    assert all(TOKENIZER_MAPPING_NAMES.get(t) != "MistralCommonBackend" for t in TRUSTED_TYPES)


@pytest.mark.parametrize("change", [{"add_bos_token": True}, {"tokenizer_class": "LlamaTokenizer"},
                                    {"extra_special_tokens": {"image_token": "<image>"}}, {"model_type": "qwen2"}])
def test_a_tokenizer_transformers_would_change_is_loaded_by_transformers(default_judge, tmp_path, change):
    _tokenizer_files(default_judge.path, tmp_path)
    assert file_tokenizer(str(tmp_path)) is not None                        # as it is: read from its files
    name = "config.json" if "model_type" in change else "tokenizer_config.json"
    config = json.loads((tmp_path / name).read_text())
    (tmp_path / name).write_text(json.dumps({**config, **change}))
    assert file_tokenizer(str(tmp_path)) is None


def _tokenizer_files(source: str, folder: Path) -> None:
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(os.path.join(source, name), folder / name)


WARM = """
import json, sys
from litjudge.engine.app.console.cli import command
import litjudge

code = command(["run", sys.argv[1]])
again = litjudge.run(sys.argv[1], progress=False)
print(json.dumps({"code": code, "generated": [j["generated"] for j in again.manifest.judges],
                  "heavy": sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[2].split(",")))}))
"""


def test_a_run_whose_verdicts_are_stored_imports_no_engine(smollm, runs_dir):
    """The demo judged once on the session's engine (the default judge, real vLLM); then a fresh
    process runs it again through the console and through litjudge.run: nothing generated, and
    neither vLLM, torch nor transformers imported."""
    first = run_on(smollm, DEMO, runs_dir / "demo")
    assert first.judges[0].generated == 12
    out = subprocess.run([sys.executable, "-c", WARM, str(DEMO), ",".join(HEAVY)], capture_output=True, text=True, timeout=300,
                         cwd=PROJECT_ROOT, env={**os.environ, "LITJUDGE_RUNS_DIR": str(runs_dir)})
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert "0 generated" in out.stdout, out.stdout[-2000:]
    got = json.loads(lines[-1])
    assert got["code"] == 0 and got["generated"] == [0]
    assert got["heavy"] == []
    cols = ["item_id", "label"]
    stored = litjudge.load(first.run_dir).verdicts.select(cols).sort("item_id")
    assert stored.equals(first.verdicts.select(cols).sort("item_id"))      # the same verdicts, aggregated again


def test_a_parsed_tokenizer_is_taken_again_only_when_free_and_unchanged(default_judge, tmp_path):
    """A repeated litjudge.judge() in one process reads tokenizer.json once, while its folder is as
    it was and no renderer still holds it (two renderers alive at once never share one)."""
    _tokenizer_files(default_judge.path, tmp_path)
    first = file_tokenizer(str(tmp_path))
    second = file_tokenizer(str(tmp_path))
    assert first is not None and second is not None
    assert second.backend_tokenizer is not first.backend_tokenizer          # both alive: one each
    held = second.backend_tokenizer
    del first, second
    third = file_tokenizer(str(tmp_path))
    assert third is not None and third.backend_tokenizer is held             # free and unchanged: taken again
    del third
    spec = json.loads((tmp_path / "tokenizer.json").read_text())
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec, indent=1))      # rewritten (the same tokenizer)
    fourth = file_tokenizer(str(tmp_path))
    assert fourth is not None and fourth.backend_tokenizer is not held       # its file changed: read again


def test_a_tokenizer_transformers_loads_is_taken_again_only_when_free_and_unchanged(default_judge, tmp_path):
    """The same for a folder transformers loads (Gemma 3's, 3.7-4.3 s a load on Zen 3; here the
    default judge's files beside a special_tokens_map.json): a sweep's cells on one judge, or
    `litjudge plan` over several configs, load it once; the renderer it serves again gives the
    same ids as a tokenizer loaded anew."""
    from transformers import AutoTokenizer

    _tokenizer_files(default_judge.path, tmp_path)
    (tmp_path / "special_tokens_map.json").write_text("{}")
    assert file_tokenizer(str(tmp_path)) is None                                # transformers' to load
    first, second = load_renderer(str(tmp_path), True), load_renderer(str(tmp_path), True)
    assert second.tokenizer is not first.tokenizer                             # both alive: one each
    held = second.tokenizer
    del first, second
    third = load_renderer(str(tmp_path), True)
    assert third.tokenizer is held                                             # free and unchanged: taken again
    prompt = third.render((Message("user", "Is it <|im_start|>original?"),))
    fresh = PromptRenderer(AutoTokenizer.from_pretrained(str(tmp_path)), True)
    assert str(prompt) == str(fresh.render((Message("user", "Is it <|im_start|>original?"),)))
    assert list(third.encode(prompt)) == list(fresh.encode(prompt))
    del third
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config, indent=1))   # rewritten (the same settings)
    fourth = load_renderer(str(tmp_path), True)
    assert fourth.tokenizer is not held                                        # its files changed: loaded again
