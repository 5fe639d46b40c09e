"""Replay of recorded judge outputs, served by item id: recomputes published LLM-vs-human agreement
with no model, through the same planner, store, parsing and metrics as live judges.

Judge names: `replay:NAME` reads `<TTCW folder>/judge_outputs/NAME.jsonl` (the TTCW card's folder
under the data root); `replay:PATH.jsonl` reads any JSONL of `{"id": item_id, "response": text}`
(a relative path as given, else beside the config file).
Recorded text is all there is: label mode only (the recorded text is parsed as the verdict).
"""
from __future__ import annotations

import hashlib
import weakref
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path

import polars as pl

from ..core.backend import Backend, Capabilities, JudgeSpec
from ..core.config import RunConfig, source_folder
from ..core.errors import DataError, JudgeNotFound, LitjudgeError
from ..core.paths import path_version
from ..core.requests import Generation, JudgeIdentity, JudgeRequest, Prepared
from ..data.cards import load_card
from ..data.ttcw import load_recorded
from .base import WordTokenizer
from .local.render import plain_layout

NO_MODEL = "recorded responses are text: there is no model to ask for probabilities or an analysis"


def replay_source(name: str, config: RunConfig) -> Path:
    """The recorded outputs of `replay:NAME` (the TTCW data's judge_outputs/NAME.jsonl) or
    `replay:FILE.jsonl`; a missing one says which of the three it is: an unknown name (the known
    ones listed), the TTCW data absent from the data root, or a missing file."""
    ref = name.removeprefix("replay:")
    if not ref.strip() or ("/" in ref and not ref.endswith(".jsonl")):
        # "replay:" or "replay:/tmp" was looked up as a recorded TTCW judge of that name
        raise JudgeNotFound(f"judge {name!r}: replay:NAME names a recorded TTCW judge, replay:FILE.jsonl a file of "
                            "yours (one JSON object per line, {\"id\": ..., \"response\": ...})")
    path = Path(ref)
    if path.suffix == ".jsonl":
        beside = source_folder(config.source) / path if config.source else path
        if not path.is_absolute() and path.is_file() and beside.is_file() and not path.samefile(beside):
            # a run from another folder read another file of the name: other verdicts, silently
            raise JudgeNotFound(f"judge {name!r}: {ref} is both beside the config ({beside}) and in the working "
                                f"folder ({path.resolve()}), two files: give the path of the one meant")
        path = beside if not path.is_absolute() and not path.exists() and beside.is_file() else path
        if not path.exists():
            raise JudgeNotFound(f"no recorded outputs for judge {name!r}: {path} does not exist")
        if not path.is_file():          # a folder; a pipe or a device was read forever
            raise JudgeNotFound(f"the recorded outputs of judge {name!r}, {path}, are not a file (a folder, a device or "
                                "a pipe): give a JSONL file")
        return path
    folder = load_card("ttcw").folder(config.data_root)
    path = folder / "judge_outputs" / f"{ref}.jsonl"
    if path.exists():
        return path
    if (folder / "judge_outputs").is_dir():
        known = sorted(p.stem for p in (folder / "judge_outputs").glob("*.jsonl"))
        raise JudgeNotFound(f"no recorded judge {ref!r} in {folder / 'judge_outputs'} (recorded: "
                            f"{', '.join(known) or 'none'}; or replay:FILE.jsonl for your own)")
    where = "--data-root / data_root" if config.data_root else "the data root"
    raise JudgeNotFound(f"judge {name!r} replays the TTCW data's recorded outputs, which are not at {folder} "
                        f"({where}): run `litjudge data fetch ttcw`, or point {where} at the folder holding ttcw/")


class _Answers(dict):
    """Recorded answers by item id (a dict that can be referenced weakly)."""


_read: weakref.WeakValueDictionary[tuple, _Answers] = weakref.WeakValueDictionary()


def _recorded(path: Path) -> dict[str, str]:
    """The recorded answers, read once per version of the file while a judge holds them: a run opens
    its judge twice (to plan, to answer), and a million answers take 6 s to read and check. Kept
    only as long as a backend holds them (a long Python session does not keep every file read)."""
    try:
        st = path.stat()
        version = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    except OSError:
        return load_recorded(path)          # not there: load_recorded says so, naming the file
    answers = _read.get(version)
    if answers is None:
        answers = _read[version] = _Answers(load_recorded(path))
    return answers


