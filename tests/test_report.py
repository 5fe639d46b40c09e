"""The judge-reliability report: tables equal the run's stored numbers, plots render in a real
browser (headless Chromium from Debian's packages), and `litjudge compare` puts runs side by side."""
import dataclasses
import html
import json
import math
import re
import shutil

import polars as pl
import pytest

from litjudge.engine.app.report import write_report
from litjudge.engine.app.report.viewer import MAX_TEXT
from litjudge.engine.app.run import run
from litjudge.engine.core.config import load_config
from litjudge.judges.metrics import rogan_gladen
from litjudge.judges.tables import SELF_CORRECTED
from tests.chromium import CHROMIUM, page_value
from tests.conftest import PROJECT_ROOT, litjudge, needs_data

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")

REPORT_READY = "document.body.dataset.plotsRendered !== undefined"     # the report's own mark (report/page.py)
PLOTS = "[document.body.dataset.plots, document.body.dataset.plotsRendered]"


def rendered(page) -> tuple[int, int]:
    """(plots on the page, plots the browser decoded), read once the page has marked them."""
    plots, ok = page_value(page.as_uri(), REPORT_READY, PLOTS)
    return int(plots), int(ok)


def screenshot(page, png, width: int = 1280, height: int = 2000) -> tuple[int, int]:
    """The report as a reader sees it, once its plots are decoded: a PNG of width x height pixels
    with text, tables and coloured bars on it, not a blank page. Returns what `rendered` does, read
    by the same browser."""
    plots, ok = page_value(page.as_uri(), REPORT_READY, PLOTS, viewport={"width": width, "height": height}, screenshot=png)
    assert png.exists()
    import matplotlib.image

    pixels = matplotlib.image.imread(png)[..., :3]
    ink = (pixels < 0.9).any(axis=2).mean()
    colours = len({tuple((p * 8).astype(int)) for p in pixels.reshape(-1, 3)[::97]})
    assert ink > 0.05 and colours >= 6, (ink, colours)        # text, tables and coloured bars, not a blank page
    return int(plots), int(ok)


def csv_equals(report_dir, name, stored: pl.DataFrame) -> None:
    got = pl.read_csv(report_dir / "tables" / f"{name}.csv")
    assert got.columns == stored.columns and got.height == stored.height
    for col in stored.columns:
        if stored[col].dtype.is_float():
            for a, b in zip(got[col].to_list(), stored[col].to_list()):
                missing_a, missing_b = a is None or math.isnan(a), b is None or math.isnan(b)
                assert (missing_a and missing_b) or a == pytest.approx(b, rel=1e-9, abs=1e-12), (col, a, b)
        else:
            assert got[col].cast(pl.Utf8).to_list() == stored[col].cast(pl.Utf8).to_list(), col


@pytest.fixture(scope="module")
def replay_run(tmp_path_factory):
    import os
    runs = tmp_path_factory.mktemp("runs")
    os.environ["LITJUDGE_RUNS_DIR"] = str(runs)
    try:
        out = run(load_config(PROJECT_ROOT / "runs" / "ttcw-replay.toml"), progress=False)
    finally:
        del os.environ["LITJUDGE_RUNS_DIR"]
    return out.run_dir


@pytest.fixture(scope="module")
def replay_report(replay_run):
    """The replay run's report, written once for the tests that only read it (2 s a report)."""
    return write_report([replay_run])


@needs_data
def test_ttcw_report_tables_are_the_stored_numbers(replay_run, replay_report):
    page = replay_report
    report = page.parent
    stored = {p.stem: pl.read_parquet(p) for p in (replay_run / "tables").glob("*.parquet")}
    for name in ("per_test", "overall", "story_counts"):
        csv_equals(report, name, stored[name])
    wide = pl.read_csv(report / "tables" / "kappa_per_test.csv")
    gpt4 = stored["per_test"].filter((pl.col("judge") == "replay:gpt4") & (pl.col("view") == "judgeable")).sort("test")
    assert wide.sort("test")["replay:gpt4"].to_list() == pytest.approx(gpt4["kappa"].to_list())
    html = page.read_text()
    assert html.count("<img class='plot'") >= 4 and "data:image/png;base64," in html
    assert (report / "report.md").read_text().count("![") >= 4


@needs_data
def test_overall_agreement_is_drawn_with_its_intervals_and_from_a_run_written_before_kappa_had_one(
        replay_run, replay_report, tmp_path):
    """The overall panel draws each judge's kappa and balanced accuracy with the intervals its table
    prints; a run whose stored overall table has no kappa interval (written before it had one)
    still reports, its kappa bars without whiskers."""
    import shutil

    overall = pl.read_parquet(replay_run / "tables" / "overall.parquet")
    assert overall["kappa_low"].is_not_null().all() and (overall["kappa_low"] <= overall["kappa"]).all()
    old = tmp_path / "old" / replay_run.name
    shutil.copytree(replay_run, old)
    overall.drop("kappa_low", "kappa_high").write_parquet(old / "tables" / "overall.parquet")
    manifest = json.loads((old / "manifest.json").read_text())      # from before the manifest kept the columns
    (old / "manifest.json").write_text(json.dumps({k: v for k, v in manifest.items() if k != "table_columns"}))
    for page in (replay_report, write_report([old])):
        html = page.read_text()
        panel = html[html.index("Overall agreement"):]
        assert "resampling whole stories" in panel[:600] and "<img class='plot'" in panel[:3000], page


