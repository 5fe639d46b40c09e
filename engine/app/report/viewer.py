"""The report's item viewer: every verdict of a run in one table you can filter (disagrees with the
humans, flipped between orders, unparsed, by judge, by test or group, free text), each row opening
the prompt, the raw output, the parsed label with its probability, and the other orders' verdicts
of the same item. Plain HTML and a little JavaScript inside the one report file: no server, works
offline. The verdicts come from the run's verdicts.parquet, the humans' answers from the protocol
(`Protocol.human_view`), the prompts from log.jsonl (where the run logged them)."""
from __future__ import annotations

import html
import json
import re

import polars as pl

from litjudge.judges import PROTOCOLS

from ..outputs import read_logged_prompts, read_table
from ..runs import LoadedRun

MAX_VERDICTS = 5000         # embedded per run; the page says how many more the parquet file holds
MAX_TEXT = 6000             # characters of one prompt or raw output shown; the rest is in log.jsonl
PAGE = 50                   # rows per page

_STYLE = """<style>
.viewer .controls{display:flex;flex-wrap:wrap;gap:.4em 1.2em;align-items:center;font-size:13px;margin:.4em 0}
.viewer table{width:100%}.viewer td{text-align:left;vertical-align:top}.viewer tr.item{cursor:pointer}
.viewer th{text-align:left}.viewer tr.item:hover{background:#f6f8ff}.viewer tr.no td.ans{color:#b00020;font-weight:600}
.viewer tr.yes td.ans{color:#08660b}.viewer .flip{color:#a15c00}.viewer td{overflow-wrap:anywhere}
.viewer pre{white-space:pre-wrap;overflow-wrap:anywhere;max-height:22em;
overflow:auto;background:#fafafa;border:1px solid #ddd;padding:.4em;font-size:12px;margin:.2em 0 .6em}
.viewer .detail td{background:#fcfcfc}.viewer .pager button{margin:0 .3em}.viewer .none{color:#777;font-style:italic}
.viewer select{max-width:32em}
</style>"""

