"""The user's own data from any folder, with their own column names: an inline [dataset] table
(or `--data FILE` over a card's layout) read as JSONL, CSV, Parquet or a saved Hugging Face
dataset, renamed by the card's mapping; a bad row fails naming the file, its line and the user's
column."""
from __future__ import annotations

import hashlib
import json
import os
import re

import polars as pl
import pytest

from litjudge.engine.app.run import run
from litjudge.engine.core.config import load_config
from litjudge.engine.core.errors import DataError, LitjudgeError
from litjudge.engine.data.cards import dataset_card, load_card, with_data
from litjudge.engine.data.loaders import load_dataset
from tests.conftest import litjudge, write_config

ROWS = [("p1", "Write about rain", "Rain fell, soft, on the tin roof.", "It rained.", "model_a"),
        ("p2", "Write about a cat", "The cat sat.", "The cat, a grey ghost, slid under the gate.", "model_b"),
        ("p3", "Write about snow", 'Snow, like "salt", on the road.', "Snow.", "model_a")]
COLUMNS = ["id", "instruction", "response_a", "response_b", "winner"]
MAPPING = """
[dataset.columns]
pair_id = "id"
prompt = "instruction"
text_a = "response_a"
text_b = "response_b"
label = "winner"
[dataset.values.label]
model_a = "a"
model_b = "b"
"""


def config_text(path: str, extra: str = "") -> str:
    return (f'name = "own"\nprotocol = "pairwise"\njudge = "smollm2-135m"\n'
            f'[engine]\nmax_model_len = 4096\nkv_cache_gib = 2\n[dataset]\npath = "{path}"\n{extra}{MAPPING}')


