"""The TTCW data (Chakrabarty et al. 2024): 48 stories, 14 tests, expert verdicts, recorded judges.

Only the 36 LLM-written stories have text; the 12 New Yorker stories are URLs (no permission to
redistribute), so they are kept as items without text and skipped, with that reason, wherever
text is needed. Rows are validated; a bad row names the file and its row (1-based).
"""
from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import DataError
from .readers import first_use, read_json_list, read_jsonl, read_text, require


@dataclass(frozen=True)
class TTCWTest:
    idx: int
    dimension: str
    category: str
    question: str
    full_prompt: str
    instruction: str = ""        # the paper's test-specific step-by-step instruction (if loaded)

    @property
    def background(self) -> str:
        """`full_prompt` minus its last two non-empty lines (the instruction and `Q) question`)."""
        lines = self.full_prompt.rstrip().split("\n")
        kept, dropped = list(lines), 0
        while kept and dropped < 2:
            if kept.pop().strip():
                dropped += 1
        return "\n".join(kept).strip()


@dataclass(frozen=True)
class Story:
    story_id: str
    group: int
    source: str                  # NewYorker, GPT3.5, GPT4, Claude
    name: str
    plot: str
    text: str | None             # None when the dataset only has a URL

    @property
    def judgeable(self) -> bool:
        return self.text is not None


@dataclass
class TTCWData:
    stories: list[Story]
    tests: list[TTCWTest]
    majority: dict[tuple[str, int], str] = field(default_factory=dict)       # (story, test) -> Yes/No
    annotations: list[tuple[str, int, int, str]] = field(default_factory=list)  # story, expert, test, verdict
    folder: Path | None = None
    upstream_template: str | None = None     # prompt_with_background.txt: [STORY], [BACKGROUND], [QUESTION]

    def test(self, idx: int) -> TTCWTest:
        for t in self.tests:
            if t.idx == idx:
                return t
        raise DataError(f"unknown TTCW test id {idx} (known: {[t.idx for t in self.tests]})")


TEST_IDS = tuple(range(1, 15))        # the paper's 14 tests


def check_tests(tests: tuple[int, ...]) -> None:
    """A protocol's `options.tests` names TTCW tests, each once: checked with the options, so a
    sweep names the cell (an unknown id was found only when the data was read, naming neither)."""
    if [t for t in tests if t not in TEST_IDS] or len(set(tests)) != len(tests):
        raise ValueError(f"options.tests names TTCW tests 1 to 14, each once, got {list(tests)}")


def item_id(story_id: str, test_idx: int) -> str:
    """The dataset's own item id (also used by the recorded judge outputs)."""
    return f"story_{story_id}_test{test_idx}"


