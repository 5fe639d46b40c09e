"""Bad dataset rows give errors that name the file and the row."""
import json

import pytest

from litjudge.engine.core.errors import DataError
from litjudge.engine.data.readers import read_jsonl
from litjudge.engine.data.ttcw import load_recorded, load_ttcw
from tests.conftest import DATA, needs_data

STORY = {"story_idx": 0, "story_id": "0_GPT4", "story_name": "s", "plot": "p", "content": "A story."}
TEST = {"ttcw_idx": 1, "torrance_dimension": "Fluency", "category": "c", "question": "q?",
        "full_prompt": "bg\n\ninstr\n\nQ) q?"}


def make(tmp_path, stories=None, tests=None, majority=None):
    (tmp_path / "stories.json").write_text(json.dumps(stories if stories is not None else [STORY]))
    (tmp_path / "tests.json").write_text(json.dumps(tests if tests is not None else [TEST]))
    if majority is not None:
        (tmp_path / "expert_majority.json").write_text(json.dumps(majority))
    return tmp_path


@pytest.mark.parametrize("stories, tests, majority, message", [
    ([{**STORY, "content": ""}], None, None, "stories.json:1: field 'content' is empty"),
    ([STORY, {k: v for k, v in STORY.items() if k != "story_id"}], None, None, "stories.json:2: missing field 'story_id'"),
    ([STORY, STORY], None, None, "stories.json:2: duplicate story_id '0_GPT4' (first on line 1)"),
    (None, [TEST, TEST], None, "tests.json:2: duplicate ttcw_idx '1' (first on line 1)"),
    (None, [{**TEST, "ttcw_idx": "one"}], None, "tests.json:1: field 'ttcw_idx' should be a whole number"),
    (None, None, [{"story_id": "0_GPT4", "ttcw_idx": 7, "binary_verdict": "Yes"}], "expert_majority.json:1: unknown test id 7"),
    (None, None, [{"story_id": "9_X", "ttcw_idx": 1, "binary_verdict": "Yes"}], "expert_majority.json:1: unknown story_id '9_X'"),
    (None, None, [{"story_id": "0_GPT4", "ttcw_idx": 1, "binary_verdict": "maybe"}], "binary_verdict must be Yes or No"),
    # a hostile pass: an entry that is no object was an internal error (TypeError)
    ([STORY, 7], None, None, "stories.json:2: not a JSON object of fields (story_idx, story_id, content), got int 7"),
    (None, [TEST, "ttcw_idx"], None, "tests.json:2: not a JSON object of fields (ttcw_idx, torrance_dimension, category, "
                                     "question, full_prompt), got str 'ttcw_idx'"),
])
def test_bad_rows_name_file_and_row(tmp_path, stories, tests, majority, message):
    folder = make(tmp_path, stories, tests, majority)
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_ttcw(folder, require_labels=False)


def test_non_utf8_and_invalid_json_are_named(tmp_path):
    folder = make(tmp_path)
    (folder / "prompt_with_background.txt").write_bytes(b"Story:\n\xff{story}")     # an internal error before
    with pytest.raises(DataError, match=r"prompt_with_background.txt:2: not utf-8 text \(byte 0 of this line\)"):
        load_ttcw(folder, require_labels=False)
    (folder / "prompt_with_background.txt").unlink()
    (folder / "stories.json").write_bytes('[{"content": "caf\xe9"}]'.encode("cp1252"))
    with pytest.raises(DataError, match="stories.json:1: not utf-8 text"):
        load_ttcw(folder, require_labels=False)
    (folder / "stories.json").write_text('[{"a": 1,}]')
    with pytest.raises(DataError, match=r"stories.json:1: invalid JSON"):
        load_ttcw(folder, require_labels=False)
    (folder / "rec.jsonl").write_text('{"id": "a", "response": "Yes"}\n{"id": "a", "response": "No"}\n')
    with pytest.raises(DataError, match=r"rec.jsonl:2: duplicate id 'a' \(first on line 1\)"):
        load_recorded(folder / "rec.jsonl")


@pytest.mark.parametrize("text, said", [
    ('[\n {"pair_id": "p1"}\n]\n', "x.json:1: holds a JSON array; litjudge reads JSON Lines, one object per line"),
    ('\n[{"pair_id": "p1"}]\n', "x.json:2: holds a JSON array"),
    ('{\n "pair_id": "p1"\n}\n', "x.json:1: holds an object written over several lines; litjudge reads JSON Lines"),
])
def test_a_json_file_that_is_not_json_lines_says_so(tmp_path, text, said):
    """A new user's `--data arr.json`: valid JSON, refused as "invalid JSON (Expecting value)" or
    "expected a JSON object"."""
    (tmp_path / "x.json").write_text(text)
    with pytest.raises(DataError) as err:
        list(read_jsonl(tmp_path / "x.json"))
    assert str(err.value).startswith(str(tmp_path / said)), str(err.value)


@needs_data
def test_real_ttcw_loads_with_the_documented_shape():
    data = load_ttcw(DATA / "ttcw", DATA.parent / "prompts" / "ttcw_llm_instructions.json")
    assert len(data.stories) == 48 and sum(s.judgeable for s in data.stories) == 36
    assert len(data.tests) == 14 and all(t.instruction for t in data.tests)
    assert len(data.majority) == 672 and len(data.annotations) == 2016
    assert not data.test(1).background.rstrip().endswith("?")
