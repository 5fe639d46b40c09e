"""Permutation self-consistency on listwise ranking: each list judged in several seeded orders,
the central (Kemeny) ranking and the position bias before and after, recomputed here by brute
force from the stored verdicts; raising the number of orders generates only the new ones."""
from __future__ import annotations

import dataclasses
import json
import math
from itertools import permutations

from litjudge.engine.app.run import run
from litjudge.engine.core.config import load_config
from litjudge.judges.listwise import ListwiseOptions, shown_orders
from litjudge.judges.metrics import spearman
from litjudge.judges.metrics.kemeny import disagreements, pairwise_wins
from tests.conftest import PROJECT_ROOT, needs_data

CONFIG = PROJECT_ROOT / "runs" / "listwise-aut-psc.toml"


def test_orders_are_seeded_per_list_and_order_and_extend_without_change():
    listed = [(f"c{i}", object()) for i in range(6)]
    three = shown_orders(listed, ListwiseOptions(orders=3), "brick/0")
    five = shown_orders(listed, ListwiseOptions(orders=5), "brick/0")
    assert three[0] == listed and five[:3] == three              # adding orders keeps the first ones
    assert len({tuple(c for c, _ in o) for o in five}) == 5
    assert all(sorted(c for c, _ in o) == sorted(c for c, _ in listed) for o in five)


@needs_data
def test_psc_run_recomputed_from_stored_verdicts(tiny, runs_dir):
    """Every PSC table recomputed from the run's stored verdicts, whatever the judge ranked (the
    session's tiny random judge: the recomputation is the point)."""
    config = load_config(CONFIG, limit=1, judge=tiny.spec.name)
    config = dataclasses.replace(config, options={**config.options, "orders": 3})
    out = run(config, progress=False, backends={tiny.spec.name: tiny})
    assert out.verdicts.height == 3 and out.manifest.verdicts.unparsed == 0
    v = out.verdicts.sort("order")
    rankings = []
    for r in v.iter_rows(named=True):
        codes = json.loads(r["codes"])
        rankings.append([codes[c] for c, _ in r["value"]])   # best first: the value arrives decoded
    wins = pairwise_wins(rankings)
    best = min(disagreements(list(p), wins) for p in permutations(rankings[0]))
    central = out.tables["psc_rankings"].sort("central_position", descending=True)["item_id"].to_list()
    assert disagreements(central, wins) == best                     # the Kemeny optimum (6 items: exact)
    psc = out.tables["psc_rankings"]                                 # both positions on one scale, first 1, last 0
    for column in ("single_position", "central_position"):           # (the central one was N..1 beside the share)
        assert sorted(psc[column].to_list()) == [k / 5 for k in range(6)], (column, psc[column].to_list())
    # position bias before: where each order showed each item vs its rank in that order, averaged
    # over the orders; after: each item's mean shown position vs its place in the Kemeny ranking
    # of all orders (what the aggregate inherits)
    befores, shown_sum = [], {}
    for k, r in enumerate(v.iter_rows(named=True)):
        codes = json.loads(r["codes"])
        shown = {codes[c]: n + 1 for n, c in enumerate(json.loads(r["shown"]))}
        items = sorted(shown)
        own = {item: len(rankings[k]) - i for i, item in enumerate(rankings[k])}
        befores.append(spearman([shown[i] for i in items], [own[i] for i in items]).value)
        for i in items:
            shown_sum[i] = shown_sum.get(i, 0) + shown[i]
    place = {item: len(central) - i for i, item in enumerate(central)}
    afters = [spearman([shown_sum[i] / len(rankings) for i in items], [place[i] for i in items]).value]
    bias = {r["ranking"]: r["spearman"] for r in out.tables["psc_position_bias"].iter_rows(named=True)}
    for key, values in (("before: single order", befores), ("after: central (Kemeny)", afters)):
        kept = [x for x in values if not math.isnan(x)]
        expect = sum(kept) / len(kept) if kept else None
        assert (expect is None and bias[key] is None) or math.isclose(bias[key], expect, abs_tol=1e-12), (key, bias[key], expect)
    assert set(out.tables["psc_agreement"]["ranking"]) == {"single order", "central (Kemeny)", "mean score over orders"}
    # one more order later, in the same folder (another config: asked for, its stored verdicts reused):
    # only it is generated
    more = dataclasses.replace(config, options={**config.options, "orders": 4})
    again = run(more, progress=False, backends={tiny.spec.name: tiny}, overwrite=True)
    assert again.verdicts.height == 4 and [j["generated"] for j in again.manifest.judges] == [1]


def test_a_list_s_repeats_are_averaged_into_its_value_first():
    """PSC's means are over lists, each its repeats' mean (the module's rule): a list whose second
    repeat is undefined weighed half as much as one with both when every (list, repeat) counted."""
    import polars as pl

    from litjudge.judges.listwise import SCORES
    from litjudge.judges.permutation import permutation_tables

    rows = []
    for lst, repeats in enumerate(([[0, 1, 2, 3], [3, 2, 1, 0]], [[0, 1, 2, 3]])):     # list 1: one repeat
        for rep, ranking in enumerate(repeats):
            for order in (0, 1):
                for at, item in enumerate(ranking):
                    rows.append({"judge": "j", "group": "g", "list": lst, "order": order, "repeat": rep, "n_items": 4,
                                 "item_id": f"{lst}-{item}", "score": float(4 - at), "position": (3 - at) / 3,
                                 "shown_at": at + 1})
    s = pl.DataFrame(rows, schema=SCORES)
    info = pl.DataFrame({"item_id": s["item_id"].unique().to_list()}).with_columns(
        pl.col("item_id").str.split("-").list.last().cast(pl.Float64).alias("category_rank"))
    agreement = {r["ranking"]: r for r in permutation_tables(s, info, 2)["psc_agreement"].iter_rows(named=True)}
    # list 0: Spearman -1 and +1 over its repeats (mean 0); list 1: -1. Over lists -0.5, not (-1 + 1 - 1) / 3
    row = agreement["single order"]
    assert row["spearman"] == -0.5 and (row["units"], row["lists"]) == (3, 2), row


def test_a_central_ranking_by_local_search_is_labelled():
    """Over 12 items the Kemeny ranking is a local search's (kemeny.is_exact): psc_rankings says so
    per row, and the agreement of the central ranking says so in its note (it claimed the optimum)."""
    import polars as pl

    from litjudge.judges.permutation import permutation_tables
    from tests.test_statistics_audit import info_for, positional_scores

    for items, exact in ((8, True), (13, False)):
        s = positional_scores(lists=3, items=items, orders=2)
        out = permutation_tables(s, info_for(s), 2)
        assert out["psc_rankings"]["central_exact"].unique().to_list() == [exact]
        central = out["psc_agreement"].filter(pl.col("ranking") == "central (Kemeny)")["ci_note"][0] or ""
        assert ("by local search, not exact" in central) is not exact, central
