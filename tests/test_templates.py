"""Your own prompt template for every protocol (`template = "path/or/inline"`): fields checked when
the options are built, before any model loads (one line naming the field and listing the
protocol's); `{{ }}` for a literal brace; the template's text in the content key (through the
prompt) and the manifest; the judge's chat template around it as around the built-in prompts; a
template with no room for the verdict refused at plan time. Planning uses the judge's tokenizer
only (no engine)."""
from __future__ import annotations

import json

import pytest

import litjudge
from litjudge.engine import backends
from litjudge.engine.app.run import prepare
from litjudge.engine.core.config import load_config
from litjudge.engine.core.errors import ConfigError
from litjudge.engine.core.planner import make_plan
from litjudge.judges.templates import parse
from litjudge.judges.ttcw import DEFAULT_INTRO
from tests.conftest import litjudge as cli
from tests.conftest import needs_data, needs_prompts, write_config

DEMO = {"name": "t", "protocol": "ttcw", "dataset": "ttcw-demo", "judge": "smollm2-135m",
        "engine": {"max_model_len": 2048}}
# the built-in TTCW prompt (variant "default"), written as a template
DEFAULT_AS_TEMPLATE = (DEFAULT_INTRO + "\n\nStory:\n{story}\n\nBackground:\n{background}\n\nQuestion: {question}\n"
                       "Answer Yes or No.")


def planned(table: dict, truncation: str = "error"):
    prep = prepare(load_config("templates-test", table))
    spec = prep.specs[0]
    requests = list(prep.protocol.build(prep.context(spec)).requests)
    return requests, make_plan(requests, backends.planner(spec), truncation), backends.planner(spec)


def refused(table: dict) -> str:
    with pytest.raises(ConfigError) as exc:
        prepare(load_config("templates-test", table))
    assert "\n" not in str(exc.value)
    return str(exc.value)


def test_an_unknown_field_fails_in_one_line_before_any_model_loads(tmp_path):
    """...naming the field meant, as a misspelt config key is ("did you mean")."""
    cfg = write_config(tmp_path / "c.toml", 'name = "c"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\n'
                                            'template = "Story: {stroy}\\nQ: {question}"\n')
    r = cli("run", str(cfg), env={"LITJUDGE_RUNS_DIR": str(tmp_path / "runs")}, timeout=300)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert (f"{cfg}: template: unknown field {{stroy}} (did you mean {{story}}?); protocol 'ttcw' provides {{story}}, "
            "{question}, "
            "{background}, {instruction}, {dimension}, {category}, {labels}") in r.stderr
    assert not (tmp_path / "runs").exists()                    # refused before a run folder, an engine, a plan


@pytest.mark.parametrize("template, words", [
    ("{story} and nothing else", "leaves out {question}, which tells one ask from another"),
    ("{story} {question} {", "unmatched brace"),
    ("{story!r} {question}", "{story!r} is not a field"),
    ("{story:>10} {question}", "{story:>10} is not a field"),
    ("{0} {question}", "{0} is not a field"),
    ("{story.text} {question}", "{story.text} is not a field"),
    ("no field at all\n", "names no field"),
    ("missing-template.txt", "template file"),
])
def test_template_mistakes_are_one_line(template, words):
    assert words in refused({**DEMO, "template": template})


def test_a_missing_template_file_gets_the_inline_hint_only_where_it_could_have_meant_inline_text():
    """A name like a file's (a suffix, a folder) is a file that is not there: nothing of inline templates."""
    for spec, hinted in [("missing-template.txt", False), ("prompts/judge", False), ("Rate this story", True)]:
        said = refused({**DEMO, "template": spec})
        assert "not found" in said and ("inline template" in said) is hinted, said


def test_a_protocol_without_a_template_says_so_and_a_rubric_mixing_kinds_needs_one_per_question():
    mixed = {**DEMO, "protocol": "rubric", "template": "{text} {question}",
             "options": {"questions": [{"id": "a", "text": "A?"}, {"id": "b", "text": "B?", "scale": "pairwise"}]}}
    assert "takes a template per question (options.questions[N].template)" in refused(mixed)
    per = {**mixed, "template": "", "options": {"questions": [{"id": "a", "text": "A?", "template": "{story}"}]}}
    assert "options.questions[0].template: unknown field {story}; protocol 'rubric' provides {text}" in refused(per)


def test_literal_braces_and_judged_text_with_braces():
    t = parse("{{literal}} {story} }}", "inline", "w", "template")
    assert t.fields == ("story",)
    assert t.render({"story": "a {question} in the story"}) == "{literal} a {question} in the story }"


def test_a_custom_ttcw_template_changes_the_content_key_and_nothing_else():
    base, base_plan, planner = planned(DEMO)
    same, same_plan, _ = planned({**DEMO, "template": DEFAULT_AS_TEMPLATE})
    own, own_plan, _ = planned({**DEMO, "template": "Story:\n{story}\n\nTest: {question}\nYes or No?"})
    assert [e.key for e in same_plan.entries] == [e.key for e in base_plan.entries]   # the prompt is all it changes
    assert not {e.key for e in own_plan.entries} & {e.key for e in base_plan.entries}
    for a, b in zip(base, own, strict=True):
        assert (a.meta, a.language, a.mode, a.sampling) == (b.meta, b.language, b.mode, b.sampling)
        assert a.messages != b.messages and b.messages[0].content.startswith("Story:\n")
    # the judge's chat template wraps your template as it wraps the built-in prompt
    rendered = planner.render(own[0])
    assert "<|im_start|>user\nStory:\n" in rendered and rendered.rstrip().endswith("<|im_start|>assistant")


