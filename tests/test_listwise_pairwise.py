"""Listwise, pairwise and classification protocols: designs, metrics against pingouin / scipy /
statsmodels or hand-computed cases, data formats with file-and-line errors, and every committed
run config end to end with the default judge (with --limit, as the configs say)."""
import json
import random

import numpy as np
import polars as pl
import pytest

from litjudge.engine.app.annotate.queue import build_queue
from litjudge.engine.app.run import run
from litjudge.engine.core.config import load_config
from litjudge.engine.core.errors import ConfigError, DataError
from litjudge.engine.core.paths import PROJECT_ROOT
from litjudge.engine.data.cards import load_card
from litjudge.engine.data.items import RatedItem, load_aut, load_rated_jsonl
from litjudge.engine.data.pairs import load_litbench_csv, load_pairs_jsonl, pairs_from_confederacy, pairs_from_ttcw
from litjudge.judges.classification import Classification
from litjudge.judges.listwise import ListwiseOptions, ListwiseRanking
from litjudge.judges.metrics import cluster_bootstrap, icc, one_way_anova
from litjudge.judges.metrics.bootstrap import difference_of_means_ci, expanded_alpha, too_few
from litjudge.judges.pairwise import Pairwise
from tests.conftest import DATA, litjudge, needs_data, needs_prompts, write_config
from tests.short_data import confederacy_cut_short, ttcw_cut_short

RUNS = PROJECT_ROOT / "runs"
DEMO = PROJECT_ROOT / "datasets" / "demo"


# -- metrics ----------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(4))
def test_icc_matches_pingouin(seed):
    pg = pytest.importorskip("pingouin")
    import pandas as pd

    x = np.random.default_rng(seed).integers(1, 6, (12, 3 + seed)).astype(float)
    df = pd.DataFrame([(i, j, x[i, j]) for i in range(x.shape[0]) for j in range(x.shape[1])], columns=["t", "r", "s"])
    ref = pg.intraclass_corr(df, targets="t", raters="r", ratings="s").set_index("Type")["ICC"]
    ours = icc(x)
    names = {"ICC1": "ICC(1,1)", "ICC2": "ICC(A,1)", "ICC3": "ICC(C,1)", "ICC1k": "ICC(1,k)", "ICC2k": "ICC(A,k)",
             "ICC3k": "ICC(C,k)"}
    for ours_name, pg_name in names.items():
        assert ours[ours_name] == pytest.approx(ref[pg_name], abs=1e-9), ours_name


def test_anova_matches_statsmodels():
    sm = pytest.importorskip("statsmodels.formula.api")
    import pandas as pd
    from statsmodels.stats.anova import anova_lm

    rng = np.random.default_rng(3)
    groups = [list(rng.normal(m, 1.0, 15)) for m in (1.0, 1.4, 2.0)]
    res = one_way_anova(groups)
    df = pd.DataFrame([(v, f"g{i}") for i, g in enumerate(groups) for v in g], columns=["y", "g"])
    table = anova_lm(sm.ols("y ~ C(g)", data=df).fit())
    assert res.value == pytest.approx(table["F"].iloc[0]) and res.p_value == pytest.approx(table["PR(>F)"].iloc[0])
    assert np.isnan(one_way_anova([[1.0, 2.0]]).value)


def test_cluster_bootstrap_of_a_mean_matches_scipy_for_single_item_clusters():
    from scipy import stats

    from litjudge.judges.metrics import accuracy

    rng = np.random.default_rng(0)
    flags = list(rng.random(200) < 0.3)
    lo, hi = cluster_bootstrap(range(200), [True] * 200, flags, accuracy, resamples=2000)
    ref = stats.bootstrap((np.array(flags, dtype=float),), np.mean, n_resamples=2000, method="percentile",
                          random_state=1).confidence_interval
    assert lo == pytest.approx(ref.low, abs=0.02) and hi == pytest.approx(ref.high, abs=0.02)


# -- designs ----------------------------------------------------------------------------------
def _items(n_per_cat=20, sources=("m1", "m2")):
    return [RatedItem(f"{s}-{c}-{k}", "g", f"text {s} {c} {k}", c, None, s)
            for s in sources for c in ("low", "mid", "high") for k in range(n_per_cat)]


