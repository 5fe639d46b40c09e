"""`litjudge annotate RUN --simulate COLUMN` (issue 55 item 6): the queue's three designs answered
from a human column of a finished replayed run, before anyone is paid; its numbers are
`active_sim.simulate`'s on the queue's own design, the truth the column's full estimate."""

import json
import math
import signal

import numpy as np
import polars as pl
import pytest

from litjudge.engine.app.annotate.labels import FILE
from litjudge.engine.app.annotate.queue import build_queue, tie_credit
from litjudge.engine.app.annotate.simulate import human_scores, run_simulation
from litjudge.judges.metrics.active import MIN
from litjudge.judges.metrics.active_sim import DESIGNS, Population, labels_needed, mean_width, simulate
from tests.annotate_run import STORIES, TESTS, Served, judged, pairwise_run
from tests.annotate_run import run_fixture as run_fixture
from tests.conftest import litjudge


def table(stdout: str) -> dict[str, tuple[int, float, float, float]]:
    """design -> (labels, mean half width, coverage, share with an interval) from the printed table
    (NaN for "no interval" and "-")."""
    out = {}
    for line in stdout.splitlines():
        for d in DESIGNS:
            if line.startswith(d + " "):
                labels, *rest = line[len(d):].replace("no interval", "nan").replace(" - ", " nan ").split()
                out[d] = (int(labels), *(float(x) for x in rest))
    return out


def test_the_command_reports_the_three_designs_and_writes_the_plot(run):
    r = litjudge("annotate", str(run), "--simulate", "expert_pass", "--budget", "20", "--repeats", "300",
                 "--seed", "4")
    assert r.returncode == 0, r.stderr[-2000:]
    # the truth: the experts' majority of the replayed dataset (tests/annotate_run.py), every label of it
    truth = np.mean([(k * 7 + t * 3) % 5 < 2 for k in range(STORIES) for t in range(1, TESTS + 1)])
    assert f"its estimate from every label: {truth:.4f}" in r.stdout
    shown = table(r.stdout)
    assert set(shown) == set(DESIGNS) and all(labels == 20 for labels, *_ in shown.values())
    # the same numbers as a direct call of the vectorized simulation on the queue's own design and seed
    q = build_queue(run, 20, floor=0.2, seed=4)
    y = human_scores(q, "expert_pass")
    assert y.sum() / q.size.sum() == pytest.approx(truth)
    ks = np.arange(MIN, 61)
    c = simulate(Population(y, q.judge_total, q.uncertainty, q.size), ks, 300, floor=q.design.floor, seed=4,
                 probability=q.design.probability, needs=q.min_draws)
    for d in DESIGNS:
        assert shown[d][1] == pytest.approx(float(mean_width(c.half[d])[20 - MIN]), abs=5e-5)
        printed = np.isfinite(c.half[d][20 - MIN])      # coverage of the intervals given, as the tables count it
        assert shown[d][2] == pytest.approx(float(c.covered[d][20 - MIN][printed].mean()), abs=5e-4)
        assert shown[d][3] == pytest.approx(float(printed.mean()), abs=5e-4)
        assert 0.85 <= shown[d][2] <= 1.0
    goal = float(mean_width(c.half["uniform PPI++"])[20 - MIN])
    needed = r.stdout.split("Labels needed for a half width of ", 1)[1].splitlines()[0]
    assert needed.startswith(f"{goal:.4f}: ")
    for d in DESIGNS:
        n = math.ceil(labels_needed(ks, mean_width(c.half[d]), goal) - 1e-9)      # whole labels
        assert (f"{d} {MIN} or fewer" if n <= MIN else f"{d} {n}") in needed
    png = run / "annotate-simulation.png"
    assert f"Plot: {png}" in r.stdout and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (run / FILE).exists()                      # a simulation opens no store, writes no label


