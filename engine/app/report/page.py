"""`litjudge report RUN...` / `litjudge compare RUN_A RUN_B ...`: one self-contained HTML page
(plots embedded as PNG data), the same content as Markdown (plots as PNG files beside it), and
every table as CSV. Tables come from the runs' stored tables, so the report shows exactly the
numbers the run wrote."""
from __future__ import annotations

import base64
import io
from pathlib import Path

import polars as pl

from ...core.errors import ConfigError
from ..outputs import STALE, csv_safe, write_text
from ..runs import LoadedRun, load_run, task_folders, unique_labels
from ..summary import figures, history, totals
from .extras import extra_panels, protocol_panels
from .folder import OPENING, prepare_report_folder
from .panels import Panel
from .viewer import escaped, viewer_html

# The page marks itself once every plot has decoded (the browser test reads this attribute).
_CHECK = """<script>
window.addEventListener('load', () => {
  const imgs = [...document.querySelectorAll('img.plot')];
  document.body.dataset.plots = imgs.length;
  document.body.dataset.plotsRendered = imgs.filter(i => i.complete && i.naturalWidth > 0).length;
});
</script>"""
_STYLE = """<style>
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}
table{border-collapse:collapse;font-size:12px;margin:.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#f2f2f2}
td.s{text-align:left}.note{color:#555;font-size:13px}img.plot{max-width:100%;margin:.3em 0}
td.s{overflow-wrap:anywhere}table{max-width:100%}
section{border-top:2px solid #eee;padding-top:.5em}
</style>"""


def header(runs: list[LoadedRun]) -> pl.DataFrame:
    """One row per judge of each run: the latest invocation's figures and, where the run folder was
    run more than once, the totals of all its invocations (RUN/history.jsonl); an ensemble's row per
    member run."""
    rows = []
    for r in runs:
        m = r.manifest
        total = totals(r.path)
        invocations = len(history(r.path))
        for f, j in zip(figures(m), m.judges, strict=True):
            counts = m.verdicts_by_judge.get(j["judge"])
            every = total.get(f.judge)
            rows.append({"run": r.name, "judge": j["judge"], "protocol": m.protocol,
                         "dataset": m.dataset, "mode": m.mode, "backend": j.get("backend"),
                         "requests": f.requests, "distinct": f.distinct, "generated": f.generated,
                         "verdicts_per_s": f.verdicts_per_s, "prefix_cache_hit": f.cache_hit,
                         "invocations": invocations or 1,
                         "generated_all": every.generated if every else f.generated,
                         "verdicts_per_s_all": every.verdicts_per_s if every else f.verdicts_per_s,
                         "prefix_cache_hit_all": every.cache_hit if every else f.cache_hit,
                         "verdicts": counts.rows if counts else None, "unparsed": counts.unparsed if counts else None,
                         "missing": counts.missing if counts else None, "missing_policy": m.missing_policy,
                         "dtype": j.get("dtype"), "dtype_why": j.get("dtype_reason"),
                         "onednn_fallback": j.get("onednn_fallback"),
                         "vllm": m.vllm, "git": (m.git_commit or "")[:12], "machine": m.machine_name})
        if not m.judges:            # an ensemble judges nothing itself: its member runs (an empty table was drawn)
            rows += [{"run": r.name, "member_run": str(member), "protocol": m.protocol, "git": (m.git_commit or "")[:12],
                      "machine": m.machine_name} for member in m.raw.get("runs", [])]
    return pl.DataFrame(rows)


def warnings_of(runs: list[LoadedRun]) -> pl.DataFrame:
    """One row per warning of each run (a constant judge, answers left unread, labels absent)."""
    return pl.DataFrame([{"run": r.name, "warning": w} for r in runs for w in r.manifest.warnings],
                        schema={"run": pl.Utf8, "warning": pl.Utf8})


def combined_tables(runs: list[LoadedRun]) -> dict[str, pl.DataFrame]:
    """Each table name across runs, with a `run` column (several runs: `litjudge compare`)."""
    names = sorted({n for r in runs for n in r.tables})
    out = {}
    for name in names:
        frames = [r.tables[name].with_columns(pl.lit(r.name).alias("run")) if len(runs) > 1 else r.tables[name]
                  for r in runs if name in r.tables]
        out[name] = pl.concat(frames, how="diagonal_relaxed") if len(frames) > 1 else frames[0]
    return out


def build_panels(runs: list[LoadedRun]) -> list[Panel]:
    protocols = {r.manifest.protocol for r in runs}
    if len(protocols) > 1:
        raise ConfigError(f"runs of different protocols cannot be compared panel by panel: {sorted(protocols)}")
    protocol = protocols.pop()
    panels = [Panel("Runs", "One row per judge of each run: the latest invocation's figures (from its manifest) and, "
                            "with *_all, the totals of every invocation of the run folder (history.jsonl): a re-run "
                            "that found every verdict stored generates nothing and does not hide the run that did.",
                    [("runs", header(runs))])]
    said = warnings_of(runs)
    if said.height:
        panels.append(Panel("Warnings", "What each run warned of at its end (its manifest's warnings, as the console "
                                        "printed them and Result.problems() returns them).", [("warnings", said)]))
    tables = combined_tables(runs)
    panels += protocol_panels(protocol, tables)
    panels += extra_panels(tables)
    if "skipped" in tables and tables["skipped"].height:
        panels.append(Panel("Skipped items", "Items not judged, and why.", [("skipped", tables["skipped"])]))
    return panels


