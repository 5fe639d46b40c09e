"""TTCW's agreement with the experts per judge (and per test): the overall and per-test tables'
counts, kappa and balanced accuracy, from one group-by's 2x2 counts for every group at once (a
table of 1,000 judges by 14 tests listed each group's rows, 6-8 s)."""
from __future__ import annotations

import polars as pl

from .metrics import binary_agreement


def agreements(v: pl.DataFrame, by: list[str]) -> dict[tuple, dict]:
    """Per group of `by`: agreement over the verdicts the missing-answer policy keeps (`n`
    counts them; `unparsed` counts the judge's non-answers, dropped, or imputed by the policy
    and then inside n), kappa and balanced accuracy from the group's 2x2 counts."""
    jp, ep = pl.col("judge_pass"), pl.col("expert_pass")
    counts = v.group_by(by).agg((jp & ep).sum().alias("tp"), (~jp & ep).sum().alias("fn"),
                                (jp & ~ep).sum().alias("fp"), (~jp & ~ep).sum().alias("tn"),
                                (pl.col("status") != "ok").sum().alias("unparsed"),
                                jp.is_not_null().sum().alias("judged"), jp.sum().alias("said_yes"))
    out = {}
    for row in counts.iter_rows(named=True):
        tp, fn, fp, tn, judged = row["tp"], row["fn"], row["fp"], row["tn"], row["judged"]
        n = tp + fn + fp + tn
        k, ba = binary_agreement(tp, fn, fp, tn)
        out[tuple(row[c] for c in by)] = {
            "n": n, "unparsed": row["unparsed"], "kappa": k.value, "balanced_accuracy": ba.value,
            "note": "one expert class: balanced accuracy undefined" if n and not ba.defined else None,
            "judge_pass_rate": row["said_yes"] / judged if judged else None,
            "expert_pass_rate": (tp + fn) / n if n else None}
    return out
