"""TTCW's agreement with the experts per judge (and per test): the overall and per-test tables'
counts, kappa and balanced accuracy, from one group-by's 2x2 counts for every group at once (a
table of 1,000 judges by 14 tests listed each group's rows, 6-8 s); and the intervals the overall
and story-cutoff tables print, the ones a sweep ranks by."""
from __future__ import annotations

import polars as pl

from .metrics import binary_agreement
from .metrics.bootstrap import joined_notes
from .metrics.estimates import Units, balanced_accuracy_of, kappa_of


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
            "note": "; ".join(why for why, undefined in (
                ("the judge and the experts each gave one answer throughout: kappa undefined", not k.defined),
                ("one expert class: balanced accuracy undefined", not ba.defined)) if n and undefined) or None,
            "judge_pass_rate": row["said_yes"] / judged if judged else None,
            "expert_pass_rate": (tp + fn) / n if n else None}
    return out


def with_intervals(agreement: dict, rows: pl.DataFrame, cluster: str) -> dict:
    """An `agreements` row with each metric's interval beside it and the intervals' note last."""
    intervals = agreement_intervals(rows, cluster)
    out: dict = {}
    for key, value in agreement.items():
        out[key] = value
        out |= {k: intervals[k] for k in (f"{key}_low", f"{key}_high") if k in intervals}
    return out | {"ci_note": intervals["ci_note"]}


def agreement_intervals(rows: pl.DataFrame, cluster: str) -> dict:
    """Kappa's and balanced accuracy's 95% intervals over the rows with both verdicts, resampling
    whole `cluster`s (a story's verdicts move together), by the rule a sweep ranks them by
    (`Units.agreement`): none where the experts' rarer answer is in fewer than MIN_CLUSTERS
    clusters. `ci_note` says why one is missing (each metric named where their reasons differ)."""
    ok = rows.filter(pl.col("judge_pass").is_not_null() & pl.col("expert_pass").is_not_null())
    clusters, truth, pred = ok[cluster].to_list(), ok["expert_pass"].to_list(), ok["judge_pass"].to_list()
    out: dict = {}
    notes: dict[str, str | None] = {}
    for name, statistic in (("kappa", kappa_of), ("balanced_accuracy", balanced_accuracy_of)):
        low, high, notes[name] = Units.agreement(clusters, truth, pred, statistic).interval_with_note()
        out |= {f"{name}_low": low, f"{name}_high": high}
    same = len(set(notes.values())) == 1
    out["ci_note"] = "no verdict with an expert label was read: no agreement" if not ok.height else joined_notes(
        *(note if same or note is None else f"{name.replace('_', ' ')}: {note}" for name, note in notes.items()))
    return out
