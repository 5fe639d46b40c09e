"""A judge's tokenizer and chat template read from its folder's files, without transformers.

Planning a run whose every verdict is stored needs only the prompts and their token ids, and
importing transformers (with torch behind it) cost 13-20 s of such a run's 16-28 s here. A folder
that transformers would load as its generic tokenizer (`TokenizersBackend`: tokenizer.json as it
is, for a model type that keeps its tokenizer_config's class) is read here with the `tokenizers`
package, and its chat template rendered as transformers renders it (a sandboxed Jinja environment
with the same options, filters and globals, the named special tokens as variables). Anything else
transformers would do on loading (rebuild the tokenizer for a model-specific class, add special
tokens the file lacks, change its post-processor, truncation or padding, pick among several
templates) is not repeated here: such a folder gets None from `file_tokenizer`, and transformers
loads it as before. tests/test_warm_path.py compares both on the default judge, id for id and
prompt for prompt.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from .reuse import FolderReuse

# The generic class of transformers 5 (PreTrainedTokenizerFast is its alias): it takes tokenizer.json as it is.
GENERIC = ("TokenizersBackend", "PreTrainedTokenizerFast")
NAMED = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
# Model types whose folders transformers loads by their tokenizer_config's class (for some others,
# Qwen2's among them, it overrides a generic class with its own: those go to transformers; the
# test of this module checks these against transformers' own table).
TRUSTED_TYPES = frozenset({"llama", "gemma", "gemma2", "gemma3", "gemma3_text", "olmo2", "granite"})
# tokenizer_config.json keys that change nothing the renderer uses (what the class keeps as settings).
INERT = {"backend", "is_local", "local_files_only", "model_max_length", "tokenizer_class", "chat_template",
         "clean_up_tokenization_spaces", "padding_side", "truncation_side", "model_input_names", "errors",
         "name_or_path", "added_tokens_decoder", "split_special_tokens", *NAMED}


class FileTokenizer:
    """The parts of a transformers tokenizer a renderer uses: the Rust tokenizer, the chat template
    and the named special tokens."""

    def __init__(self, backend: Any, chat_template: str | None, special: dict[str, str]):
        self.backend_tokenizer = backend
        self.chat_template = chat_template
        self.special_tokens_map = special
        eos = special.get("eos_token")
        self.eos_token_id = backend.token_to_id(eos) if eos is not None else None

    def apply_chat_template(self, conversation: Sequence[dict], tokenize: bool = False,
                            add_generation_prompt: bool = False) -> str:
        if tokenize or self.chat_template is None:
            raise ValueError("a file tokenizer renders text with its own chat template only")
        if not conversation:
            raise ValueError("Cannot apply chat template to an empty conversation. Provide at least one message.")
        return _compiled(self.chat_template).render(messages=list(conversation), tools=None, documents=None,
                                                    add_generation_prompt=add_generation_prompt,
                                                    **self.special_tokens_map)


def file_tokenizer(path: str) -> FileTokenizer | None:
    """The folder's tokenizer read from its files, or None where transformers would load it otherwise."""
    folder = Path(path)
    try:
        model = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        if not isinstance(model, dict) or model.get("model_type") not in TRUSTED_TYPES:
            return None
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        if not isinstance(config, dict) or config.get("tokenizer_class") not in GENERIC or set(config) - INERT:
            return None
        if config.get("split_special_tokens") or (folder / "special_tokens_map.json").exists():
            return None
        if (folder / "additional_chat_templates").exists() or (folder / "chat_template.json").exists():
            return None
        template = config.get("chat_template")
        if (folder / "chat_template.jinja").exists():
            template = (folder / "chat_template.jinja").read_text(encoding="utf-8")
        if template is not None and not isinstance(template, str):
            return None                        # several named templates: transformers picks
        named = {k: _content(config[k]) for k in NAMED if config.get(k) is not None}
        special = {k: v for k, v in named.items() if v is not None}
        if len(special) < len(named):
            return None
        backend, keep = _parsed(folder)
    except Exception:  # noqa: BLE001  (unreadable files; the Rust loader raises its own type): transformers says why
        return None
    if not _as_is(backend, config, special) or (template is not None and not _compiles(template)):
        return None
    backend.encode_special_tokens = False
    return keep(FileTokenizer(backend, template, special))


def _content(token: Any) -> str | None:
    """A special token as tokenizer_config.json writes it: its text, or an AddedToken's fields."""
    if isinstance(token, str):
        return token
    if isinstance(token, dict) and isinstance(token.get("content"), str):
        return token["content"]
    return None


def _as_is(backend: Any, config: dict, special: dict[str, str]) -> bool:
    """Whether transformers would leave tokenizer.json as it is: no truncation or padding, a
    post-processor of its own, no vocabulary past 100k (transformers may patch a Mistral regex
    there), every named special token and every token of the config's added_tokens_decoder already
    an added token with the same fields."""
    if backend.truncation is not None or backend.padding is not None or backend.post_processor is None:
        return False
    if backend.get_vocab_size() > 100_000:
        return False
    added = backend.get_added_tokens_decoder()
    by_text = {t.content: t for t in added.values()}
    if any(not by_text.get(text) or not by_text[text].special for text in special.values()):
        return False
    fields = ("content", "single_word", "lstrip", "rstrip", "normalized", "special")
    declared = config.get("added_tokens_decoder") or {}
    if not isinstance(declared, dict):
        return False
    for index, token in declared.items():
        have = added.get(int(index))
        if have is None or not isinstance(token, dict):
            return False
        if any(k in token and token[k] != getattr(have, k) for k in fields):
            return False
    return True


def _compiles(template: str) -> bool:
    """Whether the template compiles here (one using transformers' own `{% generation %}` tag does not)."""
    import jinja2

    try:
        _compiled(template)
    except jinja2.TemplateError:
        return False
    return True


@cache
def _compiled(template: str) -> Any:
    """The template compiled as transformers compiles it (utils/chat_template_utils.py): a sandboxed
    environment trimming blocks, loop controls, its tojson, raise_exception and strftime_now.
    transformers also registers a `{% generation %}` tag (for assistant masks): a template using it
    fails to compile here, and transformers loads that folder."""
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
               sort_keys: bool = False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format: str) -> str:
        return datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(template)


_PARSED: FolderReuse[Any] = FolderReuse()        # each folder's tokenizer.json, parsed


def _parsed(folder: Path) -> tuple[Any, Any]:
    """The folder's tokenizer.json parsed, and how to record who holds it (reuse.py: a process
    judging again takes the one parsed before while it is free and the folder unchanged)."""
    from tokenizers import Tokenizer

    return _PARSED.take(folder, lambda: Tokenizer.from_file(str(folder / "tokenizer.json")))
