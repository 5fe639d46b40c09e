"""The validity table of docs/measurements.md from a finished run of runs/validity/validity.toml: per protocol,
agreement with the human labels (95% CI where the protocol has one), position bias, unparsed,
the chance level, per judge side by side, and the papers' published numbers for their own
(larger) judges as context, never as targets. Every number is read from the run's own tables.

    .venv/bin/python scripts/validity_table.py runs/out/validity
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import polars as pl

# The papers' numbers for open judges of 7-12B (or the nearest they report), as context. Different
# data, sizes and prompts: these are not targets for a 0.5-1.5B code model on a slice.
CONTEXT = {
    "ttcw": "TTCW (dataset authors' notebook): proprietary judges' balanced accuracy 0.46 (Gemini Pro) to 0.58 "
            "(Claude 3 Opus) on all 672 items; no open 7-12B judge reported",
    "pairwise": "LitBench test set, zero-shot: Qwen2.5-7B 0.599, Llama-3.1-8B 0.581, Gemma-3-12B 0.657 (other data)",
    "reference-likert": "Li et al. 2025, Table 1: Qwen2-72B baseline Spearman -0.12, with the method 0.22 (other data)",
    "listwise-aut": "Al Rabeyah et al. 2024: 7-70B judges rank uses by originality level (their own oracle)",
    "classification-aut": "Sawicki et al. 2025 (poems, Good/Medium/Bad): no open 7-12B figure printed",
}


def fmt(value, low=None, high=None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    text = f"{value:.{digits}f}"
    if low is not None and high is not None and not (math.isnan(low) or math.isnan(high)):
        text += f" [{low:.{digits}f}, {high:.{digits}f}]"
    return text


def table(run: Path, task: str, name: str) -> pl.DataFrame:
    path = run / task / "tables" / f"{name}.parquet"
    return pl.read_parquet(path) if path.exists() else pl.DataFrame()


def row(df: pl.DataFrame, judge: str, **where) -> dict:
    sub = df.filter(pl.col("judge") == judge)
    for k, v in where.items():
        sub = sub.filter(pl.col(k) == v)
    return sub.row(0, named=True) if sub.height else {}


def lines(run: Path) -> tuple[list[str], list[str]]:
    manifest = json.loads((run / "manifest.json").read_text())
    judges = [j["judge"] for j in manifest["judges"]]
    head = "| protocol (slice) | measure (chance) | " + " | ".join(judges) + " |"
    out = [head, "|" + "---|" * (len(judges) + 2)]
    bias = ["| protocol | position bias (unbiased) | " + " | ".join(judges) + " |", "|" + "---|" * (len(judges) + 2)]

    def add(target: list[str], label: str, measure: str, cells: list[str]) -> None:
        target.append(f"| {label} | {measure} | " + " | ".join(cells) + " |")

    overall = table(run, "ttcw", "overall")
    if overall.height:
        n = row(overall, judges[0], view="all").get("n")
        add(out, f"TTCW, {n} items (6 stories x 14 tests)", "balanced accuracy vs expert majority (0.50)",
            [fmt((r := row(overall, j, view="all")).get("balanced_accuracy"), r.get("balanced_accuracy_low"),
                 r.get("balanced_accuracy_high")) for j in judges])
        add(out, "", "Cohen's kappa (0)", [fmt(row(overall, j, view="all").get("kappa")) for j in judges])
        add(out, "", "judge pass rate (experts: "
            f"{fmt(row(overall, judges[0], view='all').get('expert_pass_rate'))})",
            [fmt(row(overall, j, view="all").get("judge_pass_rate")) for j in judges])
    acc, pb = table(run, "pairwise", "accuracy"), table(run, "pairwise", "bias")
    if acc.height:
        n = row(acc, judges[0], order="ab").get("n")
        add(out, f"Pairwise, Confederacy, {n} pairs x 2 orders", "accuracy, mean of both orders (0.50)",
            [fmt((r := row(acc, j, order="mean of both")).get("accuracy"), r.get("ci_low"), r.get("ci_high"))
             for j in judges])
        comb = acc.filter(pl.col("order").str.starts_with("combined"))
        add(out, "", "accuracy, orders combined by mean P(a) (0.50)",
            [fmt((r := row(comb, j)).get("accuracy"), r.get("ci_low"), r.get("ci_high")) for j in judges])
        add(bias, "Pairwise", "first-position win rate (0.50)",
            [fmt((r := row(pb, j, metric="first_position_win_rate")).get("value"), r.get("ci_low"), r.get("ci_high"))
             for j in judges])
        add(bias, "", "swap-flip rate (0)",
            [fmt((r := row(pb, j, metric="swap_flip_rate")).get("value"), r.get("ci_low"), r.get("ci_high"))
             for j in judges])
    sweep = table(run, "reference-likert", "cutoff_sweep")
    if sweep.height:
        add(out, "Reference Likert, 1 Confederacy group, 12 candidates x 2 tests", "Spearman with human scores, "
            "cutoff -2 (0)", [fmt(row(sweep, j, cutoff=-2).get("spearman")) for j in judges])
        add(out, "", "pairwise ranking accuracy, cutoff -2 (0.50)",
            [fmt(row(sweep, j, cutoff=-2).get("pairwise_accuracy")) for j in judges])
        rb = table(run, "reference-likert", "bias")
        if rb.height and "first_position_win_rate" in rb.columns:
            add(bias, "Reference Likert", "first-position win rate (0.50)",
                [fmt(row(rb, j).get("first_position_win_rate")) for j in judges])
    agree = table(run, "listwise-aut", "agreement")
    if agree.height:
        add(out, "Listwise, AUT, 3 objects x 18 uses", "Spearman of mean score with originality tertile (0)",
            [fmt(row(agree, j, score="score").get("spearman_category")) for j in judges])
        psc = table(run, "listwise-aut", "psc_agreement")
        if psc.height:
            add(out, "", "the same, Kemeny ranking of 3 orders, per list (0)",
                [fmt((r := row(psc, j, ranking="central (Kemeny)")).get("spearman"), r.get("ci_low"), r.get("ci_high"))
                 for j in judges])
        lb = table(run, "listwise-aut", "psc_position_bias")
        if lb.height:
            for label, key in (("Spearman(shown position, rank), one order (0)", "before: single order"),
                               ("Kemeny ranking vs each use's mean shown position (0)", "after: central (Kemeny)")):
                add(bias, "Listwise" if key.startswith("before") else "", label,
                    [fmt((r := row(lb, j, ranking=key)).get("spearman"), r.get("ci_low"), r.get("ci_high"))
                     for j in judges])
    metrics = table(run, "classification-aut", "metrics")
    if metrics.height:
        n = row(metrics, judges[0]).get("n")
        add(out, f"Classification, AUT, {n} uses (Good/Medium/Bad by tertile)", "accuracy (0.33)",
            [fmt(row(metrics, j).get("accuracy")) for j in judges])
        add(out, "", "Spearman, predicted vs true class (0)", [fmt(row(metrics, j).get("spearman_ordinal")) for j in judges])
    unparsed = []
    for j in judges:
        counts = [json.loads((run / t / "manifest.json").read_text())["verdicts_by_judge"].get(j, {})
                  for t in ("ttcw", "pairwise", "reference-likert", "listwise-aut", "classification-aut")
                  if (run / t / "manifest.json").exists()]
        unparsed.append(f"{sum(c.get('unparsed', 0) for c in counts)} of {sum(c.get('rows', 0) for c in counts)}")
    add(out, "All tasks", "unparsed verdicts", unparsed)
    seconds = [f"{j['seconds'] / 60:.1f} min" for j in manifest["judges"]]
    add(out, "All tasks", "wall time (engine start included)", seconds)
    return out, bias


def main(argv: list[str]) -> int:
    run = Path(argv[0] if argv else "runs/out/validity")
    out, bias = lines(run)
    print("\n".join(out))
    print()
    print("\n".join(bias))
    print()
    print("Context (published, other data and larger judges; not targets):")
    for task, text in CONTEXT.items():
        print(f"- {task}: {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