def test_a_template_with_no_room_for_the_verdict_is_refused_at_plan_time(tmp_path):
    long = {**DEMO, "template": "{story} {question} " + "padding " * 3000}
    for truncation, words in (("error", "prompt(s) do not fit the context window"),
                              ("skip", "all 12 prompts are longer than the context window")):
        cfg = write_config(tmp_path / f"{truncation}.toml",
                           f'name = "{truncation}"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\ntruncation = "{truncation}"\n'
                           f'template = {json.dumps(long["template"])}\n[engine]\nmax_model_len = 2048\n')
        r = cli("run", str(cfg), env={"LITJUDGE_RUNS_DIR": str(tmp_path / "runs")}, timeout=300)
        assert r.returncode == 2 and words in r.stderr, r.stderr
        assert not (tmp_path / "runs" / truncation).exists()            # nothing generated, nothing left behind


PROTOCOL_TEMPLATES = [
    ("pairwise", "pairs-generic", {}, "Pick one.\nA: {text_a}\nB: {text_b}\nFor: {prompt} ({labels})"),
    ("classification", "rated-items-generic", {}, "Rate this {kind}: {text}\nOne of {labels}."),
    pytest.param("listwise", "rated-items-generic", {}, "Rank them.\n{format}\n{items}",
                 marks=needs_prompts),                        # {format} is the paper's answer format
    ("rubric", "ttcw-demo", {"questions": [{"id": "q", "text": "Is it moving?"}]}, "Q: {question}\n{text}\n{labels}"),
]


@pytest.mark.parametrize("protocol, dataset, options, template", PROTOCOL_TEMPLATES)
def test_every_protocol_takes_a_template(protocol, dataset, options, template, tmp_path):
    (tmp_path / "mine.txt").write_text(template)
    cfg = write_config(tmp_path / "c.toml", "")
    table = {"name": "c", "protocol": protocol, "dataset": dataset, "judge": "smollm2-135m", "template": "mine.txt",
             "options": options}
    prep = prepare(load_config(cfg, table))                    # a relative path: beside the config file
    asked = [r.messages[-1].content for r in prep.protocol.build(prep.context(prep.specs[0])).requests]
    fields = parse(template, "inline", "w", "template").fields
    assert asked and all(a.startswith(template.split("{")[0]) for a in asked)
    assert not any("{" + f + "}" in a for a in asked for f in fields)


@needs_data
def test_reference_likert_and_its_ablation_take_their_own_fields():
    base = {"name": "r", "protocol": "reference_likert", "dataset": "reference-generic", "judge": "smollm2-135m",
            "options": {"tests": [1]}}
    prep = prepare(load_config("r", {**base, "template": "A: {story_a}\nB: {story_b}\n{question} {labels}"}))
    asked = [r.messages[-1].content for r in prep.protocol.build(prep.context(prep.specs[0])).requests]
    assert asked and all(a.startswith("A: ") and "[[A>>B]]" in a for a in asked)
    assert "unknown field {story_a}" in refused({**base, "template": "{story_a} {question}",
                                                 "options": {"tests": [1], "reference": False}})


def test_the_template_is_recorded_in_the_manifest_and_keys_differ(tmp_path):
    rows = [{"id": f"p{i}", "prompt": "Write.", "a": f"first text {i}", "b": f"second text {i}", "label": "a"}
            for i in range(3)]
    recording = tmp_path / "rec.jsonl"
    recording.write_text("".join(json.dumps({"id": f"p{i}/{o}", "response": "A"}) + "\n" for i in range(3) for o in ("ab", "ba")))
    kw = {"protocol": "pairwise", "judge": f"replay:{recording}", "columns": {"pair_id": "id", "text_a": "a", "text_b": "b"},
          "out": tmp_path / "out", "progress": False}
    plain = litjudge.judge(rows, name="plain", **kw)
    own = litjudge.judge(rows, name="own", template="First: {text_a}\nSecond: {text_b}\n{labels}?", **kw)
    record = own.manifest.raw["template"]["template"]
    assert record["source"] == "inline" and record["text"].startswith("First: {text_a}") and len(record["sha256"]) == 64
    assert "template" not in plain.manifest.raw
    assert set(own.verdicts["key"]).isdisjoint(plain.verdicts["key"])
    assert own.verdicts.select("item_id", "label").sort("item_id").equals(plain.verdicts.select("item_id", "label")
                                                                          .sort("item_id"))


def test_a_template_files_mistakes_name_the_file_and_its_line():
    """A template file's error named the config only (its file and line were for the user to find),
    and {TEXT_B} got no suggestion."""
    from litjudge.judges.templates import TemplateFields, checked

    for text, words in [("A {text_a}\nB {text_b} {", "template file 'p.txt', line 2: the template has an unmatched"),
                        ("A {text_a}\n\nB {x!r}", "template file 'p.txt', line 3: {x!r} is not a field")]:
        with pytest.raises(ConfigError, match=words.replace("{", r"\{").replace("}", r"\}").replace("!", "!")):
            parse(text, "p.txt", "c.toml", "template")
    fields = TemplateFields(("text_a", "text_b", "prompt"), ("text_a", "text_b"))
    with pytest.raises(ConfigError, match=r"template file 'p.txt', line 2: unknown field \{TEXT_B\} \(did you mean "
                                          r"\{text_b\}\?\)"):
        checked(parse("A {text_a}\nB {TEXT_B}", "p.txt", "c.toml", "template"), fields, "pairwise", "c.toml", "template")
