"""A start-up cost of vLLM 0.32: each engine looks for a chat template in the model's processor
(`vllm.renderers.hf._try_get_processor_chat_template`) by loading the folder with transformers'
`AutoProcessor`. For a text-only model that is the tokenizer loaded a second time, to find no
processor and so no template: 3.3 s of CPU of a Gemma 3 start (its 262k-token tokenizer; Xeon, one
core), and litjudge never uses that template (it renders its own prompts and hands vLLM token ids).

`known_text_only_folders` wraps that lookup (once per process) so that a local folder which names no
processor anywhere transformers would look answers None at once, as the full load would have; any
other folder (a hub id, a multimodal model, a processor file or class, remote code) is looked up as
before."""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from .vllm_patch import wrap_once

# The files AutoProcessor reads to find a processor (transformers 5: processing_auto.py), and a
# processor's own chat template file.
PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json", "video_preprocessor_config.json",
                   "chat_template.json")


def text_only(folder: Path, processor_types: frozenset[str]) -> bool:
    """The folder names no processor: no processor file, no `processor_class` or AutoProcessor in
    its configs, a model type transformers maps to none (`processor_types`)."""
    if not folder.is_dir() or any((folder / name).exists() for name in PROCESSOR_FILES):
        return False
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        tokenizer = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(config, dict) or not isinstance(tokenizer, dict):
        return False
    if "processor_class" in config or "processor_class" in tokenizer:
        return False
    if "AutoProcessor" in (config.get("auto_map") or {}) or "AutoProcessor" in (tokenizer.get("auto_map") or {}):
        return False
    return config.get("model_type") not in processor_types


def known_text_only_folders() -> None:
    """Wrap vLLM's processor chat-template lookup as the module says; nothing where vLLM has none."""
    try:
        from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES
        from vllm.renderers import hf
    except ImportError:
        return
    processor_types = frozenset(PROCESSOR_MAPPING_NAMES)

    def wrap(lookup: Any) -> Any:
        @functools.wraps(lookup)
        def quick(tokenizer: Any, **kwargs: Any) -> str | None:
            name = getattr(tokenizer, "name_or_path", None)
            if isinstance(name, str) and text_only(Path(name), processor_types):
                return None
            return lookup(tokenizer, **kwargs)
        return quick

    wrap_once(hf, "_try_get_processor_chat_template", wrap)
