"""Statistics you can publish: each defect of the audit reproduced and fixed, the missing-answer
policy, and the TTCW replay against the dataset authors' own notebook computation."""
import json
import math
from collections import Counter

import polars as pl
import pytest

from litjudge.engine.app.run import aggregate_store, prepare, run
from litjudge.engine.core.config import MissingPolicy, load_config
from litjudge.engine.core.errors import ConfigError
from litjudge.engine.core.store import Store
from litjudge.engine.data.cards import load_card
from litjudge.judges.base import Context
from litjudge.judges.metrics import balanced_accuracy, cohen_kappa, icc, spearman
from litjudge.judges.metrics.bootstrap import too_few
from litjudge.judges.pairwise import Pairwise, PairwiseOptions
from litjudge.judges.reference_likert import ReferenceLikert
from tests.conftest import DATA, PROJECT_ROOT, needs_data

RUNS = PROJECT_ROOT / "runs"
NOTEBOOK_BACC = {"gemini-pro": 0.46, "cgpt": 0.49, "claudev2": 0.50, "claudev21": 0.52, "claudev13": 0.53,
                 "gpt4": 0.54, "claude3-opus": 0.58}   # Evaluating_LLM.ipynb, section 3.1, printed to 2 decimals


def pairwise_ctx(missing: str = "drop", **options) -> Context:
    import dataclasses

    config = dataclasses.replace(load_config(RUNS / "pairwise-ttcw.toml"), missing=missing)
    return Context(config, PairwiseOptions(resamples=50, **options), load_card("ttcw"))


def pairwise_table(verdicts: dict[str, tuple[str | None, str | None]], repeats: int = 1, human: str = "a"):
    """verdicts: pair -> (label shown ab, label shown ba); None = unparsed."""
    rows = []
    for repeat in range(repeats):
        for pair, labels in verdicts.items():
            for order, label in zip(("ab", "ba"), labels):
                rows.append({"judge": "j", "pair_id": pair, "order": order, "repeat": repeat, "human": human,
                             "status": "ok" if label else "unparsed", "label": label, "distribution": None,
                             "words_a": 10, "words_b": 12})
    return pl.DataFrame(rows)


# -- defect 1: swap-flip and accuracy with repeats -------------------------------------------
@pytest.mark.parametrize("repeats", [1, 2, 3])
def test_pairwise_repeats_keep_every_pair(repeats):
    verdicts = {"p1": ("A", "B"), "p2": ("A", "A"), "p3": ("B", "A"), "p4": ("A", None)}
    out = Pairwise().aggregate(pairwise_table(verdicts, repeats), pairwise_ctx())
    bias = {r["metric"]: r for r in out["bias"].iter_rows(named=True)}
    assert bias["swap_flip_rate"]["value"] == pytest.approx(1 / 3) and bias["swap_flip_rate"]["n"] == 3 * repeats
    acc = {r["order"]: r for r in out["accuracy"].iter_rows(named=True)}
    # human a: ab picks a,a,b,a (3/4); ba picks a,b,b,- (1/3); combined a, tie, b, a -> (1 + .5 + 0 + 1) / 4
    assert acc["ab"]["accuracy"] == pytest.approx(3 / 4) and acc["ab"]["n"] == 4 * repeats
    assert acc["ba"]["accuracy"] == pytest.approx(1 / 3) and acc["ba"]["n"] == 3 * repeats
    combined = next(r for o, r in acc.items() if o.startswith("combined"))
    assert combined["accuracy"] == pytest.approx(2.5 / 4) and combined["n"] == 4 * repeats
    assert combined["ci_low"] is None and combined["ci_note"] == too_few(4)     # 4 pairs: no interval


# -- defect 2: per-story counts never count a non-answer as a fail ---------------------------
@pytest.fixture(scope="module")
def replay(tmp_path_factory):
    import os

    runs = tmp_path_factory.mktemp("runs")
    os.environ["LITJUDGE_RUNS_DIR"] = str(runs)
    try:
        return run(load_config(RUNS / "ttcw-replay.toml"), progress=False)
    finally:
        del os.environ["LITJUDGE_RUNS_DIR"]


def reaggregate(outcome, missing: str):
    """The same stored verdicts, aggregated under another missing-answer policy (no model)."""
    import dataclasses

    config = dataclasses.replace(load_config(RUNS / "ttcw-replay.toml"), missing=missing)
    store = Store.open(outcome.run_dir / "store.sqlite")
    try:
        _, tables, _ = aggregate_store(prepare(config), store)
    finally:
        store.close()
    return tables