# Filters and paging in the browser; `data-shown` on the section is the filtered count, what the
# browser test and anyone scripting the page read.
_SCRIPT = """<script>
(() => {
  for (const box of document.querySelectorAll('section.viewer')) {
    const data = JSON.parse(box.querySelector('script.viewer-data').textContent);
    const R = data.rows, C = data.columns, col = Object.fromEntries(C.map((c, i) => [c, i]));
    const get = (r, c) => r[col[c]];
    const vis = s => String(s ?? '')
      .replace(/[__BIDI__]/g, c => `[U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0')}]`);
    const el = s => box.querySelector(s), body = el('tbody'), esc = s => vis(s)
      .replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
    const prompts = data.prompts.map(p => String(p).toLowerCase());     // searched as well as the row's fields
    const byUnit = {};
    R.forEach((r, i) => { const u = get(r, 'judge') + '\\u0000' + get(r, 'item') + '\\u0000' + get(r, 'repeat');
                          (byUnit[u] = byUnit[u] || []).push(i); });
    let page = 0, shown = [], open = new Set();
    const faceted = data.facets.length > 0, width = faceted ? 8 : 7;   // no test or group: no such column
    const fill = (sel, values) => values.forEach(v => sel.add(new Option(vis(v), v)));
    fill(el('select.judge'), data.judges); fill(el('select.facet'), data.facets);
    function keep(r) {
      if (el('input.disagree').checked && get(r, 'agrees') !== false) return false;
      if (el('input.flipped').checked && !get(r, 'flipped')) return false;
      if (el('input.unparsed').checked && get(r, 'status') === 'ok') return false;
      const j = el('select.judge').value, f = el('select.facet').value, q = el('input.search').value.toLowerCase();
      if (j && get(r, 'judge') !== j) return false;
      if (f && get(r, 'facet') !== f) return false;
      if (q && !['item', 'label', 'answer', 'truth', 'raw', 'reason'].some(c => String(get(r, c) ?? '')
            .toLowerCase().includes(q)) && !(get(r, 'prompt') !== null && prompts[get(r, 'prompt')].includes(q)))
        return false;
      return true;
    }
    function detail(i) {
      const r = R[i], u = get(r, 'judge') + '\\u0000' + get(r, 'item') + '\\u0000' + get(r, 'repeat');
      const others = byUnit[u].filter(k => k !== i).map(k => R[k]);
      const prompt = get(r, 'prompt') === null ? '(the run did not log its prompts)' : data.prompts[get(r, 'prompt')];
      const p = get(r, 'probability'), raw = get(r, 'raw');
      return `<tr class="detail"><td colspan="${width}"><b>Prompt</b><pre>${esc(prompt)}</pre>` +
        `<b>Raw output</b>` + (raw || !data.no_text ? `<pre>${esc(raw)}</pre>`
                                                   : `<p class="none">${esc(data.no_text)}</p>`) +
        `<b>Parsed</b>: ${esc(get(r, 'label'))} &rarr; ${esc(get(r, 'answer'))}` +
        (p === null ? '' : ` (p = ${p.toFixed(3)}${get(r, 'distribution') ? '; ' + esc(get(r, 'distribution')) : ''})`) +
        (get(r, 'reason') ? ` &middot; ${esc(get(r, 'reason'))}` : '') +
        `<br><b>Other orders</b>: ` + (others.length ? others.map(o => `order ${esc(get(o, 'order'))}: ` +
          `${esc(get(o, 'label'))} &rarr; ${esc(get(o, 'answer'))} (${esc(get(o, 'status'))})`).join('; ') : 'none') +
        `</td></tr>`;
    }
    function draw() {
      const last = Math.max(0, Math.ceil(shown.length / data.page) - 1);
      page = Math.min(page, last);
      const rows = shown.slice(page * data.page, (page + 1) * data.page);
      body.innerHTML = rows.map(i => { const r = R[i], a = get(r, 'agrees');
        return `<tr class="item ${a === true ? 'yes' : a === false ? 'no' : ''}" data-row="${i}">` +
          `<td>${esc(get(r, 'judge'))}</td><td>${esc(get(r, 'item'))}</td>` +
          (faceted ? `<td>${esc(get(r, 'facet'))}</td>` : '') +
          `<td>${esc(get(r, 'order'))}</td><td class="ans">${esc(get(r, 'answer'))}</td><td>${esc(get(r, 'truth'))}</td>` +
          `<td>${esc(get(r, 'status'))}${get(r, 'flipped') ? ' <span class="flip">flipped</span>' : ''}</td>` +
          `<td>${get(r, 'raw') || !data.no_text ? esc(String(get(r, 'raw') ?? '').slice(0, 80)) :
                 `<span class="none">${esc(get(r, 'distribution') ?? '')}</span>`}</td></tr>` +
          (open.has(i) ? detail(i) : ''); }).join('');
      box.dataset.shown = shown.length;
      box.dataset.rowsOnPage = rows.length;
      el('.count').textContent = `${shown.length} of ${R.length} verdicts` + (shown.length ?
        `; page ${page + 1} of ${last + 1}` : '');
    }
    function refilter() { shown = R.map((r, i) => i).filter(i => keep(R[i])); page = 0; draw(); }
    box.querySelectorAll('input, select').forEach(x => x.addEventListener(x.type === 'search' ? 'input' : 'change',
                                                                          refilter));
    el('button.prev').addEventListener('click', () => { page = Math.max(0, page - 1); draw(); });
    el('button.next').addEventListener('click', () => { page += 1; draw(); });
    body.addEventListener('click', e => {
      const tr = e.target.closest('tr.item'); if (!tr) return;
      const i = +tr.dataset.row; open.has(i) ? open.delete(i) : open.add(i); draw();
    });
    refilter();
  }
})();
</script>"""