class ReplayBackend(Backend):
    name = "replay"
    capabilities = Capabilities(frozenset({"label"}), recorded=True,
                                notes={"distribution": NO_MODEL, "analyze": NO_MODEL, "reward": NO_MODEL})

    @classmethod
    def source_version(cls, name: str, config: RunConfig, prefix: str = "") -> tuple:
        """The recording as it is now: edited in place, or another folder's file of the same name,
        it is resolved again (its checksum is part of every key)."""
        return path_version(replay_source(name, config))

    @classmethod
    def resolve(cls, name: str, config: RunConfig, prefix: str = "") -> JudgeSpec:
        path = replay_source(name, config)
        checksum = hashlib.sha256(path.read_bytes()).hexdigest()
        return JudgeSpec(name, cls.name, str(path), f"replay:{path.stem}:sha256:{checksum[:16]}", "replay", False,
                         config.engine, config.api, (("sha256", checksum),))

    def __init__(self, spec: JudgeSpec):
        self.spec = spec
        path = Path(spec.target)
        self.records = _recorded(path)
        # Its checksum is in every key: the answers read must be those of the file the run planned
        # with (a recording edited while a sweep ran its earlier judges was stored under the old one).
        now = hashlib.sha256(path.read_bytes()).hexdigest()
        if now != spec.detail("sha256"):
            raise DataError(f"the recording changed after the run planned with it (sha256 {spec.detail('sha256')[:16]} "
                            f"then, {now[:16]} now): nothing of it was stored; run again to judge with it as it is",
                            path=str(path))
        self._tok = WordTokenizer()

    def identity(self) -> JudgeIdentity:
        return JudgeIdentity(self.spec.fingerprint, "none", "replay")

    def tokenizer(self):
        return self._tok

    def render(self, request: JudgeRequest) -> str:
        return plain_layout(request.messages)

    def encode(self, prompt: str) -> list[int]:
        return self._tok.encode(prompt)

    def encode_batch(self, prompts: list[str]) -> list[array]:
        return self._tok.encode_batch(prompts)

    def context_window(self) -> int:
        return 1 << 30

    def describe(self) -> dict:
        return {"backend": "replay", "source": self.spec.target, "sha256": self.spec.detail("sha256"),
                "records": len(self.records)}

    def generate(self, batch: Sequence[Prepared]) -> Iterator[Generation]:
        for p in batch:
            item = p.request.meta.item_id
            if item in self.records:
                yield Generation(p.key, self.records[item], prompt_tokens=p.prompt_tokens)
            else:
                yield Generation(p.key, "", error=NO_RESPONSE)


NO_RESPONSE = "the recording has no response for this id"


def unmatched_ids(verdicts: pl.DataFrame, specs: Sequence[JudgeSpec]) -> list[str]:
    """A line per replayed judge whose recording had no response for some item asked: with the
    recording's ids the run did not ask, where it holds any (keyed by other ids than the data's, or
    a misspelt id), which were never named; a missing response is otherwise only an unparsed
    verdict among the rest. (Ids asked for none, with every item answered, are the items a --limit
    or a test subset left out: not said.)"""
    out = []
    for spec in specs:
        if spec.backend != ReplayBackend.name or not {"judge", "reason", "item_id"} <= set(verdicts.columns):
            continue
        mine = verdicts.filter(pl.col("judge") == spec.name)
        missed = sorted(set(mine.filter(pl.col("reason") == NO_RESPONSE)["item_id"].to_list()))
        if not missed:
            continue
        asked = set(mine["item_id"].to_list())
        records: dict[str, str] = {}
        if spec.target and Path(spec.target).is_file():     # a rebuild from the manifest: no file named
            try:
                records = _recorded(Path(spec.target))
            except LitjudgeError:          # unreadable now: the run read it, a rebuild need not
                pass
        unused = sorted(i for i in records if i not in asked)
        # ascii: an id in another Unicode form than the data's looked the same as the item's
        if len(missed) == len(asked):
            if unused:
                out.append(f"{spec.name}: none of its recording's {len(records)} ids is an item of the run (e.g. "
                           f"{unused[0]!a}, where the run asked e.g. {missed[0]!a}): are its ids the data's?")
            continue
        out.append(f"{spec.name}: its recording has no response for {len(missed)} of the {len(asked)} items asked "
                   f"(e.g. {missed[0]!a}; each an unparsed verdict)"
                   + (f", and holds {len(unused)} id{'s' * (len(unused) != 1)} the run did not ask (e.g. "
                      f"{unused[0]!a}): a misspelt id?"
                      if unused else ""))
    return out