def _png(fig) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def _fmt(v) -> str:
    if isinstance(v, float):
        return "" if v != v else f"{v:.4g}"
    return "" if v is None else str(v)


def by_field(df: pl.DataFrame, keys: tuple[str, ...] = ("run", "judge")) -> pl.DataFrame:
    """A wide table shown one column per row (named by its `keys`) and one row per field: the runs
    table has some 30 fields per judge, far wider than a page read the usual way. (Its CSV keeps
    the usual layout.)"""
    names = [" / ".join(str(row[k]) for k in keys if k in df.columns) for row in df.iter_rows(named=True)]
    if not df.height or len(set(names)) != len(names) or "field" in names:
        return df                               # rows the keys do not tell apart: shown as they are
    fields = [c for c in df.columns if c not in keys]
    return pl.DataFrame({"field": fields, **{name: [_fmt(df[f][i]) for f in fields] for i, name in enumerate(names)}})


def _html_table(df: pl.DataFrame, max_rows: int = 30) -> str:
    head = "".join(f"<th>{escaped(c)}</th>" for c in df.columns)
    body = []
    for row in df.head(max_rows).iter_rows():
        cells = "".join(f"<td class='s'>{escaped(_fmt(v))}</td>" if isinstance(v, str)
                        else f"<td>{escaped(_fmt(v))}</td>"
                        for v in row)
        body.append(f"<tr>{cells}</tr>")
    more = f"<p class='note'>{df.height - max_rows} more rows in the CSV.</p>" if df.height > max_rows else ""
    return f"<table><tr>{head}</tr>{''.join(body)}</table>{more}"


def _md(text: str) -> str:
    """Data as Markdown text, never markup: Markdown renders raw HTML (a judge named `<svg onload=...>`
    would be an element), so `&`, `<` and `>` are written as entities and `|` cannot end a cell."""
    return escaped(text, quote=False).replace("|", "&#124;")


def _md_table(df: pl.DataFrame, max_rows: int = 60) -> str:
    lines = ["| " + " | ".join(_md(c) for c in df.columns) + " |", "|" + "---|" * df.width]
    lines += ["| " + " | ".join(_md(_fmt(v)) for v in row) + " |" for row in df.head(max_rows).iter_rows()]
    if df.height > max_rows:                           # as the HTML says it: a cut table is never read as whole
        lines.append(f"\n{df.height - max_rows} more rows in the CSV.")
    return "\n".join(lines)


def write_report(run_dirs: list[Path], out: Path | None = None) -> Path:
    """Write report.html, report.md (+ PNGs) and tables/*.csv; return the HTML path. A run of
    several tasks stands for its task folders, side by side (the AUT study's two designs). Text in
    the charts is never mathtext: a category named "$^^$" (a label from the user's data) crashed
    the report, "x_$y$" was drawn as maths; the setting holds for this call only."""
    import matplotlib.pyplot as plt

    with plt.rc_context({"text.parse_math": False}):
        return _write_report(run_dirs, out)


def _write_report(run_dirs: list[Path], out: Path | None) -> Path:
    runs = unique_labels([load_run(d) for d in task_folders([Path(d) for d in run_dirs])])
    out = Path(out) if out else (Path(run_dirs[0]) / "report" if len(run_dirs) == 1 else
                                 runs[0].path.parent / ("compare-" + "-vs-".join(r.path.name for r in runs)))
    panels = build_panels(runs)                  # every check (same protocol...) before anything is written
    viewer = viewer_html(runs)                   # (a plugin's run without its plugin: refused here, not half-written)
    prepare_report_folder(out, [*(f"{name}.png" for p in panels for name, _ in p.figures),
                                *(f"tables/{name}.csv" for p in panels for name, _ in p.tables)])
    title = (f"litjudge report: {runs[0].name}" if len(runs) == 1 else
             "litjudge compare: " + ", ".join(r.name for r in runs))
    page = [f"{OPENING}{escaped(title)}</title>{_STYLE}</head><body>",
            f"<h1>{escaped(title)}</h1>"]
    md = [f"# {_md(title)}", ""]
    for panel in panels:
        page.append(f"<section><h2>{escaped(panel.title)}</h2>")
        md += [f"## {_md(panel.title)}", ""]
        if panel.note:
            page.append(f"<p class='note'>{escaped(panel.note)}</p>")
            md += [_md(panel.note), ""]
        for name, fig in panel.figures:
            data = _png(fig)
            (out / f"{name}.png").write_bytes(data)
            page.append(f"<img class='plot' alt='{escaped(name)}' src='data:image/png;base64,"
                        f"{base64.b64encode(data).decode()}'>")
            md += [f"![{name}]({name}.png)", ""]
        for name, df in panel.tables:
            csv_safe(df).write_csv(out / "tables" / f"{name}.csv")
            shown = by_field(df) if name == "runs" else df
            page.append(f"<h3>{escaped(name)}</h3>{_html_table(shown)}")
            md += [f"### {_md(name)}", "", _md_table(shown), ""]
        page.append("</section>")
    page.append(viewer)
    md += ["## Items", "", "The item viewer (filters, prompts, raw outputs, both orders) is in report.html.", ""]
    page.append(_CHECK + "</body></html>")
    write_text(out / "report.html", "\n".join(page))
    write_text(out / "report.md", "\n".join(md))
    (out / STALE).unlink(missing_ok=True)
    return out / "report.html"

