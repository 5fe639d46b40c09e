"""tests/shared_cli.py hands a command's judge the session's engine only where it is the engine the
config asks for, in what changes verdicts; every other judge starts as it would."""
from types import SimpleNamespace

import pytest

from litjudge.engine import backends
from tests.shared_cli import serving


def spec(name: str, dtype: str, backend: str = "vllm"):
    return backends.model_spec(name, backend=backend, dtype=dtype)


def test_a_shared_engine_serves_its_judge_and_refuses_another_dtype():
    reset = []
    shared = SimpleNamespace(spec=spec("smollm2-135m", "float32"), reset_prefix_cache=lambda: reset.append(1))
    started = []
    create = serving({"smollm2-135m": shared}, lambda s, c=None: started.append(s.name) or s.name)
    assert create(spec("smollm2-135m", "float32")) is shared and reset == [1]       # emptied, as a fresh engine's
    assert create(spec("gemma3-270m", "float32")) == "gemma3-270m" and started == ["gemma3-270m"]
    with pytest.raises(AssertionError, match="asks dtype bfloat16, the shared engine is float32"):
        create(spec("smollm2-135m", "bfloat16"))
