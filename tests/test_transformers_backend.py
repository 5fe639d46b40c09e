"""The transformers backend on a machine unlike ours: no C++ compiler (a slim container image), and
torch's compile cache in /tmp holding kernels of another CPU. outlines masks the logits with a
`torch.compile`d kernel, which the backend runs eagerly: nothing is compiled (torch printed a long
traceback without a compiler, then fell back), nothing is read from or written to that cache, and
every constrained answer stays in its language."""
import json
import math
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


def test_distribution_mode_projects_only_the_positions_it_reads_and_agrees_with_vllm(tiny_folder, tiny):
    """Distribution mode reads the vocabulary projection at the answer's positions only
    (`logits_to_keep`): the same probabilities as projecting every position, for one-token labels
    (Yes/No) and for labels of several tokens (the five-point scale's `[[A>>B]]` ...), and the same as vLLM's
    on the same float32 weights."""
    import litjudge.grammars as g
    from litjudge.engine import backends
    from litjudge.engine.backends.local.label_tokens import check_language
    from litjudge.engine.core.planner import make_plan
    from litjudge.engine.core.requests import JudgeRequest, Message, RequestMeta, Sampling

    hf = backends.create(backends.model_spec(str(tiny_folder), backend="transformers", dtype="float32"))
    assert hf._keeps_logits
    for lang in (g.binary(), g.likert(5)):
        reqs = [JudgeRequest((Message("user", f"Story {k}: the lighthouse kept a diary. Judge it."),), lang,
                             "distribution", Sampling(), RequestMeta("t", f"s{k}")) for k in range(3)]
        plan = make_plan(reqs, hf)
        first = plan.unique[0]
        single = check_language(hf.renderer.label_tokens(first.prompt, lang.labels()), first.token_ids, lang.prefixed,
                                hf.renderer.tokenizer.eos_token_id)["single_token"]
        assert single == (lang.labels() == ("Yes", "No")), lang.labels()       # both paths are exercised
        sliced = {o.key: o.distribution for o in hf.generate(plan.unique)}
        hf._keeps_logits = False
        whole = {o.key: o.distribution for o in hf.generate(plan.unique)}
        hf._keeps_logits = True
        for key, dist in sliced.items():
            assert dist.keys() == whole[key].keys() == set(lang.labels())
            assert all(math.isclose(dist[k], whole[key][k], abs_tol=1e-5) for k in dist), (dist, whole[key])
        vplan = make_plan(reqs, tiny)                # keys differ: backends never share a key
        vllm = {o.key: o.distribution for o in tiny.generate(vplan.unique)}
        for p, v in zip(plan.unique, vplan.unique, strict=True):
            assert p.request.meta.item_id == v.request.meta.item_id
            dist, other = sliced[p.key], vllm[v.key]
            assert all(abs(dist[k] - other[k]) < 0.01 for k in dist), (dist, other)