def test_designs_balance_categories_and_are_seeded():
    proto = ListwiseRanking()
    items = _items(10)
    seg = proto.lists(items, ListwiseOptions(design="segmented", segments=5), random.Random(0))
    assert len(seg) == 5 and all(len(s) == 12 for s in seg)          # 60 items, one per cell twice
    for s in seg:
        cells = [(i.source, i.category) for i in s]
        assert all(cells.count(c) == 2 for c in set(cells))
    sub = proto.lists(items, ListwiseOptions(design="subsets", subset_size=15, subsets=7), random.Random(1))
    assert len(sub) == 7 and all(len(s) == 15 for s in sub)
    assert all(sum(i.category == c for i in s) == 5 for s in sub for c in ("low", "mid", "high"))
    again = proto.lists(items, ListwiseOptions(design="subsets", subset_size=15, subsets=7), random.Random(1))
    assert [[i.item_id for i in s] for s in sub] == [[i.item_id for i in s] for s in again]
    for size in (2, 4, 5):                 # not a multiple of the 3 categories: lists of 3 were made, silently
        with pytest.raises(ConfigError, match=f"options.subset_size = {size} cannot hold equal numbers of the pool's 3"):
            proto.lists(items, ListwiseOptions(design="subsets", subset_size=size), random.Random(1))
    comp = proto.lists(items, ListwiseOptions(), random.Random(2))
    assert len(comp) == 1 and sorted(i.item_id for i in comp[0]) == sorted(i.item_id for i in items)
    pool = proto.pool(items, ListwiseOptions(per_category=3), random.Random(0))
    assert len(pool) == 9 and {i.category for i in pool} == {"low", "mid", "high"}


def test_designs_refuse_the_lists_they_cannot_build_and_orders_are_distinct():
    """A hostile pass's silent designs: segments beyond the largest cell made fewer lists; a subset
    counted uncategorised items as a category, or came out shorter and unequal; a group named twice
    was judged once and counted twice; a list of 3 was shown twice in one order and its PSC tables
    counted 2 orders (orders = 1000 on lists of 6 planned 1,098 distinct requests of 2,000)."""
    from litjudge.engine.data.items import ItemSet, select_groups
    from litjudge.judges.listwise import shown_orders

    proto = ListwiseRanking()
    small = _items(2)                                        # cells of 2 items
    with pytest.raises(ConfigError, match=r"options.segments = 4, and group 'g'.s largest \(source, category\) "
                                          r"cell holds 2 item\(s\): 2 list\(s\) at most"):
        proto.lists(small, ListwiseOptions(design="segmented", segments=4), random.Random(0))
    assert len(proto.lists(small, ListwiseOptions(design="segmented", segments=2), random.Random(0))) == 2
    mixed = [*_items(2), RatedItem("odd", "g", "text", None, None, "m1")]
    with pytest.raises(ConfigError, match="1 item\\(s\\) of group 'g' have none \\(first: 'odd'\\)"):
        proto.lists(mixed, ListwiseOptions(design="subsets", subset_size=3), random.Random(0))
    with pytest.raises(ConfigError, match="takes 5 of each, and group 'g' has 4 of 'high'"):
        proto.lists(small, ListwiseOptions(design="subsets", subset_size=15), random.Random(0))
    plain = [RatedItem(f"i{k}", "g", "t", None, None) for k in range(6)]     # no categories at all: one pool
    assert [len(x) for x in proto.lists(plain, ListwiseOptions(design="subsets", subset_size=4, subsets=2),
                                        random.Random(0))] == [4, 4]
    with pytest.raises(ConfigError, match=r"group\(s\) \['g'\] named twice in options.groups"):
        select_groups(ItemSet(tuple(small)), ["g", "g"])
    listed = [(c, plain[k]) for k, c in enumerate("abc")]
    for seed in range(20):
        orders = shown_orders(listed, ListwiseOptions(orders=6, seed=seed), "g/0")
        assert len({tuple(c for c, _ in o) for o in orders}) == 6            # every order of 3, once each