def load_ttcw(folder: Path, instructions: Path | None = None, require_labels: bool = True) -> TTCWData:
    folder = Path(folder)
    if not folder.exists():
        raise DataError("TTCW data folder not found (set --data-root or LITJUDGE_DATA_ROOT)", path=str(folder))
    tests_path, stories_path = folder / "tests.json", folder / "stories.json"
    steps = _load_instructions(instructions) if instructions else {}
    tests = []
    test_rows: dict[str, int] = {}
    for row, rec in enumerate(read_json_list(tests_path), start=1):
        require(rec, {"ttcw_idx": int, "torrance_dimension": str, "category": str, "question": str,
                      "full_prompt": str}, tests_path, row)
        tests.append(TTCWTest(rec["ttcw_idx"], rec["torrance_dimension"], rec["category"], rec["question"],
                              rec["full_prompt"], _match_instruction(steps, rec)))
        first_use(test_rows, str(rec["ttcw_idx"]), "ttcw_idx", tests_path, row)
    stories: list[Story] = []
    story_rows: dict[str, int] = {}
    for row, rec in enumerate(read_json_list(stories_path), start=1):
        require(rec, {"story_idx": int, "story_id": str, "content": str}, stories_path, row)
        sid = rec["story_id"]
        first_use(story_rows, sid, "story_id", stories_path, row)
        content = rec["content"].strip()
        is_url = content.startswith(("http://", "https://")) and len(content.split()) == 1
        source = sid.split("_", 1)[1] if "_" in sid else "unknown"
        stories.append(Story(sid, rec["story_idx"], source, rec.get("story_name", ""), rec.get("plot", ""),
                             None if is_url else content))
    template = folder / "prompt_with_background.txt"
    data = TTCWData(stories, tests, folder=folder,
                    upstream_template=read_text(template, ("utf-8",)) if template.exists() else None)
    known_tests, known_stories = {t.idx for t in tests}, {s.story_id for s in stories}
    maj = folder / "expert_majority.json"
    if maj.exists():
        first: dict[tuple[str, int], int] = {}
        for row, rec in enumerate(read_json_list(maj), start=1):
            require(rec, {"story_id": str, "ttcw_idx": int, "binary_verdict": str}, maj, row)
            _check_ids(rec, known_stories, known_tests, maj, row)
            key = (rec["story_id"], rec["ttcw_idx"])
            if key in first:
                same = "the same verdict" if data.majority[key] == rec["binary_verdict"] else "a different verdict"
                raise DataError(f"story_id {key[0]!r}, ttcw_idx {key[1]} is labelled twice (rows {first[key]} and "
                                f"{row}, {same}): keep one row per item", path=str(maj), row=row)
            first[key] = row
            data.majority[key] = rec["binary_verdict"]
    elif require_labels:
        raise DataError("expert_majority.json not found", path=str(maj))
    ann = folder / "expert_annotations.json"
    if ann.exists():
        rows: dict[tuple[str, int, int], int] = {}
        for row, rec in enumerate(read_json_list(ann), start=1):
            require(rec, {"story_id": str, "expert_idx": int, "ttcw_idx": int, "binary_verdict": str}, ann, row)
            _check_ids(rec, known_stories, known_tests, ann, row)
            key3 = (rec["story_id"], rec["expert_idx"], rec["ttcw_idx"])
            if key3 in rows:
                raise DataError(f"expert {key3[1]} labels story_id {key3[0]!r}, ttcw_idx {key3[2]} twice (rows "
                                f"{rows[key3]} and {row})", path=str(ann), row=row)
            rows[key3] = row
            data.annotations.append((rec["story_id"], rec["expert_idx"], rec["ttcw_idx"], rec["binary_verdict"]))
    return data


def _check_ids(rec: dict, stories: set[str], tests: set[int], path: Path, row: int) -> None:
    if rec["story_id"] not in stories:
        raise DataError(f"unknown story_id {rec['story_id']!r}", path=str(path), row=row)
    if rec["ttcw_idx"] not in tests:
        raise DataError(f"unknown test id {rec['ttcw_idx']}", path=str(path), row=row)
    if rec["binary_verdict"] not in ("Yes", "No"):
        raise DataError(f"binary_verdict must be Yes or No, got {rec['binary_verdict']!r}", path=str(path), row=row)


def _load_instructions(path: Path) -> dict[str, dict]:
    if not path.exists():
        raise DataError("TTCW LLM instructions not found", path=str(path))
    return json.loads(path.read_text(encoding="utf-8"))["tests"]


def _match_instruction(steps: dict[str, dict], rec: dict) -> str:
    """The paper keys instructions by dimension+number; match within the dimension by question."""
    same_dim = {k: v for k, v in steps.items() if k.rstrip("0123456789") == rec["torrance_dimension"]}
    if not same_dim:
        return ""
    best = max(same_dim, key=lambda k: difflib.SequenceMatcher(None, same_dim[k]["question"], rec["question"]).ratio())
    return same_dim[best]["instruction"]


def load_recorded(path: Path) -> dict[str, str]:
    """A recorded judge's responses by item id (`{"id": ..., "response": ...}` per line)."""
    out: dict[str, str] = {}
    rows: dict[str, int] = {}
    for n, rec in read_jsonl(path):
        require(rec, {"id": str}, path, n)
        first_use(rows, rec["id"], "id", path, n)
        response = rec.get("response")
        if response is not None and not isinstance(response, str):
            raise DataError(f"field 'response' must be text (a string), got {type(response).__name__}", path=str(path),
                            row=n)
        out[rec["id"]] = response or ""
    return out