@needs_data
@pytest.mark.parametrize("missing", ["drop", "label:No"])
def test_story_counts_brute_force_from_stored_verdicts(replay, missing):
    stored = pl.read_parquet(replay.run_dir / "verdicts.parquet")
    majority = {(r["story_id"], r["ttcw_idx"]): r["binary_verdict"] == "Yes"
                for r in json.loads((DATA / "ttcw" / "expert_majority.json").read_text())}
    tables = reaggregate(replay, missing)
    counts = {r["judge"]: r for r in tables["story_counts"].filter(pl.col("view") == "all").iter_rows(named=True)}
    for judge, rows in stored.group_by("judge"):
        judge_n, expert_n = Counter(), Counter()
        for r in rows.iter_rows(named=True):
            if r["status"] != "ok" and missing == "drop":
                continue                                # a non-answer is neither a pass nor a fail
            judge_n[r["story_id"]] += r["status"] == "ok" and r["label"] == "Yes"
            expert_n[r["story_id"]] += majority[(r["story_id"], r["test"])]
        stories = sorted(expert_n)
        rho = spearman([judge_n[s] for s in stories], [expert_n[s] for s in stories])
        assert counts[judge[0]]["stories"] == len(stories)
        assert counts[judge[0]]["spearman"] == pytest.approx(rho.value, abs=1e-12)
    gemini = counts["replay:gemini-pro"]
    if missing == "drop":
        assert gemini["stories"] == 47 and round(gemini["spearman"], 3) == -0.258     # 3_NewYorker has no answer
    else:
        assert gemini["stories"] == 48 and round(gemini["spearman"], 3) == -0.285     # the notebook's reading


# -- defect 3: one undefined group does not make the mean NaN --------------------------------
def test_reference_likert_mean_skips_undefined_groups():
    per = pl.DataFrame([{"judge": "j", "group": g, "candidate": f"{g}{i}", "source": "s", "human_score": float(h),
                         "pass": p, "test": 1}
                        for g, humans, passes in (("g1", [1, 2, 3], [False, True, True]), ("g2", [1, 2, 3], [True] * 3))
                        for i, (h, p) in enumerate(zip(humans, passes))])
    _, ranking, mean = ReferenceLikert._rank(per, [])
    row = mean.row(0, named=True)
    assert math.isnan(ranking.filter(pl.col("group") == "g2")["spearman"][0])
    assert row["spearman"] == pytest.approx(0.8660254, abs=1e-6) and row["groups"] == 2 and row["groups_defined"] == 1
    assert row["pairwise_accuracy"] == pytest.approx((2.5 / 3 + 0.5) / 2) and row["pairwise_groups"] == 2


# -- defect 4: ICC with large rater offsets ---------------------------------------------------
def test_icc_with_rater_offsets_matches_pingouin():
    pg = pytest.importorskip("pingouin")
    import pandas as pd

    x = [[0, 5e4], [1, 5e4 + 1], [2, 5e4 + 2.5], [3, 5e4 + 2.9]]
    df = pd.DataFrame([(i, j, v) for i, row in enumerate(x) for j, v in enumerate(row)], columns=["t", "r", "s"])
    ref = pg.intraclass_corr(df, targets="t", raters="r", ratings="s").set_index("Type")["ICC"]
    # pingouin itself loses ~1e-7 here (sums of squares from large totals); exact rational arithmetic:
    assert icc(x)["ICC3"] == pytest.approx(exact_icc3(x), abs=1e-12)
    assert icc(x)["ICC3"] == pytest.approx(ref["ICC(C,1)"], abs=1e-6) and round(icc(x)["ICC3"], 3) == 0.979
    assert all(math.isnan(v) for v in icc([[2.0, 2.0], [2.0, 2.0], [2.0, 2.0]]).values())


def exact_icc3(x) -> float:
    """ICC(3,1) in exact rational arithmetic (Shrout & Fleiss): the brute-force reference."""
    from fractions import Fraction

    x = [[Fraction(v) for v in row] for row in x]
    n, k = len(x), len(x[0])
    grand = sum(map(sum, x)) / (n * k)
    rows = [sum(r) / k for r in x]
    cols = [sum(r[j] for r in x) / n for j in range(k)]
    msr = k * sum((m - grand) ** 2 for m in rows) / (n - 1)
    mse = sum((x[i][j] - rows[i] - cols[j] + grand) ** 2 for i in range(n) for j in range(k)) / ((n - 1) * (k - 1))
    return float((msr - mse) / (msr + (k - 1) * mse))