@needs_data
def test_a_table_deleted_since_the_run_is_one_line_and_reparse_rebuilds_it(replay_run, tmp_path):
    """A run's table deleted after the run left its panel out of the report and its rows out of a
    compare without a word; the manifest lists the tables the run wrote, and a missing one is the
    unreadable tables' line with its remedy."""
    import shutil

    gone = tmp_path / "gone" / replay_run.name
    shutil.copytree(replay_run, gone)
    (gone / "tables" / "overall.parquet").unlink()
    for args in (("report", str(gone)), ("compare", str(replay_run), str(gone), "--out", str(tmp_path / "cmp"))):
        r = litjudge(*args)
        assert r.returncode == 2 and f"{gone}: tables/overall.parquet is missing though the run wrote it; " \
            f"`litjudge reparse {gone}` rebuilds the tables and verdicts.parquet from the store" in r.stderr, r.stderr[-2000:]
    assert litjudge("reparse", str(gone)).returncode == 0
    assert (gone / "tables" / "overall.parquet").is_file() and litjudge("report", str(gone)).returncode == 0


@needs_data
def test_corrected_pass_rates_follow_rogan_gladen(replay_run, replay_report):
    report = replay_report.parent
    cp = pl.read_csv(report / "tables" / "corrected_pass_rates.csv")
    per_item = pl.read_parquet(replay_run / "tables" / "per_item.parquet")
    row = cp.filter((pl.col("judge") == "replay:claude3-opus") & (pl.col("test") == "all")).row(0, named=True)
    items = per_item.filter((pl.col("judge") == "replay:claude3-opus") & pl.col("judge_pass").is_not_null())
    lab = items.filter(pl.col("expert_pass").is_not_null())
    tp = lab.filter(pl.col("expert_pass") & pl.col("judge_pass")).height
    tn = lab.filter(~pl.col("expert_pass") & ~pl.col("judge_pass")).height
    se, sp = tp / lab.filter(pl.col("expert_pass")).height, tn / lab.filter(~pl.col("expert_pass")).height
    raw = items["judge_pass"].mean()
    assert row["raw_pass_rate"] == pytest.approx(raw) and row["sensitivity"] == pytest.approx(se)
    # every scored story is labelled here, so the correction would only return the experts' own rate:
    # the table withholds it and says why
    assert rogan_gladen(raw, se, sp) == pytest.approx(lab["expert_pass"].mean())
    assert row["corrected_pass_rate"] is None and row["ci_low"] is None and row["note"] == SELF_CORRECTED
    # and the report draws no empty chart of them: it says why instead
    page = (report / "report.html").read_text()
    assert "alt='corrected_pass_rates'" not in page and f"No rate to draw here: {html.escape(SELF_CORRECTED)}" in page
    assert math.isnan(rogan_gladen(0.5, 0.4, 0.5))                  # no better than chance: undefined


@needs_data
@needs_chromium
def test_ttcw_report_renders_in_chromium(replay_report, tmp_path):
    page = replay_report
    plots, ok = screenshot(page, tmp_path / "ttcw.png")
    assert plots >= 4 and ok == plots


@needs_chromium
def test_pairwise_report_renders_and_matches_the_run(smollm, runs_dir, tmp_path):
    """Distribution mode (P(A) at the decision point): the bias, length-control and calibration
    panels, every table equal to the stored one, every plot decoded by the browser."""
    config = dataclasses.replace(load_config(PROJECT_ROOT / "runs" / "pairwise-ttcw.toml"), dataset="pairs-generic",
                                 name="pairwise-demo", mode="distribution")
    out = run(config, progress=False, backends={"smollm2-135m": smollm})
    from litjudge.engine.app.annotate.queue import build_queue
    q = build_queue(out.run_dir, 3, pairs_by="probability")      # the queue draws by its P(text), not its picks
    assert q.uncertainty.all() and q.uncertainty_source == "the judges' P(text) over both orders"
    assert build_queue(out.run_dir, 3).uncertainty_source.startswith("the judges' P(text) over both orders")
    page = write_report([out.run_dir])
    for name in ("accuracy", "bias", "length_control", "calibration_summary", "calibration"):
        csv_equals(page.parent, name, pl.read_parquet(out.run_dir / "tables" / f"{name}.parquet"))
    html = page.read_text()
    assert "Length-controlled accuracy" in html and "Calibration of the judge" in html and "reliability_diagram" in html
    plots, ok = screenshot(page, tmp_path / "pairwise.png", width=1400, height=2600)
    assert plots >= 5 and ok == plots
    # distribution mode generates no text: the viewer says so where the raw output would be
    from litjudge.engine.app.report.viewer import NO_TEXT
    out = clicks(page, """
      out.head = [...box.querySelectorAll('thead th')].map(th => th.textContent);
      out.note = box.querySelector('p.note').textContent;
      out.cell = box.querySelector('tbody tr.item td:last-child').textContent;
      box.querySelector('tbody tr.item').click();
      out.detail = box.querySelector('tr.detail').textContent;
    """, tmp_path)
    assert NO_TEXT in out["note"] and f"Raw output{NO_TEXT}Parsed" in out["detail"], out
    assert out["head"][-1] == "raw output (probabilities)" and out["cell"][:2] in ("A ", "B "), out