def test_labels_needed_reads_a_curve_that_begins_below_the_target_at_its_first_interval():
    """A hostile pass: the active curve withheld (NaN) until its min_draws and already narrower than
    the target there printed "active more than 90"; it needs that first length. Interpolated
    between two widths, and NaN only where the curve never reaches the target."""
    ks = np.arange(MIN, 91)
    width = np.where(ks < 30, np.nan, 0.0304 * np.sqrt(30 / ks))
    assert labels_needed(ks, width, 0.0376) == 30.0
    assert labels_needed(ks, width, 0.0304 * np.sqrt(30 / 40.5)) == pytest.approx(40.5, abs=0.01)
    assert np.isnan(labels_needed(ks, width, 0.001)) and labels_needed(ks, 0.1 / np.sqrt(ks), 1.0) == MIN


def test_the_queues_probabilities_are_the_ones_simulated(run):
    """The library call is `simulate` on the queue's own floor and probabilities with the same
    seed (equal numbers), its curves running to 3x the budget."""
    q = build_queue(run, 10, floor=0.5, seed=0)
    sim = run_simulation(q, "expert_pass", 2, seed=1, plot=run / "x.png")
    again = simulate(Population(human_scores(q, "expert_pass"), q.judge_total, q.uncertainty, q.size),
                     np.arange(MIN, 31), 2, floor=q.design.floor, seed=1, probability=q.design.probability,
                     needs=q.min_draws)
    for d in DESIGNS:
        assert np.array_equal(sim.curves.half[d], again.half[d], equal_nan=True)
        assert np.array_equal(sim.curves.covered[d], again.covered[d])
    assert sim.reach == 30 and (run / "x.png").is_file()


def test_pairwise_answers_from_the_human_label_and_a_target_width(tmp_path):
    run = pairwise_run(tmp_path / "p")
    r = litjudge("annotate", str(run), "--simulate", "human", "--budget", "12", "--repeats", "200",
                 "--target-width", "0.25")
    assert r.returncode == 0, r.stderr[-2000:]
    q = build_queue(run, 12)
    # the judges' accuracy against the humans' label: the pair's label (tests/annotate_run.py) against
    # the judge's majority decision over both orders, a tie (half) where the orders disagree, as the
    # run's accuracy table combines them: the one judge answers "A" in both orders of two pairs in three
    human = {f"p{i:02d}": "ab"[i % 2] for i in range(16)}
    assert q.decision == {f"p{i:02d}": "tie" if i % 3 else "a" for i in range(16)}
    accuracy = np.mean([tie_credit(human[c.cluster], q.decision[c.cluster]) for c in q.clusters])
    combined = pl.read_parquet(run / "tables" / "accuracy.parquet").filter(pl.col("order").str.starts_with("combined"))
    assert combined["accuracy"].item() == pytest.approx(accuracy)
    assert f"its estimate from every label: {accuracy:.4f}" in r.stdout
    assert set(table(r.stdout)) == set(DESIGNS)
    assert "Labels needed for a half width of 0.2500: " in r.stdout
    assert (run / "annotate-simulation.png").is_file()
    # a width every design has at the fewest labels simulated: "10 or fewer", not "10.0"
    r = litjudge("annotate", str(run), "--simulate", "human", "--budget", "12", "--repeats", "20",
                 "--target-width", "5")
    needed = r.stdout.split("Labels needed for a half width of 5.0000: ", 1)[1].splitlines()[0]
    assert needed == ", ".join(f"{d} {MIN} or fewer" for d in DESIGNS), needed


@pytest.mark.parametrize("args, line", [
    (("--simulate", "nope", "--budget", "20"), "--simulate: the run has no column 'nope' in tables/per_item"),
    (("--simulate", "judge_pass", "--budget", "20"), "--simulate: column 'judge_pass' gives item"),
    (("--simulate", "expert_pass", "--budget", "9"), f"--budget must be >= {MIN} to simulate"),
    (("--simulate", "expert_pass", "--budget", "20", "--repeats", "0"), "--repeats must be >= 1, got 0"),
    (("--simulate", "expert_pass", "--budget", "20", "--target-width", "0"), "--target-width must be a half width"),
])
def test_a_bad_simulation_is_one_line(run, args, line):
    r = litjudge("annotate", str(run), *args)
    assert r.returncode != 0 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and line in r.stderr, r.stderr
    assert not (run / "annotate-simulation.png").exists()


