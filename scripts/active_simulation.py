"""The annotation queue's simulation (issue 55, docs/annotate.md): coverage and interval width of
human-only, uniform PPI++ and active draws at budgets of 10, 20 and 50 stories, and the labels
active needs to reach uniform PPI++'s width; with --ttcw, the same on TTCW's 48 real stories.

    .venv/bin/python scripts/active_simulation.py                 # simulated judges, table + PNG
    .venv/bin/python scripts/active_simulation.py --ttcw          # TTCW (needs the shared data)

Simulated stories have 14 yes/no tests each (as TTCW). The judges (P = the judge's P(Yes) per
item; humans answer Y ~ Bernoulli(P) where the judge is calibrated):
- calibrated, sure of most stories: P = sigmoid(k_s (a_s + b_t + e)), story level a_s ~ N(-0.3,
  1.2), test level b_t ~ N(0, 0.8), item noise e ~ N(0, 0.5); the judge's sharpness k_s is 12 on
  75% of the stories (it reads them clearly: most P within 1% of 0 or 1) and 0.5 on the rest
  (it hesitates on every test of them).
- calibrated, graded: the same with k_s ~ lognormal(log 1.5, 0.75): the confidence varies
  smoothly between stories.
- useless (same confidence): Y from the first population, P from an independent second draw of it:
  the judge's uncertainty varies between stories as much, and tells nothing.
- useless (flat): P ~ U(0, 1) per item, unrelated to Y.
- lopsided: 10% of the stories pass 35% of their tests, the rest 3%; the judge knows which kind a
  story is (P = its rate, calibrated).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from litjudge.engine.app.annotate.simulate import plot_widths
from litjudge.judges.metrics.active import label_ratio, probabilities, vote_uncertainty
from litjudge.judges.metrics.active_sim import (
    DESIGNS,
    STORIES,
    TESTS,
    Curves,
    Population,
    saving,
    scenarios,
    simulate,
)

BUDGETS = (10, 20, 50)
KS = np.arange(4, 81)
FLOOR = 0.2


def table_rows(name: str, curves: Curves, boot: int) -> list[str]:
    rows = []
    for b in BUDGETS:
        i = int(np.nonzero(curves.ks == b)[0][0])
        cells = []
        for d in DESIGNS:
            h = curves.half[d][i]
            cells.append(f"{curves.covered[d][i].mean():.3f} | {np.nanmean(h):.4f}")
        need, lo, hi = saving(curves, b, boot)
        ratio = np.nanmean(curves.half["active"][i]) / np.nanmean(curves.half["human-only"][i])
        rows.append(f"| {name} | {b} | " + " | ".join(cells) + f" | {ratio:.3f} | {need:.1f} [{lo:.1f}, {hi:.1f}] "
                    f"| {1 - need / b:+.0%} |")
    return rows


HEADER = ("| judge | labels | human-only cover / half width | uniform PPI++ cover / half width | active cover / half width "
          "| active / human-only width | labels active needs for uniform PPI++'s width [95%] | saving |\n"
          "|---|---|---|---|---|---|---|---|")


def ttcw_population() -> tuple[Population, dict] | None:
    """TTCW's 48 stories: expert majority as the truth, the 7 recorded judges' vote share as f
    (a response starting with "yes" is a Yes, upstream's rule; gemini-pro's 14 missing answers
    are left out of its share)."""
    from litjudge.engine.core.paths import data_root
    from litjudge.engine.data.ttcw import item_id, load_recorded, load_ttcw

    folder = data_root() / "ttcw"
    if not (folder / "stories.json").exists() or not (folder / "judge_outputs").is_dir():
        return None
    data = load_ttcw(folder)
    judges = sorted(p.stem for p in (folder / "judge_outputs").glob("*.jsonl"))
    answers = [load_recorded(folder / "judge_outputs" / f"{j}.jsonl") for j in judges]
    stories = [s.story_id for s in data.stories]
    tests = sorted(t.idx for t in data.tests)
    cl, y, votes = [], [], []
    for c, sid in enumerate(stories):
        for t in tests:
            cl.append(c)
            y.append(1.0 if data.majority[(sid, t)] == "Yes" else 0.0)
            iid = item_id(sid, t)
            votes.append([float(a[iid].strip().lower().startswith("yes")) if iid in a else np.nan for a in answers])
    ci, v = np.array(cl), np.array(votes)
    n = len(stories)
    share = np.nanmean(v, axis=1)
    pop = Population(np.bincount(ci, weights=np.array(y), minlength=n), np.bincount(ci, weights=share, minlength=n),
                     vote_uncertainty(v, ci, n), np.bincount(ci, minlength=n).astype(float))
    info = {"stories": n, "items": len(y), "judges": judges, "pass_rate": float(np.mean(y)),
            "judge_rate": float(share.mean()), "corr": float(np.corrcoef(pop.human, pop.judge)[0, 1])}
    return pop, info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=2000)
    ap.add_argument("--boot", type=int, default=300, help="bootstrap resamples of the repeats for the saving's interval")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plot", type=Path, default=Path("docs/annotate-simulation.png"))
    ap.add_argument("--ttcw", action="store_true", help="simulate the queue on TTCW's real stories instead")
    a = ap.parse_args(argv)
    start = time.process_time()
    if a.ttcw:
        got = ttcw_population()
        if got is None:
            print("TTCW data not found under the data root (set LITJUDGE_DATA_ROOT to the folder holding ttcw/): "
                  "nothing simulated", file=sys.stderr)
            return 2
        pop, info = got
        print(json.dumps(info))
        p = probabilities(pop.uncertainty, FLOOR)
        print(f"predicted label ratio if the vote share were a calibrated P(Yes): {label_ratio(p, pop.uncertainty):.3f}")
        curves = {"TTCW, 7 judges' vote share": simulate(pop, KS, a.repeats, floor=FLOOR, seed=a.seed)}
    else:
        pops = scenarios(a.repeats, a.seed)
        for name, pop in pops.items():
            p = probabilities(pop.uncertainty, FLOOR)
            ratios = [label_ratio(p[r], pop.uncertainty[r]) for r in range(min(50, a.repeats))]
            print(f"{name}: pass rate {pop.human.sum() / pop.size.sum():.3f}, predicted label ratio "
                  f"{np.mean(ratios):.3f}")
        curves = {name: simulate(pop, KS, a.repeats, floor=FLOOR, seed=a.seed + 1) for name, pop in pops.items()}
    print(f"\n{a.repeats} repeats, floor {FLOOR}, {STORIES if not a.ttcw else 48} stories of {TESTS} tests\n")
    print(HEADER)
    for name, c in curves.items():
        print("\n".join(table_rows(name, c, a.boot)))
    for name, c in curves.items():
        bias = {d: float(np.nanmean(c.error[d][np.nonzero(c.ks == 10)[0][0]])) for d in DESIGNS}
        print(f"mean error at 10 labels, {name}: " + ", ".join(f"{d} {v:+.4f}" for d, v in bias.items()))
    path = a.plot.with_name(a.plot.stem + "-ttcw" + a.plot.suffix) if a.ttcw else a.plot
    plot_widths(curves, path, "TTCW: mean half width against labels" if a.ttcw else "Simulated judges: mean half width "
                "against labels")
    print(f"\nplot: {path}; {time.process_time() - start:.1f} CPU s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
