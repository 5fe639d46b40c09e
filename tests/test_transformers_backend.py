"""The transformers backend on a machine unlike ours: no C++ compiler (a slim container image), and
torch's compile cache in /tmp holding kernels of another CPU. outlines masks the logits with a
`torch.compile`d kernel, which the backend runs eagerly: nothing is compiled (torch printed a long
traceback without a compiler, then fell back), nothing is read from or written to that cache, and
every constrained answer stays in its language."""
import json
import os
import subprocess
import sys

import pytest

SCRIPT = """
import json, sys
import litjudge.grammars as g
from litjudge.engine import backends
from litjudge.engine.core.planner import make_plan
from litjudge.engine.core.requests import JudgeRequest, Message, RequestMeta, Sampling

backend = backends.create(backends.model_spec(sys.argv[1], backend="transformers", dtype="float32"))
langs = {"binary": g.binary(), "likert": g.likert(5), "genre": g.categorical(("comedy", "tragedy", "romance"))}
reqs = [JudgeRequest((Message("user", f"Story {k}: the sea kept the letters. Answer."),), lang, "label",
                     Sampling(temperature=1.0, seed=k), RequestMeta("t", f"{name}{k}"))
        for name, lang in langs.items() for k in range(4)]
plan = make_plan(reqs, backend)
asked = {p.key: p.request.language.labels() for p in plan.unique}
print(json.dumps([[o.raw, list(asked[o.key])] for o in backend.generate(plan.unique)]))
"""


@pytest.mark.slow
def test_constrained_answers_need_no_compiler_and_no_compile_cache(tmp_path, tiny_folder):
    cache = tmp_path / "inductor"
    cache.mkdir()
    env = {**os.environ, "CXX": str(tmp_path / "no-such-g++"), "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(tiny_folder)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    answers = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(answers) == 12 and all(raw in labels for raw, labels in answers), answers
    assert list(cache.iterdir()) == []                        # nothing compiled, nothing cached
    assert "Traceback" not in r.stderr and "WON'T CONVERT" not in r.stderr, r.stderr[-3000:]