def test_a_judge_always_answering_the_first_position_scores_half_and_no_design_gives_an_interval(tmp_path):
    """A judge answering "A" in both orders of every pair, on data whose better text is always text
    a: its orders disagree on every pair, so the queue's decision is a tie (the accuracy table's
    combined 0.5), not "a" (the page said 1.0; 0.0 had the data named the better text b). Every
    labelled draw then scores 0.5: no design gives an interval, and the simulation says so, not a
    half width and a coverage of 0."""
    rows = [{"pair_id": f"p{i:02d}", "prompt": "Which is better?", "text_a": f"First {i}.", "text_b": f"Second {i}.",
             "label": "a"} for i in range(20)]
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in rows))
    (tmp_path / "answers.jsonl").write_text("".join(json.dumps({"id": f"p{i:02d}/{o}", "response": "A"}) + "\n"
                                                    for i in range(20) for o in ("ab", "ba")))
    cfg = tmp_path / "first.toml"
    cfg.write_text(f'name = "first"\nprotocol = "pairwise"\njudge = "replay:{tmp_path / "answers.jsonl"}"\n'
                   '[dataset]\nloader = "pairs_jsonl"\npath = "pairs.jsonl"\n')
    run = judged(cfg)
    q = build_queue(run, 10)
    assert set(q.decision.values()) == {"tie"} and set(human_scores(q, "human")) == {0.5}
    r = litjudge("annotate", str(run), "--simulate", "human", "--budget", "10", "--repeats", "20")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "its estimate from every label: 0.5000" in r.stdout
    shown = table(r.stdout)
    assert all(np.isnan(width) and np.isnan(cover) and share == 0.0 for _, width, cover, share in shown.values())
    assert "Labels needed: not compared" in r.stdout and "0.0000" not in r.stdout
    assert "20 repeats of 10 draws" in r.stdout
    # the plot says why its panels are empty (they read as a drawing fault: helper-112), and one repeat is one
    sim = run_simulation(q, "human", 1, plot=tmp_path / "blank.png")
    assert sim.notes == ("No design gives an interval at any number of labels\n(every labelled draw scores the same, "
                         "say: no spread to measure)",) and (tmp_path / "blank.png").is_file()
    r = litjudge("annotate", str(run), "--simulate", "human", "--budget", "10", "--repeats", "1")
    assert r.returncode == 0 and "1 repeat of 10 draws" in r.stdout, r.stdout


@pytest.mark.parametrize("odd, said", [("tie", "answer 'tie' for item 'p03' (the simulation needs one of a, b for every "
                                                "item of the queue: a tie is an answer of a run with `tie = true`"),
                                        (None, "no answer for item 'p03' (the simulation needs one of a, b for every item "
                                               "of the queue: simulate a run of the items it answers")])
def test_a_human_column_with_a_tie_or_a_blank_is_refused_saying_what_to_do(tmp_path, odd, said):
    """A new user's column answered in part, or with ties, was refused naming only what was wrong."""
    rows = [{"pair_id": f"p{i:02d}", "prompt": "Which?", "text_a": f"A {i}.", "text_b": f"B {i}.",
             "label": odd if i == 3 else "ab"[i % 2]} for i in range(12)]
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in rows))
    (tmp_path / "answers.jsonl").write_text("".join(json.dumps({"id": f"p{i:02d}/{o}", "response": "AB"[i % 3 == 0]})
                                                    + "\n" for i in range(12) for o in ("ab", "ba")))
    cfg = tmp_path / "odd.toml"
    cfg.write_text(f'name = "odd"\nprotocol = "pairwise"\njudge = "replay:{tmp_path / "answers.jsonl"}"\n'
                   '[dataset]\nloader = "pairs_jsonl"\npath = "pairs.jsonl"\n')
    r = litjudge("annotate", str(judged(cfg)), "--simulate", "human", "--budget", "10")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and said in r.stderr, r.stderr