def viewer_frame(run: LoadedRun) -> pl.DataFrame:
    """One row per verdict with what the viewer shows: item (the unit both orders share), facet
    (test or group), order, the answer, the humans' answer and agreement, flipped (another order
    of the same item, judge and repeat answered differently), the label's probability."""
    verdicts = read_table(run.path / "verdicts.parquet")
    protocol = PROTOCOLS.get(run.manifest.protocol)()
    v = protocol.viewed(verdicts, run.tables)
    order = pl.col("order").cast(pl.Utf8) if "order" in v.columns else pl.lit("")
    facet = (pl.lit("test ") + pl.col("test").cast(pl.Utf8)) if "test" in v.columns else \
        pl.col("question").cast(pl.Utf8) if "question" in v.columns else \
        pl.col("group").cast(pl.Utf8) if "group" in v.columns else pl.lit("")
    v = v.with_columns(order.fill_null("").alias("order"), facet.fill_null("").alias("facet"),
                       pl.col("repeat").fill_null(0) if "repeat" in v.columns else pl.lit(0).alias("repeat"))
    unit = pl.when((pl.col("order") != "") & pl.col("item_id").str.ends_with("/" + pl.col("order"))).then(
        pl.col("item_id").str.slice(0, pl.col("item_id").str.len_chars() - pl.col("order").str.len_chars() - 1)
    ).otherwise(pl.col("item_id"))
    answer = pl.col("value").map_elements(_text, return_dtype=pl.Utf8) if v.schema["value"] != pl.Utf8 else pl.col("value")
    v = v.with_columns(unit.alias("unit"), *([] if "answer" in v.columns else [answer.alias("answer")]),
                       *_probability(v))
    answered = v.filter(pl.col("status") == "ok").group_by(["judge", "unit", "repeat"]).agg(
        (pl.col("answer").n_unique() > 1).alias("flipped"), pl.col("order").n_unique().alias("orders"))
    v = v.join(answered.filter(pl.col("orders") > 1).drop("orders"), on=["judge", "unit", "repeat"], how="left")
    return v.with_columns(pl.col("flipped").fill_null(False))


def _probability(v: pl.DataFrame) -> list[pl.Series]:
    """Each verdict's P(its label) and its labels' probabilities as text: distribution mode's, else
    those analyze mode read after the analysis (said so)."""
    def column(name: str) -> list:
        return v[name].to_list() if isinstance(v.schema.get(name), pl.Struct) else [None] * v.height

    probs, texts = [], []
    for label, read, after in zip(v["label"].to_list(), column("distribution"), column("analysis_distribution"),
                                  strict=True):
        dist = {k: p for k, p in (read or after or {}).items() if p is not None}
        probs.append(dist.get(label) if label is not None else None)
        text = " · ".join(f"{k} {p:.2f}" for k, p in sorted(dist.items(), key=lambda kv: -kv[1]))
        texts.append(None if not text else text if read else f"after the analysis: {text}")
    return [pl.Series("probability", probs, pl.Float64), pl.Series("distribution", texts, pl.Utf8)]


def _text(value) -> str | None:
    return None if value is None else value if isinstance(value, str) else json.dumps(value, default=str)


