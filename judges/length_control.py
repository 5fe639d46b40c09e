"""Length (and style) control of pairwise agreement with humans: a judge that prefers the longer
text looks good wherever humans do too. A logistic regression of "the judge picked the
human-preferred text" on the log length ratio of that text to the other (and markdown style
differences) is read at zero difference. The features are request metadata (`text_features`),
never part of a key."""
from __future__ import annotations

import math
import re

import polars as pl

from litjudge.engine.data.pairs import Pair

from .metrics.bootstrap import MIN_CLUSTERS, too_few
from .metrics.estimates import Units
from .metrics.logistic import cluster_robust_cov, fit_logistic, separated, sigmoid

STYLE = {"headers": re.compile(r"^\s{0,3}#{1,6}\s", re.M), "lists": re.compile(r"^\s*(?:[-*+]|\d+[.)])\s", re.M),
         "bold": re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__")}
FEATURE_COLUMNS = ("words_a", "words_b", *(f"{k}_{side}" for k in STYLE for side in "ab"))


def text_features(pair: Pair, style: bool = True) -> tuple[tuple[str, int], ...]:
    """Words (and, for style control, markdown style counts) of both texts: request metadata, not
    part of any key."""
    out = [("words_a", len(pair.text_a.split())), ("words_b", len(pair.text_b.split()))]
    for name, pattern in STYLE.items() if style else ():
        out += [(f"{name}_a", len(pattern.findall(pair.text_a))), (f"{name}_b", len(pattern.findall(pair.text_b)))]
    return tuple(out)


def control_features(rows: pl.DataFrame, style: bool) -> list[list[float]]:
    """Per verdict: log length ratio of the human-preferred text to the other, and (style) each
    style count's normalised difference (pref - other) / (pref + other + 1)."""
    a_preferred = pl.col("human") == "a"

    def pref(name: str) -> tuple[pl.Expr, pl.Expr]:
        a, b = pl.col(f"{name}_a").cast(pl.Float64), pl.col(f"{name}_b").cast(pl.Float64)
        return pl.when(a_preferred).then(a).otherwise(b), pl.when(a_preferred).then(b).otherwise(a)

    words, other = pref("words")
    columns = [((words + 1) / (other + 1)).log().alias("length")]
    for k in STYLE if style else ():
        mine, theirs = pref(k)
        columns.append(((mine - theirs) / (mine + theirs + 1)).alias(k))
    return rows.select(columns).to_numpy().tolist() if rows.height else []


def length_controlled(labelled: pl.DataFrame, style: bool) -> dict:
    """Agreement with humans at equal length (and style): logistic regression of "the judge picked
    the human-preferred text" on the log length ratio of that text to the other (and the style
    differences), read at zero difference, sigmoid(intercept); 95% CI from the intercept's
    cluster-robust standard error (pairs as clusters). Verdicts that picked a tie are left out.
    No interval with fewer than MIN_CLUSTERS pairs (else a t(G - 1) quantile); under perfect
    separation (the judge always right, or right exactly on one side of a length ratio) the fit is
    set by its ridge penalty, not the data: `separated` flags it, and the value, its coefficients and
    its interval are left out (a hostile pass: 19 of 20 pairs right, the one wrong at the shortest
    preferred text, printed lc_accuracy 0.99999999 beside accuracy 0.95, and such fits made the
    mean lc_accuracy of a judge right 95% of the time 0.962 at 10 pairs)."""
    style = style and all(f"{k}_a" in labelled.columns for k in STYLE)
    rows = labelled.filter(pl.col("pick") != "tie")
    names = ["length"] + (list(STYLE) if style else [])
    if not rows.height:
        return {"features": "+".join(names), "n": 0, "accuracy": None, "lc_accuracy": None, "ci_low": None,
                "ci_high": None, "separated": None, "ci_note": None, **{f"coef_{n}": None for n in names}}
    x = control_features(rows, style)
    y = [float(p == h) for p, h in zip(rows["pick"].to_list(), rows["human"].to_list())]
    beta, lo, hi, split, note = lc_fit(x, y, rows["pair_id"].to_list())
    return {"features": "+".join(names), "n": len(y), "accuracy": sum(y) / len(y),
            "lc_accuracy": None if split else sigmoid(beta[0]), "ci_low": lo, "ci_high": hi, "separated": split,
            "ci_note": note, **{f"coef_{n}": None if split else float(b) for n, b in zip(names, beta[1:])}}


def lc_fit(x: list[list[float]], y: list[float], pairs: list) -> tuple:
    """(coefficients, CI low, CI high, separated, note) of the length-controlled fit: the interval
    from the intercept's cluster-robust standard error with a t(G - 1) quantile (the tables' and
    a sweep's, `lc_units`)."""
    beta = fit_logistic(x, y)
    g = len(set(map(str, pairs)))
    split = separated(x, y)
    note = too_few(g) if g < MIN_CLUSTERS else SEPARATED if split else None
    if note is not None:
        return beta, None, None, split, note
    from scipy.special import stdtrit

    se = math.sqrt(max(cluster_robust_cov(x, y, beta, pairs)[0, 0], 0.0))
    if se <= 1e-9:              # every pair's residuals cancel: a zero-width interval claims what no pair shows
        return beta, None, None, split, CANCELLED
    z = float(stdtrit(g - 1, 0.975))                   # t(G - 1): few clusters
    return beta, sigmoid(beta[0] - z * se), sigmoid(beta[0] + z * se), split, None


def lc_accuracy_of(c) -> float:
    """Length- (and style-) controlled agreement of rows with features x0.. and outcome y."""
    x = [c[k] for k in sorted(k for k in c if k.startswith("x"))]
    rows, y = list(zip(*x)), c["y"].astype(float).tolist()
    if not len(y) or separated(rows, y):               # the table's: no value where the penalty sets it
        return math.nan
    return sigmoid(float(fit_logistic(rows, y)[0]))


def lc_rule(u: Units, resamples: int, seed: int) -> tuple[float, float, str | None]:
    """A sweep's interval of lc_accuracy: the table's (`lc_fit`), not a bootstrap of refits."""
    x = [list(r) for r in zip(*(u.columns[k] for k in sorted(k for k in u.columns if k.startswith("x"))))]
    _, lo, hi, _, note = lc_fit(x, u.columns["y"].astype(float).tolist(), u.cluster_of_rows().tolist())
    return (math.nan if lo is None else lo), (math.nan if hi is None else hi), note


SEPARATED = "perfect separation: the fit is set by its ridge penalty, not the data; no value and no interval"
CANCELLED = ("every pair's verdicts cancel in the fit (one right, one wrong at the same length ratio: a judge "
             "that always picks one position): the clustered standard error is 0; no interval")
