"""Issue 55's promise: "the estimate on the page equals a recomputation from the exported labels
within 1e-9". A real `litjudge annotate` server (its own process, loopback), three annotators
two to a story over HTTP (a skip, an undo and a changed answer on the way), a design that draws
some stories more than once; the estimate the page reads (/api/estimate) against one recomputed
from the exported CSV and JSONL alone, by the formulas of docs/annotate.md ("Method") written out
here: no litjudge estimator is called."""
from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import uuid

import numpy as np
import pytest
from scipy import stats

from tests.annotate_run import Served, ttcw_run

MIN = 10                       # docs: no interval below 10 labelled draws


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return ttcw_run(tmp_path_factory.mktemp("conformance"), tests=4)       # 4 tests: the judges' totals vary


def answer(who: str, item: str) -> str:
    """A fixed answer per annotator and item; the three annotators disagree on some items."""
    return "Yes" if int(hashlib.sha256(f"{who}|{item}".encode()).hexdigest(), 16) % 5 < 2 else "No"


def submit(c, who: str, item: dict, flip: bool = False) -> None:
    labels = {q["item"]: answer(who, q["item"]) for q in item["questions"]}
    if flip:
        labels = {k: "No" if v == "Yes" else "Yes" for k, v in labels.items()}
    r = c.post("/api/label", json={"annotator": who, "cluster": item["cluster"], "labels": labels,
                                   "key": uuid.uuid4().hex})
    assert r.status_code == 200 and r.json()["stored"], r.text


def parsed(row: dict) -> dict:
    """An exported row with its numbers read (the CSV gives text)."""
    return {**row, "score": float(row["score"]), "probability": float(row["probability"]),
            "judge_total": float(row["judge_total"]), "cluster_items": int(row["cluster_items"]),
            "judge_total_all": float(row["judge_total_all"]), "items_all": float(row["items_all"]),
            "clusters_all": int(row["clusters_all"]),
            "draws": [int(x) for x in str(row["draws"]).split()]}


def recompute(rows: list[dict]) -> dict:
    """The page's estimates from the exported rows alone (docs/annotate.md, "Method")."""
    rows = [parsed(r) for r in rows if str(r["counted"]) in ("True", "true")   # JSONL true, CSV "True"
            and str(r["standing"]) in ("True", "true")]               # an answer replaced later is history
    latest = {(r["annotator"], r["item"]): r for r in rows}
    assert len(latest) == len(rows), "two standing answers of one annotator to one item"
    scores: dict[str, dict[str, list[float]]] = {}
    info: dict[str, dict] = {}
    for r in latest.values():
        scores.setdefault(r["cluster"], {}).setdefault(r["item"], []).append(r["score"])
        info[r["cluster"]] = r
    big_f, big_m, n_clusters = rows[0]["judge_total_all"], rows[0]["items_all"], rows[0]["clusters_all"]
    assert all((r["judge_total_all"], r["items_all"], r["clusters_all"]) == (big_f, big_m, n_clusters) for r in rows)
    human = {c: sum(sum(v) / len(v) for v in by_item.values()) for c, by_item in scores.items()
             if len(by_item) == info[c]["cluster_items"]}                # every item answered
    at = {k: c for c in human for k in info[c]["draws"]}
    k = 0
    while k in at:                                                       # the labelled prefix
        k += 1
    seq = [at[j] for j in range(k)]
    y = np.array([human[c] for c in seq])
    f = np.array([info[c]["judge_total"] for c in seq])
    m = np.array([float(info[c]["cluster_items"]) for c in seq])
    p = np.array([info[c]["probability"] for c in seq])
    theta_h = (y / p).sum() / (m / p).sum()

    def one(lam: float | None) -> dict:
        tuned = lam is None
        if tuned:     # the f coefficient of the least squares of Y on (f, m), weights 1/p, no intercept
            w = 1 / p
            s11, s12, s22 = (w * f * f).sum(), (w * f * m).sum(), (w * m * m).sum()
            det = s11 * s22 - s12 * s12
            tuned = k >= 3 and det > 1e-12 * max(s11 * s22, 1e-300)
            lam = float((s22 * (w * f * y).sum() - s12 * (w * m * y).sum()) / det) if tuned else 0.0
        theta = lam * big_f / big_m + ((y - lam * f) / p).sum() / (m / p).sum()
        value = min(1.0, max(0.0, theta))
        if k < MIN:
            return {"value": value, "low": None, "high": None, "half_width": None, "lam": lam, "draws": k}
        r = (y - lam * f - (theta - lam * big_f / big_m) * m) / p
        carried = int((m > 0).sum())                  # the draws of clusters in the quantity
        df = carried - (2 if tuned else 1)
        var = (r * r).sum() * carried / df / (m / p).sum() ** 2      # M estimated by the draws
        sat = (r * r).sum() ** 2 / (r ** 4).sum() * (carried - 1) / carried
        half = stats.t.ppf(0.975, max(1.0, min(df, sat))) * math.sqrt(var)
        return {"value": value, "low": max(0.0, theta - half), "high": min(1.0, theta + half), "half_width": half,
                "lam": lam, "draws": k}

    uniform = None
    if k >= MIN and len(set(seq)) > 1:
        a0, b0 = y - theta_h * m, f - big_f / big_m * m
        saa, sab, sbb = (a0 * a0 / p).mean(), (a0 * b0 / p).mean(), (b0 * b0 / p).mean()
        lam_u = sab / sbb if sbb > 0 else 0.0
        resid = max(0.0, saa - lam_u * sab) * k / (k - 2)
        r_u = a0 - lam_u * b0                          # Satterthwaite's share from these residuals
        rho = min(1.0, max(1e-9, (r_u * r_u / p).mean() ** 2 / (n_clusters * (r_u ** 4 / p).mean())))
        df = max(1.0, min(k - 2.0, rho * (k - 1)))
        uniform = min(1.0, stats.t.ppf(0.975, df) * math.sqrt(n_clusters * resid / k) / big_m)
    return {"labelled_draws": k, "clusters_labelled": len(human), "active": one(None), "human": one(0.0),
            "uniform_half_width": uniform}