def _natural(text: str) -> list:
    """'test 2' before 'test 10'."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _clip(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_TEXT:
        return text
    return text[:MAX_TEXT] + f"\n… ({len(text) - MAX_TEXT:,} more characters in log.jsonl)"


# Distribution mode generates no text: the verdict is read from the labels' probabilities at the decision point.
NO_TEXT = ("Distribution mode: the judge generates no text (its verdict is the label with the highest probability, "
           "read at the decision point), so there is no raw output; the probabilities are shown instead.")

COLUMNS = ("judge", "item", "facet", "order", "repeat", "status", "label", "answer", "truth", "agrees",
           "flipped", "probability", "distribution", "reason", "raw", "prompt")


# Characters that could end or re-open markup inside <script> (`</script>`, `<!--<script>` puts the
# parser in its double-escaped state and the rest of the page becomes script text), plus the two line
# separators some JavaScript parsers once refused in strings: written as JSON escapes, which decode to the
# same text, so no judged text can change the page's structure.
# Bidirectional controls in judged text are shown as their code points, never applied: U+202E turns
# an id "exe.txt" into one that reads as another, and reorders the page's text after it.
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_BIDI = re.compile(f"[{BIDI_CONTROLS}]")
_SCRIPT = _SCRIPT.replace("__BIDI__", "".join(f"\\u{ord(c):04x}" for c in BIDI_CONTROLS))


def visible(text: str) -> str:
    """Text with its bidirectional controls shown as their code points ([U+202E])."""
    return _BIDI.sub(lambda m: f"[U+{ord(m.group()):04X}]", text)


def escaped(text: str, quote: bool = True) -> str:
    """Data as HTML text: never markup, its bidirectional controls visible."""
    return html.escape(visible(text), quote=quote)


_SCRIPT_UNSAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
                                "\u2029": "\\u2029"})


def script_json(data) -> str:
    """`data` as JSON safe to embed in a <script> element: no `<`, `>` or `&` in it (JSON escapes)."""
    return json.dumps(data, ensure_ascii=False, allow_nan=False).translate(_SCRIPT_UNSAFE)


def viewer_section(run: LoadedRun) -> str:
    """The viewer of one run as an HTML section (data embedded as JSON)."""
    v = viewer_frame(run)
    total = v.height
    v = v.head(MAX_VERDICTS)
    logged = read_logged_prompts(run.path / "log.jsonl") if (run.path / "log.jsonl").exists() else {}
    prompts: list[str] = []
    index: dict[str, int] = {}
    rows = []
    for r in v.iter_rows(named=True):
        text = logged.get(r["key"])
        if text is not None and text not in index:
            index[text] = len(prompts)
            prompts.append(_clip(text) or "")
        rows.append([r["judge"], r["unit"], r["facet"], r["order"], r["repeat"], r["status"], r["label"],
                     r["answer"], r["truth"], r["agrees"], r["flipped"], r["probability"], r["distribution"],
                     r["reason"], _clip(r["raw"]), index.get(text) if text is not None else None])
    facets = sorted({f for f in v["facet"].to_list() if f}, key=_natural)
    no_text = NO_TEXT if run.manifest.mode == "distribution" else ""
    data = {"columns": list(COLUMNS), "rows": rows, "prompts": prompts, "page": PAGE,
            "judges": sorted(set(v["judge"].to_list())), "facets": facets, "no_text": no_text}
    payload = script_json(data)
    capped = (f" The first {MAX_VERDICTS:,} of {total:,} verdicts are here; all of them are in verdicts.parquet."
              if total > MAX_VERDICTS else "")
    has_truth = v["agrees"].is_not_null().any()
    note = ("Click a row to open its prompt, raw output, parsed label and the other orders' verdicts."
            + ("" if has_truth else " This protocol's data has no human answer to set beside one verdict.")
            + (" " + no_text if no_text else "") + capped)
    columns = ("judge", "item", *(("test / group",) if facets else ()), "order", "answer", "humans", "status",
               "raw output" if not no_text else "raw output (probabilities)")
    head = "".join(f"<th>{h}</th>" for h in columns)
    facet_filter = ("<label>test / group <select class='facet'><option value=''>all</option></select></label>"
                    if facets else "<select class='facet' hidden><option value=''>all</option></select>")
    return (f"<section class='viewer' data-run='{escaped(run.name)}'><h2>Items: {escaped(run.name)}</h2>"
            f"<p class='note'>{escaped(note)}</p><div class='controls'>"
            "<label><input type='checkbox' class='disagree'> disagrees with the humans</label>"
            "<label><input type='checkbox' class='flipped'> flipped between orders</label>"
            "<label><input type='checkbox' class='unparsed'> not parsed</label>"
            "<label>judge <select class='judge'><option value=''>all</option></select></label>"
            f"{facet_filter}"
            "<input type='search' class='search' placeholder='search text and prompts'>"
            "<span class='count'></span><span class='pager'><button class='prev'>&lsaquo; prev</button>"
            "<button class='next'>next &rsaquo;</button></span></div>"
            f"<table><thead><tr>{head}</tr></thead><tbody></tbody></table>"
            f"<script type='application/json' class='viewer-data'>{payload}</script></section>")


def viewer_html(runs: list[LoadedRun]) -> str:
    """Every run's viewer, its style and its script (once), for the end of report.html."""
    sections = [viewer_section(r) for r in runs if (r.path / "verdicts.parquet").exists()]
    return _STYLE + "".join(sections) + _SCRIPT if sections else ""