def test_too_many_orders_for_a_list_is_one_line_and_agreement_counts_the_items_it_reads(
        tmp_path, smollm, litjudge_shared):
    """orders beyond a list's n! is refused in one line; the agreement table's `items` counts the
    items its Spearman reads (an item without a category or a human score is in neither: it said 6
    over 5), and `items_human` the human-score one's."""
    rows = [{"group": "g", "item_id": f"i{k}", "text": f"Poem {k}.", "category": ["Bad", "Medium", "Good"][k % 3],
             "human_score": float(k)} for k in range(5)] + [{"group": "g", "item_id": "bare", "text": "Poem x."}]
    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = write_config(tmp_path / "lw.toml", 'name = "lw"\nprotocol = "listwise"\ndataset = "rated-items-generic"\n'
                                             'judge = "smollm2-135m"\n[options]\norders = 721\n')
    env = {"LITJUDGE_RUNS_DIR": str(tmp_path / "runs")}
    r = litjudge_shared({"smollm2-135m": smollm}, "plan", str(cfg), "--data", str(data), env=env)
    assert r.returncode == 2 and "options.orders = 721, and list 1 of group 'g' holds 6 items: 720 orders at most" \
        in r.stderr, r.stderr[-2000:]
    cfg.write_text(cfg.read_text().replace("orders = 721", "orders = 1"))
    r = litjudge_shared({"smollm2-135m": smollm}, "run", str(cfg), "--data", str(data), "--quiet", env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    agreement = pl.read_parquet(tmp_path / "runs" / "lw" / "tables" / "agreement.parquet")
    assert agreement["items"].to_list() == [5, 5] and agreement["items_human"].to_list() == [5, 5]


# -- pairwise aggregation by hand ---------------------------------------------------------------
def test_pairwise_decisions_by_hand():
    rows = [  # pair p1: human a; judge says A in both orders -> picks a then b: inconsistent
        ("p1", "ab", "a", "A"), ("p1", "ba", "a", "A"),
        # p2: human b; judge consistent for b (B first, then A)
        ("p2", "ab", "b", "B"), ("p2", "ba", "b", "A"),
        # p3: human a; consistent for a
        ("p3", "ab", "a", "A"), ("p3", "ba", "a", "B")]
    table = pl.DataFrame([{"judge": "j", "pair_id": p, "order": o, "human": h, "label": lab, "status": "ok",
                           "distribution": None, "repeat": 0, "words_a": 10 if p != "p2" else 5, "words_b": 5 if p != "p2" else 10}
                          for p, o, h, lab in rows])
    from litjudge.judges.base import Context
    from litjudge.judges.pairwise import PairwiseOptions

    ctx = Context(load_config(RUNS / "pairwise-ttcw.toml"), PairwiseOptions(resamples=200), load_card("ttcw"))
    out = Pairwise().aggregate(table, ctx)
    acc = {r["order"]: r["accuracy"] for r in out["accuracy"].iter_rows(named=True)}
    assert acc["ab"] == 1.0 and acc["ba"] == pytest.approx(2 / 3) and acc["mean of both"] == pytest.approx(5 / 6)
    assert acc["combined (inconsistent; tie = 0.5)"] == pytest.approx((0.5 + 1 + 1) / 3)
    bias = {r["metric"]: r["value"] for r in out["bias"].iter_rows(named=True)}
    assert bias["swap_flip_rate"] == pytest.approx(1 / 3)
    assert bias["first_position_win_rate"] == pytest.approx(4 / 6)
    assert bias["longer_text_win_rate"] == pytest.approx(5 / 6)     # every pick but p1/ba is the longer text


def test_classification_confusion_by_hand():
    from litjudge.judges.base import Context
    from litjudge.judges.classification import ClassificationOptions

    table = pl.DataFrame([{"judge": "j", "item_id": f"i{k}", "group": "g", "truth": t, "status": "ok", "label": p,
                           "repeat": 0} for k, (t, p) in enumerate([("Good", "Good"), ("Good", "Medium"),
                                                                      ("Bad", "Medium"), ("Medium", "Medium")])])
    ctx = Context(load_config(RUNS / "classification-aut.toml"), ClassificationOptions(), load_card("aut-ocsai"))
    out = Classification().aggregate(table, ctx)
    m = out["metrics"].row(0, named=True)
    assert m["accuracy"] == 0.5 and m["items"] == 4
    conf = {r["true"]: r for r in out["confusion"].iter_rows(named=True)}
    assert conf["Good"]["pred_Good"] == 1 and conf["Good"]["pred_Medium"] == 1 and conf["Bad"]["pred_Medium"] == 1
    counts = {r["label"]: r["predicted"] for r in out["class_counts"].iter_rows(named=True)}
    assert counts == {"Good": 1, "Medium": 3, "Bad": 0}
    # a non-answer counted wrong is in the accuracy's n, not in the ordinal Spearman's
    silent = table.vstack(pl.DataFrame([{"judge": "j", "item_id": "i9", "group": "g", "truth": "Bad",
                                         "status": "unparsed", "label": None, "repeat": 0}], schema=table.schema))
    wrong = Context(load_config(RUNS / "classification-aut.toml", missing="wrong"), ClassificationOptions(),
                    load_card("aut-ocsai"))
    m = Classification().aggregate(silent, wrong)["metrics"].row(0, named=True)
    assert (m["n"], m["accuracy"], m["spearman_n"]) == (5, 0.4, 4)
    # a hostile pass: the unparsed item's true label went uncounted (Bad: 0 for 1), and with repeats
    # `items` counted verdicts (27 for 9 items)
    repeated = pl.concat([silent.with_columns(pl.lit(r).alias("repeat")) for r in range(3)])
    out = Classification().aggregate(repeated, wrong)
    m = out["metrics"].row(0, named=True)
    assert (m["items"], m["verdicts"], m["unparsed"]) == (5, 15, 3)
    counts = {r["label"]: (r["items"], r["true"], r["predicted"]) for r in out["class_counts"].iter_rows(named=True)}
    assert counts == {"Good": (2, 6, 3), "Medium": (1, 3, 9), "Bad": (2, 6, 0)}


# -- data formats -----------------------------------------------------------------------------
GOOD_ITEM = '{"group": "g", "item_id": "p1", "text": "a poem", "category": "Good"}'
GOOD_PAIR = '{"pair_id": "d1", "prompt": "p", "text_a": "x", "text_b": "y", "label": "b"}'


@pytest.mark.parametrize("good, line, message", [
    (GOOD_ITEM, '{"group": "g", "text": "x"}', ":2: missing field 'item_id'"),
    (GOOD_ITEM, '{"group": "g", "item_id": "p1", "text": "x"}', ":2: duplicate item_id 'p1' (first on line 1)"),
    (GOOD_ITEM, '{"group": "g", "item_id": "p9", "text": "x", "category": "Superb"}', ":2: category 'Superb' is not one of"),
    (GOOD_ITEM, '{"group": "g", "item_id": "p9", "text": "x", "human_score": "high"}',
     ":2: field 'human_score' should be a number"),
    (GOOD_PAIR, '{"prompt": "p", "text_a": "x", "label": "a"}', ":2: missing field 'text_b'"),
    (GOOD_PAIR, '{"prompt": "p", "text_a": "x", "text_b": "y", "label": "C"}', ":2: field 'label' must be one of ['a', 'b', 'tie']"),
    (GOOD_PAIR, '{"pair_id": "d1", "prompt": "p", "text_a": "x", "text_b": "y", "label": "a"}', ":2: duplicate pair_id 'd1' (first on line 1)"),
])
def test_bad_rows_name_file_and_line(tmp_path, good, line, message):
    path = tmp_path / "data.jsonl"
    path.write_text(good + "\n" + line + "\n")
    load = (lambda p: load_rated_jsonl(p, ["Bad", "Medium", "Good"])) if good is GOOD_ITEM else load_pairs_jsonl
    with pytest.raises(DataError, match="data.jsonl") as err:
        load(path)
    assert message in str(err.value)


def test_examples_and_litbench_layout(tmp_path):
    items = load_rated_jsonl(DEMO / "rated-items-example.jsonl", ["Bad", "Medium", "Good"])
    assert len(items.items) == 6 and items.category_rank("Good") == 3.0
    assert [p.label for p in load_pairs_jsonl(DEMO / "pairs-example.jsonl")] == ["a", "b", "tie"]
    lit = load_litbench_csv(DEMO / "litbench-example.csv")
    assert len(lit) == 2 and all(p.label == "a" for p in lit) and lit[0].pair_id == "c1-r1"
    bad = tmp_path / "lb.csv"
    bad.write_text("prompt,chosen_story,rejected_story\nwrite,,a story\n")
    with pytest.raises(DataError, match=r"lb.csv:2: empty 'chosen_story'"):
        load_litbench_csv(bad)
    bad.write_text("prompt,chosen,rejected\nwrite,a,b\n")
    with pytest.raises(DataError, match="missing column"):
        load_litbench_csv(bad)


@needs_data
def test_derived_datasets():
    aut = load_aut(DATA / "aut-ocsai" / "test.jsonl")
    assert len(aut.items) == 3030 and aut.categories == ("low", "mid", "high")
    brick = [i for i in aut.items if i.group == "brick"]
    low = [i.human_score for i in brick if i.category == "low"]
    high = [i.human_score for i in brick if i.category == "high"]
    assert max(low) < min(high) and abs(len(low) - len(brick) / 3) <= 0.1 * len(brick)
    # equal ratings of an object share a tertile (by line order, 584 responses had a twin in another)
    tertiles: dict[tuple[str, float | None], set[str | None]] = {}
    for i in aut.items:
        tertiles.setdefault((i.group, i.human_score), set()).add(i.category)
    assert all(len(t) == 1 for t in tertiles.values())
    ttcw = pairs_from_ttcw(DATA / "ttcw")
    assert len(ttcw) == 32 and all(p.label in ("a", "b") for p in ttcw)
    conf = pairs_from_confederacy(DATA / "confederacy")
    assert len(conf) == 386 and len({p.group for p in conf}) == 5


# -- the committed run configs, end to end ------------------------------------------------------------
@needs_data
@pytest.mark.slow
@pytest.mark.parametrize("name, limit, expect", [
    ("listwise-aut-comprehensive", 2, {"agreement", "anova", "category_means", "success"}),
    ("listwise-aut-segmented", 1, {"agreement", "anova", "success"}),
    ("listwise-confederacy-subsets", 1, {"agreement", "icc", "success"}),
    ("classification-aut", 1, {"metrics", "confusion", "class_counts"}),
    ("pairwise-confederacy", 2, {"accuracy", "bias", "pairs"}),
])
def test_committed_configs_run_end_to_end(tiny, runs_dir, tmp_path, name, limit, expect):
    """Each committed config, its judge replaced by the session's tiny random Llama (SmolLM2's
    tokenizer and chat template): its plumbing is the point, not what a judge says (36 s of the
    default judge's forward passes; Xeon, float32). The Confederacy configs read the stories cut to
    their first paragraph (every story, rating and group kept; nothing asserted reads a text's
    length): 1,564 distinct tokens to prefill in the listwise subsets and 557 in the pairs, where
    the whole stories were 10,240 and 3,535."""
    judge = tiny.spec.name
    config = load_config(RUNS / f"{name}.toml", limit=limit, judge=judge)
    if config.dataset == "confederacy":
        config = load_config(RUNS / f"{name}.toml", limit=limit, judge=judge,
                             data_root=str(confederacy_cut_short(tmp_path / "data" / "confederacy").parent))
    out = run(config, progress=False, backends={judge: tiny})
    assert out.manifest.judges[0]["judge"] == judge and out.manifest.judges[0]["generated"] > 0
    assert out.verdicts.height > 0 and out.manifest.verdicts.unparsed == 0
    for table in expect:
        assert out.tables[table].height > 0, table
        assert (runs_dir / name / "tables" / f"{table}.parquet").exists()
    if name == "listwise-confederacy-subsets":
        icc_rows = out.tables["icc"].filter(pl.col("score") == "score")
        assert icc_rows.height == 4 and set(icc_rows["repeats"]) == {3}
        assert {"ICC1", "ICC2", "ICC3", "ICC1k", "ICC2k", "ICC3k"} <= set(icc_rows.columns)
        agree = out.tables["agreement"].filter(pl.col("score") == "score").row(0, named=True)
        assert agree["items"] <= 13 and "spearman_human" in agree
    if name == "pairwise-confederacy":
        assert out.verdicts.height == 4                        # 2 pairs x 2 orders
        assert set(out.verdicts["order"]) == {"ab", "ba"}
        assert out.verdicts["distribution"].is_not_null().all()
    if name.startswith("listwise"):
        assert out.tables["success"]["success_rate"].min() == 1.0   # slot decoding: every list complete


@needs_data
@pytest.mark.slow
def test_pairwise_ttcw_config_through_the_cli(tmp_path, smollm, litjudge_shared):
    """The committed config run by the console in this process on the session's engine (the
    command's work and output are the point, not its process), on the TTCW data (`--data`) with its
    stories cut to two paragraphs: one pair in both orders, 808 distinct tokens to prefill where
    the two whole stories were 8,262 (and a CLI process with an engine of its own)."""
    data = ttcw_cut_short(tmp_path / "data" / "ttcw")
    r = litjudge_shared({"smollm2-135m": smollm}, "run", "runs/pairwise-ttcw.toml", "--data", str(data),
                        "--limit", "1", "--quiet", env={"LITJUDGE_RUNS_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr[-3000:]
    assert "verdicts (0 unparsed)" in r.stdout and "Bias" in r.stdout
    acc = pl.read_parquet(tmp_path / "pairwise-ttcw" / "tables" / "accuracy.parquet")
    assert "mean of both" in acc["order"].to_list()
    m = json.loads((tmp_path / "pairwise-ttcw" / "manifest.json").read_text())
    assert m["judges"][0]["plan"]["requests"] == 2                    # one pair, both orders


@needs_data
def test_bad_protocol_options_fail_with_one_line(tmp_path):
    cfg = write_config(tmp_path / "bad.toml", 'name = "x"\nprotocol = "listwise"\ndataset = "rated-items-generic"\n'
                                              '[options]\ndesign = "tournament"\n')
    r = litjudge("run", str(cfg), env={"LITJUDGE_RUNS_DIR": str(tmp_path)})
    assert r.returncode == 2 and "options.design: must be one of" in r.stderr
    cfg = write_config(tmp_path / "bad2.toml", 'name = "x"\nprotocol = "pairwise"\ndataset = "rated-items-generic"\n')
    r = litjudge("run", str(cfg), env={"LITJUDGE_RUNS_DIR": str(tmp_path)})
    assert r.returncode == 2 and ("protocol 'pairwise' reads pairs data, and dataset 'rated-items-generic' (loader "
                                  "'rated_items_jsonl') gives items") in r.stderr
    cfg = write_config(tmp_path / "bad3.toml", 'name = "x"\nprotocol = "classification"\ndataset = "aut-ocsai"\n'
                                               '[options]\ngroups = ["spaceship"]\n')
    r = litjudge("run", str(cfg), env={"LITJUDGE_RUNS_DIR": str(tmp_path)})
    assert r.returncode == 2 and "unknown group(s) ['spaceship']" in r.stderr
    # a recorded judge's one ranking per list would be every shown order's: PSC read it as perfectly consistent
    (tmp_path / "rec.jsonl").write_text('{"id": "x", "response": "1. abcd : 3"}\n')
    cfg = write_config(tmp_path / "bad4.toml", f'name = "x"\nprotocol = "listwise"\ndataset = "rated-items-generic"\n'
                                               f'judge = "replay:{tmp_path / "rec.jsonl"}"\n[options]\norders = 3\n')
    r = litjudge("plan", str(cfg), env={"LITJUDGE_RUNS_DIR": str(tmp_path)})
    assert r.returncode == 2 and ("holds one answer per item id, and item 'demo-poems/list0' is asked twice (with "
                                  "another order and shown), which would share it") in r.stderr, r.stderr[-2000:]
    # refused while a sweep plans: no sweep folder is left behind that looks like an interrupted one
    (tmp_path / "bad5.toml").write_text((tmp_path / "bad4.toml").read_text().replace('name = "x"', 'name = "sw"')
                                        + "[matrix]\nlimit = [1, 2]\n")
    r = litjudge("run", str(tmp_path / "bad5.toml"), env={"LITJUDGE_RUNS_DIR": str(tmp_path / "out")})
    assert r.returncode == 2 and "is asked twice" in r.stderr and not (tmp_path / "out" / "sw").exists(), r.stderr[-2000:]


def test_a_recorded_judge_is_never_asked_one_item_two_ways(tmp_path):
    """Replay serves by item id: the planner refuses, per run, a second key for an id (whatever asks it:
    a plugin's protocol, repeats past the config's check), and lets the same request twice and
    another run's same id through."""
    from litjudge.engine import backends
    from litjudge.engine.core.config import RunConfig
    from litjudge.engine.core.errors import ConfigError
    from litjudge.engine.core.planner import StreamPlanner
    from litjudge.engine.core.requests import JudgeRequest, Message, RequestMeta, Sampling
    from litjudge.grammars import binary

    (tmp_path / "rec.jsonl").write_text('{"id": "s1", "response": "Yes"}\n')
    name = f"replay:{tmp_path / 'rec.jsonl'}"
    spec = backends.resolve(name, RunConfig(name="x", protocol="-", dataset="-", judge=name))

    def ask(text: str, repeat: int = 0) -> JudgeRequest:
        return JudgeRequest((Message("user", text),), binary(), "label", Sampling(temperature=1.0, seed=repeat),
                            RequestMeta("plugin", "s1", (("repeat", repeat),)))

    fine = [("r1", ask("Is it good?")), ("r1", ask("Is it good?")), ("r2", ask("Is it fine?"))]
    assert sum(len(c.entries) for c in StreamPlanner(backends.planner(spec)).chunks(fine)) == 3
    for second, how in [(ask("Is it fine?"), "with another prompt"), (ask("Is it good?", 1), "with another repeat")]:
        with pytest.raises(ConfigError, match=f"item 's1' is asked twice \\({how}\\)"):
            list(StreamPlanner(backends.planner(spec), chunk=1).chunks([("r1", ask("Is it good?")), ("r1", second)]))


# -- reward-model judges ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_reward_model(tmp_path_factory):
    """A tiny Bradley-Terry reward model (Llama sequence classification, one logit, random weights)
    with the default judge's tokenizer, built here: plumbing only, its preferences mean nothing."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForSequenceClassification

    from litjudge.engine.backends.local.models import resolve_judge

    tok = AutoTokenizer.from_pretrained(resolve_judge("smollm2-135m").path)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048, num_labels=1,
                      pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
                      tie_word_embeddings=False)
    torch.manual_seed(0)
    model = LlamaForSequenceClassification(cfg).eval()
    path = tmp_path_factory.mktemp("tiny-rm") / "tiny-rm"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path, model, tok


@pytest.mark.slow
def test_reward_model_judge_scores_each_text_and_the_higher_wins(tiny_reward_model, tmp_path):
    import torch

    path, model, tok = tiny_reward_model
    cfg = write_config(tmp_path / "rm.toml", f'name = "rm"\nprotocol = "pairwise"\ndataset = "pairs-generic"\n'
                                             f'judge = "reward:{path}"\nmode = "reward"\n'
                                             f'[engine]\nmax_model_len = 2048\nkv_cache_gib = 1\ndtype = "float32"\n')
    r = litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(tmp_path / "runs")})
    assert r.returncode == 0, r.stderr[-3000:]
    assert "6 verdicts (0 unparsed)" in r.stdout
    v = pl.read_parquet(tmp_path / "runs" / "rm" / "verdicts.parquet")
    log = {json.loads(line)["key"]: json.loads(line) for line in (tmp_path / "runs" / "rm" / "log.jsonl").open()}
    pairs = {p.pair_id: p for p in load_pairs_jsonl(DEMO / "pairs-example.jsonl")}
    for row in v.iter_rows(named=True):
        pair = pairs[row["pair_id"]]
        text = pair.text_a if row["side"] == "a" else pair.text_b
        rendered = tok.apply_chat_template([{"role": "user", "content": pair.prompt},
                                            {"role": "assistant", "content": text}], tokenize=False)
        assert log[row["key"]]["prompt"] == rendered
        with torch.no_grad():
            ids = tok(rendered, add_special_tokens=False, return_tensors="pt")
            expected = model(**ids).logits.item()
        assert float(row["value"]) == pytest.approx(expected, abs=1e-3)
    decided = pl.read_parquet(tmp_path / "runs" / "rm" / "tables" / "pairs.parquet")
    wide = v.pivot(on="side", index="pair_id", values="value", aggregate_function="first")
    for r_ in wide.iter_rows(named=True):
        want = "a" if float(r_["a"]) > float(r_["b"]) else "b"
        assert decided.filter(pl.col("pair_id") == r_["pair_id"])["combined"][0] == want
    acc = pl.read_parquet(tmp_path / "runs" / "rm" / "tables" / "accuracy.parquet")
    assert acc["order"][0] == "reward" and acc["n"][0] == 2          # the tie pair has no right answer
    calibration = pl.read_parquet(tmp_path / "runs" / "rm" / "tables" / "calibration_summary.parquet")
    assert calibration["read"].to_list() == ["reward model"]         # its sigmoid, not a distribution's


def test_reward_mode_needs_a_reward_judge(tmp_path):
    cfg = write_config(tmp_path / "bad.toml", 'name = "x"\nprotocol = "pairwise"\ndataset = "pairs-generic"\nmode = "reward"\n')
    r = litjudge("run", str(cfg), env={"LITJUDGE_RUNS_DIR": str(tmp_path)})
    assert r.returncode == 2 and "reward mode needs a reward-model judge, reward:MODEL" in r.stderr


def test_a_reward_judge_that_is_no_reward_model_is_one_line_before_any_engine(tiny_folder, tmp_path):
    """A hostile pass: `reward:smollm2-135m` planned 8 requests, started its engine, then vLLM's
    "Classification API is not supported by this model" was an internal error."""
    cfg = write_config(tmp_path / "rm.toml", f'name = "rm"\nprotocol = "pairwise"\ndataset = "pairs-generic"\n'
                                             f'judge = "reward:{tiny_folder}"\nmode = "reward"\n')
    for command in ("plan", "run"):
        r = litjudge(command, str(cfg), env={"LITJUDGE_RUNS_DIR": str(tmp_path / "runs")})
        assert r.returncode == 2 and "(LlamaForCausalLM) is a text generator, not a sequence-classification (reward) " \
            "model" in r.stderr and "internal error" not in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / "runs").exists()


def test_inter_judge_matrix_and_self_preference_by_hand():
    items = pl.DataFrame({"judge": ["j1"] * 4 + ["j2"] * 4, "item_id": ["a", "b", "c", "d"] * 2,
                          "mean_score": [1.0, 2.0, 3.0, 4.0, 4.0, 3.0, 2.0, 1.0],
                          "mean_position": [4.0, 3.0, 2.0, 1.0, 1.0, 2.0, 3.0, 4.0],
                          "source": ["m1", "m1", "m2", "m2"] * 2, "group": ["g1"] * 8})
    matrix = ListwiseRanking._inter_judge(items)
    assert matrix.filter(pl.col("judge") == "j1")["j2"][0] == pytest.approx(-1.0)
    assert matrix.filter(pl.col("judge") == "j2")["j2"][0] == 1.0
    pref = ListwiseRanking._self_preference(items, ListwiseOptions(self_sources={"j1": "m2"}))
    row = pref.filter(pl.col("score") == "score").row(0, named=True)
    assert row["own_items"] == 2 and row["own_mean"] == 3.5 and row["other_mean"] == 1.5 and row["difference"] == 2.0
    assert row["ci_low"] is None and row["ci_note"] == too_few(1)          # one item group: no interval
    pos = pref.filter(pl.col("score") == "position").row(0, named=True)
    assert pos["difference"] == -2.0


def test_self_preference_interval_matches_a_brute_force_bootstrap():
    """The interval of own minus others' mean equals a hand-written bootstrap of whole item groups
    (each drawn group brings its own and others' items) read at the expanded percentile levels of
    the group count (the one interval rule)."""
    rng = np.random.default_rng(3)
    groups = np.repeat(np.arange(15), 4)
    values, own = rng.integers(1, 6, 60).astype(float), np.tile([True, False, False, False], 15)
    diff, low, high = difference_of_means_ci(groups.tolist(), values.tolist(), own.tolist(), resamples=4000)
    draws = np.random.default_rng(11)
    stats = []
    for _ in range(4000):
        rows = np.concatenate([np.flatnonzero(groups == g) for g in draws.integers(0, 15, 15)])
        stats.append(values[rows][own[rows]].mean() - values[rows][~own[rows]].mean())
    a = expanded_alpha(15)
    ref_low, ref_high = np.quantile(stats, [a / 2, 1 - a / 2])
    assert diff == pytest.approx(values[own].mean() - values[~own].mean())
    assert low == pytest.approx(ref_low, abs=0.08) and high == pytest.approx(ref_high, abs=0.08)
    assert all(np.isnan(difference_of_means_ci([1], [1.0], [False])))                 # nothing to compare
    assert np.isnan(difference_of_means_ci(list(range(9)) + [8], [2.0] * 10, [True] * 9 + [False])[1])  # 9 groups


@pytest.mark.slow
@needs_prompts
def test_pairwise_analysis_then_verdict(tiny, runs_dir, tmp_path):
    """Free analysis, then the constrained tail (the session's tiny random judge writes both)."""
    cfg = write_config(tmp_path / "pa.toml", 'name = "pa"\nprotocol = "pairwise"\ndataset = "pairs-generic"\n'
                                             f'judge = "{tiny.spec.name}"\nmode = "analyze"\n[options]\n'
                                             'template = "writerly_criteria"\nanalysis_tokens = 48\n')
    out = run(load_config(cfg), progress=False, backends={tiny.spec.name: tiny})
    v = out.verdicts
    assert v.height == 6 and set(v["status"]) == {"ok"} and set(v["label"]) <= {"A", "B"}
    assert all("\nPreferred: " in raw for raw in v["raw"]) and v["analysis"].is_not_null().all()
    q = build_queue(out.run_dir, 3, pairs_by="probability")   # one judge: it draws by P(text) after the analysis
    assert q.uncertainty.all() and q.uncertainty_source == "the judges' P(text) over both orders read after their analysis"


def test_categories_without_an_order_rank_by_name_and_say_so(tiny, runs_dir, tmp_path):
    """Your own items' categories carry an order only if you give one: without `category_order`
    they rank by name ("high" < "low" < "mid") and the run warns, naming that order and the key;
    with it, category_rank follows it and nothing is said. (Whatever the judge says: the session's
    tiny random one.)"""
    rows = [{"obj": "brick", "id": f"u{k}", "use": f"use number {k}", "tert": t, "score": s}
            for k, (t, s) in enumerate([("low", 1), ("mid", 2), ("high", 3)] * 2)]
    (tmp_path / "uses.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    base = ('name = "{name}"\nprotocol = "listwise"\njudge = "{judge}"\n[dataset]\npath = "uses.jsonl"\n{order}'
            '[dataset.columns]\ngroup = "obj"\nitem_id = "id"\ntext = "use"\ncategory = "tert"\nhuman_score = "score"\n')
    ranks = {}
    for name, order in (("by-name", ""), ("given", 'category_order = ["low", "mid", "high"]\n')):
        cfg = write_config(tmp_path / f"{name}.toml", base.format(name=name, order=order, judge=tiny.spec.name))
        out = run(load_config(cfg), progress=False, backends={tiny.spec.name: tiny})
        means = out.tables["category_means"]
        ranks[name] = dict(zip(means["category"].to_list(), means["category_rank"].to_list()))
        warned = [w for w in out.manifest.warnings if "rank by name" in w]
        assert len(warned) == (name == "by-name"), out.manifest.warnings
        if warned:
            assert "(high < low < mid)" in warned[0] and "category_order" in warned[0]
    assert ranks["by-name"] == {"high": 1.0, "low": 2.0, "mid": 3.0}
    assert ranks["given"] == {"low": 1.0, "mid": 2.0, "high": 3.0}


def test_iccs_outside_their_range_say_why():
    """The ICCs are ANOVA estimates (pingouin's exactly): on two items the k-repeat forms read 3.0
    and -3.0, published bare; the row says they are outside [-1, 1] and why."""
    from litjudge.judges.listwise import icc_row

    row = icc_row(pl.DataFrame({"r0": [1.0, 0.0], "r1": [1.0, 0.0], "r2": [0.0, 1.0]}))
    assert row["ICC2k"] == pytest.approx(3.0) and row["ICC3k"] == pytest.approx(-3.0)
    assert row["note"] == "ICC2k, ICC3k outside [-1, 1]: too few items (2) for a stable estimate"
    steady = icc_row(pl.DataFrame({"r0": [1.0, 2.0, 3.0, 4.0], "r1": [1.0, 2.0, 3.5, 4.0]}))
    assert steady["note"] is None and steady["ICC1"] > 0.9
    alike = icc_row(pl.DataFrame({"r0": [3.0, 3.0, 3.0], "r1": [3.0, 3.0, 3.0]}))      # blank, and said why
    assert alike["note"] == "ICC1, ICC2, ICC3, ICC1k, ICC2k, ICC3k undefined: a variance it divides by is zero"
