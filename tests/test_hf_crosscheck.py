"""The transformers + outlines backend cross-checks vLLM on the default judge: greedy label
verdicts agree on >= 95% of 60 requests, and distribution-mode probabilities agree closely on 30
(both run bf16 weights; the kernels differ, so a few near-ties can flip). transformers judges one
request at a time, 0.27 s each on one core: 150 and 60 requests took 58 s and 20 s of the suite,
and agreed on 150 of 150."""
import json
import math

import pytest

import litjudge.grammars as g
from litjudge.engine import backends
from litjudge.engine.backends.base import Prepared
from litjudge.engine.core.planner import make_plan
from litjudge.engine.core.requests import JudgeRequest, Message, RequestMeta, Sampling
from tests.conftest import DATA, needs_data

N_LABEL, N_DIST = 60, 30      # 60 greedy labels: 4 flips fail the 0.95 bar
# Measured on a 2-core CPU (bf16 weights in both): mean |P_vllm(Yes) - P_hf(Yes)| 0.014, max 0.063
# over 60 requests (0.013 and 0.052 in a later run). The test prints the numbers of each run.
MAX_TOLERANCE, MEAN_TOLERANCE = 0.10, 0.03


def aut_requests(n: int, mode: str):
    rows = [json.loads(line) for line in (DATA / "aut-ocsai" / "test.jsonl").open()][:n]
    reqs = []
    for i, row in enumerate(rows):
        obj = row["prompt"].split("AUT Prompt:", 1)[1].split("\n", 1)[0]
        use = row["prompt"].split("Response:", 1)[1].split("\n", 1)[0]
        text = f"Someone suggested this alternative use for a {obj}: \"{use}\". Is this use creative? Answer Yes or No."
        reqs.append(JudgeRequest((Message("user", text),), g.binary(), mode, Sampling(), RequestMeta("xcheck", f"aut{i}")))
    return reqs


@pytest.fixture(scope="module")
def hf():
    return backends.create(backends.model_spec("smollm2-135m", backend="transformers"))


def same_prompts(plan, hf_backend):
    """HF runs exactly the prompts vLLM ran (keys differ: backends never share a key)."""
    return [Prepared(p.key, p.request, p.prompt, tuple(hf_backend.encode(p.prompt)), p.max_tokens) for p in plan.unique]


@needs_data
@pytest.mark.slow
def test_greedy_labels_agree_with_vllm(smollm, hf):
    plan = make_plan(aut_requests(N_LABEL, "label"), smollm)
    assert len(plan.unique) >= N_LABEL - N_LABEL // 6
    v = {o.key: o.raw for o in smollm.generate(plan.unique)}
    h = {o.key: o.raw for o in hf.generate(same_prompts(plan, hf))}
    assert set(v.values()) | set(h.values()) <= {"Yes", "No"}
    agree = sum(v[k] == h[k] for k in v) / len(v)
    print(f"\ngreedy label agreement vLLM vs transformers+outlines: {agree:.3f} over {len(v)} requests")
    assert agree >= 0.95


@needs_data
@pytest.mark.slow
def test_distribution_probabilities_agree_with_vllm(smollm, hf):
    plan = make_plan(aut_requests(N_DIST, "distribution"), smollm)
    v = {o.key: o.distribution["Yes"] for o in smollm.generate(plan.unique)}
    h = {o.key: o.distribution["Yes"] for o in hf.generate(same_prompts(plan, hf))}
    diffs = [abs(v[k] - h[k]) for k in v]
    print(f"\nP(Yes) vLLM vs transformers: max |diff| {max(diffs):.4f}, mean {sum(diffs) / len(diffs):.4f} "
          f"over {len(diffs)} requests")
    assert max(diffs) <= MAX_TOLERANCE and sum(diffs) / len(diffs) <= MEAN_TOLERANCE


def by_hand(hf, prompt: list[int], answers: dict[str, list[int]]) -> dict[str, float]:
    """Each answer's probability after `prompt`, renormalised over them: the transformers model's
    log-softmax summed over the answer's tokens, one forward pass each (the reference)."""
    import torch

    scores = {}
    for label, answer in answers.items():
        with torch.no_grad():
            logits = hf.model(torch.tensor([[*prompt, *answer]])).logits[0].float().log_softmax(-1)
        scores[label] = sum(logits[len(prompt) + j - 1, t].item() for j, t in enumerate(answer))
    top = max(scores.values())
    total = sum(math.exp(v - top) for v in scores.values())
    return {label: math.exp(v - top) / total for label, v in scores.items()}


@pytest.mark.slow
def test_a_label_that_starts_another_is_scored_with_the_end_of_the_answer(smollm, hf):
    """"1" and "10": each label's probability is of it and the end token after it, as the
    transformers model computes it here by hand. Scored without the end, P("1") held P("10") (it
    was at least one half for any prompt); this judge finds "10" likelier even after "0 + 1"."""
    lang = g.LabelSet("n", (("1", 1), ("10", 10)))
    asked = ["What is 0 + 1? Reply with the number only.", "Reply with the number ten in digits, nothing else.",
             "What is 5 + 5? Reply with the number only."]           # far from even odds (bfloat16 here)
    plan = make_plan([JudgeRequest((Message("user", q),), lang, "distribution", Sampling(), RequestMeta("x", f"q{i}"))
                      for i, q in enumerate(asked)], smollm)
    got = {o.key: o.distribution["10"] for o in smollm.generate(plan.unique)}
    tok = hf.renderer.tokenizer
    for u in plan.unique:
        reference = by_hand(hf, list(u.token_ids), {x: [*tok(x, add_special_tokens=False)["input_ids"], tok.eos_token_id]
                                                    for x in ("1", "10")})["10"]
        assert got[u.key] == pytest.approx(reference, abs=0.1), (u.request.meta.item_id, got[u.key], reference)
    assert min(got.values()) > 0.5                                    # never at most one half, as it was


@pytest.mark.slow
def test_labels_that_join_the_space_and_labels_that_do_not_are_read_from_one_point(smollm, hf):
    """After "Verdict: ", SmolLM2 writes "Great" as ":" " Great" and "7" as ":" " " "7": each label
    is read from after the colon, with its space, as by hand here. "7" was read from after the
    space, without P(" "): 0.88 where the judge's own is 0.54."""
    lang = g.categorical(["Great", "7", "Poor"])
    asked = ["Rate this story: 'The cat sat.' Answer Great, 7 or Poor.", "Is a sunset pretty? Answer Great, 7 or Poor."]
    plan = make_plan([JudgeRequest((Message("user", q),), lang, "distribution", Sampling(), RequestMeta("x", f"q{i}"),
                                   prefill="My verdict: ") for i, q in enumerate(asked)], smollm)
    got = {o.key: o.distribution for o in smollm.generate(plan.unique)}
    tok = hf.renderer.tokenizer
    for u in plan.unique:
        ids = list(u.token_ids)
        assert tok.decode(ids[-1:]) == " " and tok.decode(ids[-2:-1]) == ":"
        reference = by_hand(hf, ids[:-1], {x: tok(" " + x, add_special_tokens=False)["input_ids"] for x in lang.labels()})
        for label in lang.labels():
            assert got[u.key][label] == pytest.approx(reference[label], abs=0.1), (label, got[u.key], reference)
