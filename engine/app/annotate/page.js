// The annotation page's script (engine/app/annotate/page.py serves it inline). Judged text
// enters the DOM only through textContent, with dir=auto: a right-to-left text reads in its own direction.
(() => {
  const params = new URLSearchParams(location.search);
  const token = params.get('token');
  const $ = s => document.querySelector(s);
  const make = (tag, props = {}, ...kids) => { const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props)) { if (k === 'text') e.textContent = v; else if (k === 'cls') e.className = v;
      else e.setAttribute(k, v); }
    kids.forEach(k => e.appendChild(k)); return e; };
  let info = null, unit = ['story', 'stories'], item = null, answers = Object.create(null), current = 0, busy = false;
  const many = n => n === 1 ? unit[0] : unit[1];          // what the queue calls n of its clusters
  const annotator = () => $('#annotator').value.trim();
  const headers = () => Object.assign({'Content-Type': 'application/json'}, token ? {'X-Litjudge-Token': token} : {});
  const newKey = () => 'k' + Date.now().toString(36) + '-' + Math.random().toString(36).slice(2, 12);
  async function api(path, body) {
    let r;
    try { r = await fetch(path, body === undefined ? {headers: headers()} : {method: 'POST', headers: headers(), body: JSON.stringify(body)}); }
    catch (e) { const gone = new Error('The server does not answer (is litjudge annotate still running?)');
                gone.offline = true; throw gone; }
    if (!r.ok) { const e = new Error((await r.text()).trim()); e.code = r.status; throw e; }
    return r.json();
  }
  async function post(path, body) {
    // A submit is retried with the same key: the server stores it once.
    for (let i = 0; ; i++) { try { return await api(path, body); } catch (e) { if (i >= 2 || /^\w+:/.test(e.message)) throw e; } }
  }
  function status(text, bad) {            // at the top, and beside the buttons where the reader is
    for (const s of [$('#status'), $('#inline-status')]) if (s) { s.textContent = text; s.className = 'status' + (bad ? ' err' : ''); }
    // a refusal is scrolled into view: below a long story, Enter's "answer every question first" was off-screen
    const here = $('#inline-status');
    if (bad && here && here.scrollIntoView) here.scrollIntoView({block: 'nearest'});
  }
  // what to do about a failure, said for the key that met it (one text said "press Enter" on the last page too)
  const failed = (e, again) => status(e.offline ? `${e.message}: ${again} once it is back.` : e.message, true);
  function render() {
    const box = $('#item'); box.replaceChildren();
    if (!item) return;
    if (item.done) {
      const held = item.held ? `${item.held} ${many(item.held)} ${item.held === 1 ? 'is' : 'are'} open with other ` +
        `annotators: one they leave unanswered comes back after ${item.lock_minutes} minutes (reload then). ` : '';
      // Undo where there is something of theirs to take back (it was offered to a name that had answered nothing)
      const undoable = item.mine > 0 || item.skipped > 0;
      const hint = !undoable ? '' : '(' + (item.skipped ? 'What you skipped waits for another annotator, or for you: ' +
        'the first button brings it back. ' : '') + 'Undo brings back your last submit or skip.)';
      box.appendChild(make('div', {cls: 'done', text: (item.held ? 'Nothing for you right now. ' :
        'Nothing left for you in this queue. ') + (undoable ? 'Thank you! ' : '') + held + hint}));
      const undoB = make('button', {text: 'Undo (u)'}); undoB.onclick = () => undoLast();
      const buttons = undoable ? [undoB] : [];
      if (item.skipped) {                 // alone, the estimates wait at the first of them
        const backB = make('button', {id: 'unskip', text: `Answer the ${item.skipped} you skipped (b)`});
        backB.onclick = () => unskip(); buttons.unshift(backB);
      }
      box.appendChild(make('div', {cls: 'actions'}, ...buttons, make('span', {id: 'inline-status', cls: 'status'})));
      if (item.mine !== undefined) $('#mine').textContent = String(item.mine);
      return;
    }
    box.dataset.cluster = item.cluster;
    saveDraft();
    box.appendChild(make('div', {cls: 'note', text: `Draw ${item.draw + 1} · drawn ${item.times_drawn}× · probability ${item.probability.toFixed(4)}`}));
    if (item.context) box.appendChild(make('div', {cls: 'context', dir: 'auto', text: item.context}));
    const texts = make('div', {cls: 'texts' + (item.texts.length > 1 ? ' two' : '')});
    item.texts.forEach((t, i) => texts.appendChild(make('div', {cls: 'text'},
      make('h3', {text: item.texts.length > 1 ? `${i + 1}. ${['First', 'Second'][i]} text` : t.heading}),
      make('div', {cls: 'body', dir: 'auto', text: t.text}))));
    box.appendChild(texts);
    const qs = make('div', {cls: 'questions'});
    item.questions.forEach((q, i) => {
      const row = make('div', {cls: 'q' + (i === current ? ' current' : ''), 'data-item': q.item},
                       make('span', {cls: 't', dir: 'auto', text: q.text}));
      const opts = make('div', {cls: 'answers' + (q.answers.some(a => a.caption.length > 12) ? ' long' : '')});
      q.answers.forEach(a => { const own = a.caption.startsWith(a.key + ':');     // a point names its key
        const b = make('button', {'data-value': a.value}, ...(own ? [] : [make('kbd', {text: a.key})]),
                       make('span', {dir: 'auto', text: a.caption}));
        if (answers[q.item] === a.value) b.className = 'on';
        b.onclick = () => { answers[q.item] = a.value; current = Math.min(i + 1, item.questions.length - 1); render(); };
        opts.appendChild(b); });
      row.appendChild(opts);
      qs.appendChild(row);
    });
    box.appendChild(qs);
    const n = Object.keys(answers).length;
    const submit = make('button', {cls: 'primary', text: `Submit (Enter) ${n}/${item.questions.length}`, id: 'submit'});
    submit.onclick = () => submitItem();
    const skipB = make('button', {text: 'Skip (s)'}); skipB.onclick = () => skipItem();
    const undoB = make('button', {text: 'Undo (u)'}); undoB.onclick = () => undoLast();
    box.appendChild(make('div', {cls: 'actions'}, submit, skipB, undoB, make('span', {id: 'inline-status', cls: 'status'})));
    $('#mine').textContent = String(item.mine);
    const on = box.querySelector('.q.current');
    if (on && on.scrollIntoView) on.scrollIntoView({block: 'nearest'});
  }
  // The answers being given, kept in this tab's sessionStorage as they are chosen: a reload (the server
  // back after a crash, say) showed the story with none of them, though the page said they stayed.
  // Storage refused (a browser's setting, a full quota) throws: the page works on without the draft and
  // the remembered name (a refused setItem had stopped the page before its first story).
  const DRAFT = 'litjudge-draft';
  const stored = (f, fallback) => { try { return f(); } catch (e) { return fallback; } };
  const dropDraft = () => stored(() => sessionStorage.removeItem(DRAFT));
  function saveDraft() {
    if (item && !item.done) stored(() => sessionStorage.setItem(DRAFT, JSON.stringify(
      {annotator: annotator(), cluster: item.cluster, answers: Object.entries(answers)})));
  }
  function draft() {         // the kept answers to this story, each still one of its question's answers
    const out = Object.create(null);
    const kept = stored(() => JSON.parse(sessionStorage.getItem(DRAFT) || 'null'), null);
    if (!kept || kept.annotator !== annotator() || kept.cluster !== item.cluster || !Array.isArray(kept.answers)) return out;
    const asked = new Map(item.questions.map(q => [q.item, q.answers.map(a => a.value)]));
    kept.answers.forEach(([k, v]) => { if (asked.has(k) && asked.get(k).includes(v)) out[k] = v; });
    return out;
  }
  async function load() {
    if (!annotator()) { status('Type your name first (top right).'); return; }
    stored(() => localStorage.setItem('litjudge-annotator', annotator()));     // remembered where storage is allowed
    try { item = await api('/api/next?annotator=' + encodeURIComponent(annotator())); }
    catch (e) { failed(e, 'reload the page'); return; }
    if ($('#status').classList.contains('err')) status('');      // an earlier error is past
    // no prototype: an item id '__proto__' set nothing on a plain object and could never be answered
    answers = item.done ? Object.create(null) : draft(); current = 0;
    const open = item.done ? -1 : item.questions.findIndex(q => !Object.hasOwn(answers, q.item));
    if (open > 0) current = open;                                 // a kept draft: on at its first unanswered question
    render(); estimate();
    // a new story opens at its top: its first question scrolled into view left the reader halfway
    // down a long story, its title, the save and the progress above the fold (a new user's try)
    window.scrollTo(0, 0);
  }
  async function submitItem() {
    if (busy || !item || item.done) return;
    const open = item.questions.findIndex(q => !(q.item in answers));
    if (open >= 0) {          // the first one unanswered is highlighted and shown (a new user hunted for it)
      current = open; render(); status(`Answer every question first: question ${open + 1} has no answer.`, true); return;
    }
    busy = true;
    try { const r = await post('/api/label', {annotator: annotator(), cluster: item.cluster, labels: answers, key: newKey(), shown: item.shown});
          dropDraft(); status(r.duplicate ? 'Already saved.' : 'Saved.'); await load(); }
    catch (e) {
      if (e.code === 409 && e.message.startsWith('cluster ')) {    // taken by others while it was open here
        const why = e.message.split(': ask for the next')[0];
        await load(); status(`Not saved: ${why}. Here is the next ${unit[0]}.`, true);
        window.scrollTo(0, 0);                                    // said at the top too, above the new story
      } else failed(e, 'your answers stay on this page, a reload too; press Enter again');
    } finally { busy = false; }
  }
  async function skipItem() {
    if (busy || !item || item.done) return; busy = true;
    try { await post('/api/skip', {annotator: annotator(), cluster: item.cluster, key: newKey()});
          dropDraft(); status('Skipped.'); await load(); }
    catch (e) { failed(e, 'press s again'); } finally { busy = false; }
  }
  async function unskip() {
    if (busy) return; busy = true;
    try { const r = await post('/api/unskip', {annotator: annotator()});
          status(r.back.length ? `Brought back ${r.back.length} you skipped.` : 'Nothing you skipped.'); await load(); }
    catch (e) { failed(e, 'press b again'); } finally { busy = false; }
  }
  async function undoLast() {
    if (busy) return; busy = true;
    try { const r = await post('/api/undo', {annotator: annotator()});
          await load();
          const again = item && item.cluster === r.undone && Object.keys(r.answers || {}).length > 0;
          if (again) {       // shown again as answered, to change one (they were cleared: all given again)
            item.questions.forEach(q => { if (Object.hasOwn(r.answers, q.item)) answers[q.item] = r.answers[q.item]; });
            render();
          }
          status(!r.undone ? 'Nothing to undo.' : r.stands === 'earlier' ? `Undone; your earlier answer to that ${unit[0]} stands.`
                 : r.stands === 'later' ? `Undone; a later answer of yours to that ${unit[0]} (imported) stands, so no answer changed.`
                 : again ? 'Undone: shown again with your answers; change any, then Enter.'
                 : item && item.cluster === r.undone ? 'Undone: shown again.'
                 : 'Undone: that one comes back after the ones drawn before it (another annotator may take it meanwhile).'); }
    catch (e) { failed(e, 'press u again'); } finally { busy = false; }
  }
  const fmt = x => x === null || x === undefined ? '–' : x.toFixed(3);
  function svgPlot(curve) {
    const NS = "http://www.w3.org/2000/svg", W = 300, H = 160, P = 30;
    // the legend in a row under the axis: at the top right, the first (widest) interval was drawn under it
    const svg = document.createElementNS(NS, 'svg'); svg.setAttribute('width', W); svg.setAttribute('height', H + 18);
    svg.setAttribute('id', 'plot');
    const el = (tag, attrs) => { const e = document.createElementNS(NS, tag); for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v); svg.appendChild(e); return e; };
    // human-only wide and pale beneath, uniform dashed: equal curves (a judge that adds nothing) showed as one line
    const series = [['human', '#9ca3af', 'human only', 5, ''], ['uniform', '#f59e0b', 'uniform PPI++', 2, '5 3'],
                    ['active', '#2563eb', 'active', 2, '']];
    const ys = curve.flatMap(p => series.map(s => p[s[0]])).filter(v => v !== null);
    el('line', {x1: P, y1: H - P, x2: W - 6, y2: H - P, stroke: '#999'}); el('line', {x1: P, y1: 6, x2: P, y2: H - P, stroke: '#999'});
    const label = (x, y, t, anchor) => { const e = el('text', {x, y, 'font-size': 10, fill: '#555', 'text-anchor': anchor || 'start'}); e.textContent = t; };
    label(W / 2, H - 8, 'labelled draws', 'middle'); label(P + 4, 12, 'interval half-width');
    if (!ys.length) { label(W / 2, H / 2, 'widths appear with the first interval', 'middle'); return svg; }
    const ymax = Math.max(...ys) > 0 ? Math.max(...ys) : 1, n = curve[curve.length - 1].draws;   // all 0: no NaN
    const x = d => P + (W - P - 10) * (n > 1 ? (d - 1) / (n - 1) : 0.5), y = v => H - P - (H - P - 22) * v / ymax;
    label(P - 2, 26, ymax.toFixed(2), "end"); label(P - 2, H - P, '0', 'end'); label(W - 8, H - P + 12, String(n), 'end');
    if (n > 1) label(P, H - P + 12, '1', 'middle');
    series.forEach(([key, color, name, width, dash], i) => {
      const pts = curve.filter(p => p[key] !== null).map(p => `${x(p.draws).toFixed(1)},${y(p[key]).toFixed(1)}`);
      if (pts.length) el('polyline', {points: pts.join(' '), fill: 'none', stroke: color, 'stroke-width': width,
                                      'stroke-dasharray': dash, 'stroke-linecap': 'round'});
      if (pts.length) { const [cx, cy] = pts[pts.length - 1].split(','); el('circle', {cx, cy, r: 1 + width / 2 + 1, fill: color}); }   // the latest (one point: no line)
      const at = P - 10 + [0, 86, 196][i];          // 'uniform PPI++' is the long one
      el('line', {x1: at, y1: H + 9, x2: at + 12, y2: H + 9, stroke: color, 'stroke-width': width, 'stroke-dasharray': dash});
      label(at + 16, H + 12, name);
    });
    return svg;
  }
  async function estimate() {
    // a failure is said where the estimate is read: swallowed, the panel kept its last numbers as current
    let e; try { e = await api('/api/estimate'); }
    catch (err) { $('#est-note').textContent = `The estimate could not be updated (${err.code || 'no answer'}): ` +
                                               `${err.message.slice(0, 300)}`; return; }
    $('#done-draws').textContent = `${e.labelled_draws} / ${e.budget}`;
    // "Queue 12 / 20" beside "You: 10" read as lost labels (a new user's try): two draws repeated earlier ones
    const again = e.labelled_draws - e.active.clusters_read;
    $('#repeats').textContent = again > 0 ? ` (${again} ${again === 1 ? 'repeats an earlier draw' : 'repeat earlier draws'})` : '';
    $('#bar').style.width = `${100 * e.labelled_draws / e.budget}%`;
    const t = $('#est'); t.replaceChildren();
    t.appendChild(make('tr', {}, make('th', {text: ''}), make('th', {text: 'estimate'}), make('th', {text: '95% interval'})));
    [['active', e.active], ['human only', e.human]].forEach(([name, x]) => {
      const row = make('tr', {'data-which': name === 'active' ? 'active' : 'human', 'data-value': String(x.value),
                              'data-low': String(x.low), 'data-high': String(x.high)},
        make('td', {text: name}), make('td', {cls: 'n', text: fmt(x.value)}),
        make('td', {cls: 'n', text: x.low === null ? '–' : `${fmt(x.low)} – ${fmt(x.high)}`}));
      t.appendChild(row);
    });
    t.appendChild(make('tr', {}, make('td', {text: 'uniform PPI++'}), make('td', {cls: 'n', text: ''}),
      make('td', {cls: 'n', text: e.uniform_half_width === null || e.active.low === null ? '–'
                                  : `± ${fmt(e.uniform_half_width)} (projected)`})));
    // the story's id isolated (U+2068 ... U+2069): a right-to-left override in it reversed the rest of the note
    // a story partly answered (an import of some of its questions) is kept for whoever began it
    const w = e.waiting, held = w ? `The estimates stop at draw ${w.draw} (\u2068${w.cluster}\u2069): it has ` +
      (w.partly && w.partly.length ? 'answers to some of its questions only, and ' : 'no answer yet, and ') +
      `${w.clusters_after} answered ${w.clusters_after === 1 ? 'one drawn after it waits' : 'ones drawn after it wait'} ` +
      (w.partly && w.partly.length ? `for it (it is kept for \u2068${w.partly.join(', ')}\u2069 to finish, on this ` +
        'page or by importing the rest of it).'
       : w.held && w.held.length ? `for it (it is open on the page of \u2068${w.held.join(', ')}\u2069, and comes to ` +
        'others if their lock runs out unanswered).'
       : 'for it (skipped? another annotator can answer it, or you can: the last page brings back what you skipped).') : '';
    const until = e.labelled_draws < e.budget && e.min_draws <= e.budget ? ' yet' : '';   // a budget short of it: none ever
    $('#est-note').textContent = [e.active.note ? `No interval${until}: ${e.active.note}.` : '',
                                  e.whole_range ? `${e.whole_range}.` : '', e.against ? `${e.against}.` : '', held,
                                  e.stale ? `${e.stale}.` : '']
                                  .filter(Boolean).join(' ');
    const ag = e.agreement;
    $('#agree').textContent = ag.items ? `Agreement between annotators on the estimate's question: Krippendorff's ` +
      `alpha (nominal) ${fmt(ag.krippendorff_alpha)}` + (ag.low === null ? '' : ` (95% interval ${fmt(ag.low)} – ` +
      `${fmt(ag.high)})`) + ` over ${ag.items} items in ${ag.clusters} ${many(ag.clusters)} ` +
      `answered by two or more` + (ag.note ? `; ${ag.note}.` : '.') : '';
    // shown to one decimal: -0.01 read "-0.0 (below 0: ...)", as if a cost
    const gained = e.labels_gained === null ? null : Math.abs(e.labels_gained) < 0.05 ? 0 : e.labels_gained;
    $('#gained').textContent = gained === null ? '–' : gained.toFixed(1);
    // a number below 0 was shown bare (a new user's try): it says the judges' choice cost labels so far
    $('#gained-why').textContent = gained !== null && gained < 0 ? ' (below 0: so far the ' +
      'judges\u2019 choice of stories narrows the interval less than as many labels drawn at random would)' : '';
    $('#plotbox').replaceChildren(svgPlot(e.curve));
  }
  document.addEventListener('keydown', ev => {
    if (ev.target.tagName === 'INPUT' || !item || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const k = ev.key.toLowerCase();
    if (item.done) {
      if (k === 'u') undoLast(); else if (k === 'b' && item.skipped) unskip(); else return;
      ev.preventDefault(); return;
    }
    const q = item.questions[current], chosen = q.answers.find(a => a.key === k);
    if (chosen) {
      answers[q.item] = chosen.value;
      current = Math.min(current + 1, item.questions.length - 1); render();
    } else if (k === 'arrowdown' || k === 'j') { current = Math.min(current + 1, item.questions.length - 1); render(); }
    else if (k === 'arrowup' || k === 'k') { current = Math.max(current - 1, 0); render(); }
    else if (k === 'enter') submitItem();
    else if (k === 's') skipItem();
    else if (k === 'u') undoLast();
    else return;
    ev.preventDefault();
  });
  (async () => {
    try { info = await api('/api/info'); } catch (e) { status(e.message, true); return; }
    unit = info.unit;
    $('#quantity').textContent = info.quantity;
    $('#source').textContent = info.uncertainty;
    const keys = {ttcw: 'y / n', pairwise: '1 / 2' + (info.labels.includes('tie') ? ' / t' : ''),
                  listwise: '1 – ' + info.labels.length}[info.protocol];
    if (keys) $('#keys').textContent = keys;
    else {                                   // a rubric: each question's answers carry their own keys
      $('#keys').nextSibling.textContent = ' picks an answer of the highlighted question, ';
      $('#keys').replaceWith(document.createTextNode('the key shown on an answer'));
    }
    $('#instr').textContent = info.instructions;
    const name = params.get('annotator') || stored(() => localStorage.getItem('litjudge-annotator'), null) || '';
    $('#annotator').value = name;
    $('#annotator').addEventListener('change', load);
    // Enter takes the name and leaves the box: the keys that follow answer questions, not type into it
    $('#annotator').addEventListener('keydown', ev => { if (ev.key === 'Enter') { ev.preventDefault(); ev.target.blur(); } });
    if (name) load(); else { status('Type your name (top right) and press Enter.'); estimate(); }
  })();
})();