def skewed_run(folder, judges: tuple[int, ...] = (0, 1, 2), name: str = "skewed", extra: str = "",
               probabilities: bool = True):
    """Three recorded judges (j0, j1, j2) of 30 stories of 4 tests saying No to nearly everything, j0
    Yes on test 1 of three stories; the run of those `judges` (`extra`: more of its config). With
    `probabilities`, each verdict's P(Yes) as if read after an analysis: a story's, from Beta(0.2,
    3.8) (the audit's rare answer, calibrated), which the queue's draws need 30 or more of."""
    from tests.conformance_data import ttcw_dataset

    names = [f"k{k:02d}" for k in range(30)]
    yes = {(s, t): k < 3 and t == 1 for k, s in enumerate(names) for t in range(1, 5)}
    card = ttcw_dataset(folder, names, 4, yes)
    for j in range(3):
        path = folder / f"j{j}.jsonl"
        path.write_text("".join(json.dumps({"id": f"story_{s}_GPT4_test{t}", "response": "Yes" if yes[(s, t)] and
                                            j == 0 else "No"}) + "\n" for s in names for t in range(1, 5)))
    cfg = folder / f"{name}.toml"
    listed = ", ".join(f'"replay:{folder / f"j{j}.jsonl"}"' for j in judges)
    cfg.write_text(f'name = "{name}"\nprotocol = "ttcw"\ndataset = "{card}"\njudge = [{listed}]\n'
                   'backend = "replay"\nmode = "label"\n' + extra)
    run = judged(cfg)
    if probabilities:
        story = {f"{s}_GPT4": float(p) for s, p in zip(names, np.random.default_rng(0).beta(0.2, 3.8, len(names)))}
        v = pl.read_parquet(run / "verdicts.parquet")
        p_yes = pl.col("story_id").cast(pl.Utf8).replace_strict(story, default=None, return_dtype=pl.Float64)
        v.with_columns(pl.struct(p_yes.alias("Yes"), (1 - p_yes).alias("No")).alias("analysis_distribution")
                       ).write_parquet(run / "verdicts.parquet")
    return run


@pytest.mark.parametrize("bad", [float("nan"), 1.7, -0.2])
def test_a_stored_probability_that_is_none_is_refused_in_one_line(tmp_path, bad):
    """A hostile pass: a NaN P(Yes) in verdicts.parquet left every estimate empty ("every labelled
    draw gives the same weighted value"), and 1.7 or -0.2 moved the draws asked (30 -> 72 or 39)."""
    from litjudge.engine.core.errors import ConfigError

    run = skewed_run(tmp_path)
    v = pl.read_parquet(run / "verdicts.parquet")
    yes = v["analysis_distribution"].struct.field("Yes").to_list()
    yes[3] = bad
    v.with_columns(pl.struct(pl.Series("Yes", yes, dtype=pl.Float64), v["analysis_distribution"].struct.field("No"))
                   .alias("analysis_distribution")).write_parquet(run / "verdicts.parquet")
    with pytest.raises(ConfigError) as e:
        build_queue(run, 12)
    assert f"verdicts.parquet: analysis_distribution.Yes is {bad} in row 3: not a probability" in str(e.value)
    assert "\n" not in str(e.value)
    r = litjudge("annotate", str(run), "--budget", "12", timeout=60)
    assert r.returncode != 0 and "not a probability" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_skewed_queue_s_simulation_says_why_active_gives_no_interval(tmp_path):
    """Three recorded judges saying No to nearly everything, one of them Yes on a test of three
    stories, their P(Yes) a rare answer's: the draws are skewed, so the queue's active interval waits
    for the draws its simulation asks (`min_draws`), and `--simulate` at a smaller budget says so where it printed
    "no interval" alone (a helper read it as a fault)."""
    run = skewed_run(tmp_path)
    need = build_queue(run, 12).min_draws
    assert need > MIN
    r = litjudge("annotate", str(run), "--simulate", "expert_pass", "--budget", "12", "--repeats", "20")
    assert r.returncode == 0, r.stderr[-2000:]
    assert np.isnan(table(r.stdout)["active"][1]), r.stdout
    assert f"The active design gives no interval before {need} labelled draws: the judges' probabilities" in r.stdout
    # at a budget of the draws asked, active's first interval already narrower than uniform PPI++'s: it
    # needs that many (it printed "active more than 3 x budget": a hostile pass)
    r = litjudge("annotate", str(run), "--simulate", "expert_pass", "--budget", str(need), "--repeats", "20")
    assert table(r.stdout)["active"][1] < table(r.stdout)["uniform PPI++"][1], r.stdout
    assert f", active {need} (its first interval)" in r.stdout, r.stdout
    # serving that queue at a budget below the draws asked: said before anyone labels (the budget is fixed once started)
    served = Served(run, "--budget", "12")
    served.kill(signal.SIGINT)
    assert f"the active interval from {need} labelled draws on" in served.printed, served.printed
    assert f"warning: the active interval needs {need} labelled draws and the queue's budget is 12" in served.stderr