@needs_data
@needs_chromium
def test_ttcw_distribution_report_shows_calibration(tiny, runs_dir):
    """The calibration tables and plots of a distribution-mode run (the session's tiny random judge:
    what the report draws from its P(Yes) is the point)."""
    config = dataclasses.replace(load_config(PROJECT_ROOT / "runs" / "ttcw-binary.toml", judge=tiny.spec.name),
                                 name="ttcw-calibration", mode="distribution", limit=1,
                                 options={"variant": "default", "tests": [1, 2, 3, 4, 5, 6]})
    out = run(config, progress=False, backends={tiny.spec.name: tiny})
    summary = out.tables["calibration_summary"].row(0, named=True)
    per_item = out.tables["per_item"].filter(pl.col("p_yes").is_not_null() & pl.col("expert_pass").is_not_null())
    p, y = per_item["p_yes"].to_list(), [float(v) for v in per_item["expert_pass"].to_list()]
    assert summary["n"] == len(p) == 6
    assert summary["brier"] == pytest.approx(sum((a - b) ** 2 for a, b in zip(p, y)) / len(p))
    page = write_report([out.run_dir])
    csv_equals(page.parent, "calibration", out.tables["calibration"])
    assert "Reliability diagram" in (page.parent / "report.md").read_text() or "reliability_diagram" in page.read_text()
    plots, ok = rendered(page)
    assert ok == plots >= 5


@needs_data
def test_compare_puts_judges_side_by_side(tmp_path):
    env = {"LITJUDGE_RUNS_DIR": str(tmp_path / "a")}
    assert litjudge("run", str(PROJECT_ROOT / "runs" / "ttcw-replay.toml"), "--judge", "replay:gpt4", "--quiet", env=env).returncode == 0
    env = {"LITJUDGE_RUNS_DIR": str(tmp_path / "b")}
    assert litjudge("run", str(PROJECT_ROOT / "runs" / "ttcw-replay.toml"), "--judge", "replay:claude3-opus",
                    "--quiet", env=env).returncode == 0
    (tmp_path / "a" / "ttcw-replay").rename(tmp_path / "gpt4-run")
    (tmp_path / "b" / "ttcw-replay").rename(tmp_path / "claude-run")
    r = litjudge("compare", str(tmp_path / "gpt4-run"), str(tmp_path / "claude-run"), "--out", str(tmp_path / "cmp"))
    assert r.returncode == 0, r.stderr[-2000:]
    wide = pl.read_csv(tmp_path / "cmp" / "tables" / "kappa_per_test.csv")
    assert {"gpt4-run: replay:gpt4", "claude-run: replay:claude3-opus"} <= set(wide.columns)
    runs_table = pl.read_csv(tmp_path / "cmp" / "tables" / "runs.csv")
    assert runs_table["run"].to_list() == ["gpt4-run", "claude-run"]


def test_compared_runs_of_one_judge_are_two_bars_in_the_overall_chart():
    """`compare` of a judge before and after: the overall chart draws each run's numbers (it drew
    only the last run's, under the judge's bare name), named run: judge in its legend."""
    from litjudge.engine.app.report.panels import ttcw_panels

    overall = pl.DataFrame({"run": ["before", "after"], "judge": ["replay:gpt4"] * 2, "view": ["all"] * 2,
                            "kappa": [0.061, 0.064], "kappa_low": [0.02, 0.0], "kappa_high": [0.11, 0.18],
                            "balanced_accuracy": [0.584, 0.5435], "balanced_accuracy_low": [0.55, 0.5],
                            "balanced_accuracy_high": [0.62, 0.59]})
    panel = next(p for p in ttcw_panels({"overall": overall}) if p.title == "Overall agreement")
    ax = panel.figures[0][1].axes[0]
    heights = sorted(round(bar.get_height(), 4) for bar in ax.patches)
    assert heights == [0.061, 0.064, 0.5435, 0.584], heights
    assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == ["after: replay:gpt4", "before: replay:gpt4"]
    # a missing interval has no whisker (drawn flat at its value, it read as an exact one)
    missing = overall.with_columns(pl.when(pl.col("run") == "after").then(None).otherwise(pl.col("kappa_low"))
                                   .alias("kappa_low"))
    panel = next(p for p in ttcw_panels({"overall": missing}) if p.title == "Overall agreement")
    from matplotlib.container import ErrorbarContainer
    bars = [c for c in panel.figures[0][1].axes[0].containers if isinstance(c, ErrorbarContainer)]
    assert sum(len(c.lines[2][0].get_segments()) for c in bars) == 3


def test_report_of_a_non_run_is_one_clear_line(tmp_path):
    r = litjudge("report", str(tmp_path))
    assert r.returncode == 2 and "not a finished run (no manifest.json)" in r.stderr


def test_a_plugins_run_reported_without_its_plugin_is_refused_before_anything_is_written(finished, tmp_path):
    """A run of a plugin's protocol, reported where the plugin is not installed: one line naming the
    protocol, and no report folder (runs.csv was written before the item viewer looked the protocol up)."""
    import shutil

    from litjudge.engine.core.errors import ConfigError

    run_dir = shutil.copytree(finished, tmp_path / "plugged")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["protocol"]["name"] = manifest["config"]["protocol"] = "toy_gone"
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match=r"unknown protocol 'toy_gone'.*plugin") as refused:
        write_report([run_dir])
    assert "\n" not in str(refused.value) and not (run_dir / "report").exists()