def write_rows(folder, fmt: str):
    frame = pl.DataFrame([dict(zip(COLUMNS, r, strict=True)) for r in ROWS])
    if fmt == "csv":
        frame.write_csv(folder / "prefs.csv")
        return "prefs.csv"
    if fmt == "jsonl":
        (folder / "prefs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in frame.to_dicts()))
        return "prefs.jsonl"
    if fmt == "parquet":
        frame.write_parquet(folder / "prefs.parquet")
        return "prefs.parquet"
    import datasets

    datasets.Dataset.from_list(frame.to_dicts()).save_to_disk(str(folder / "prefs_ds"))
    return "prefs_ds"


def pairs_of(config_path):
    config = load_config(config_path)
    card = dataset_card(config.dataset, str(config_path), config.protocol)
    return list(load_dataset(card, "pairs", card.folder()))


def items_of(config_path):
    config = load_config(config_path)
    card = dataset_card(config.dataset, str(config_path), config.protocol)
    return load_dataset(card, "items", card.folder())


def ideas_config(folder, path: str):
    """A classification run of rated ideas in `path`, its columns under their own names."""
    return write_config(folder / "own.toml", (
        f'name = "ideas"\nprotocol = "classification"\njudge = "smollm2-135m"\n[dataset]\npath = "{path}"\n'
        '[dataset.columns]\nitem_id = "uid"\ngroup = "prompt_id"\ntext = "answer"\nhuman_score = "rating"\n'
        'category = "=idea"\n'))


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet", "arrow"])
def test_inline_dataset_renames_columns_and_values(tmp_path, fmt):
    elsewhere = tmp_path / "my data"
    elsewhere.mkdir()
    name = write_rows(elsewhere, fmt)
    cfg = write_config(elsewhere / "own.toml", config_text(name))
    pairs = pairs_of(cfg)
    assert [(p.pair_id, p.prompt, p.text_a, p.text_b, p.label) for p in pairs] == [
        (i, prompt, a, b, {"model_a": "a", "model_b": "b"}[w]) for i, prompt, a, b, w in ROWS]


def test_a_values_map_matches_in_any_case_and_spacing_as_labels_are_read(tmp_path):
    """A hostile pass: a map `A = "b"`, `B = "a"` renamed the cell `A` only; `a` and `A ` passed
    through and were read as the label a (labels are read in any case): the opposite preference,
    silently. The map now matches as the labels are read; a cell two keys match so, renaming it
    otherwise, is one line; a key of its own wins."""
    rows = [("q1", "A"), ("q2", "a"), ("q3", " A "), ("q4", "B")]
    (tmp_path / "d.csv").write_text("id,instruction,response_1,response_2,preferred\n" +
                                    "".join(f"{i},P,x,y,{v}\n" for i, v in rows))
    mapping = ('[dataset.columns]\npair_id = "id"\nprompt = "instruction"\ntext_a = "response_1"\n'
               'text_b = "response_2"\nlabel = "preferred"\n[dataset.values.label]\n')
    base = 'name = "m"\nprotocol = "pairwise"\njudge = "smollm2-135m"\n[dataset]\npath = "d.csv"\n'
    cfg = write_config(tmp_path / "m.toml", base + mapping + 'A = "b"\nB = "a"\n')
    assert [p.label for p in pairs_of(cfg)] == ["b", "b", "b", "a"]
    cfg = write_config(tmp_path / "own.toml", base + mapping + 'A = "b"\nB = "a"\na = "a"\n')
    with pytest.raises(DataError, match=r"d.csv:4: value ' A ' of field 'label' \(column 'preferred'\) matches several keys of "
                                        r"\[dataset.values.label\] in another case or spacing \('a', 'b'\)"):
        pairs_of(cfg)


def test_a_map_to_no_label_is_named_as_the_cause(tmp_path):
    """A new user's `right = "bee"`: each row it renamed was refused for holding 'bee', with the
    hint to rename 'bee' itself; the map is the cause, named before a row is read."""
    (tmp_path / "d.csv").write_text("id,instruction,response_1,response_2,preferred\nq1,P,x,y,left\n")
    mapping = ('[dataset.columns]\npair_id = "id"\nprompt = "instruction"\ntext_a = "response_1"\n'
               'text_b = "response_2"\nlabel = "preferred"\n[dataset.values.label]\nleft = "A"\nright = "bee"\n')
    cfg = write_config(tmp_path / "m.toml", 'name = "m"\nprotocol = "pairwise"\njudge = "smollm2-135m"\n[dataset]\n'
                                            'path = "d.csv"\n' + mapping)
    with pytest.raises(DataError, match=re.escape("[dataset.values.label] renames 'right' to 'bee', which is not a, b or "
                                                  "tie (the text the humans preferred, or neither)")):
        pairs_of(cfg)


@pytest.mark.parametrize("extra, line", [
    ('[dataset.columns]\nprompt = ["instruction"]\n', "dataset.columns.prompt: expected str, got list ['instruction']"),
    ('[dataset.values]\nlabel = "x"\n', "dataset.values.label: expected a table, got str"),
])
def test_a_map_of_the_wrong_shape_is_one_line(tmp_path, extra, line):
    """A hostile pass: each was an internal error (TypeError: unhashable type; AttributeError)."""
    name = write_rows(tmp_path, "csv")
    cfg = write_config(tmp_path / "m.toml", f'name = "m"\nprotocol = "pairwise"\njudge = "smollm2-135m"\n[dataset]\n'
                                              f'path = "{name}"\n{extra}')
    with pytest.raises(LitjudgeError, match=re.escape(line)):
        pairs_of(cfg)


def test_a_score_no_float_holds_and_a_folder_named_as_data_are_one_line(tmp_path):
    """A hostile pass: a score of 10**400 was an OverflowError; a folder named as the data read
    "cannot be written (Is a directory)", of a file nothing writes."""
    (tmp_path / "ideas.jsonl").write_text(json.dumps({"uid": "u1", "prompt_id": "g", "answer": "An idea.", "rating": 2})
                                          + "\n"
                                          + '{"uid": "u2", "prompt_id": "g", "answer": "Another.", "rating": 1'
                                          + "0" * 400 + "}\n")
    with pytest.raises(DataError, match=r"ideas.jsonl:2: field 'human_score' \(column 'rating'\) must be a finite "
                                        r"number, got one of 401 digits"):
        items_of(ideas_config(tmp_path, "ideas.jsonl"))
    (tmp_path / "adir").mkdir()
    cfg = write_config(tmp_path / "d.toml", config_text("adir").replace('path = "adir"', 'path = "adir"\nformat = "csv"'))
    r = litjudge("plan", str(cfg))
    assert r.returncode == 2 and "adir: Is a directory; check the path and run again" in r.stderr, r.stderr[-2000:]
    assert "cannot be written" not in r.stderr


def test_a_device_or_a_pipe_named_as_data_or_recording_is_refused(tmp_path):
    """A hostile pass: /dev/zero read as JSONL grew until the kernel killed the run, and a FIFO as
    the data or the recording waited forever."""
    from litjudge.engine.backends.replay import replay_source
    from litjudge.engine.core.errors import JudgeNotFound

    os.mkfifo(tmp_path / "pipe.jsonl")
    for data in ("/dev/zero", str(tmp_path / "pipe.jsonl")):
        cfg = write_config(tmp_path / "z.toml", config_text(data).replace(MAPPING, "") + 'format = "jsonl"\n')
        with pytest.raises(DataError, match="is not a regular file or folder"):
            pairs_of(cfg)
    with pytest.raises(JudgeNotFound, match="are not a file"):
        replay_source(f"replay:{tmp_path / 'pipe.jsonl'}", load_config(write_config(tmp_path / "c.toml",
                                                                                      config_text("x.csv"))))


def test_an_error_line_writes_control_characters_as_escapes(tmp_path):
    """A hostile pass: a path holding a NUL or an escape (which starts a terminal sequence) reached
    the terminal raw in the error line."""
    cfg = write_config(tmp_path / "e.toml", config_text("x\\u001b[31m\\u0000.csv"))
    r = litjudge("plan", str(cfg))
    assert r.returncode == 2 and "x\\x1b[31m\\x00.csv" in r.stderr, r.stderr[-2000:]
    assert "\x1b" not in r.stderr and "\x00" not in r.stderr


def test_a_bad_byte_deep_in_a_csv_names_its_own_line(tmp_path):
    """The text layer decodes a chunk ahead of the rows: a bad byte on line 501 was named as line
    1, the one on line 2001 as line 1833."""
    name = write_rows(tmp_path, "csv")
    text = (tmp_path / name).read_bytes().splitlines(keepends=True)
    rows = text[:1] + [f"q{i},P,a,b,model_a\n".encode() for i in range(600)]
    rows[500] = b"q499,P,caf\xe9,b,model_a\n"
    (tmp_path / name).write_bytes(b"".join(rows))
    cfg = write_config(tmp_path / "m.toml", config_text(name))
    with pytest.raises(DataError, match=r"prefs.csv:501: not UTF-8 text \(byte 10 of this line\)"):
        pairs_of(cfg)


def test_a_card_file_anywhere_and_data_over_a_shipped_layout(tmp_path):
    name = write_rows(tmp_path, "csv")
    card_file = tmp_path / "mine.toml"
    card_file.write_text(f'name = "mine"\ntitle = "my prefs"\nloader = "table"\nroot = "card"\npath = "{name}"\n'
                         f'protocols = ["pairwise"]\n' + MAPPING.replace("dataset.", ""))
    card = load_card(str(card_file))
    assert [p.label for p in load_dataset(card, "pairs", card.folder())] == ["a", "b", "a"]
    # `--data FILE`: the generic pairs layout (litjudge's own field names) over a file elsewhere
    plain = tmp_path / "plain.jsonl"
    plain.write_text("".join(json.dumps({"pair_id": i, "prompt": p, "text_a": a, "text_b": b, "label": "tie"}) + "\n"
                             for i, p, a, b, _ in ROWS))
    over = dataset_card(with_data(load_card("pairs-generic"), str(plain)), "", "pairwise")
    assert [p.pair_id for p in load_dataset(over, "pairs", over.folder())] == ["p1", "p2", "p3"]


BAD = [  # (how the CSV is broken, the one line expected)
    (lambda rows: rows[:1] + [("p2", "Write", "", "b", "model_b")] + rows[2:],
     "prefs.csv:3: missing field 'text_a' (column 'response_a')"),
    (lambda rows: rows[:2] + [("p3", "Write", "a", "b", "maybe")],
     "prefs.csv:4: field 'label' (column 'winner') must be one of ['a', 'b', 'tie'] (any case), got 'maybe'; "
     "map each of your values to a, b or tie, e.g. [dataset.values.label] maybe = \"a\" if 'maybe' means text a "
     "is the better ([dataset.values.label] renames 'model_a', 'model_b')"),
    (lambda rows: rows + [("p1", "Again", "a", "b", "model_a")], "prefs.csv:5:"),
]


@pytest.mark.parametrize(("breaking", "expected"), BAD)
def test_a_bad_row_names_the_file_line_and_column(tmp_path, breaking, expected):
    pl.DataFrame([dict(zip(COLUMNS, r, strict=True)) for r in breaking(ROWS)]).write_csv(tmp_path / "prefs.csv")
    cfg = write_config(tmp_path / "own.toml", config_text("prefs.csv"))
    with pytest.raises(DataError) as err:
        pairs_of(cfg)
    assert expected in str(err.value) and "\n" not in str(err.value)


HEADER = "id,instruction,response_a,response_b,winner\n"


@pytest.mark.parametrize(("body", "expected"), [
    # a quote opened in a cell and closed rows later: pandas merged the rows into one cell, silently
    ('p1,"Write,The door opened,x,model_a\np2,Write,A quiet story,y,model_b\np3,Write,She said "fine",z,model_a\n',
     'prefs.csv:2: cannot be read as CSV: \',\' expected after \'"\''),
    ('p1,Write,"She said "hi" and left,x,model_a\n', "prefs.csv:2: cannot be read as CSV"),   # a quote dropped
    ('p1,Write,a,b,model_a\np2,"Write,a,b,model_b\n', "prefs.csv:3: cannot be read as CSV: unexpected end of data"),
    ('p1,Write,a,b\n', "prefs.csv:2: 4 cells where the header has 5"),
    ('p1,Write,a,b,model_a,extra\n', "prefs.csv:2: 6 cells where the header has 5"),
    ('p1,"Write\nover two lines",a,b,model_a\np2,Write,a,b,maybe\n', "prefs.csv:4: field 'label'"),  # its true line
    ('p1,Write,' + "a" * 300_000 + ',b,model_a\np2,Write,a,b,maybe\n', "prefs.csv:3: field 'label'"),  # a long cell
])
def test_a_stray_quote_or_a_short_row_is_its_line_never_merged_rows(tmp_path, body, expected):
    (tmp_path / "prefs.csv").write_text(HEADER + body)
    cfg = write_config(tmp_path / "own.toml", config_text("prefs.csv"))
    with pytest.raises(DataError) as err:
        pairs_of(cfg)
    assert str(err.value).startswith(str(tmp_path / expected.split(":")[0])) and expected in str(err.value), err.value


def test_a_csv_whose_header_repeats_a_column_or_is_empty_is_one_line(tmp_path):
    cfg = write_config(tmp_path / "own.toml", config_text("prefs.csv"))
    (tmp_path / "prefs.csv").write_text(HEADER.replace("response_b", "response_a") + "p1,W,a,b,model_a\n")
    with pytest.raises(DataError, match=r"prefs.csv:1: the header names column 'response_a' twice"):
        pairs_of(cfg)
    (tmp_path / "prefs.csv").write_text("")
    with pytest.raises(DataError, match=r"prefs.csv:1: is empty: no header line"):
        pairs_of(cfg)
    # a spreadsheet's trailing empty columns (`...,winner,,`) are no columns: they were refused as '' twice
    (tmp_path / "prefs.csv").write_text(HEADER.replace("\n", ",,\n") + "p1,W,a,b,model_a,,\n")
    assert [p.pair_id for p in pairs_of(cfg)] == ["p1"]
    # and its empty rows (`,,,,`, whatever their number of commas) are blank lines: they failed as a missing field
    (tmp_path / "prefs.csv").write_text(HEADER + "p1,W,a,b,model_a\n,,,,\n,,\r\np2,W,c,d,model_b\n, ,,,\n")
    assert [p.pair_id for p in pairs_of(cfg)] == ["p1", "p2"]


@pytest.mark.parametrize(("change", "expected"), [
    (lambda t: t.replace('pair_id = "id"', 'pair_id = "ident"'),
     "maps pair_id to column 'ident', which the data does not have (columns: id, instruction, response_a"),
    (lambda t: t.replace('pair_id = "id"', 'story = "id"'), "[dataset.columns] maps 'story', which pairs data"),
    (lambda t: t.replace('prompt = "instruction"', 'prompt = "instructoin"'),   # "did you mean", as for a config key
     "maps prompt to column 'instructoin', which the data does not have (did you mean 'instruction'?) (columns: id,"),
    (lambda t: t.replace('path = "prefs.csv"', 'path = "nope.csv"'), "nope.csv: the [dataset] path does not exist"),
    (lambda t: t.replace('path = "prefs.csv"', 'path = "prefs.txt"'), "cannot tell the format of prefs.txt"),
])
def test_mapping_mistakes_are_one_line(tmp_path, change, expected):
    write_rows(tmp_path, "csv")
    (tmp_path / "prefs.txt").write_text("x")
    cfg = write_config(tmp_path / "own.toml", change(config_text("prefs.csv")))
    with pytest.raises(LitjudgeError) as err:
        pairs_of(cfg)
    assert expected in str(err.value)


def test_an_unreadable_parquet_is_one_line(tmp_path):
    (tmp_path / "prefs.parquet").write_text("a,b\n1,2\n")
    cfg = write_config(tmp_path / "own.toml", config_text("prefs.parquet"))
    with pytest.raises(DataError, match=r"prefs.parquet: cannot be read as parquet: "):
        pairs_of(cfg)


def test_rated_items_from_parquet_with_their_own_names(tmp_path):
    pl.DataFrame({"uid": ["i1", "i2", "i3"], "prompt_id": ["brick", "brick", "cup"],
                  "answer": ["a wall", "a doorstop", "a hat"], "rating": [1.5, 3.0, 2.5]}
                 ).write_parquet(tmp_path / "ideas.parquet")
    items = items_of(ideas_config(tmp_path, "ideas.parquet"))
    got = [(i.item_id, i.group, i.text, i.human_score) for i in items.items]
    assert got == [("i1", "brick", "a wall", 1.5), ("i2", "brick", "a doorstop", 3.0), ("i3", "cup", "a hat", 2.5)]


@pytest.mark.parametrize("cell", ["1_0", "1e0", "\uff13", "nan"])
def test_a_csv_human_score_is_plain_digits_not_whatever_float_reads(tmp_path, cell):
    """float() read "1_0" as ten, "1e0" as one and a full-width 3 as three: such a cell is refused
    naming its row, while " 2.5 " and "+3" are the numbers they look like."""
    (tmp_path / "ideas.csv").write_text(f"uid,prompt_id,answer,rating\ni1,brick,a wall, 2.5 \ni2,brick,a hat,+3\n"
                                        f"i3,brick,a door,{cell}\n")
    cfg = ideas_config(tmp_path, "ideas.csv")
    with pytest.raises(DataError, match=r"ideas.csv:4: .*'human_score'") as exc:
        items_of(cfg)
    assert "\n" not in str(exc.value)
    (tmp_path / "ideas.csv").write_text("uid,prompt_id,answer,rating\ni1,brick,a wall, 2.5 \ni2,brick,a hat,+3\n")
    assert [i.human_score for i in items_of(cfg).items] == [2.5, 3.0]


def test_csv_cells_that_read_like_missing_values_are_text(tmp_path):
    """"None", "NA", "null", "N/A", "#N/A", "nan" in a CSV cell are that text (a category called
    None, a poem titled NA), as in JSONL; only an empty cell is missing."""
    words = ["None", "NA", "null", "N/A", "#N/A", "nan", "NULL"]
    (tmp_path / "ideas.csv").write_text("uid,prompt_id,answer,level\n" + "".join(
        f"i{k},brick,{w},{w}\n" for k, w in enumerate(words)) + "i9,brick,a hat,\n")
    cfg = write_config(tmp_path / "own.toml", (
        'name = "ideas"\nprotocol = "classification"\njudge = "smollm2-135m"\n[dataset]\npath = "ideas.csv"\n'
        '[dataset.columns]\nitem_id = "uid"\ngroup = "prompt_id"\ntext = "answer"\ncategory = "level"\n'))
    config = load_config(cfg)
    card = dataset_card(config.dataset, str(cfg), config.protocol)
    items = load_dataset(card, "items", card.folder()).items
    assert [(i.text, i.category) for i in items] == [*((w, w) for w in words), ("a hat", None)]


def test_texts_without_groups_are_told_how_to_make_one(tmp_path):
    """A rubric over single texts needs no groups; the items reader asks for one and says how."""
    (tmp_path / "texts.csv").write_text("id,story\nt1,Once upon a time.\nt2,The end.\n")
    base = ('name = "texts"\nprotocol = "rubric"\njudge = "smollm2-135m"\n[dataset]\npath = "texts.csv"\n'
            '[dataset.columns]\nitem_id = "id"\ntext = "story"\n')

    def items(extra: str):
        config = load_config(write_config(tmp_path / "own.toml", base + extra))
        card = dataset_card(config.dataset, str(tmp_path / "own.toml"), config.protocol)
        return load_dataset(card, "items", card.folder())

    with pytest.raises(DataError, match=r"texts.csv:2: missing field 'group' .*group = \"=all\""):
        items("")
    assert [(i.item_id, i.group) for i in items('group = "=all"\n').items] == [("t1", "all"), ("t2", "all")]


def test_own_csv_judged_end_to_end_from_any_folder(smollm, tmp_path, monkeypatch):
    """A CSV in a folder of its own, judged with both orders; the run's manifest names the file."""
    monkeypatch.chdir(tmp_path)
    name = write_rows(tmp_path, "csv")
    cfg = write_config(tmp_path / "own.toml", config_text(name))
    config = load_config(cfg)
    out = run(config, progress=False, backends={"smollm2-135m": smollm})
    assert out.run_dir == tmp_path / "runs" / "out" / "own"
    verdicts = pl.read_parquet(out.run_dir / "verdicts.parquet")
    assert verdicts.height == 6 and set(verdicts["pair_id"]) == {"p1", "p2", "p3"}
    manifest = json.loads((out.run_dir / "manifest.json").read_text())
    data = manifest["dataset"]["data"]
    assert data["path"] == str(tmp_path / "prefs.csv")
    assert data["sha256"] == hashlib.sha256((tmp_path / "prefs.csv").read_bytes()).hexdigest()


def test_data_flag_over_the_cli(tmp_path):
    """`litjudge plan CONFIG --data FILE` reads the file with the config's dataset layout."""
    write_rows(tmp_path, "csv")
    cfg = write_config(tmp_path / "own.toml", config_text("prefs.csv"))
    other = tmp_path / "other.csv"
    pl.DataFrame([dict(zip(COLUMNS, r, strict=True)) for r in ROWS[:2]]).write_csv(other)
    r = litjudge("plan", str(cfg), "--no-calibrate", "--data", str(other),
                 env={"LITJUDGE_RUNS_DIR": str(tmp_path / "runs"), **os.environ})
    assert r.returncode == 0, r.stderr
    assert "4 requests" in r.stdout


def test_a_missing_field_lists_the_rows_columns_and_names_surrounding_spaces(tmp_path):
    """A header written `pair_id, prompt, ...` (a space after each comma) said only "missing field
    'prompt'": the row's columns are listed, and the one with surrounding spaces is named."""
    import litjudge

    (tmp_path / "pairs.csv").write_text("pair_id, prompt, text_a, text_b, label\np1,Write,a,b,a\n")
    (tmp_path / "x.jsonl").write_text(json.dumps({"id": "p1/ab", "response": "A"}) + "\n")
    with pytest.raises(DataError) as err:
        litjudge.judge(tmp_path / "pairs.csv", protocol="pairwise", judge=f"replay:{tmp_path / 'x.jsonl'}",
                       out=tmp_path / "runs", progress=False, cache=False)
    line = str(err.value)
    assert line.startswith(f"{tmp_path / 'pairs.csv'}:2: missing field 'prompt'") and "\n" not in line, line
    assert "' prompt'" in line and "' text_a'" in line and "surrounding spaces" in line, line
    (tmp_path / "pairs.jsonl").write_text(json.dumps({"pair_id": "p1", "promt": "Write", "text_a": "a", "text_b": "b",
                                                      "label": "a"}) + "\n")
    with pytest.raises(DataError) as err:
        litjudge.judge(tmp_path / "pairs.jsonl", protocol="pairwise", judge=f"replay:{tmp_path / 'x.jsonl'}",
                       out=tmp_path / "runs", progress=False, cache=False)
    line = str(err.value)
    assert ":1: missing field 'prompt'" in line and "promt" in line and "surrounding" not in line, line


def test_category_order_on_data_without_categories_is_said(tmp_path):
    """`category_order` orders rated items' categories; on pairs it was ignored without a word: one
    warning (in the run's warnings), naming the key and the kind of data read."""
    import litjudge
    from litjudge import LitjudgeWarning

    rows = [{"pair_id": "p1", "prompt": "Write.", "text_a": "a", "text_b": "b", "label": "a"}]
    (tmp_path / "x.jsonl").write_text("".join(json.dumps({"id": f"p1/{o}", "response": "A"}) + "\n" for o in ("ab", "ba")))
    with pytest.warns(LitjudgeWarning) as caught:
        result = litjudge.judge(rows, protocol="pairwise", judge=f"replay:{tmp_path / 'x.jsonl'}", out=tmp_path / "runs",
                                progress=False, cache=False, category_order=["bad", "good"])
    said = [w for w in result.manifest.warnings if "category_order" in w]
    assert len(said) == 1 and "pairs" in said[0] and "\n" not in said[0], result.manifest.warnings
    assert any("category_order" in str(w.message) for w in caught)
