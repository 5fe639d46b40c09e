"""The shared datasets with their texts cut short, in their own layout (a `--data` folder, or a data
root for LITJUDGE_DATA_ROOT): every file, story, test, label and recorded judge output as it is,
only the long texts shorter. Prefill of whole stories (and of TTCW's 14 backgrounds, ~280 tokens
each, after each story) is what the committed configs' tests spent their CPU on, at ~280 tokens/s
on one core; a test that reads no number that depends on a text's length runs the same path on these."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import DATA, PROJECT_ROOT


def paragraphs(text: str, n: int) -> str:
    """The first `n` paragraphs of `text`."""
    return "\n\n".join(text.split("\n\n")[:n])


def ttcw_cut_short(folder: Path, *, story_paragraphs: int = 2, short_backgrounds: bool = False) -> Path:
    """The TTCW folder (every story, label and recorded judge output) with each story cut to its
    first `story_paragraphs` paragraphs; with `short_backgrounds`, each test's background cut to its
    first paragraph (its instruction and `Q)` question, the last two lines, kept)."""
    src = DATA / "ttcw"
    shutil.copytree(src, folder, ignore=shutil.ignore_patterns("stories.json", "tests.json"))
    stories = json.loads((src / "stories.json").read_text())
    for s in stories:
        if not s["content"].startswith("http"):
            s["content"] = paragraphs(s["content"], story_paragraphs)
    (folder / "stories.json").write_text(json.dumps(stories))
    tests = json.loads((src / "tests.json").read_text())
    if short_backgrounds:
        for t in tests:
            lines = [line for line in t["full_prompt"].split("\n") if line.strip()]
            t["full_prompt"] = "\n\n".join([paragraphs(t["full_prompt"], 1), *lines[-2:]])
    (folder / "tests.json").write_text(json.dumps(tests))
    return folder


def confederacy_cut_short(folder: Path, story_paragraphs: int = 1) -> Path:
    """The Confederacy folder (ratings, mapping) with each story cut to its first `story_paragraphs`
    paragraphs (in UTF-8: the cp1252 files read the same)."""
    src = DATA / "confederacy"
    shutil.copytree(src, folder, ignore=shutil.ignore_patterns("stories"))
    (folder / "stories").mkdir()
    for path in sorted((src / "stories").iterdir()):
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("cp1252")
        text = paragraphs(text.replace("\r\n", "\n").strip(), story_paragraphs)
        (folder / "stories" / path.name).write_text(text, encoding="utf-8")
    return folder


def demo_cut_short(folder: Path) -> Path:
    """The demo sample (`--data`: the same layout, 3 stories and 4 tests) with each story cut to its
    first paragraph: 3 x 4 prompts of 140-240 tokens in place of 270-330."""
    src = PROJECT_ROOT / "datasets" / "demo" / "ttcw-demo"
    folder.mkdir()
    stories = json.loads((src / "stories.json").read_text())
    for story in stories:
        story["content"] = paragraphs(story["content"], 1)
    (folder / "stories.json").write_text(json.dumps(stories))
    shutil.copy(src / "tests.json", folder / "tests.json")
    return folder


def first_story_cut_short(folder: Path) -> Path:
    """The TTCW data (`--data`) with its first story only, cut to its first two paragraphs (154 of
    its 1,270 words), and that story's expert verdicts: the same layout, tests and labels, with a
    prompt of ~600 tokens in place of ~1,950."""
    src = DATA / "ttcw"
    folder.mkdir()
    story = next(s for s in json.loads((src / "stories.json").read_text()) if not s["content"].startswith("http"))
    story["content"] = paragraphs(story["content"], 2)
    (folder / "stories.json").write_text(json.dumps([story]))
    for name in ("expert_majority.json", "expert_annotations.json"):
        rows = json.loads((src / name).read_text())
        (folder / name).write_text(json.dumps([r for r in rows if r["story_id"] == story["story_id"]]))
    for name in ("tests.json", "prompt_with_background.txt"):
        shutil.copy(src / name, folder / name)
    return folder
