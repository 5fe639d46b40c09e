"""A sweep ranks the estimate the protocol declares, with an interval on every ranked value and the
cells it cannot tell from the best. The audit's case: LitBench-shaped pairs (the preferred text is
always text_a), a judge that always answers "A" and an unbiased judge right 75% of the time. Ranked
by the order-ab row, the always-A judge won at 1.000 with NaN intervals; ranked by the pooled
estimate (the mean of both orders) the unbiased judge wins. Replayed judges: no model is needed."""
from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from litjudge.engine.app.sweep_rank import RANKED_AFTER
from litjudge.judges.metrics.bootstrap import too_few
from tests.conftest import PROJECT_ROOT, needs_data
from tests.test_cli_probe import cli, one_line

N_PAIRS = 40


def litbench_sweep(folder: Path, rank_by: str | None = None, perfect: bool = False) -> Path:
    rng = np.random.default_rng(0)
    pairs = [{"pair_id": f"p{i:02d}", "prompt": "Write a story.", "text_a": f"the better story {i}",
              "text_b": f"the weaker story {i} with more words", "label": "a"} for i in range(N_PAIRS)]
    (folder / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    always_a = {f"{p['pair_id']}/{o}": "A" for p in pairs for o in ("ab", "ba")}
    unbiased = {}
    for p in pairs:
        right = rng.random() < 0.75                     # the same pick in both orders
        for order in ("ab", "ba"):
            picks_first = right == (order == "ab")      # text a is shown first in order ab
            unbiased[f"{p['pair_id']}/{order}"] = "A" if picks_first else "B"
    right = {f"{p['pair_id']}/{o}": "A" if o == "ab" else "B" for p in pairs for o in ("ab", "ba")}
    judged = [("always_a", always_a), ("unbiased", unbiased)] + ([("perfect", right)] if perfect else [])
    for name, answers in judged:
        (folder / f"{name}.jsonl").write_text("".join(json.dumps({"id": k, "response": v}) + "\n"
                                                      for k, v in answers.items()))
    cfg = folder / "litbench-sweep.toml"
    cfg.write_text('name = "litbench-sweep"\nprotocol = "pairwise"\n'
                   '[matrix]\njudge = [' + ", ".join(f'"replay:{folder / n}.jsonl"' for n, _ in judged) + ']\n'
                   + (f'[sweep]\nrank_by = "{rank_by}"\n' if rank_by else "")
                   + '[dataset]\nloader = "pairs_jsonl"\npath = "pairs.jsonl"\n')
    return cfg


def ranking(folder: Path) -> list[dict]:
    with open(folder / "runs" / "out" / "litbench-sweep" / "sweep_ranking.csv") as f:
        return list(csv.DictReader(f))


def test_the_unbiased_judge_ranks_first_with_an_interval_on_every_value(tmp_path):
    cfg = litbench_sweep(tmp_path)
    r = cli("run", str(cfg), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = ranking(tmp_path)
    assert [Path(row["judge"].removeprefix("replay:")).stem for row in rows] == ["unbiased", "always_a"]
    assert {row["group"] for row in rows} == {"order=mean of both"}
    assert float(rows[1]["value"]) == 0.5                         # always A: right in one order, wrong in the other
    assert 0.6 < float(rows[0]["value"]) < 0.9
    for row in rows:                                              # an interval on every ranked value
        assert row["ci_low"] and row["ci_high"] and float(row["ci_low"]) < float(row["value"]) < float(row["ci_high"])
        assert row["clusters"] == str(N_PAIRS) and row["unread"] == "0.0"
    assert rows[0]["same_as_best"] == "true" and rows[1]["same_as_best"] == "false"
    assert "unread" not in r.stdout                                # no cell left an answer unread
    assert "mean of both" in r.stdout and "same_as_best" in r.stdout and "family-wise" in r.stdout
    # a sweep writes no run folder of its own cells: its export says what to export instead
    one_line(cli("export", str(tmp_path / "runs" / "out" / "litbench-sweep"), "--to", str(tmp_path / "exp"),
                 cwd=tmp_path), "a sweep folder holds its cells' verdicts in its store", "without [matrix]")


def test_a_cell_whose_answers_were_partly_unread_says_how_many(tmp_path):
    """A judge answering "Tie" where ties are off is ranked on the answers read; the ranking says
    what share was not (the table printed nothing of it, the cell level with complete ones). One
    that left all but 2 pairs unread, right on those, is ranked after the cells that have an
    interval: it topped the ranking at 1.0 with none."""
    cfg = litbench_sweep(tmp_path)
    answers = [json.loads(line) for line in (tmp_path / "unbiased.jsonl").read_text().splitlines()]
    for k in range(0, len(answers), 4):
        answers[k]["response"] = "Tie"                               # 20 of 80 unread
    (tmp_path / "muddled.jsonl").write_text("".join(json.dumps(a) + "\n" for a in answers))
    lucky = [{"id": a["id"], "response": ("A" if a["id"].endswith("/ab") else "B") if a["id"] < "p02" else "Tie"}
             for a in answers]                                      # right on p00, p01; 76 of 80 unread
    (tmp_path / "lucky.jsonl").write_text("".join(json.dumps(a) + "\n" for a in lucky))
    cfg.write_text(cfg.read_text().replace("judge = [", f'judge = ["replay:{tmp_path / "muddled.jsonl"}", '
                                                        f'"replay:{tmp_path / "lucky.jsonl"}", '))
    r = cli("run", str(cfg), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = {Path(row["judge"].removeprefix("replay:")).stem: row for row in ranking(tmp_path)}
    assert {k: float(row["unread"]) for k, row in rows.items()} == {
        "muddled": 0.25, "unbiased": 0.0, "always_a": 0.0, "lucky": 0.95}
    assert "unread" in r.stdout
    assert rows["lucky"]["value"] == "1.0" and rows["lucky"]["rank"] == "4" and rows["lucky"]["same_as_best"] == ""
    assert rows["lucky"]["ci_note"].endswith(RANKED_AFTER) and too_few(2) in rows["lucky"]["ci_note"]
    assert all(RANKED_AFTER not in rows[k]["ci_note"] for k in ("muddled", "unbiased", "always_a"))
    assert "1 of 4 ranked rows have no interval (fewer than 10 clusters" in " ".join(r.stderr.split())


def test_one_order_ranks_only_when_asked_explicitly(tmp_path):
    cfg = litbench_sweep(tmp_path, rank_by="accuracy.accuracy@order=ab")
    r = cli("run", str(cfg), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = ranking(tmp_path)
    assert [Path(row["judge"].removeprefix("replay:")).stem for row in rows] == ["always_a", "unbiased"]
    assert {row["group"] for row in rows} == {"order=ab"}
    # right on every pair: no resample varies, so the exact binomial bound over 40 pairs stands in
    assert rows[0]["value"] == "1.0" and float(rows[0]["ci_low"]) == pytest.approx(0.025 ** (1 / N_PAIRS))
    assert "exact binomial" in rows[0]["ci_note"]


def test_a_rank_by_that_names_no_estimate_is_refused_in_one_line(tmp_path):
    one_line(cli("run", str(litbench_sweep(tmp_path, rank_by="accuracy.kappa")), cwd=tmp_path),
             "sweep.rank_by", "cannot rank by 'accuracy.kappa'", "accuracy.accuracy")
    one_line(cli("run", str(litbench_sweep(tmp_path, rank_by="accuracy.accuracy@order")), cwd=tmp_path),
             "sweep.rank_by", "COLUMN=VALUE")


@needs_data
def test_a_ttcw_run_of_two_stories_prints_no_interval(tmp_path):
    """2 stories: a percentile interval would cover about half the time; none is printed, and the
    tables say why."""
    r = cli("run", str(PROJECT_ROOT / "runs" / "ttcw-replay.toml"), "--limit", "2", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    run = tmp_path / "runs" / "out" / "ttcw-replay" / "tables"
    overall = pl.read_parquet(run / "overall.parquet")
    assert overall["balanced_accuracy_low"].is_null().all() or overall["balanced_accuracy_low"].is_nan().all()
    notes = set(overall["ci_note"].to_list())
    assert too_few(2) in notes and all(n.startswith("too few clusters (") for n in notes)
    for name in ("label_distribution", "corrected_pass_rates"):
        table = pl.read_parquet(run / f"{name}.parquet")
        assert table["ci_low"].drop_nans().drop_nulls().is_empty(), name
    assert "too few clusters (2" in r.stdout


@needs_data
def test_a_post_axis_that_leaves_the_ranked_estimate_alone_is_named_not_dropped_in_silence(tmp_path):
    """A threshold on P(Yes) changes nothing of a label-mode run: the ranking lists each cell once
    for it (its rows were repeats) and says so; the story cutoff, which changes the ranked
    story_cutoff.kappa, keeps its column and its rows."""
    cfg = tmp_path / "idle.toml"
    cfg.write_text('name = "idle"\nprotocol = "ttcw"\ndataset = "ttcw"\nmode = "label"\nmissing = "label:No"\n'
                   '[options]\nvariant = "upstream"\n[matrix]\njudge = ["replay:gpt4", "replay:claude3-opus"]\n'
                   '[sweep]\nrank_by = "story_cutoff.kappa"\nbootstrap = 200\n'
                   '[sweep.post]\n"options.threshold" = [0.3, 0.5, 0.7]\n"options.story_cutoff" = [0.25, 0.5]\n')
    r = cli("run", str(cfg), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    folder = tmp_path / "runs" / "out" / "idle"
    ranked = pl.read_parquet(folder / "sweep_ranking.parquet")
    assert "options.threshold" not in ranked.columns and ranked.height == 2 * 2
    assert sorted(set(ranked["options.story_cutoff"].to_list())) == [0.25, 0.5]
    said = ("options.threshold gives story_cutoff.kappa the same value in every cell for its 3 values: the ranking "
            "lists each cell once for it, at 0.3")
    assert said in r.stderr and said in json.loads((folder / "manifest.json").read_text())["warnings"][0]
    assert "options.story_cutoff gives" not in r.stderr
    metrics = pl.read_parquet(folder / "sweep_metrics.parquet")           # every setting's tables are kept
    assert metrics.select("cell", "options.threshold", "options.story_cutoff").unique().height == 2 * 3 * 2


@needs_data
def test_a_sweep_ranked_over_the_judgeable_stories_prints_the_interval_of_their_table(tmp_path):
    """`overall.kappa@view=judgeable` ranked with no interval ("no resampling units") and counted
    gemini-pro's 14 unanswered URL-only items as unread in a view without them. Each cell now prints
    its overall table's judgeable interval and unread share; a view TTCW has not is one line."""
    cfg = tmp_path / "view.toml"
    body = ('name = "view"\nprotocol = "ttcw"\ndataset = "ttcw"\nmode = "label"\nmissing = "label:No"\n'
            '[options]\nvariant = "upstream"\ninclude_unjudgeable = true\n'
            '[matrix]\njudge = ["replay:gpt4", "replay:gemini-pro"]\n[sweep]\nrank_by = "RANK"\nbootstrap = 1000\n')
    cfg.write_text(body.replace("RANK", "overall.kappa@view=judgeable"))
    r = cli("run", str(cfg), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    ranked = {row["judge"]: row for row in pl.read_parquet(tmp_path / "runs" / "out" / "view" / "sweep_ranking.parquet")
              .iter_rows(named=True)}
    plain = tmp_path / "plain.toml"
    plain.write_text(body.replace('name = "view"', 'name = "plain"\njudge = ["replay:gpt4", "replay:gemini-pro"]')
                     .replace('[matrix]\njudge = ["replay:gpt4", "replay:gemini-pro"]\n', "")
                     .replace('[sweep]\nrank_by = "RANK"\nbootstrap = 1000\n', ""))
    assert cli("run", str(plain), cwd=tmp_path).returncode == 0
    table = pl.read_parquet(tmp_path / "runs" / "out" / "plain" / "tables" / "overall.parquet")
    for row in table.filter(pl.col("view") == "judgeable").iter_rows(named=True):
        got = ranked[row["judge"]]
        assert got["value"] == pytest.approx(row["kappa"]) and got["clusters"] == 36, got
        assert (got["ci_low"], got["ci_high"]) == pytest.approx((row["kappa_low"], row["kappa_high"])), (got, row)
        assert got["unread"] == 0.0, got
    cfg.write_text(body.replace("RANK", "overall.kappa@view=nosuch"))
    one_line(cli("run", str(cfg), cwd=tmp_path), "TTCW's views are all and judgeable (the stories with text), not 'nosuch'")


def test_every_ranked_value_has_an_interval_inside_its_range_and_constant_judges_the_exact_bound(tmp_path):
    """D1: the exact bound of a constant judge ran on [0, size of the first cluster]: a perfect
    judge printed 1.000 [0.912, 1.088], always-"A" 0.500 [0.456, 0.632]. Now: the perfect judge
    [0.025^(1/n), 1], always-"A" 0.5 +- (1 - 0.025^(1/n)) / 2 (README: Statistics), the 75% judge
    its rate interval, all inside [0, 1]; the console lists the exact bound under "interval where"."""
    r = cli("run", str(litbench_sweep(tmp_path, perfect=True)), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = {Path(row["judge"].removeprefix("replay:")).stem: row for row in ranking(tmp_path)}
    assert list(rows) == ["perfect", "unbiased", "always_a"]
    share = 1 - 0.025 ** (1 / N_PAIRS)
    for row in rows.values():
        assert 0.0 <= float(row["ci_low"]) <= float(row["value"]) <= float(row["ci_high"]) <= 1.0, row
    assert (float(rows["perfect"]["ci_low"]), float(rows["perfect"]["ci_high"])) == pytest.approx((1 - share, 1.0))
    assert (float(rows["always_a"]["ci_low"]), float(rows["always_a"]["ci_high"])) == \
        pytest.approx((0.5 - share / 2, 0.5 + share / 2))
    assert "exact binomial" in rows["perfect"]["ci_note"] and "exact binomial" in rows["always_a"]["ci_note"]
    assert "interval where: every cluster gives the same value" in r.stdout
    assert "no interval where: every cluster" not in r.stdout


@pytest.mark.parametrize("batch", [None, 64])
def test_the_rates_intervals_at_once_are_each_cells_own(batch):
    """The ranking computes its rates' intervals in one `rate_interval` over every cell: each is
    the interval that cell's own rule gives (within rounding), notes included, over rates near 0
    and 1, constant ones, missing values, two orders as strata and too few clusters, at once or a
    few cells at a time; a cell that is no rate keeps its own rule."""
    import math

    from litjudge.judges.metrics.estimates import Units, intervals_with_notes, mean_of

    rng = np.random.default_rng(0)
    cells = []
    for _ in range(400):
        clusters = np.repeat([f"c{j}" for j in range(int(rng.integers(1, 30)))], int(rng.integers(1, 5)))
        v = (rng.random(len(clusters)) < rng.choice([0.0, 0.01, 0.1, 0.5, 0.97, 1.0])).astype(float)
        v[rng.random(len(v)) < rng.choice([0.0, 0.2, 1.0])] = np.nan
        strata = list(rng.choice(["ab", "ba"], len(v))) if rng.random() < 0.3 else None
        cells.append(Units.rate(list(clusters), list(v), strata))
    cells.append(Units.of([f"c{j}" for j in range(20)], {"v": rng.random(20)}, mean_of("v"), (0.0, 1.0)))
    notes = set()
    # batch: the padded arrays in chunks of a few cells, the same intervals
    at_once = intervals_with_notes(cells, batch_cells=batch) if batch else intervals_with_notes(cells)
    for cell, (low, high, note) in zip(cells, at_once, strict=True):
        own = cell.interval_with_note()
        assert note == own[2] and all(math.isclose(a, b, abs_tol=1e-12) or math.isnan(a) and math.isnan(b)
                                      for a, b in ((low, own[0]), (high, own[1]))), (cell.ids, own, (low, high, note))
        notes.add(note.split(" (")[0] if note else note)
    assert len(notes) >= 4, notes          # shown, too few clusters, the few-clusters guard, constant


def test_a_rank_by_row_is_named_by_every_column_of_its_table_in_any_order():
    """`@order=ab,question=pw` (a real row, its columns in another order) and `@question=pw` (order
    left out) matched no row: an empty ranking said 'data without human labels?', exit 0. The
    columns are read in the table's order, and a row missing one is refused before anything runs."""
    from litjudge.judges import PROTOCOLS

    rubric, ttcw = PROTOCOLS.get("rubric")(), PROTOCOLS.get("ttcw")()
    assert rubric.parse_rank_by("pairwise_agreement.accuracy@order=ab,question=pw").group == "question=pw,order=ab"
    assert ttcw.parse_rank_by("per_test.kappa@test=1,view=all").group == "view=all,test=1"
    for protocol, text, words in [(rubric, "pairwise_agreement.accuracy@question=pw", "names no order"),
                                  (ttcw, "per_test.kappa@test=1", "names no view"),
                                  (rubric, "agreement.agreement@question=pw,order=ab", "agreement has no column 'order'"),
                                  (ttcw, "per_test.kappa@view=all,view=judgeable", "names 'view' twice")]:
        with pytest.raises(ValueError, match=words):
            protocol.parse_rank_by(text)


def test_data_whose_stories_have_no_text_are_refused_with_the_reason_and_an_empty_cell_is_listed(tmp_path):
    """TTCW stories that are URLs only (as the New Yorker's): a run said "no requests (check options,
    limit and dataset)", and a sweep failed on an internal error in aggregation (its verdict frame
    empty). Both now say every item was skipped and why; a cell of a sweep with nothing to judge
    (include_unjudgeable off) beside one with recorded answers is listed unranked, saying so."""
    from tests.conformance_data import ttcw_dataset

    names = [f"s{i}" for i in range(12)]
    card = ttcw_dataset(tmp_path, names, 3, {(s, t): (i + t) % 2 == 0 for i, s in enumerate(names) for t in (1, 2, 3)})
    stories = tmp_path / "ttcw-sim" / "stories.json"
    stories.write_text(json.dumps([{**s, "content": f"https://example.org/{s['story_id']}"}
                                   for s in json.loads(stories.read_text())]))
    (tmp_path / "rec.jsonl").write_text("".join(json.dumps({"id": f"{s}_GPT4/{t}", "response": "Yes"}) + "\n"
                                                for s in names for t in (1, 2, 3)))
    head = f'protocol = "ttcw"\ndataset = "{card}"\n'
    (tmp_path / "one.toml").write_text(f'name = "one"\n{head}judge = "replay:{tmp_path / "rec.jsonl"}"\n')
    (tmp_path / "sw.toml").write_text(f'name = "sw"\n{head}[matrix]\njudge = ["replay:{tmp_path / "rec.jsonl"}"]\n[sweep]\n')
    for cfg in ("one.toml", "sw.toml"):
        one_line(cli("run", str(tmp_path / cfg), cwd=tmp_path), "the protocol produced no requests to judge: every "
                 "item was skipped (36 of 36: story text not in the dataset (New Yorker URL))")
    (tmp_path / "mix.toml").write_text(f'name = "mix"\n{head}[matrix]\n"options.include_unjudgeable" = [false, true]\n'
                                       f'judge = ["replay:{tmp_path / "rec.jsonl"}"]\n[sweep]\n')
    r = cli("run", str(tmp_path / "mix.toml"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = list(csv.DictReader(open(tmp_path / "runs" / "out" / "mix" / "sweep_ranking.csv")))
    empty = next(row for row in rows if row["cell"].startswith("False"))
    assert empty["rank"] == "" and empty["ci_note"] == "no verdict in this cell (every item skipped): unranked"
    assert "has no verdict: every item of the cell was skipped" in r.stderr


def test_a_row_whose_interval_is_withheld_is_not_compared_with_the_best():
    """A judge whose humans said Yes in 3 of 40 stories has kappa without an interval (the rule
    withholds it: it would not cover); it was marked worse than the best "with 95% confidence"
    (or the best itself). It is ranked after the rows that have one and is not compared."""
    from litjudge.engine.app.sweep_rank import Ranked, ranking
    from litjudge.judges.metrics.estimates import Units, kappa_of

    rng = np.random.default_rng(4)
    stories = [f"s{i}" for i in range(40)]
    balanced = rng.random(40) < 0.5
    rare = np.arange(40) < 3
    rows = [Ranked({"judge": "fair"}, 0.0, 40, Units.agreement(stories, balanced.tolist(),
                                                                 (balanced ^ (rng.random(40) < 0.2)).tolist(), kappa_of)),
            Ranked({"judge": "rare"}, 0.0, 40, Units.agreement(stories, rare.tolist(), rare.tolist(), kappa_of))]
    rows = [Ranked(r.head, r.units.value(), r.n, r.units) for r in rows]
    table = ranking(rows, True, 200)
    assert table["judge"].to_list() == ["fair", "rare"] and table["value"][1] == 1.0 > table["value"][0]
    assert table["same_as_best"].to_list() == [True, None] and table["ci_low"][1] is None
    assert table["ci_note"][1].endswith(RANKED_AFTER) and RANKED_AFTER not in (table["ci_note"][0] or "")


def test_the_pooled_row_named_explicitly_is_the_pooled_estimate_and_unread_counts_the_labelled_pairs():
    """`accuracy.accuracy@order=mean of both` filtered the verdicts by an order none holds: no
    interval, 0 clusters. And `unread` counted a judge's unreadable answers on pairs the humans tied
    or left unlabelled, which accuracy never reads (0.25 where every answer behind it was read)."""
    from litjudge.engine.core.verdicts import answered_and_unread
    from litjudge.judges import PROTOCOLS

    pairwise = PROTOCOLS.get("pairwise")()
    assert pairwise.parse_rank_by("accuracy.accuracy@order=mean of both") == pairwise.parse_rank_by("accuracy.accuracy")
    verdicts = pl.DataFrame({"pair_id": [f"p{i // 2}" for i in range(32)], "order": ["ab", "ba"] * 16,
                             "human": ["a"] * 24 + ["tie"] * 4 + [None] * 4,
                             "status": ["ok"] * 24 + ["unparsed"] * 8, "label": ["A", "B"] * 12 + [None] * 8})
    for table, unread in (("accuracy", 0), ("bias", 8)):
        rows = pairwise.group_rows(verdicts, "order=mean of both", table)
        assert answered_and_unread(rows)[1].height == unread, table


def test_an_unranked_ttcw_row_says_why_its_value_is_undefined():
    """A judge saying No to every story where the experts did too: kappa undefined. The ranking's
    note was the interval's ("a human answer is in fewer than 10 clusters ..."), and its clusters 0."""
    from litjudge.engine.app.sweep_rank import Ranked, ranking
    from litjudge.engine.app.sweep_run import _table_note
    from litjudge.judges.metrics.estimates import Units, kappa_of
    from litjudge.judges.ttcw_agreement import agreements, with_intervals

    v = pl.DataFrame({"judge": ["no"] * 36, "story_id": [f"s{i}" for i in range(36)], "status": ["ok"] * 36,
                      "judge_pass": [False] * 36, "expert_pass": [False] * 36})
    row = with_intervals(agreements(v, ["judge"])[("no",)], v, "story_id")
    table = pl.DataFrame([{"judge": "no", "view": "all", **row}])
    why = _table_note(table, "judge=no,view=all")
    assert why == "the judge and the experts each gave one answer throughout: kappa undefined; one expert class: " \
                  "balanced accuracy undefined"
    units = Units.agreement(v["story_id"].to_list(), [False] * 36, [False] * 36, kappa_of)
    out = ranking([Ranked({"judge": "no"}, float("nan"), 36, units, note=why)], True, 50).row(0, named=True)
    assert out["rank"] is None and out["clusters"] == 36 and out["ci_note"] == f"{why}: unranked"


def test_a_rubric_cells_unread_counts_the_texts_its_agreement_reads():
    """A rubric's ranked tables are agreements with the humans: a text without a human answer is
    not behind the value, and its unreadable verdict was counted in `unread` all the same."""
    from litjudge.engine.core.verdicts import answered_and_unread
    from litjudge.judges import PROTOCOLS

    rubric = PROTOCOLS.get("rubric")()
    verdicts = pl.DataFrame({"question": ["q"] * 10, "human": ["Yes"] * 6 + [None] * 4,
                             "status": ["ok"] * 6 + ["unparsed"] * 4, "label": ["Yes"] * 6 + [None] * 4})
    assert answered_and_unread(rubric.group_rows(verdicts, "question=q", "binary_agreement"))[1].height == 0
    assert answered_and_unread(rubric.group_rows(verdicts, "question=q", "scores"))[1].height == 4


def test_a_sweep_of_changed_data_is_refused_and_its_manifest_names_the_data(tmp_path):
    """A sweep edited to read other data (one human label changed) replaced its ranking unsaid, and
    its manifest named no data: now refused as a run is, its manifest records each data file's
    sha256 (and no judge where the judge is an axis), and --overwrite replaces it; a sweep folder of
    before (no data recorded, the base's judge) resumes as it did."""
    cfg = litbench_sweep(tmp_path)
    assert cli("run", str(cfg), cwd=tmp_path).returncode == 0
    out, data = tmp_path / "runs" / "out" / "litbench-sweep", tmp_path / "pairs.jsonl"
    manifest = json.loads((out / "manifest.json").read_text())
    assert [d["sha256"] for d in manifest["data"]] == [hashlib.sha256(data.read_bytes()).hexdigest()]
    assert "judge" not in manifest["config"]         # an axis: the base's default judge was recorded, never run
    before = ranking(tmp_path)
    assert cli("run", str(cfg), cwd=tmp_path).returncode == 0          # the same data: the same sweep
    data.write_text(data.read_text().replace('"label": "a"', '"label": "b"', 1))
    one_line(cli("run", str(cfg), cwd=tmp_path), "holds the results of another run", "other data", "--overwrite")
    assert ranking(tmp_path) == before
    assert cli("run", str(cfg), "--overwrite", cwd=tmp_path).returncode == 0
    assert ranking(tmp_path) != before
    del manifest["data"]
    manifest["config"]["judge"] = "smollm2-135m"                        # as a sweep of before recorded it
    (out / "manifest.json").write_text(json.dumps(manifest))
    data.write_text(data.read_text().replace('"label": "a"', '"label": "b"', 1))
    assert cli("run", str(cfg), cwd=tmp_path).returncode == 0          # recorded no data: compared by its config
