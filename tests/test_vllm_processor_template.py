"""vLLM's processor chat-template lookup (engine/backends/local/vllm_processor_template.py): a local
text-only folder answers None at once, as vLLM's own load of it does; a folder that names a
processor anywhere transformers looks is looked up by vLLM as before."""
import json
import shutil
import time

import pytest
from transformers import AutoTokenizer
from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES
from vllm.renderers import hf

from litjudge.engine import backends
from litjudge.engine.backends.local.vllm_processor_template import known_text_only_folders, text_only

TYPES = frozenset(PROCESSOR_MAPPING_NAMES)


def lookup(tokenizer):
    return hf._try_get_processor_chat_template(tokenizer, revision=None, code_revision=None, trust_remote_code=False)


def test_a_text_only_folder_answers_none_at_once_as_vllm_does():
    known_text_only_folders()
    known_text_only_folders()                                   # wrapped once per process
    assert hf._try_get_processor_chat_template.litjudge_wrapped
    original = hf._try_get_processor_chat_template.__wrapped__
    for judge in ("smollm2-135m", "gemma3-270m"):
        tokenizer = AutoTokenizer.from_pretrained(backends.model_spec(judge).target)
        start = time.perf_counter()
        assert lookup(tokenizer) is None
        assert time.perf_counter() - start < 1.0, judge         # Gemma 3's full lookup: 3.3 s
    # vLLM's own lookup of the small judge (its cache cleared) says the same: no processor template
    smollm = AutoTokenizer.from_pretrained(backends.model_spec("smollm2-135m").target)
    hf._PROCESSOR_CHAT_TEMPLATES.clear()
    assert original(smollm, revision=None, code_revision=None, trust_remote_code=False) is None


@pytest.mark.parametrize("change", ["preprocessor_config.json", "processor_config.json", "chat_template.json",
                                    "tokenizer processor_class", "config processor_class", "config auto_map",
                                    "multimodal model type", "no config", "not a folder"])
def test_a_folder_naming_a_processor_is_looked_up_as_before(tmp_path, change):
    folder = tmp_path / "judge"
    folder.mkdir()
    source = backends.model_spec("smollm2-135m").target
    for name in ("config.json", "tokenizer_config.json"):
        shutil.copy(f"{source}/{name}", folder / name)
    assert text_only(folder, TYPES)
    config, tokenizer = (json.loads((folder / n).read_text()) for n in ("config.json", "tokenizer_config.json"))
    if change.endswith(".json"):
        (folder / change).write_text("{}")
    elif change == "tokenizer processor_class":
        tokenizer["processor_class"] = "LlavaProcessor"
    elif change == "config processor_class":
        config["processor_class"] = "LlavaProcessor"
    elif change == "config auto_map":
        config["auto_map"] = {"AutoProcessor": "processing.MyProcessor"}
    elif change == "multimodal model type":
        config["model_type"] = "gemma3"
    elif change == "no config":
        (folder / "config.json").unlink()
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    if change != "no config":
        (folder / "config.json").write_text(json.dumps(config))
    target = folder / "absent" if change == "not a folder" else folder
    assert not text_only(target, TYPES)