def clicks(page, script: str, tmp_path) -> dict:
    """Drive the report's item viewer in headless Chromium: a page of ours loads the report in a
    frame, runs `script` (real clicks on the viewer's controls: `box` is the viewer's section,
    `out` what to report back) and the DOM it leaves is read."""
    wrapper = tmp_path / "drive.html"
    wrapper.write_text(f"""<!doctype html><html><body><iframe id="f" src="{page.as_uri()}"></iframe><script>
document.getElementById('f').addEventListener('load', () => {{
  const box = document.getElementById('f').contentDocument.querySelector('section.viewer');
  const out = {{}};
  const set = (sel, value) => {{ const x = box.querySelector(sel); x.value = value;
    x.dispatchEvent(new Event(x.type === 'search' ? 'input' : 'change')); }};
  try {{ {script} }} catch (e) {{ out.error = String(e); }}
  document.body.dataset.result = JSON.stringify(out);
}});
</script></body></html>""")
    return result_of(wrapper)


@needs_data
@needs_chromium
def test_item_viewer_filters_and_opens_a_row_in_chromium(replay_run, replay_report, tmp_path):
    """The viewer's counts after each click equal the same filters computed here from the run's
    own tables; a clicked row opens its logged prompt and the raw output."""
    page = replay_report
    verdicts = pl.read_parquet(replay_run / "verdicts.parquet")
    per_item = pl.read_parquet(replay_run / "tables" / "per_item.parquet")
    wrong = per_item.filter((pl.col("status") == "ok") & pl.col("expert_pass").is_not_null()
                            & (pl.col("judge_pass") != pl.col("expert_pass")))
    out = clicks(page, """
      out.all = +box.dataset.shown; out.page = +box.dataset.rowsOnPage;
      box.querySelector('input.disagree').click(); out.disagree = +box.dataset.shown;
      set('select.judge', 'replay:gpt4'); out.gpt4 = +box.dataset.shown;
      set('select.facet', 'test 3'); out.test3 = +box.dataset.shown;
      box.querySelector('input.disagree').click(); set('select.judge', ''); set('select.facet', '');
      set('input.search', 'cliche'); out.search = +box.dataset.shown; set('input.search', '');
      box.querySelector('tbody tr.item').click();
      const pres = box.querySelectorAll('tr.detail pre');
      out.opened = box.querySelectorAll('tr.detail').length;
      out.prompt = pres[0].textContent; out.raw = pres[1].textContent;
      out.item = box.querySelector('tbody tr.item td:nth-child(2)').textContent;
      box.querySelector('button.next').click(); out.page2 = box.querySelector('.count').textContent;
    """, tmp_path)
    assert out["all"] == verdicts.height and out["page"] == 50
    assert out["disagree"] == wrong.height > 0
    assert out["gpt4"] == wrong.filter(pl.col("judge") == "replay:gpt4").height
    assert out["test3"] == wrong.filter((pl.col("judge") == "replay:gpt4") & (pl.col("test") == 3)).height
    logged = {json.loads(line)["key"]: json.loads(line).get("prompt") for line in
              (replay_run / "log.jsonl").read_text().splitlines()}
    hay = [" ".join(str(x or "") for x in row[:-1]).lower() + " " + (logged.get(row[-1]) or "")[:MAX_TEXT].lower()
           for row in verdicts.select("item_id", "label", "raw", "reason", "key").iter_rows()]   # the prompt shown too
    assert out["search"] == sum("cliche" in h for h in hay) > 0
    first = verdicts.row(0, named=True)
    assert out["opened"] == 1 and out["item"] == first["item_id"] and out["raw"] == first["raw"]
    assert out["prompt"] == logged[first["key"]]
    assert "page 2 of" in out["page2"]


@needs_chromium
def test_item_viewer_shows_flips_and_caps_a_large_run(tmp_path):
    """A judge that always picks the first text shown flips on every pair (a in order ab, b in ba):
    the flipped filter keeps every verdict. 6,000 pairs (12,000 verdicts) embed the first 5,000
    with a note, and the page still filters and pages."""
    from litjudge.engine.app.report.viewer import MAX_VERDICTS

    n = 6000
    pairs = [{"pair_id": f"p{i:05d}", "prompt": "Write.", "text_a": f"a {i}", "text_b": f"b {i}", "label": "a"}
             for i in range(n)]
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    (tmp_path / "first.jsonl").write_text("".join(json.dumps({"id": f"{p['pair_id']}/{o}", "response": "A"}) + "\n"
                                                  for p in pairs for o in ("ab", "ba")))
    cfg = tmp_path / "flip.toml"
    cfg.write_text(f'name = "flip"\nprotocol = "pairwise"\njudge = "replay:{tmp_path / "first.jsonl"}"\n'
                   '[dataset]\nloader = "pairs_jsonl"\npath = "pairs.jsonl"\n')
    r = litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(tmp_path / "out")})
    assert r.returncode == 0, r.stderr[-2000:]
    page = write_report([tmp_path / "out" / "flip"])
    assert f"The first {MAX_VERDICTS:,} of {2 * n:,} verdicts are here" in page.read_text()
    out = clicks(page, """
      out.all = +box.dataset.shown;
      box.querySelector('input.flipped').click(); out.flipped = +box.dataset.shown;
      box.querySelector('input.disagree').click(); out.wrong = +box.dataset.shown;
      box.querySelector('input.unparsed').click(); out.unparsed = +box.dataset.shown;
      box.querySelector('input.unparsed').click(); box.querySelector('input.disagree').click();
      box.querySelector('input.flipped').click();
      box.querySelector('tbody tr.item').click();
      out.other = box.querySelector('tr.detail').textContent;
    """, tmp_path)
    assert out["all"] == out["flipped"] == MAX_VERDICTS
    assert out["wrong"] == MAX_VERDICTS // 2 and out["unparsed"] == 0      # order ba picks b: wrong
    assert "Other orders: order ba: A → b (ok)" in out["other"]


