"""Issue 59's typed configs: a closed set is a `Literal` the loader, a table built in Python and the
reference all read (no check of its own); an error naming a setting carries it (`parameter`,
`value`) and is worded from it for the config file or for the Python call; registry lookups are
typed (mypy sees the class a registry holds, not Any)."""
from __future__ import annotations

import importlib.util
import shutil
import textwrap
from pathlib import Path

import pytest
from mypy import build
from mypy.main import process_options
from mypy.modulefinder import BuildSource

from litjudge.engine.app.config_reference import explain
from litjudge.engine.core.config import EngineConfig, load_config
from litjudge.engine.core.errors import ConfigError, DataError, Setting
from litjudge.engine.core.schema import FieldError
from litjudge.judges import PROTOCOLS
from litjudge.judges.listwise import ListwiseOptions

ROOT = Path(__file__).resolve().parent.parent
BASE = {"name": "x", "protocol": "ttcw", "dataset": "ttcw-demo"}


def test_a_misspelt_closed_value_is_one_line_naming_the_key_and_the_values(tmp_path):
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "run.toml", {**BASE, "engine": {"dtype": "bf16"}})
    said = str(caught.value)
    assert "\n" not in said and said.endswith("engine.dtype: must be one of ['auto', 'bfloat16', 'float16', 'float32'], "
                                              "got 'bf16' (did you mean 'bfloat16'?)"), said
    assert caught.value.parameter == "engine.dtype" and caught.value.value == "bf16"
    with pytest.raises(ConfigError, match=r"truncation: must be one of \['error', 'skip'\], got 'skp'"):
        load_config(tmp_path / "run.toml", {**BASE, "truncation": "skp"})
    likert = load_config(tmp_path / "run.toml", {**BASE, "protocol": "reference_likert", "options": {"points": 5.0}})
    with pytest.raises(ConfigError, match=r"options\.points: must be one of \[3, 5, 7\], got 5\.0$"):
        PROTOCOLS.get("reference_likert")().options(likert)        # 5.0 is no 5: TOML wrote a float


def test_a_table_built_in_python_is_held_to_the_same_set():
    with pytest.raises(FieldError) as caught:
        EngineConfig(dtype="bf16")                    # type: ignore[arg-type]
    said = str(caught.value)
    assert said == "EngineConfig(dtype=...): must be one of ['auto', 'bfloat16', 'float16', 'float32'], got 'bf16' " \
                   "(did you mean 'bfloat16'?)", said
    with pytest.raises(FieldError, match=r"ListwiseOptions\(design=\.\.\.\): must be one of"):
        ListwiseOptions(design="segmentd")            # type: ignore[arg-type]
    assert EngineConfig(dtype="float32").dtype == "float32"
    from litjudge.engine.core.errors import LitjudgeError
    assert isinstance(caught.value, LitjudgeError) and isinstance(caught.value, ValueError)   # both, for callers
    # a text or a bool where a number goes (a hostile pass: `temperature="hot"` was a TypeError)
    from litjudge.engine.core.sampling import Sampling
    for wrong in ("hot", True, None):
        with pytest.raises(FieldError, match=f"temperature: must be in \\[0, 5\\], got {wrong}"):
            Sampling(temperature=wrong)                # type: ignore[arg-type]


def test_the_reference_shows_the_literal_values():
    (entry,) = explain("api.structured")
    assert entry.allowed == "one of ['auto', 'vllm', 'json_schema', 'none']" and entry.type == "str"
    (points,) = [e for e in explain("options.points") if "rubric" not in e.section and "questions" not in e.key]
    assert points.allowed == "one of [3, 5, 7]" and points.type == "int"


def test_a_list_of_tables_is_explained_with_the_keys_of_its_tables():
    """`config --explain options.questions` printed a doc saying "the keys below" and no key below it."""
    keys = [e.key for e in explain("options.questions")]
    assert keys[0] == "options.questions" and {"options.questions[].id", "options.questions[].scale"} <= set(keys[1:])
    assert all(k.startswith("options.questions[].") for k in keys[1:])


