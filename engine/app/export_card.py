"""The dataset card of `litjudge export` (export.py): the YAML header the Hub reads (license, tags,
one config per file), then what ran and what it found: judges, protocol and version, the headline
metrics as the run's results.json gives them, the mode and sampling, a rubric's questions, the
data's source and the manifest's hashes. Every value from the run passes through `public.redact`:
no absolute path of the user's disk reaches it."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import polars as pl

from .manifest import RunManifest
from .public import redact

SPLIT = "train"
MARKER = "<!-- written by litjudge export -->"
# Hub license identifiers for the licenses the shipped cards name (the card's words decide nothing else)
HUB_LICENSES = {"apache-2.0": "apache-2.0", "mit": "mit", "bsd-3-clause": "bsd-3-clause", "cc by-sa 4.0": "cc-by-sa-4.0",
                "cc-by-sa-4.0": "cc-by-sa-4.0", "cc by 4.0": "cc-by-4.0", "cc-by-4.0": "cc-by-4.0"}


def hub_license(text: str) -> str:
    """The Hub's identifier for a data card's license: a known one, `unknown` when the card says
    nothing, else `other` (the card's own words go in the body)."""
    if not text.strip():
        return "unknown"
    return HUB_LICENSES.get(text.split("(")[0].strip().lower(), "other")


def _q(value: Any) -> str:
    """A YAML scalar (JSON is YAML): text from a config or a card never becomes YAML structure."""
    return json.dumps(value, ensure_ascii=False)


def _code(value: Any) -> str:
    """Text shown in the card's Markdown as code, never as markup."""
    return "`" + re.sub(r"[`\r\n]+", " ", str(value)) + "`"


def _cell(value: Any) -> str:
    """`_code` in a table's cell: a `|` in the text (a question "Dialogue | monologue?") ended the
    cell; GitHub's tables read `\\|` as the character, inside code too."""
    return _code(value).replace("|", "\\|")


def card(manifest: RunManifest, parts: dict[str, pl.DataFrame], run_dir: Path, empty: list[str],
         base: Path | None = None) -> str:
    """The dataset card: the YAML header the Hub reads, then what ran and how to load and publish it.
    Every value from the run passes through `redact` (no absolute path of the user's disk)."""
    raw = redact(manifest.raw, base)
    data = raw.get("dataset", {}) if isinstance(raw.get("dataset"), dict) else {}
    protocol = raw.get("protocol", {}) if isinstance(raw.get("protocol"), dict) else {}
    license_text = str(data.get("license", ""))
    header = ["---", f"license: {_q(hub_license(license_text))}", f"pretty_name: {_q('litjudge run ' + run_dir.name)}",
              "tags:", "- litjudge", "- llm-as-a-judge"] + ([f"- {_q(protocol['name'])}"] if protocol.get("name") else [])
    header.append("configs:")
    for n, name in enumerate(parts):
        header += [f"- config_name: {_q(name)}", "  data_files:", f"  - split: {SPLIT}",
                   f"    path: {_q(f'data/{name}.parquet')}"] + (["  default: true"] if n == 0 else [])
    header.append("---")
    judges = [j for j in raw.get("judges", []) if isinstance(j, dict)]
    name = protocol.get("name", manifest.protocol)
    lines = [MARKER, f"# litjudge run {_code(run_dir.name)}", "",
             f"Verdicts of {', '.join(_code(j.get('judge')) for j in judges) or 'the judges'} on the dataset "
             f"{_code(data.get('card', manifest.dataset))} under the protocol {_code(name)} "
             f"(version {_code(protocol.get('version', ''))}), written by litjudge {_code(raw.get('litjudge'))} "
             f"(commit {_code(raw.get('git_commit'))}) on {_code(raw.get('created'))}.", ""]
    lines += _headline(_results(run_dir, base))
    lines += _settings(raw)
    lines += ["## Configs", "", "| config | rows | columns |", "|---|---|---|"]
    lines += [f"| {_cell(name)} | {df.height} | {len(df.columns)} |" for name, df in parts.items()]
    if empty:
        lines += ["", f"Tables the run left empty (not exported: a split needs rows): {', '.join(map(_code, empty))}."]
    lines += ["", "## Load and publish", "", "```python", "from datasets import load_dataset",
              f"verdicts = load_dataset(\"DIR\")[{_q(SPLIT)}]          # one row per verdict",
              f"table = load_dataset(\"DIR\", {_q(next(iter(list(parts)[1:]), 'verdicts'))})[{_q(SPLIT)}]",
              "", "from huggingface_hub import HfApi          # publishing is this one call (or export --push-to-hub)",
              "HfApi().upload_folder(folder_path=\"DIR\", repo_id=\"you/NAME\", repo_type=\"dataset\")", "```", "",
              "## Provenance (the run's manifest)", ""]
    lines += _hashes(raw, data)
    lines += ["", "## Data", "", f"- source: {_code(_source(data))}",
              f"- license (from the data card): {_code(license_text or 'not stated')}"]
    return "\n".join(header + lines) + "\n"


def _source(data: dict[str, Any]) -> str:
    """Where the judged data came from: the data card's source, else its Hub id or file (named publicly)."""
    identity = data.get("data", {}) if isinstance(data.get("data"), dict) else {}
    return str(data.get("source") or data.get("hub") or (f"the file {identity['path']}" if identity.get("path") else "")
               or f"the dataset card {data.get('card', '')}")


def _results(run_dir: Path, base: Path | None) -> list[dict[str, Any]]:
    """The run's results.json records (a run of several tasks: each task's), read, not recomputed."""
    try:
        record = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    record = redact(record, base)
    if isinstance(record.get("tasks"), dict):
        return [{**r, "task": name} for name, r in record["tasks"].items() if isinstance(r, dict)]
    return [record]


def _headline(records: list[dict[str, Any]]) -> list[str]:
    """The headline metrics: each judge's rows of the declared estimate's table, the headline marked."""
    out = ["## Headline metrics", ""]
    if not records:
        return out + ["The run folder holds no results.json (a run written before litjudge 0.2.0).", ""]
    for record in records:
        head = record.get("headline") or {}
        task = f" (task {_code(record['task'])})" if record.get("task") else ""
        if not head:
            out += [f"The protocol declares no headline estimate{task}.", ""]
            continue
        direction = head.get("higher_is_better")
        better = "" if direction is None else "higher is better" if direction else "lower is better"
        out += [f"{_code(head.get('metric'))}{task}, pooled view {_code(head.get('view'))}"
                + (f" ({better})" if better else "") + (f": {head['note']}" if head.get("note") else "") + ".", ""]
        rows = [r for r in record.get("results", []) if isinstance(r, dict)]
        if rows:
            out += ["| judge | metric | view | value | 95% interval | n |", "|---|---|---|---|---|---|"]
            for r in rows:
                interval = (f"{r['ci_low']:.3f} to {r['ci_high']:.3f}" if isinstance(r.get("ci_low"), float)
                            and isinstance(r.get("ci_high"), float) else "n/a")
                value = f"{r['value']:.3f}" if isinstance(r.get("value"), float) else "n/a"
                mark = " (headline)" if r.get("headline") else ""
                out.append(f"| {_cell(r.get('judge'))} | {_cell(r.get('metric'))} | {_cell(r.get('view'))}{mark} "
                           f"| {value} | {interval} | {r.get('n')} |")
            out.append("")
    return out


def _settings(raw: dict[str, Any]) -> list[str]:
    """How the judges were asked: mode, sampling, the prompt template, a rubric's questions."""
    config = raw.get("config", {}) if isinstance(raw.get("config"), dict) else {}
    sampling = config.get("sampling", {}) if isinstance(config.get("sampling"), dict) else {}
    out = ["## How the judges were asked", "", f"- mode: {_code(config.get('mode', 'label'))}",
           "- sampling: " + (", ".join(f"{k} {_code(v)}" for k, v in sampling.items()) or "the defaults")]
    if config.get("template"):
        out.append(f"- prompt template: {_code(config['template'])} (its sha256 under Provenance)")
    options = config.get("options", {}) if isinstance(config.get("options"), dict) else {}
    questions = [q for q in options.get("questions", []) if isinstance(q, dict)]
    if questions:
        out += ["", "Rubric questions:", "", "| id | scale | question |", "|---|---|---|"]
        out += [f"| {_cell(q.get('id'))} | {_cell(q.get('scale', 'binary'))} | {_cell(q.get('text'))} |" for q in questions]
    return out + [""]


def _hashes(raw: dict[str, Any], data: dict[str, Any]) -> list[str]:
    out = []
    identity = data.get("data", {}) if isinstance(data.get("data"), dict) else {}
    if identity.get("sha256"):
        kind = f"folder ({identity['files']} files)" if "files" in identity else "file"
        out.append(f"- data {kind} sha256: {_code(identity['sha256'])} ({_code(identity.get('path', ''))})")
    for j in raw.get("judges", []):
        if isinstance(j, dict):
            out.append(f"- judge {_code(j.get('judge'))}: backend {_code(j.get('backend', ''))}, weights "
                       f"{_code(j.get('fingerprint', j.get('sha256', 'n/a')))}, chat template "
                       f"{_code(j.get('chat_template_hash', 'n/a'))}")
    for key, t in (raw.get("template") or {}).items():
        out.append(f"- prompt template {_code(key)} sha256: {_code(t.get('sha256'))}")
    out.append("- each verdict's content key: the `key` column of `verdicts`")
    return out
