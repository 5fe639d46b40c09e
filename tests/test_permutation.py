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