def test_a_ppi_table_of_a_skewed_queue_s_labels_withholds_the_interval_as_its_page_does(tmp_path):
    """`[ppi] labelled = "annotations:RUN"` with the skewed queue's 20 draws labelled: a later run of
    one label-mode judge (its 0/1 answers predict no skew) gives no active interval, as the queue's
    page gives none before its `min_draws`; it gave one for every judge before (an audit)."""
    import uuid

    from tests.annotate_run import InThread

    queued = skewed_run(tmp_path)
    with InThread(queued, budget=20) as s, s.client() as c:
        while not (item := c.get("/api/next", params={"annotator": "ann"}).json())["done"]:
            c.post("/api/label", json={"annotator": "ann", "cluster": item["cluster"], "key": uuid.uuid4().hex,
                                       "labels": {q["item"]: "Yes" if q["item"].endswith("test1") and int(item["cluster"][1:3]) % 2 else "No"
                                                  for q in item["questions"]}}).raise_for_status()
        page = c.get("/api/estimate").json()
    assert page["labelled_draws"] == 20 and page["min_draws"] > 20 and page["active"]["low"] is None
    later = skewed_run(tmp_path, judges=(1,), name="later", extra=f'[ppi]\nlabelled = "annotations:{queued}"\n',
                       probabilities=False)
    table = pl.read_parquet(later / "tables" / "ppi.parquet")
    assert table.height and table["ppi_low"].is_null().all() and table["human_low"].is_not_null().any(), table
    assert all(f"an interval needs {page['min_draws']})" in note for note in table["ci_note"].to_list()), table


SIMULATE_MANY = r"""
import re, time, numpy as np
from litjudge.judges.metrics.active_sim import Population, simulate
n, rng = 100_000, np.random.default_rng(0)
p = rng.uniform(size=n)
pop = Population(rng.binomial(1, p).astype(float), p, np.sqrt(p * (1 - p)), np.ones(n))
start = time.perf_counter()
c = simulate(pop, np.arange(10, 601), 100, probability=np.full(n, 1.0 / n), needs=10)
# VmHWM, this process's own peak: ru_maxrss keeps the forking pytest worker's across exec (3.6 GB read)
peak = re.search(r"VmHWM:\s+(\d+)", open("/proc/self/status").read()).group(1)
print(peak, time.perf_counter() - start, c.covered["active"][-1].mean())
"""


def test_a_simulation_of_many_clusters_holds_its_draws_not_every_comparison():
    """--simulate on a run of 100,000 pairs (its default 500 repeats would have held R x k x N
    booleans: 6 GB at 100 repeats): 100 repeats of 600 draws in a process of its own, well under
    a GB and in seconds, the intervals covering."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", SIMULATE_MANY], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    peak_kb, seconds, cover = (float(x) for x in done.stdout.split())
    assert peak_kb < 900_000 and seconds < 60 and cover > 0.85, done.stdout
