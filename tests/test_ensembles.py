"""The metric modules behind cascades, juries and permutation self-consistency, against their
guarantees and brute-force recomputations: the cascade's threshold keeps its promise on simulated
judges (failure rate of the guarantee <= delta over 1,000 draws), the jury's poolings equal their
definitions, Kemeny is the brute-force optimum for small lists."""
from __future__ import annotations

import json
import math
from itertools import permutations

import numpy as np
import polars as pl
import pytest

from litjudge.engine.app.ensemble import load_ensemble
from litjudge.engine.core.errors import ConfigError
from litjudge.judges.ensembles import CascadeOptions, JuryOptions, cascade_tables, jury_tables
from litjudge.judges.metrics import balanced_accuracy
from litjudge.judges.metrics.jury import average, fit_stacking, logit, majority, stacked
from litjudge.judges.metrics.kemeny import EXACT_MAX, disagreements, kemeny, pairwise_wins
from litjudge.judges.metrics.logistic import sigmoid
from litjudge.judges.metrics.selective import Level, cascade, choose_threshold
from tests.conftest import PROJECT_ROOT, litjudge, needs_data, write_config
from tests.short_data import ttcw_cut_short


def overconfident(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A judge whose stated confidence c ~ U(0.5, 1) is right with probability c**2 (overconfident):
    among items with c >= t its true agreement is (1 + t + t**2) / 3."""
    c = rng.uniform(0.5, 1.0, n)
    return c, rng.random(n) < c ** 2


def true_agreement(t: float) -> float:
    return (1 + t + t * t) / 3


@pytest.mark.parametrize(("target", "delta"), [(0.8, 0.1), (0.85, 0.05)])
def test_the_threshold_keeps_its_guarantee_over_1000_draws(target, delta):
    rng = np.random.default_rng(0)
    failures, certified = 0, 0
    for _ in range(1000):
        c, ok = overconfident(rng, 300)
        t = choose_threshold(c.tolist(), ok.tolist(), target, delta)
        if t is None:
            continue
        certified += 1
        failures += true_agreement(t) < target
    assert certified >= 500                        # the test has power: most draws certify a threshold
    assert failures / 1000 <= delta, (failures, certified)


def test_a_two_level_cascade_keeps_its_guarantee_over_1000_draws():
    """Level 1 overconfident, level 2 a better judge; the agreement on all answered items (true
    rates, from a large fresh sample) stays >= target in all but <= delta of the draws."""
    target, delta = 0.8, 0.1
    rng = np.random.default_rng(1)
    failures = 0
    for _ in range(1000):
        n = 400
        truth = rng.random(n) < 0.5
        c1, ok1 = overconfident(rng, n)
        c2 = rng.uniform(0.5, 1.0, n)
        ok2 = rng.random(n) < np.sqrt(c2)
        levels = [Level("cheap", np.where(ok1, truth, ~truth).tolist(), c1.tolist()),
                  Level("strong", np.where(ok2, truth, ~truth).tolist(), c2.tolist())]
        result = cascade(levels, truth.tolist(), list(range(n)), target, delta)
        t1, t2 = result.thresholds
        # the answered items' true agreement: level 1 answers c1 >= t1, level 2 the rest with c2 >= t2
        m = 200_000
        f1, f2 = rng.uniform(0.5, 1.0, m), rng.uniform(0.5, 1.0, m)
        a1 = f1 >= t1 if t1 is not None else np.zeros(m, bool)
        a2 = ~a1 & (f2 >= t2) if t2 is not None else np.zeros(m, bool)
        answered = a1.sum() + a2.sum()
        if answered:
            agreement = ((f1[a1] ** 2).sum() + np.sqrt(f2[a2]).sum()) / answered
            failures += agreement < target
    assert failures / 1000 <= delta, failures


def test_threshold_edge_cases():
    assert choose_threshold([0.9] * 10, [True] * 10, 0.8, 0.1) is None          # 0.8^10 = 0.107 > delta
    # fewer than min_answered (30): tested on all of them (the grid started at 30 and certified none);
    # 24 error-free verdicts of 12 pairs: the clustered p-value 0.8^12 = 0.069 <= delta
    assert choose_threshold([0.9] * 11, [True] * 11, 0.8, 0.1) == 0.9
    assert choose_threshold([0.9] * 24, [True] * 24, 0.8, 0.1, clusters=[i // 2 for i in range(24)]) == 0.9
    assert choose_threshold([], [], 0.8, 0.1) is None
    assert choose_threshold([0.9] * 40, [False] * 40, 0.8, 0.1) is None          # always wrong: never certified
    with pytest.raises(ValueError, match="equal lengths"):
        choose_threshold([0.9], [True, False], 0.8, 0.1)


def test_jury_poolings_by_their_definitions():
    probs = [[0.9, 0.2, 0.6], [0.1, 0.4, 0.5], [0.5, 0.5, 0.3], [1.0, 0.0, 0.5]]
    assert average(probs) == pytest.approx([sum(r) / 3 for r in probs])
    assert majority(probs) == [1.0, 0.0, 0.0, 0.5]     # p = 0.5 is half a vote each way (a fair coin)
    assert majority([[0.9, 0.1]]) == [0.5]
    weights = [0.3, 1.0, -0.5, 2.0]
    assert stacked(weights, probs) == pytest.approx(
        [1 / (1 + math.exp(-(0.3 + sum(w * logit(p) for w, p in zip(weights[1:], r, strict=True))))) for r in probs])
    # stacking on a judge that is right and one that is noise: the right one gets the weight
    rng = np.random.default_rng(3)
    truth = rng.random(400) < 0.5
    good = np.where(truth, 0.8, 0.2)
    noise = rng.uniform(0, 1, 400)
    w = fit_stacking(np.column_stack([good, noise]).tolist(), truth.tolist())
    assert w[1] > 1.0 and abs(w[2]) < 0.5
    assert sigmoid(0.0) == 0.5


def decision_frame(rng: np.random.Generator, items: int = 240) -> pl.DataFrame:
    """Two judges on binary items in clusters of 4: `prob` gives probabilities, `oneh` only labels."""
    rows = []
    for i in range(items):
        truth = bool(rng.random() < 0.4)
        p = float(np.clip(0.5 + (0.3 if truth else -0.3) + rng.normal(0, 0.25), 0.01, 0.99))
        label = truth if rng.random() < 0.7 else not truth
        rows.append({"judge": "prob", "item": f"i{i:03d}", "cluster": f"c{i // 4}", "truth": truth, "pred": p >= 0.5,
                     "p": p, "tokens": 100, "cost": 0.0})
        rows.append({"judge": "oneh", "item": f"i{i:03d}", "cluster": f"c{i // 4}", "truth": truth, "pred": label,
                     "p": None, "tokens": 100, "cost": 0.001})
    return pl.DataFrame(rows)


def test_jury_tables_recomputed_by_brute_force():
    frame = decision_frame(np.random.default_rng(5))
    out = jury_tables(frame, JuryOptions(calibration_fraction=0.5, seed=2), resamples=200)
    jury = {r["member"]: r for r in out["jury"].iter_rows(named=True)}
    # the held-out split, recomputed: the clusters not drawn for calibration
    from litjudge.judges.ensembles import split

    items = frame.filter(pl.col("judge") == "prob").sort("item")
    calib = split(items["cluster"].to_list(), 0.5, 2)
    test = items.filter(~pl.col("cluster").is_in(list(calib)))
    t = test["truth"].to_list()
    pred = [p >= 0.5 for p in test["p"].to_list()]
    assert jury["judge: prob"]["agreement"] == pytest.approx(sum(a == b for a, b in zip(pred, t, strict=True)) / len(t))
    assert jury["judge: prob"]["balanced_accuracy"] == pytest.approx(balanced_accuracy(t, pred).value)
    oneh = frame.filter(pl.col("judge") == "oneh").join(test.select("item"), on="item")
    assert jury["judge: oneh"]["agreement"] == pytest.approx((oneh["pred"] == oneh["truth"]).mean())
    assert set(jury) == {"judge: prob", "judge: oneh", "majority vote", "average", "stacked"}
    assert out["jury_weights"].height == 3


def test_the_jury_says_which_items_it_reads(caplog):
    """A member that answered half the items (a pairwise judge answered in one order only) leaves
    the jury the items every member answered: the jury table says how many each answered, of how
    many, and a warning says so (every member's row was scored on those without a word)."""
    import logging

    from litjudge.engine.app.ensemble import _say_what_the_jury_left_out

    frame = decision_frame(np.random.default_rng(6))
    frame = frame.filter((pl.col("judge") == "prob") | (pl.col("item").str.slice(1).cast(pl.Int64) % 2 == 0))
    jury = jury_tables(frame, JuryOptions(calibration_fraction=0.5, seed=2), resamples=50)["jury"]
    answered = dict(zip(jury["member"], jury["answered"]))
    assert answered["judge: prob"] == 240 and answered["judge: oneh"] == 120 and answered["average"] == 120
    assert set(jury["items"]) == {240} and set(jury["shared_items"]) == {120}
    with caplog.at_level(logging.WARNING, logger="litjudge"):
        _say_what_the_jury_left_out(jury)
    said = [r.getMessage() for r in caplog.records]
    assert said == ["litjudge: warning: the jury reads the 120 items every member answered, of 240 labelled "
                    "(answered: prob 240, oneh 120); every member's row is scored on those"], said


def test_a_jury_of_one_says_it_pools_nothing(caplog):
    """A jury of one judge printed its majority vote and average as rows equal to the judge's, and a
    stacking that is the judge recalibrated, without a word (a new user read three poolings agreeing)."""
    import logging

    from litjudge.engine.app.ensemble import _say_a_jury_of_one

    frame = decision_frame(np.random.default_rng(6))
    one = jury_tables(frame, JuryOptions(["prob"], calibration_fraction=0.5, seed=2), resamples=50)["jury"]
    rows = {m: a for m, a in zip(one["member"], one["agreement"])}
    assert rows["judge: prob"] == rows["majority vote"] == rows["average"], rows
    with caplog.at_level(logging.WARNING, logger="litjudge"):
        _say_a_jury_of_one(one)
        _say_a_jury_of_one(jury_tables(frame, JuryOptions(calibration_fraction=0.5, seed=2), resamples=50)["jury"])
    assert [r.getMessage() for r in caplog.records] == [
        "litjudge: warning: the jury has one judge: its majority vote and average are that judge, and its stacking is "
        "the judge recalibrated on the calibration split (name two or more judges to pool)"]


def test_a_cascade_escalates_what_its_level_could_not_read():
    """A new user's cheap level with a quarter of its answers unparsed: those items were left out
    of the cascade (coverage 1.0 where escalating them gave 0.6). An unparsed answer is a level
    without one: the item goes on to the next level, and every item asked is routed."""
    frame = decision_frame(np.random.default_rng(6), items=400)
    unread = (pl.col("judge") == "prob") & (pl.col("item").str.slice(1).cast(pl.Int64) % 4 == 0)
    broken = frame.with_columns(pl.when(unread).then(None).otherwise(pl.col("pred")).alias("pred"),
                                pl.when(unread).then(None).otherwise(pl.col("p")).alias("p"))
    out = cascade_tables(broken, CascadeOptions(judges=["prob", "oneh"], target=0.7, delta=0.1))
    summary = out["cascade_summary"].row(0, named=True)
    assert summary["shared_items"] == 400 and summary["calibration_items"] + summary["test_items"] == 400
    levels = out["cascade"]
    assert int(levels["answered"].sum()) + summary["abstained"] == summary["test_items"]
    # clusters of 4, one item of each unread by `prob`: a quarter of the held-out items goes on to `oneh`
    assert levels["reached"].to_list()[0] == summary["test_items"]
    assert levels["reached"].to_list()[1] >= summary["test_items"] // 4


def test_cascade_tables_route_every_held_out_item_once():
    frame = decision_frame(np.random.default_rng(6), items=400)
    out = cascade_tables(frame, CascadeOptions(judges=["prob", "oneh"], target=0.7, delta=0.1))
    summary = out["cascade_summary"].row(0, named=True)
    levels = out["cascade"]
    assert int(levels["answered"].sum()) + summary["abstained"] == summary["test_items"]
    assert summary["calibration_items"] + summary["test_items"] == 400
    # each level's share of the tokens the cascade spent (it was of every judge asked every item: 0.58 in all)
    assert levels["token_share"].sum() == pytest.approx(1) and levels["cost_usd"].is_not_null().all()
    unknown = cascade_tables(frame.with_columns(pl.lit(None, dtype=pl.Int64).alias("tokens"),
                                                pl.lit(None, dtype=pl.Float64).alias("cost")),
                             CascadeOptions(judges=["prob", "oneh"], target=0.7, delta=0.1))["cascade"]
    assert unknown["token_share"].is_null().all() and unknown["cost_usd"].is_null().all()   # unknown, never 0
    with pytest.raises(ValueError, match="not judges of this run"):
        cascade_tables(frame, CascadeOptions(judges=["prob", "nobody"]))


@pytest.mark.parametrize("n", [3, 5, 6])
def test_kemeny_is_the_brute_force_optimum(n):
    rng = np.random.default_rng(n)
    items = [f"x{i}" for i in range(n)]
    rankings = [list(rng.permutation(items)) for _ in range(5)]
    wins = pairwise_wins(rankings)
    best = min(disagreements(list(p), wins) for p in permutations(items))
    assert disagreements(kemeny(rankings), wins) == best
    assert n <= EXACT_MAX


def test_kemeny_beyond_exact_is_a_ranking_no_worse_than_borda():
    rng = np.random.default_rng(9)
    items = [f"x{i}" for i in range(12)]
    base = list(rng.permutation(items))
    rankings = [base[:]]
    for _ in range(6):
        r = base[:]
        i, j = rng.integers(0, 12, 2)
        r[i], r[j] = r[j], r[i]
        rankings.append(r)
    central = kemeny(rankings)
    assert sorted(central) == sorted(items)
    wins = pairwise_wins(rankings)
    borda = sorted(items, key=lambda x: sum(r.index(x) for r in rankings))
    assert disagreements(central, wins) <= disagreements(borda, wins)


@needs_data
def test_ensemble_command_over_a_finished_run(tmp_path):
    """`litjudge ensemble` pools the replayed judges of a finished TTCW run from its stored tables;
    a member's held-out agreement is recomputed from the run's per-item verdicts."""
    made = litjudge("run", "ttcw-replay", "--quiet", "--out", str(tmp_path))
    assert made.returncode == 0, made.stderr
    run_dir = tmp_path / "ttcw-replay"
    r = litjudge("ensemble", str(run_dir), "--jury", "replay:gpt4,replay:claude3-opus", "--cascade",
                 "replay:claude3-opus,replay:gpt4", "--target", "0.65", "--name", "ens", env={"LITJUDGE_RUNS_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    jury = pl.read_parquet(tmp_path / "ens" / "tables" / "jury.parquet")
    from litjudge.judges.ensembles import split

    items = pl.read_parquet(run_dir / "tables" / "per_item.parquet").filter(pl.col("judge") == "replay:gpt4")
    calib = split(items["story_id"].to_list(), 0.5, 0)
    test = items.filter(~pl.col("story_id").is_in(list(calib)))
    row = jury.filter(pl.col("member") == "judge: replay:gpt4").row(0, named=True)
    assert row["agreement"] == pytest.approx((test["judge_pass"] == test["expert_pass"]).mean())
    levels = pl.read_parquet(tmp_path / "ens" / "tables" / "cascade.parquet")
    assert levels["token_share"].is_not_null().all() and levels["token_share"][0] > 0   # from the stored counts
    summary = pl.read_parquet(tmp_path / "ens" / "tables" / "cascade_summary.parquet").row(0, named=True)
    assert summary["items"] == 672 and summary["calibration_items"] + summary["test_items"] == 672
    results = json.loads((tmp_path / "ens" / "results.json").read_text())          # the one file other tools load
    assert results["kind"] == "ensemble" and results["run"] == "ens" and results["results"]["cascade_summary"][0]["items"] == 672
    assert [m["member"] for m in results["results"]["jury"]] == jury["member"].to_list()
    assert set(jury["shared_items"]) == set(jury["items"]) == {672} and "the jury reads" not in r.stderr
    from litjudge import load  # the Python report of an ensemble, as the console's

    page = load(tmp_path / "ens").report()
    assert page.is_file() and "Jury" in page.read_text()
    runs_table = pl.read_csv(page.parent / "tables" / "runs.csv")        # its member runs (an empty table was drawn)
    assert runs_table["member_run"].to_list() == [str(run_dir.resolve())]
    said = litjudge("report", str(tmp_path / "ens"), env={"LITJUDGE_RUNS_DIR": str(tmp_path)})
    assert said.returncode == 0 and said.stdout.startswith("# litjudge ensemble ens: git "), said.stdout
    assert "vLLM" not in said.stdout and "unparsed" not in said.stdout          # no verdicts of its own
    (tmp_path / "ens" / "tables" / "jury.parquet").unlink()         # a table deleted since: named, and how to redo it
    gone = litjudge("report", str(tmp_path / "ens"), env={"LITJUDGE_RUNS_DIR": str(tmp_path)})
    assert gone.returncode != 0 and gone.stderr.count("\n") == 1, gone.stderr
    assert "tables/jury.parquet is missing" in gone.stderr and "`litjudge ensemble`" in gone.stderr, gone.stderr
    assert "reparse" not in gone.stderr                              # reparse refuses an ensemble
    bad = litjudge("ensemble", str(run_dir), "--cascade", "replay:nobody", env={"LITJUDGE_RUNS_DIR": str(tmp_path)})
    assert bad.returncode == 2 and "--cascade names 'replay:nobody', not a judge of these runs" in bad.stderr
    unread = litjudge("ensemble", str(run_dir), "--jury", "--target", "1.5", env={"LITJUDGE_RUNS_DIR": str(tmp_path)})
    assert unread.returncode == 2 and "--target and --delta are the cascade's guarantee" in unread.stderr   # ran, exit 0
    # one --name for two ensembles: the second says it replaces the first (the default name is one folder for all)
    jury = ("ensemble", str(run_dir), "--jury", "replay:gpt4,replay:claude3-opus", "--name", "ens")
    other = litjudge(*jury, env={"LITJUDGE_RUNS_DIR": str(tmp_path)})
    assert other.returncode == 0 and f"warning: replacing the ensemble of other settings in {tmp_path / 'ens'}; " \
        "give --name" in other.stderr, other.stderr
    again = litjudge(*jury, env={"LITJUDGE_RUNS_DIR": str(tmp_path)})     # the same ensemble again: unsaid
    assert again.returncode == 0 and "replacing" not in again.stderr, again.stderr


@pytest.mark.slow
@needs_data
def test_ensemble_config_runs_its_members_and_reports(tmp_path, tiny, litjudge_shared):
    """runs/ensemble-ttcw.toml, its open judge the session's tiny random one in that engine's
    float32 on every CPU (the config's work is the point, not what the judge says): that judge in
    distribution mode and the recorded judges, run as member runs, then the cascade and the jury;
    the report renders both panels. The commands run in this process on the session's engine (not
    their process), on the TTCW data with its stories cut to two paragraphs and its tests'
    backgrounds to one (every story, test, label and recorded answer kept; nothing asserted reads a
    text's length)."""
    runs, judge = tmp_path / "runs", tiny.spec.name
    committed = PROJECT_ROOT / "runs" / "ensemble-ttcw.toml"
    text = committed.read_text().replace('config = "ttcw-binary.toml"\n',
                                         f'config = "{committed.parent}/ttcw-binary.toml"\njudge = "{judge}"\n'
                                         'engine = { dtype = "float32" }\n')
    text = text.replace('config = "ttcw-replay.toml"', f'config = "{committed.parent}/ttcw-replay.toml"')
    text = text.replace('judges = ["smollm2-135m", "replay:claude3-opus"]', f'judges = ["{judge}", "replay:claude3-opus"]')
    assert text.count(judge) == 2 and text.count(str(committed.parent)) == 2
    cfg = write_config(tmp_path / "ensemble-ttcw.toml", text)
    env = {"LITJUDGE_RUNS_DIR": str(runs), "LITJUDGE_DATA_ROOT": str(ttcw_cut_short(tmp_path / "data" / "ttcw",
                                                                                    short_backgrounds=True).parent)}
    r = litjudge_shared({judge: tiny}, "run", str(cfg), "--limit", "2", "--quiet", "--show", "0",
                        env=env)                                            # 1 story calibrates, 1 held out
    assert r.returncode == 0, r.stderr[-3000:]
    # --show 0: no table, the ensemble's neither (its tables printed 60 rows whatever N: helper-112)
    assert not {"Cascade", "Cascade summary", "Jury", "Jury weights"} & set(r.stdout.splitlines()), r.stdout
    assert f"Results: {runs / 'ensemble-ttcw'}" in r.stdout
    p = pl.read_parquet(runs / "ttcw-binary-p" / "verdicts.parquet")
    assert p.height == 28 and p["distribution"].is_not_null().all()          # P(Yes) read, the cascade's confidence
    jury = pl.read_parquet(runs / "ensemble-ttcw" / "tables" / "jury.parquet")
    assert f"judge: {judge}" in jury["member"].to_list() and "stacked" in jury["member"].to_list()
    rep = litjudge_shared({}, "report", str(runs / "ensemble-ttcw"), env=env)
    assert rep.returncode == 0, rep.stderr
    md = (runs / "ensemble-ttcw" / "report" / "report.md").read_text()
    assert "## Cascade with an agreement guarantee" in md and "## Jury: each judge and each pooling" in md
    assert "![reliability_diagram](reliability_diagram.png)" in md                  # the jury's calibration


@pytest.mark.parametrize("body, message", [
    ('[[runs]]\nconfig = "a.toml"\n[jurry]\njudges = ["x"]\n', "jurry: unknown key (did you mean 'jury'?)"),
    ('runs = []\n', "runs: runs must be [[runs]] tables"),
    ('[[runs]]\njudge = "x"\n', "runs: runs must be [[runs]] tables, each with a `config`"),
    ('runs = "a.toml"\n', "runs: expected a list"),
    ('name = "e"\n', "runs: missing required key"),
    ('[[runs]]\nconfig = "a.toml"\n[cascade]\njudges = ["x", "y"]\ntarget = "high"\n', "cascade.target: expected float"),
    ('[[runs]]\nconfig = "a.toml"\n[jury]\njudgs = ["x"]\n', "jury.judgs: unknown key (did you mean 'jury.judges'?)"),
    ('jury = 3\n[[runs]]\nconfig = "a.toml"\n', "jury: expected a table"),
    ('[[runs]]\nconfig = "a.toml"\n[jury]\njudges = ["x", "x"]\n', "jury judges must name each judge once"),
])
def test_an_ensemble_config_goes_through_the_schema_of_run_configs(tmp_path, body, message):
    """One wording for every config kind: file, key, did-you-mean; nothing runs before it is said."""
    path = tmp_path / "ens.toml"
    path.write_text(body)
    with pytest.raises(ConfigError) as err:
        load_ensemble(path)
    assert str(path) in str(err.value) and message in str(err.value), str(err.value)


@pytest.mark.parametrize("members, message", [
    (["pw.toml", "lw.toml"], "runs[1]: protocol: a 'listwise' run: juries and cascades take the binary decisions of a ttcw or "
                             "pairwise run"),
    (["pw.toml", "tt.toml"], "the runs are of different protocols (pairwise, ttcw)")])
def test_members_an_ensemble_cannot_pool_are_refused_before_any_runs(tmp_path, members, message):
    """A listwise member, or members of two protocols, were refused after every member had run in
    full (a hostile pass: an engine started and verdicts generated, then the refusal)."""
    (tmp_path / "pw.toml").write_text('name = "pw"\nprotocol = "pairwise"\ndataset = "pairs-generic"\n'
                                      'judge = "replay:a.jsonl"\n')
    (tmp_path / "lw.toml").write_text('name = "lw"\nprotocol = "listwise"\ndataset = "aut-ocsai"\n')
    (tmp_path / "tt.toml").write_text('name = "tt"\nprotocol = "ttcw"\ndataset = "ttcw"\njudge = "replay:b.jsonl"\n')
    path = tmp_path / "ens.toml"
    path.write_text('name = "e"\n' + "".join(f'[[runs]]\nconfig = "{m}"\n' for m in members) + "[jury]\n")
    with pytest.raises(ConfigError) as err:
        load_ensemble(path)
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_an_analyze_judge_enters_a_jury_by_its_probability_after_the_analysis():
    """A hostile pass: an analyze judge entered a jury one-hot (its `p_yes_after_analysis` unread),
    though its run calibrates it; a jury's pooled probabilities said "distribution" in `read`. The
    decision frame reads the stated probability (distribution mode's, else after the analysis), as
    the tables do, and the jury's calibration says it is the jury's."""
    from litjudge.judges.ensembles import decision_frame as frame_of

    per_item = pl.DataFrame({"judge": ["analyze"] * 2 + ["dist"] * 2, "item_id": ["s/1", "s/2"] * 2,
                             "story_id": ["s", "s"] * 2, "test": [1, 2] * 2, "repeat": [0] * 4, "expert_pass": [True, False] * 2,
                             "judge_pass": [True, False, True, True], "p_yes": [None, None, 0.9, 0.6],
                             "p_yes_after_analysis": [0.8, 0.3, None, None]})
    got = frame_of("ttcw", {"per_item": per_item}).sort("judge", "item")
    assert got["p"].to_list() == [0.8, 0.3, 0.9, 0.6]
    older = frame_of("ttcw", {"per_item": per_item.drop("p_yes_after_analysis")}).sort("judge", "item")
    assert older["p"].to_list() == [None, None, 0.9, 0.6]          # a run folder of before: one-hot, as it was
    out = jury_tables(decision_frame(np.random.default_rng(5)), JuryOptions(calibration_fraction=0.5, seed=2),
                      resamples=50)
    assert set(out["jury_calibration_summary"]["read"]) == {"jury"}


def pairwise_tables(picks: dict[str, list[str | None]], p_a: dict[str, list[float | None]] | None = None,
                    pairs: int = 40) -> dict[str, pl.DataFrame]:
    """A pairwise run's per_verdict table: each judge's pick per pair (order ab only), humans always
    preferring text a but on every fourth pair."""
    rows = []
    for judge, said in picks.items():
        for i in range(pairs):
            rows.append({"judge": judge, "pair_id": f"p{i:02d}", "order": "ab", "repeat": 0, "pick": said[i],
                         "human": "b" if i % 4 == 3 else "a", "p_a": (p_a or {}).get(judge, [None] * pairs)[i]})
    return {"per_verdict": pl.DataFrame(rows, schema_overrides={"p_a": pl.Float64})}


def test_a_tie_is_half_a_vote_in_the_jury_and_no_answer_in_the_cascade():
    """A pairwise judge answering "tie" was read as picking text b: its jury row scored the share of
    held-out pairs whose better text is b (0.2), not a tie's half credit; the cascade took its tie
    for a sure "b"."""
    from litjudge.judges.ensembles import decision_frame as frame_of

    frame = frame_of("pairwise", pairwise_tables({"ties": ["tie"] * 40, "right": ["b" if i % 4 == 3 else "a"
                                                                                for i in range(40)]}))
    ties = frame.filter(pl.col("judge") == "ties")
    assert ties["pred"].is_null().all() and set(ties["p"]) == {0.5}
    jury = {r["member"]: r for r in jury_tables(frame, JuryOptions(), resamples=50)["jury"].iter_rows(named=True)}
    assert jury["judge: ties"]["agreement"] == 0.5 and jury["judge: ties"]["ties"] == jury["judge: ties"]["n"]
    assert jury["judge: right"]["agreement"] == 1.0
    levels = cascade_tables(frame, CascadeOptions(judges=["ties", "right"], target=0.7, delta=0.1))["cascade"]
    assert levels["answered"].to_list()[0] == 0                 # a tie is never an answer: it escalates
    assert levels["answered"].to_list()[1] == levels["reached"].to_list()[1] > 0


def test_a_judge_deciding_by_its_own_threshold_is_scored_by_its_decisions():
    """A TTCW judge in distribution mode at threshold 0.66: its run passes P(Yes) >= 0.66. Its jury
    row scored P(Yes) > 0.5 instead, and the cascade answered No with confidence max(p, 1 - p)."""
    from litjudge.judges.ensembles import _levels, _wide
    from litjudge.judges.ensembles import decision_frame as frame_of

    p = [0.6, 0.7, 0.2, 0.65] * 10
    per_item = pl.DataFrame({"judge": "d66", "item_id": [f"s{i}/1" for i in range(40)], "story_id": [f"s{i}" for i in
                             range(40)], "test": 1, "repeat": 0, "expert_pass": [False, True, False, False] * 10,
                             "judge_pass": [q >= 0.66 for q in p], "p_yes": p})
    frame = frame_of("ttcw", {"per_item": per_item})
    jury = {r["member"]: r for r in jury_tables(frame, JuryOptions(), resamples=50)["jury"].iter_rows(named=True)}
    assert jury["judge: d66"]["agreement"] == 1.0                 # its decisions are all right; P > 0.5 half wrong
    level = _levels(_wide(frame, ["d66"]), ["d66"])[0]
    assert level.confidence[:4] == pytest.approx([0.4, 0.7, 0.8, 0.35])   # in the answer given: No at 0.6 is 0.4


def test_runs_over_different_data_or_sharing_a_judge_are_refused_in_one_line(tmp_path):
    """Two runs whose pairs share ids but not labels were pooled silently, scored by the first run's
    labels (so the result hung on the order of the arguments); a judge named alike in two runs of
    different pairs (two recordings with one file name) was merged into one row."""
    from tests.test_cli_probe import cli, one_line

    def run(name: str, better: str, recording: str, first: int = 0) -> str:
        folder = tmp_path / name
        folder.mkdir()
        pairs = [{"pair_id": f"p{i:02d}", "prompt": "Write.", "text_a": f"one {i}", "text_b": f"two {i}",
                  "label": better} for i in range(first, first + 24)]
        (folder / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
        (folder / recording).write_text("".join(json.dumps({"id": f"{p['pair_id']}/{o}", "response": "A"}) + "\n"
                                                for p in pairs for o in ("ab", "ba")))
        (folder / "r.toml").write_text(f'name = "{name}"\nprotocol = "pairwise"\njudge = "replay:{recording}"\n'
                                       '[dataset]\nloader = "pairs_jsonl"\npath = "pairs.jsonl"\n')
        r = cli("run", str(folder / "r.toml"), "--quiet", cwd=folder)
        assert r.returncode == 0, r.stderr[-2000:]
        return str(folder / "runs" / "out" / name)

    a, b, c = run("a", "a", "one.jsonl"), run("b", "b", "two.jsonl"), run("c", "a", "one.jsonl", first=24)
    one_line(cli("ensemble", a, b, "--jury", "--name", "e1", cwd=tmp_path),
             "the runs give item 'p00#ab#0' different human labels", "different datasets with the same ids")
    one_line(cli("ensemble", a, c, "--jury", "--name", "e2", cwd=tmp_path),
             "judge 'replay:one.jsonl' is in two of the runs", "name each judge once")
    assert not (tmp_path / "runs" / "out" / "e1").exists() and not (tmp_path / "runs" / "out" / "e2").exists()


def test_one_calibration_split_serves_the_cascade_and_the_jury_or_it_is_said(tmp_path):
    """[jury] calibration_fraction and seed were dropped without a word beside a [cascade]."""
    path = tmp_path / "ens.toml"
    path.write_text('[[runs]]\nconfig = "a.toml"\n[cascade]\njudges = ["x"]\n[jury]\ncalibration_fraction = 0.8\n')
    with pytest.raises(ConfigError, match="calibration_fraction = 0.5 and \\[jury\\] calibration_fraction = 0.8 differ"):
        load_ensemble(path)


def test_a_jury_short_of_some_clusters_splits_as_the_cascade_does():
    """The split was drawn over the clusters each ensemble read: a jury member without 2 of 60
    clusters moved others across (the stacking fitted on stories the cascade held out, where the
    docs say the two share one split). It is drawn over every labelled cluster of the runs."""
    from litjudge.judges.ensembles import split

    frame = decision_frame(np.random.default_rng(7))
    short = frame.filter((pl.col("judge") == "prob") & ~pl.col("cluster").is_in(["c3", "c17"]))
    frame = pl.concat([frame, short.with_columns(pl.lit("short").alias("judge"))])
    calibration = split(frame["cluster"].to_list(), 0.5, 0)
    held_out = frame.filter((pl.col("judge") == "short") & ~pl.col("cluster").is_in(list(calibration)))
    jury = jury_tables(frame, JuryOptions(judges=["prob", "short"]), resamples=50)["jury"]
    row = jury.filter(pl.col("member") == "judge: short").row(0, named=True)
    assert row["n"] == held_out.height and row["agreement"] == pytest.approx(
        (held_out["pred"] == held_out["truth"]).mean()), (row, held_out.height)
    summary = cascade_tables(frame, CascadeOptions(judges=["prob", "oneh"]))["cascade_summary"].row(0, named=True)
    assert summary["test_items"] == 4 * (60 - len(calibration))
    with pytest.raises(ValueError, match="puts none of the 2 clusters the judges share in the calibration split"):
        # two held-out clusters `short` answers (polars' unique() keeps no order: c3 or c17 drawn
        # here left one cluster, another refusal, once in a fresh clone's run)
        cut = [c for c in short["cluster"].unique(maintain_order=True).to_list() if c not in calibration][:2]
        jury_tables(pl.concat([frame.filter(pl.col("judge") == "prob"),
                               short.filter(pl.col("cluster").is_in(cut)).with_columns(pl.lit("few").alias("judge"))]),
                    JuryOptions(judges=["prob", "few"]), resamples=50)


def test_an_empty_held_out_split_is_refused_and_an_unreached_level_has_no_share():
    frame = decision_frame(np.random.default_rng(6), items=400)
    with pytest.raises(ValueError, match="puts all 100 clusters in the calibration split"):
        jury_tables(frame, JuryOptions(calibration_fraction=0.999))
    perfect = frame.filter(pl.col("judge") == "oneh").with_columns(pl.lit("perfect").alias("judge"),
                                                                    pl.col("truth").alias("pred"))
    levels = cascade_tables(pl.concat([frame, perfect]), CascadeOptions(judges=["perfect", "prob"], target=0.6,
                                                                        delta=0.1))["cascade"]
    second = levels.row(1, named=True)
    assert second["reached"] == 0 and second["token_share"] == 0.0, second    # it was 1 / (every token)