# What a hostile story, label or judge name may hold: every way out of a <script> element's data
# (`</script>`, `<!--<script>` puts the parser in its double-escaped state, where the next
# `</script>` no longer ends the element), a CDATA end, an entity and a line separator, plus markup
# that would run script if it ever became an element.
HOSTILE = "<!--<script>x\u2028</script><!--]]>&amp;"
RUNS = "<img src=x onerror=\"document.documentElement.dataset.pwned=1\"><script>document.title='pwned'</script>"


def hostile_run(tmp_path):
    """A classification run whose story, item ids, groups, labels, raw outputs and judge name all hold
    HOSTILE and RUNS (the judge is a replayed file in a folder named with them): 6 items, 4 answered
    with a label, 2 with hostile text (unparsed)."""
    labels = ["Good" + HOSTILE, "Bad" + HOSTILE]
    items = [{"group": f"group {i % 2} {HOSTILE}", "item_id": f"it{i}{HOSTILE}{RUNS}".replace("/", "|"),
              "text": f"story {i} {HOSTILE}{RUNS}", "category": labels[i % 2]} for i in range(6)]
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in items))
    folder = tmp_path / f"judge {HOSTILE}{RUNS}".replace("/", "|")[:120] / "<"     # '/script>' needs a folder
    folder.mkdir(parents=True)
    answers = folder / "script>.jsonl"
    answers.write_text("".join(json.dumps({"id": r["item_id"], "response": labels[i // 2 % 2] if i < 4 else
                                           f"raw {HOSTILE}{RUNS}"}) + "\n" for i, r in enumerate(items)))
    cfg = tmp_path / "hostile.toml"
    cfg.write_text(f'name = "hostile"\nprotocol = "classification"\njudge = {json.dumps("replay:" + str(answers))}\n'
                   f'[dataset]\nloader = "rated_items_jsonl"\npath = {json.dumps(str(tmp_path / "items.jsonl"))}\n'
                   f'[options]\nlabels = {json.dumps(labels)}\ntemplate = "default"\n')
    out = run(load_config(cfg), progress=False)
    return out.run_dir, "replay:" + str(answers), items


@needs_chromium
def test_item_viewer_survives_hostile_text_in_every_field(runs_dir, tmp_path):
    """`<!--<script>`, `</script>`, `<!--` and `]]>` in the story (so the prompt), the raw output, the
    judge's name, the item id, the group and the label: every row is shown, the filters work, a row
    opens with its text as written, and nothing the data holds runs as script. report.md shows the same
    text as text (no element a Markdown viewer would render)."""
    run_dir, judge, items = hostile_run(tmp_path)
    page = write_report([run_dir])
    out = clicks(page, f"""
      const d = box.ownerDocument;
      out.title = d.title; out.pwned = d.documentElement.dataset.pwned || null;
      out.sections = d.querySelectorAll('section').length;
      out.all = +box.dataset.shown; out.rows = box.querySelectorAll('tbody tr.item').length;
      out.judges = [...box.querySelectorAll('select.judge option')].map(o => o.value);
      out.facets = [...box.querySelectorAll('select.facet option')].map(o => o.value);
      set('select.judge', {json.dumps(judge)}); out.judge = +box.dataset.shown;
      set('select.facet', {json.dumps(items[1]['group'])}); out.facet = +box.dataset.shown;
      set('select.judge', ''); set('select.facet', '');
      box.querySelector('input.unparsed').click(); out.unparsed = +box.dataset.shown;
      box.querySelector('input.unparsed').click();
      set('input.search', 'it3'); out.search = +box.dataset.shown; set('input.search', '');
      const last = [...box.querySelectorAll('tbody tr.item')].pop(); last.click();
      const cells = box.querySelectorAll('tbody tr.item')[5].querySelectorAll('td');
      out.item = cells[1].textContent; out.group = cells[2].textContent; out.shownJudge = cells[0].textContent;
      const pres = box.querySelectorAll('tr.detail pre');
      out.prompt = pres[0].textContent; out.raw = pres[1].textContent;
      box.querySelectorAll('tbody tr.item')[0].click();
      out.label = box.querySelector('tr.detail').textContent;
      out.pwnedAfter = d.documentElement.dataset.pwned || null; out.titleAfter = d.title;
      out.scripts = d.querySelectorAll('script').length; out.images = d.querySelectorAll('img:not(.plot)').length;
    """, tmp_path)
    assert out["title"] == out["titleAfter"] == "litjudge report: hostile" and out["pwned"] is out["pwnedAfter"] is None
    assert out["scripts"] == 3 and out["images"] == 0              # the viewer's data and code, the plots' check
    assert out["all"] == out["rows"] == 6 and out["sections"] >= 4
    assert out["judges"] == ["", judge] and out["facets"] == ["", items[0]["group"], items[1]["group"]]
    assert out["judge"] == 6 and out["facet"] == 3 and out["unparsed"] == 2 and out["search"] == 1
    assert out["item"] == items[5]["item_id"] and out["group"] == items[1]["group"] and out["shownJudge"] == judge
    assert items[5]["text"] in out["prompt"] and out["raw"] == f"raw {HOSTILE}{RUNS}"
    assert f"Parsed: Good{HOSTILE} → Good{HOSTILE}" in out["label"]
    md = (page.parent / "report.md").read_text()
    assert "<" not in md and "&lt;!--&lt;script&gt;" in md
    screenshot(page, tmp_path / "hostile.png", width=1280, height=3200)      # down to the viewer's rows


def layout(page, script: str, tmp_path, width: int = 1400) -> dict:
    """The report laid out at `width` CSS pixels (a frame of that size in headless Chromium): `script`
    measures it (`d` is the report's document, `out` what to report back)."""
    wrapper = tmp_path / "layout.html"
    wrapper.write_text(f"""<!doctype html><html><body style="margin:0"><iframe id="f" src="{page.as_uri()}"
style="width:{width}px;height:3000px;border:0"></iframe><script>
document.getElementById('f').addEventListener('load', () => {{
  const d = document.getElementById('f').contentDocument, out = {{}};
  try {{ {script} }} catch (e) {{ out.error = String(e); }}
  document.body.dataset.result = JSON.stringify(out);
}});
</script></body></html>""")
    return result_of(wrapper, {"width": width + 40, "height": 3100})


def result_of(wrapper, viewport: dict | None = None) -> dict:
    """What a page of ours reports in `body[data-result]` once its frame has loaded and its script
    ran (the frame is read across file:// URLs)."""
    out = json.loads(page_value(wrapper.as_uri(), "document.body.dataset.result !== undefined",
                                "document.body.dataset.result", viewport, file_access=True))
    assert "error" not in out, out
    return out


def two_judge_pairs_run(tmp_path):
    """A pairwise run of two replayed judges over 12 pairs: one always picks the first text shown
    (swap-flip and first-position rates of 1, the tallest bars a bias chart draws), the other the
    humans' choice."""
    pairs = [{"pair_id": f"p{i:02d}", "prompt": "Write.", "text_a": f"a {i}" * (1 + i % 3), "text_b": f"b {i}",
              "label": "a" if i % 2 else "b"} for i in range(12)]
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    first, right = tmp_path / "always-the-first-text-shown-by-a-long-named-judge.jsonl", tmp_path / "right.jsonl"
    first.write_text("".join(json.dumps({"id": f"{p['pair_id']}/{o}", "response": "A"}) + "\n"
                             for p in pairs for o in ("ab", "ba")))
    pick = {("a", "ab"): "A", ("a", "ba"): "B", ("b", "ab"): "B", ("b", "ba"): "A"}
    right.write_text("".join(json.dumps({"id": f"{p['pair_id']}/{o}", "response": pick[p["label"], o]}) + "\n"
                             for p in pairs for o in ("ab", "ba")))
    cfg = tmp_path / "two.toml"
    cfg.write_text(f'name = "two"\nprotocol = "pairwise"\njudge = ["replay:{first}", "replay:{right}"]\n'
                   '[dataset]\nloader = "pairs_jsonl"\npath = "pairs.jsonl"\n')
    return run(load_config(cfg), progress=False).run_dir


@needs_chromium
def test_the_report_fits_a_1400_px_page_and_shows_no_empty_column(runs_dir, tmp_path):
    """Every table within a 1400-px page (the runs table, some 30 fields per judge, ran off it: it is
    now shown one column per judge), the bias chart's legend beside the bars rather than over the
    tallest ones, and no "test / group" column in the viewer of a protocol that has neither."""
    from litjudge.engine.app.report.page import build_panels
    from litjudge.engine.app.runs import load_run

    run_dir = two_judge_pairs_run(tmp_path)
    bias = next(fig for p in build_panels([load_run(run_dir)]) for name, fig in p.figures if name == "bias")
    bias.canvas.draw()
    renderer = bias.canvas.get_renderer()
    legend = bias.axes[0].get_legend().get_window_extent(renderer)
    bars = [b.get_window_extent(renderer) for b in bias.axes[0].patches]
    assert len(bars) == 10 and not any(legend.overlaps(b) for b in bars)
    assert bias.bbox.contains(legend.x1 - 1, legend.y0 + 1)                       # and inside the figure
    page = write_report([run_dir])
    out = layout(page, """
      const page = d.body.getBoundingClientRect();
      out.page = [page.left, page.right]; out.scroll = d.documentElement.scrollWidth;
      out.wide = [...d.querySelectorAll('table')].filter(t => t.getBoundingClientRect().right > page.right + 1)
        .map(t => t.previousElementSibling ? t.previousElementSibling.textContent : '?');
      out.runs = [...d.querySelectorAll('h3')].find(h => h.textContent === 'runs').nextElementSibling
        .querySelector('tr').textContent;
      const box = d.querySelector('section.viewer');
      out.head = [...box.querySelectorAll('thead th')].map(th => th.textContent);
      out.cells = box.querySelector('tbody tr.item').querySelectorAll('td').length;
      out.facet = box.querySelector('select.facet').closest('label') === null && box.querySelector('select.facet').hidden;
    """, tmp_path)
    assert out["wide"] == [] and out["scroll"] <= 1400, out
    assert out["runs"] == f"fieldtwo / replay:{tmp_path / 'always-the-first-text-shown-by-a-long-named-judge.jsonl'}" \
                          f"two / replay:{tmp_path / 'right.jsonl'}", out["runs"]
    assert "test / group" not in out["head"] and out["cells"] == len(out["head"]) == 7 and out["facet"], out
    screenshot(page, tmp_path / "pairs-1400.png", width=1400, height=2600)


def test_a_markdown_table_cut_short_says_how_many_rows_are_in_the_csv():
    """report.md cut the ppi and per_test tables at 60 rows without a word (the HTML says it)."""
    import polars as pl

    from litjudge.engine.app.report.page import _md_table
    md = _md_table(pl.DataFrame({"x": list(range(75))}))
    assert md.count("\n| ") == 60 and md.endswith("\n\n15 more rows in the CSV.")
    assert "more rows" not in _md_table(pl.DataFrame({"x": list(range(60))}))


@needs_chromium
def test_the_viewer_wraps_a_long_line_searches_prompts_and_shows_bidi_controls(runs_dir, tmp_path):
    """A story of one 20,000-character line made the opened row 41,588 px wide; the search found
    nothing that only the prompt held; U+202E in an id reversed how it read. Now the row wraps
    within the page, the search reads the prompts, and each bidi control shows as its code point."""
    pairs = [{"pair_id": f"p{i}\u202egpj.exe", "prompt": "Write.", "text_a": ("needle " if i == 1 else "") + "x" * 20000,
              "text_b": f"b {i}", "label": "a"} for i in range(3)]
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    rec = tmp_path / "rec\u202elnosj.jsonl"                  # the judge's name too, in its select
    rec.write_text("".join(json.dumps({"id": f"{p['pair_id']}/{o}", "response": "A"}) + "\n"
                           for p in pairs for o in ("ab", "ba")))
    cfg = tmp_path / "long.toml"
    cfg.write_text(f'name = "long"\nprotocol = "pairwise"\njudge = "replay:{rec}"\n'
                   '[dataset]\nloader = "pairs_jsonl"\npath = "pairs.jsonl"\n')
    page = write_report([run(load_config(cfg), progress=False).run_dir])
    out = layout(page, """
      const box = d.querySelector('section.viewer');
      const set = (sel, value) => { const x = box.querySelector(sel); x.value = value;
        x.dispatchEvent(new Event(x.type === 'search' ? 'input' : 'change')); };
      box.querySelector('tbody tr.item').click();
      out.scroll = d.documentElement.scrollWidth; out.pre = box.querySelector('tr.detail pre').scrollWidth;
      out.item = box.querySelector('tbody tr.item').querySelectorAll('td')[1].textContent;
      set('input.search', 'needle'); out.found = +box.dataset.shown;
      set('input.search', 'nowhere at all'); out.none = +box.dataset.shown;
      out.judge = [...box.querySelectorAll('select.judge option')].map(o => o.textContent).pop();
    """, tmp_path)
    assert out["scroll"] <= 1400 and out["pre"] <= 1400, out
    assert out["item"] == "p0[U+202E]gpj.exe" and out["found"] == 2 and out["none"] == 0, out
    assert out["judge"].endswith("rec[U+202E]lnosj.jsonl"), out
    assert "\u202e" not in (page.parent / "report.md").read_text()


def test_a_folder_with_a_report_html_of_someone_elses_is_not_cleared(finished, tmp_path):
    """A hostile pass: any file named report.html made --out a report folder, and the report deleted
    the folder's other PNGs and tables/*.csv. Only litjudge's own page (or its mark file) does now."""
    from litjudge.engine.core.errors import ConfigError

    mine = tmp_path / "mine"
    (mine / "tables").mkdir(parents=True)
    (mine / "report.html").write_text("<html>my page</html>")
    (mine / "holiday.png").write_bytes(b"png")
    (mine / "tables" / "my-data.csv").write_text("a\n1\n")
    with pytest.raises(ConfigError, match="a folder with other files, not a report's"):
        write_report([finished], mine)
    assert sorted(str(p.relative_to(mine)) for p in mine.rglob("*")) == [
        "holiday.png", "report.html", "tables", "tables/my-data.csv"]
    # a report litjudge wrote before the mark file existed is still its own: its pages rewritten,
    # its other files kept (which of them are litjudge's, nothing says)
    old = tmp_path / "old"
    write_report([finished], old)
    (old / ".litjudge-report").unlink()
    (old / "stale.png").write_bytes(b"png")
    (old / "report.md").write_text("an old report.md")
    write_report([finished], old)
    assert (old / "stale.png").exists() and (old / "report.md").read_text() != "an old report.md"


def test_a_report_deletes_only_the_files_it_listed_and_writes_through_no_link(finished, tmp_path):
    """A hostile pass: a report deleted every *.png and tables/*.csv of a folder it took for its own
    (a notes folder holding a copy of a litjudge page; the user's figure added to RUN/report), and
    through a `tables` link it deleted and overwrote the user's files where the link pointed. The
    mark lists what the report writes; the next one deletes those alone, and a link is refused."""
    from litjudge.engine.core.errors import ConfigError

    first = write_report([finished], tmp_path / "first").parent
    listed = (first / ".litjudge-report").read_text().splitlines()
    plot = next(n for n in listed if n.endswith(".png"))
    table = next(n for n in listed if n.startswith("tables/"))
    assert listed[:2] == ["report.html", "report.md"] and all((first / n).is_file() for n in listed)
    # the user's own files beside a report, an earlier report's file, names that are no report's
    (first / "my-annotated-figure.png").write_bytes(b"mine")
    (first / "tables" / "my-notes.csv").write_text("mine\n")
    (first / "gone-plot.png").write_bytes(b"an earlier report's")
    (tmp_path / "outside.csv").write_text("outside\n")
    with (first / ".litjudge-report").open("a") as mark:
        mark.write("gone-plot.png\n../outside.csv\n/etc/hostname\ntables/../../outside.csv\n")
    write_report([finished], first)
    assert (first / "my-annotated-figure.png").read_bytes() == b"mine"
    assert (first / "tables" / "my-notes.csv").read_text() == "mine\n"
    assert not (first / "gone-plot.png").exists() and (tmp_path / "outside.csv").read_text() == "outside\n"
    assert (first / ".litjudge-report").read_text().splitlines() == listed
    # a notes folder holding a copy of a litjudge page: the page is rewritten, the user's files kept
    notes = tmp_path / "notes"
    (notes / "tables").mkdir(parents=True)
    shutil.copy(first / "report.html", notes / "report.html")
    (notes / "fig1.png").write_bytes(b"mine")
    (notes / "tables" / "my-data.csv").write_text("mine\n")
    write_report([finished], notes)
    assert (notes / "fig1.png").read_bytes() == b"mine" and (notes / "tables" / "my-data.csv").read_text() == "mine\n"
    # a link where the report writes: refused in one line before anything is deleted or written
    theirs = tmp_path / "userdata"
    theirs.mkdir()
    (theirs / "precious.csv").write_text("precious\n")
    (theirs / table.removeprefix("tables/")).write_text("theirs\n")
    linked = shutil.copytree(first, tmp_path / "linked", symlinks=True)
    shutil.rmtree(linked / "tables")
    (linked / "tables").symlink_to(theirs)
    with pytest.raises(ConfigError, match=r"^--out .*linked: tables is a link \(to .*userdata\): a report writes its "
                                          r"files into its own folder; remove the link or give a new folder$"):
        write_report([finished], linked)
    assert sorted(p.name for p in theirs.iterdir()) == ["precious.csv", table.removeprefix("tables/")]
    assert (theirs / table.removeprefix("tables/")).read_text() == "theirs\n" and (linked / "report.html").exists()
    (linked / "tables").unlink()
    (linked / plot).unlink()
    (linked / plot).symlink_to(theirs / "precious.csv")
    (linked / ".litjudge-report").write_text("report.html\nreport.md\n")     # a plot it did not list
    with pytest.raises(ConfigError, match=f"{plot} is a link"):
        write_report([finished], linked)
    assert (theirs / "precious.csv").read_text() == "precious\n"


def test_a_run_without_its_verdicts_file_is_one_line_not_a_report_without_its_viewer(finished, tmp_path):
    """A hostile pass: with verdicts.parquet deleted the report left the item viewer out without a
    word (report.md still said it was in report.html); it is the missing table's line now, and
    reparse rebuilds it."""
    import shutil

    from litjudge.engine.app.reparse import reparse
    from litjudge.engine.core.errors import StoreError

    run_dir = shutil.copytree(finished, tmp_path / "r")
    (run_dir / "verdicts.parquet").unlink()
    with pytest.raises(StoreError, match=r"verdicts.parquet is missing though the run wrote it; `litjudge reparse"):
        write_report([run_dir])
    assert not (run_dir / "report").exists()
    reparse(run_dir)
    assert "section class='viewer'" in write_report([run_dir]).read_text()


def test_a_hand_edited_table_is_one_line_not_an_internal_error(finished, tmp_path):
    """A hostile pass: a column dropped from a stored table, or cast to text, crashed the report as
    "internal error ... please report it" (a KeyError in a chart, matplotlib's TypeError). The
    manifest records each table's columns; an edited one is the deleted table's line. A run written
    before the manifest kept them is read as before."""
    import shutil

    from litjudge.engine.core.errors import StoreError

    overall = pl.read_parquet(finished / "tables" / "overall.parquet")
    column = next(c for c in ("kappa", "balanced_accuracy") if c in overall.columns)
    for name, edit, said in (("dropped", lambda t: t.drop(column), f"lacks column {column!r}, which the run wrote"),
                             ("text", lambda t: t.with_columns(pl.col(column).cast(pl.Utf8)),
                              f"column {column!r} holds text values where the run wrote number")):
        run_dir = shutil.copytree(finished, tmp_path / name)
        edit(overall).write_parquet(run_dir / "tables" / "overall.parquet")
        with pytest.raises(StoreError, match=re.escape(f"tables/overall.parquet {said}") + ".*`litjudge reparse"):
            write_report([run_dir])
        assert not (run_dir / "report").exists()
    old = shutil.copytree(finished, tmp_path / "old")
    manifest = json.loads((old / "manifest.json").read_text())
    assert set(manifest["table_columns"]) == set(manifest["tables"])
    del manifest["table_columns"]
    (old / "manifest.json").write_text(json.dumps(manifest))
    assert write_report([old]).exists()