def same(page: dict, mine: dict) -> None:
    assert page["labelled_draws"] == mine["labelled_draws"] and page["clusters_labelled"] == mine["clusters_labelled"]
    for name in ("active", "human"):
        for field in ("value", "low", "high", "half_width", "lam"):
            got, want = page[name][field], mine[name][field]
            assert (got is None) == (want is None), (name, field, got, want)
            assert got is None or abs(got - want) <= 1e-9, (name, field, got, want)
    got, want = page["uniform_half_width"], mine["uniform_half_width"]
    assert (got is None) == (want is None) and (got is None or abs(got - want) <= 1e-9), (got, want)


def exported(c) -> tuple[list[dict], list[dict]]:
    as_csv = list(csv.DictReader(io.StringIO(c.get("/api/export.csv").text)))
    as_jsonl = [json.loads(x) for x in c.get("/api/export.jsonl").text.splitlines()]
    assert [r["key"] + r["item"] for r in as_csv] == [r["key"] + r["item"] for r in as_jsonl]
    return as_csv, as_jsonl


def test_the_page_estimate_equals_a_recomputation_from_the_exported_labels(run):
    with Served(run, "--budget", "40", "--per-item", "2") as s, s.client() as c:
        # part of the queue: ann and bob read the first stories, ann changes her mind on one (undo,
        # then a different answer), zoe skips the next story: the estimate stops at its draw
        for _ in range(6):
            for who in ("ann", "bob"):
                submit(c, who, c.get("/api/next", params={"annotator": who}).json())
        assert c.post("/api/undo", json={"annotator": "ann"}).json()["undone"]
        submit(c, "ann", c.get("/api/next", params={"annotator": "ann"}).json(), flip=True)
        skipped = c.get("/api/next", params={"annotator": "zoe"}).json()
        c.post("/api/skip", json={"annotator": "zoe", "cluster": skipped["cluster"], "key": uuid.uuid4().hex})
        page = c.get("/api/estimate").json()
        as_csv, as_jsonl = exported(c)
        assert 0 < page["labelled_draws"] < 40 and page["labelled_draws"] == skipped["draw"]
        for rows in (as_csv, as_jsonl):
            same(page, recompute(rows))
        # the whole queue, each story by two of the three
        while True:
            items = {who: c.get("/api/next", params={"annotator": who}).json() for who in ("zoe", "bob", "ann")}
            if all(i["done"] for i in items.values()):
                break
            for who, item in items.items():
                if not item["done"]:
                    submit(c, who, item)
        page = c.get("/api/estimate").json()
        as_csv, as_jsonl = exported(c)
    assert page["labelled_draws"] == 40 and page["active"]["low"] is not None
    assert max(int(r["times_drawn"]) for r in as_jsonl) > 1                  # a story drawn twice counts twice
    assert len({r["annotator"] for r in as_jsonl}) == 3
    answers = {}
    for r in as_jsonl:
        answers.setdefault(r["item"], set()).add(r["label"])
    assert any(len(v) == 2 for v in answers.values())                          # the annotators disagree somewhere
    for rows in (as_csv, as_jsonl):
        mine = recompute(rows)
        same(page, mine)
    assert page["active"]["lam"] != 0.0, page["active"]             # the judges are used: lam tuned