# -- defect 5: NaN labels are missing, not a category ----------------------------------------
def test_nan_labels_are_left_out():
    nan = float("nan")
    k = cohen_kappa([nan, 1, 2], [nan, 1, 2])
    assert k.value == 1.0 and k.n == 2
    b = balanced_accuracy([nan, 1, 0], [nan, 1, 0])
    assert b.value == 1.0 and b.n == 2
    one_class = balanced_accuracy([nan, 1], [nan, 1])               # one truth class left: undefined
    assert math.isnan(one_class.value) and one_class.n == 1
    assert balanced_accuracy([None, "Yes", "No"], ["Yes", "Yes", None]).n == 1


# -- defect 6: one first-position win rate ---------------------------------------------------
def test_first_position_win_rate_has_one_definition():
    """12 verdicts, 5 for the first-shown item, 5 for the second, 2 ties: 5/10 in both protocols."""
    firsts = ["A"] * 5 + ["B"] * 5 + ["tie"] * 2
    table = pl.DataFrame([{"judge": "j", "pair_id": f"p{i // 2}", "order": ("ab", "ba")[i % 2], "repeat": 0,
                           "human": "a", "status": "ok", "label": lab, "distribution": None, "words_a": 3,
                           "words_b": 3} for i, lab in enumerate(firsts)])
    pw = Pairwise().aggregate(table, pairwise_ctx(tie=True))
    pw_rate = pw["bias"].filter(pl.col("metric") == "first_position_win_rate").row(0, named=True)
    lt = pl.DataFrame([{"judge": "j", "status": "ok", "answer": float({"A": 1, "B": -1, "tie": 0}[lab])}
                       for lab in firsts])
    wide = pl.DataFrame({"judge": ["j"], "L_plus": [1.0], "L_minus": [1.0]})
    rl = ReferenceLikert._bias(lt, wide).row(0, named=True)
    assert pw_rate["value"] == rl["first_position_win_rate"] == 0.5 and pw_rate["n"] == 10


# -- defect 7: the report's run table is per judge -------------------------------------------
@needs_data
def test_report_run_table_counts_each_judge(replay):
    from litjudge.engine.app.report import header
    from litjudge.engine.app.runs import load_run

    rows = {r["judge"]: r for r in header([load_run(replay.run_dir)]).iter_rows(named=True)}
    assert all(r["verdicts"] == 672 for r in rows.values())
    assert rows["replay:gemini-pro"]["unparsed"] == 14
    assert {r["unparsed"] for j, r in rows.items() if j != "replay:gemini-pro"} == {0}
    assert {r["missing_policy"] for r in rows.values()} == {"label:No"}


# -- defect 8: the missing-answer policy, and the notebook reproduced ------------------------
def notebook_bacc(model: str) -> float:
    """The dataset authors' computation (Evaluating_LLM.ipynb, 3.1), rewritten: the majority label
    of every item, a missing response counted as 0 (No), sklearn's balanced accuracy."""
    from sklearn.metrics import balanced_accuracy_score

    majority = json.loads((DATA / "ttcw" / "expert_majority.json").read_text())
    preds = {}
    for line in (DATA / "ttcw" / "judge_outputs" / f"{model}.jsonl").read_text().splitlines():
        rec = json.loads(line)
        preds[rec["id"]] = 1 if rec["response"].lower().startswith("yes") else 0
    ids = [f"story_{r['story_id']}_test{r['ttcw_idx']}" for r in majority]
    return balanced_accuracy_score([int(r["binary_verdict"] == "Yes") for r in majority], [preds.get(i, 0) for i in ids])