@pytest.mark.parametrize("key, said", [
    ("matrx", "matrx: unknown key (did you mean 'matrix', a sweep's key?)"),
    ("jurry", "jurry: unknown key (did you mean 'jury', an ensemble's key?)"),
    ("zzz", "tasks; and a sweep's matrix, sweep; an ensemble's runs, cascade, jury)"),
])
def test_a_misspelt_key_of_a_sweep_or_an_ensemble_is_named(tmp_path, key, said):
    """A new user's `[matrx]`: it was told a run's keys only, with no did-you-mean, by the run
    and by the sweep's loader (`litjudge plan`)."""
    from litjudge.engine.app.sweep import load_sweep

    cfg = tmp_path / "c.toml"
    cfg.write_text(f'name = "x"\nprotocol = "pairwise"\njudge = "smollm2-135m"\n[{key}]\njudge = ["a"]\n')
    for load in (load_config, load_sweep):
        with pytest.raises(ConfigError) as err:
            load(cfg)
        assert str(err.value).endswith(said), str(err.value)


def test_the_two_wordings_of_an_error_come_from_its_settings():
    rename = Setting("dataset.values.label", {"maybe": "a"})
    assert rename.console() == '[dataset.values.label] maybe = "a"'
    assert rename.python() == 'values={"label": {"maybe": "a"}}'
    table, key = Setting("dataset.columns", table=True), Setting("dataset.path")
    assert (table.console(), table.python()) == ("[dataset.columns]", "columns")
    assert (key.console(), key.python()) == ("[dataset] path", 'dataset["path"]')   # no judge() keyword: the dict key
    assert Setting("dataset.columns", {"my col": "x"}).console() == '[dataset.columns] "my col" = "x"'
    err = DataError(("got 'maybe'; rename your values, e.g. ", rename), path="p.csv", row=4)
    assert str(err) == "p.csv:4: got 'maybe'; rename your values, e.g. [dataset.values.label] maybe = \"a\""
    assert str(err.in_python()) == "p.csv:4: got 'maybe'; rename your values, e.g. values={\"label\": {\"maybe\": \"a\"}}"
    assert isinstance(err.in_python(), DataError) and str(err).startswith("p.csv:4:")     # the original keeps its words
    config = ConfigError("unknown key", where="litjudge.judge()", parameter="dataset.values.lable", value={"a": "b"})
    assert str(config) == "litjudge.judge(): dataset.values.lable: unknown key"
    assert str(config.in_python()) == "litjudge.judge(): values.lable: unknown key"
    plain = ConfigError("must be >= 32 tokens, got 8", where="x.toml", parameter="engine.max_model_len", value=8)
    assert plain.in_python() is plain and (plain.parameter, plain.value) == ("engine.max_model_len", 8)


def test_registry_lookups_are_typed(tmp_path):
    """mypy reads PROTOCOLS.get(...) as type[Protocol] and BACKENDS.get(...) as type[Backend] (was Any),
    checked over the package as scripts/typecheck.py gives it to mypy, with a snippet beside it."""
    spec = importlib.util.spec_from_file_location("typecheck", ROOT / "scripts" / "typecheck.py")
    assert spec is not None and spec.loader is not None
    typecheck = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(typecheck)
    snippet = tmp_path / "snippet.py"
    snippet.write_text(textwrap.dedent("""
        from litjudge.engine.backends.registry import BACKENDS
        from litjudge.judges import PROTOCOLS
        reveal_type(PROTOCOLS.get("ttcw"))
        reveal_type(BACKENDS.get("vllm"))
        PROTOCOLS.get("ttcw").no_such_attribute
    """))
    cache = tmp_path / "cache"
    if (ROOT / ".mypy_cache").is_dir():      # `make lint`'s cache, copied: the answer is mypy's either way, only sooner
        shutil.copytree(ROOT / ".mypy_cache", cache)
    _, options = process_options(["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(cache)],
                                 require_targets=False)
    result = build.build([*typecheck.sources(), BuildSource(str(snippet), "snippet", None, str(tmp_path))], options)
    said = "\n".join(line for line in result.errors if "snippet.py" in line)
    assert 'Revealed type is "type[litjudge.judges.base.Protocol]"' in said, said
    assert 'Revealed type is "type[litjudge.engine.core.backend.Backend]"' in said, said
    assert '"type[Protocol]" has no attribute "no_such_attribute"' in said, said
