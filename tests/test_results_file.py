"""RUN/results.json (issue 58, item 2): the one file another tool loads, written in every run
folder: the headline metrics with their intervals per judge and view, the config, the versions,
each judge's identity, n, unparsed and time. Loaded here after a replay run of two protocols (one
run of two tasks, through the console), and rewritten by `reparse`."""
from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from litjudge import __version__
from litjudge.engine.app.public import config_folder, redact
from litjudge.engine.app.run import prepare
from litjudge.engine.core.config import load_config
from litjudge.grammars.labels import LabelSet
from tests.conftest import litjudge, write_config

TASKS = ('[[tasks]]\nname = "pairs"\nprotocol = "pairwise"\ndataset = "pairs-generic"\n'
         '[[tasks]]\nname = "items"\nprotocol = "classification"\ndataset = "rated-items-generic"\n'
         '[tasks.options]\ntemplate = "default"\n'
         '[[tasks]]\nname = "ttcw"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\n[tasks.options]\nvariant = "default"\n')


def recording(config: Path, path: Path) -> None:
    """Answers to every request of every task of `config`, the label set's labels in turn."""
    answers = {}
    for _, task in load_config(config).task_configs():
        prep = prepare(task)
        for k, r in enumerate(prep.protocol.build(prep.context(prep.specs[0])).requests):
            language = getattr(r.language, "inner", r.language)
            labels = [label for label, _ in language.pairs] if isinstance(language, LabelSet) else ["Yes", "No"]
            answers[r.meta.item_id] = labels[(k // 2) % len(labels)]
    path.write_text("".join(json.dumps({"id": k, "response": v}) + "\n" for k, v in answers.items()))


def test_results_json_after_a_replay_run_of_two_protocols(tmp_path):
    rec = tmp_path / "rec.jsonl"
    rec.write_text(json.dumps({"id": "placeholder", "response": "x"}) + "\n")
    cfg = write_config(tmp_path / "both.toml", f'name = "both"\njudge = "replay:{rec}"\n' + TASKS)
    recording(cfg, rec)
    env = {"LITJUDGE_RUNS_DIR": str(tmp_path / "runs")}
    r = litjudge("run", str(cfg), "--quiet", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    run = tmp_path / "runs" / "both"
    top = json.loads((run / "results.json").read_text())
    assert top["schema"] == "litjudge.results/1" and top["kind"] == "tasks" and list(top["tasks"]) == ["pairs", "items", "ttcw"]
    for task, metric, view in (("pairs", "accuracy.accuracy", "order=mean of both"), ("items", "metrics.accuracy", "all")):
        res = json.loads((run / task / "results.json").read_text())
        assert res == top["tasks"][task]                       # the shared file holds each task's record
        manifest = json.loads((run / task / "manifest.json").read_text())
        assert res["kind"] == "run" and res["task"] == task and res["protocol"] == manifest["protocol"]
        assert res["headline"]["metric"] == metric and res["headline"]["view"] == view
        assert res["headline"]["higher_is_better"] is True
        assert res["versions"]["litjudge"] == __version__ == manifest["litjudge"]
        assert res["config"] == redact(manifest["config"], config_folder(manifest["config"]))   # no absolute path
        assert res["config"]["protocol"] == res["protocol"]["name"] and str(tmp_path) not in json.dumps(res["config"])
        assert (res["n"], res["unparsed"], res["missing"]) == (manifest["verdicts"]["rows"], 0, 0) and res["n"] > 0
        assert res["seconds"] == manifest["seconds"] and res["created"] == manifest["created"]
        (judge,) = res["judges"]
        assert judge["judge"] == "replay:rec.jsonl" and judge["backend"] == "replay"      # beside the config
        assert str(tmp_path) not in json.dumps(res) and {row["judge"] for row in res["results"]} <= {judge["judge"]}
        assert judge["fingerprint"] == manifest["judges"][0]["fingerprint"] and judge["sha256"]
        assert judge["n"] == res["n"] and judge["unparsed"] == 0
        # the headline row is the table's pooled row, with its interval
        top_rows = [row for row in res["results"] if row["headline"]]
        assert len(top_rows) == 1 and top_rows[0]["metric"] == metric and top_rows[0]["view"] == view
        table, name = metric.split(".")
        frame = pl.read_parquet(run / task / "tables" / f"{table}.parquet")
        column, _, value = view.partition("=")
        pooled = (frame.filter(pl.col(column) == value) if value else frame).row(0, named=True)
        assert top_rows[0]["value"] == pooled[name] and judge["headline"]["value"] == pooled[name]
        low = pooled.get(f"{name}_low", pooled.get("ci_low"))
        assert top_rows[0]["ci_low"] == low and (low is None or top_rows[0]["ci_low"] <= top_rows[0]["value"])
    pairs = json.loads((run / "pairs" / "results.json").read_text())
    assert [row["view"] for row in pairs["results"]][:3] == ["order=ab", "order=ba", "order=mean of both"]   # every view
    assert [row["metric"] for row in json.loads((run / "items" / "results.json").read_text())["results"]] == [
        "metrics.accuracy", "metrics.spearman_ordinal"]                   # the headline table's rankable metrics
    unlabelled = top["tasks"]["ttcw"]                                     # the demo stories have no expert labels
    assert unlabelled["results"] == [] and "no overall table" in unlabelled["headline"]["note"]
    # reparse rebuilds the tables, and results.json with them
    (run / "pairs" / "results.json").unlink()
    r = litjudge("reparse", str(run), env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    again = json.loads((run / "pairs" / "results.json").read_text())
    assert again["results"] == pairs["results"] and json.loads((run / "results.json").read_text())["tasks"]["pairs"] == again


def test_the_headline_carries_its_interval(tmp_path):
    """Twelve pairs: the pooled accuracy's interval is the table's, and the file is strict JSON."""
    import warnings

    import litjudge
    from tests.test_python_api import COLUMNS, VALUES, pairs, recording

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", litjudge.LitjudgeWarning)          # a judge answering A: a constant judge
        r = litjudge.judge(pairs(), protocol="pairwise", judge=recording(tmp_path, pairs()), columns=COLUMNS,
                           values=VALUES, out=tmp_path / "out", progress=False)
    text = (r.run_dir / "results.json").read_text()
    res = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))     # no NaN, no Infinity
    row = next(row for row in res["results"] if row["headline"])
    pooled = r.tables["accuracy"].filter(pl.col("order") == "mean of both").row(0, named=True)
    assert (row["value"], row["ci_low"], row["ci_high"], row["n"]) == (pooled["accuracy"], pooled["ci_low"],
                                                                       pooled["ci_high"], pooled["n"])
    assert row["ci_low"] < row["value"] < row["ci_high"] and res["judges"][0]["headline"]["ci_high"] == row["ci_high"]
    assert any("a constant judge" in w for w in res["warnings"])


def test_a_sweep_folder_has_its_ranking_as_results(tmp_path):
    from tests.test_cli_probe import cli
    from tests.test_sweep_ranking import litbench_sweep, ranking

    r = cli("run", str(litbench_sweep(tmp_path)), "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads((tmp_path / "runs" / "out" / "litbench-sweep" / "results.json").read_text())
    assert res["kind"] == "sweep" and res["headline"] == {"metric": "accuracy.accuracy", "higher_is_better": True}
    rows = ranking(tmp_path)
    public = {row["judge"]: "replay:" + Path(row["judge"].removeprefix("replay:")).relative_to(tmp_path).as_posix()
              for row in rows}                                # named from the config's folder, as published
    assert [(row["judge"], row["value"], row["ci_low"]) for row in res["results"]] == [
        (public[row["judge"]], float(row["value"]), float(row["ci_low"])) for row in rows]
    assert {j["judge"] for j in res["judges"]} == set(public.values()) and all(j["sha256"] for j in res["judges"])
    assert str(tmp_path) not in json.dumps(res)
    assert res["versions"]["litjudge"] == __version__ and res["config"]["protocol"] == "pairwise"