@needs_data
def test_replay_reproduces_the_notebook_under_its_policy_and_drop_differs(replay):
    assert replay.manifest.missing_policy == "label:No"
    overall = {r["judge"].removeprefix("replay:"): r
               for r in replay.tables["overall"].filter(pl.col("view") == "all").iter_rows(named=True)}
    for model, printed in NOTEBOOK_BACC.items():
        exact = notebook_bacc(model)
        assert overall[model]["balanced_accuracy"] == pytest.approx(exact, abs=1e-12), model
        assert round(exact, 2) == printed and overall[model]["n"] == 672
    assert round(overall["gemini-pro"]["balanced_accuracy"], 3) == 0.461
    dropped = reaggregate(replay, "drop")["overall"].filter((pl.col("view") == "all")
                                                             & (pl.col("judge") == "replay:gemini-pro")).row(0, named=True)
    assert round(dropped["balanced_accuracy"], 3) == 0.476 and dropped["n"] == 658 and dropped["unparsed"] == 14
    wrong = reaggregate(replay, "wrong")["overall"].filter((pl.col("view") == "all")
                                                            & (pl.col("judge") == "replay:gemini-pro")).row(0, named=True)
    assert wrong["n"] == 672 and wrong["balanced_accuracy"] < dropped["balanced_accuracy"]


def test_missing_policy_is_checked_at_the_edge(tmp_path):
    assert MissingPolicy.parse("label:No") == MissingPolicy("label", "No")
    cfg = tmp_path / "c.toml"
    cfg.write_text('name = "x"\nprotocol = "ttcw"\ndataset = "ttcw"\nmissing = "ignore"\n')
    with pytest.raises(ConfigError, match='c.toml: missing: must be "drop", "wrong" or "label:LABEL"'):
        load_config(cfg)
    cfg.write_text('name = "x"\nprotocol = "ttcw"\ndataset = "ttcw"\nmissing = "label:Maybe"\n')
    from litjudge.judges.ttcw import TTCW

    with pytest.raises(ConfigError, match="'Maybe' is not a verdict label of protocol 'ttcw'"):
        TTCW().options(load_config(cfg))
    cfg.write_text('name = "x"\nprotocol = "listwise"\ndataset = "aut-ocsai"\nmissing = "wrong"\n')
    from litjudge.judges.listwise import ListwiseRanking

    with pytest.raises(ConfigError, match='protocol \'listwise\' supports missing = "drop"'):
        ListwiseRanking().options(load_config(cfg))


@pytest.mark.parametrize("policy,expected", [("drop", (2 / 3, 3)), ("wrong", (2 / 4, 4)), ("label:B", (2 / 4, 4)),
                                             ("label:A", (3 / 4, 4))])
def test_pairwise_missing_policy_by_hand(policy, expected):
    # shown ab, human a: picks a, a, b and one unparsed; label:A shown first -> a (right), label:B -> b (wrong)
    table = pairwise_table({"p1": ("A", None), "p2": ("A", None), "p3": ("B", None), "p4": (None, None)})
    out = Pairwise().aggregate(table.filter(pl.col("order") == "ab"), pairwise_ctx(policy))
    ab = out["accuracy"].filter(pl.col("order") == "ab").row(0, named=True)
    assert (ab["accuracy"], ab["n"]) == pytest.approx(expected)
    bias = out["bias"].filter(pl.col("metric") == "first_position_win_rate").row(0, named=True)
    assert bias["n"] == 3                                  # bias reads real answers only, whatever the policy


def test_verdicts_exactly_at_the_ttcw_threshold_pass_and_the_run_says_how_many():
    """bf16 weights give P(Yes) in coarse steps: an audit's SmolLM2 run had 26 of 168 verdicts at
    exactly 0.5, each a pass under P(Yes) >= threshold, which decided the sweep's top cells. They
    pass as documented, and a warning says how many sat there."""
    from litjudge.judges.ttcw import TTCW, TTCWOptions

    config = load_config(RUNS / "ttcw-binary.toml")
    ctx = Context(config, TTCWOptions(threshold=0.5), load_card("ttcw"))
    p = [0.5, 0.5, 0.75, 0.25, 0.5000001, 0.4999999]
    table = pl.DataFrame({"judge": "j", "story_id": [f"s{i}" for i in range(6)], "test": 1, "status": "ok",
                          "label": None, "distribution": [{"Yes": x, "No": 1 - x} for x in p]},
                         schema_overrides={"label": pl.Utf8})
    expert = pl.DataFrame({"story_id": [f"s{i}" for i in range(6)], "test": 1, "expert_pass": True})
    d = TTCW().decisions(table, ctx, expert)
    assert d["judge_pass"].to_list() == [True, True, True, False, True, False]
    assert ctx.warnings == ["j: 2 verdicts have P(Yes) exactly at the threshold 0.5 and pass (P(Yes) >= threshold); "
                            "the agreement tables count each as Yes: compare options.threshold just above it"]
