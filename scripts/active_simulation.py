"""The annotation queue's simulation (issue 55, docs/annotate.md): coverage and interval width of
human-only, uniform PPI++ and active draws at budgets of 10, 20 and 50 stories, and the labels
active needs to reach uniform PPI++'s width; with --ttcw, the same on TTCW's 48 real stories.

    .venv/bin/python scripts/active_simulation.py --docs docs/annotate.md          # simulated judges
    .venv/bin/python scripts/active_simulation.py --ttcw --docs docs/annotate.md   # TTCW (shared data)

Every figure of docs/annotate.md's "Simulation" and "TTCW" sections comes from here: the script
prints the markdown that goes between the section's markers and, with --docs, writes it there
(tests/test_active_inference.py regenerates the calibrated judge's rows and finds them there).

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
import textwrap
import time
from pathlib import Path

import numpy as np

from litjudge.engine.app.annotate.simulate import plot_widths
from litjudge.judges.metrics.active import MAX_COST, MIN, label_ratio, probabilities
from litjudge.judges.metrics.active_sim import DESIGNS, STORIES, TESTS, Curves, Population, saving, scenarios, simulate
from litjudge.judges.metrics.draws_needed import Totals, min_draws
from litjudge.judges.metrics.uncertainty import vote_share, vote_uncertainty

BUDGETS = (10, 20, 50)
REPEATS, BOOT, SEED = 2000, 300, 0                 # the defaults the docs' figures were made with
KS = np.arange(4, 81)
FLOOR = 0.2
CAPS = (float("inf"), MAX_COST, 1.15, 1.20)       # the cost cap's trade-off (inf: the floor alone)
SURE, USELESS, LOPSIDED = "calibrated, sure of most", "useless (same confidence)", "lopsided 35%/3%"
CHECKED = ("calibrated, sure of most", "calibrated, graded", "useless (same confidence)", "useless (flat)")
NULL = ("useless (same confidence)", "useless (flat)")
HEADER = ["| judge | labels | human-only | uniform PPI++ | active | active / human-only width "
          "| labels active needs for uniform PPI++'s width [95%] | saving [95%] "
          "| labels uniform PPI++ needs for active's width [95%] | saving, read that way [95%] |",
          "|---|---|---|---|---|---|---|---|---|---|"]


def marks(ttcw: bool) -> tuple[str, str]:
    """The markers around the generated part of docs/annotate.md."""
    what = "scripts/active_simulation.py" + (" --ttcw" if ttcw else "")
    return f"<!-- begin: written by {what} --docs; do not edit -->", f"<!-- end: {what} -->"


def _at(curves: Curves, b: int) -> int:
    return int(np.nonzero(curves.ks == b)[0][0])


def width_ratio(curves: Curves, b: int) -> float:
    i = _at(curves, b)
    return float(np.nanmean(curves.half["active"][i]) / np.nanmean(curves.half["human-only"][i]))


def rmse(curves: Curves, design: str, b: int) -> float:
    return float(np.sqrt(np.mean(curves.error[design][_at(curves, b)] ** 2)))


def covered(curves: Curves, design: str, b: int) -> float:
    """The coverage of the intervals given at `b` draws (NaN where none is: withheld, `min_draws`)."""
    i = _at(curves, b)
    given = np.isfinite(curves.half[design][i])
    return float(curves.covered[design][i][given].mean()) if given.any() else float("nan")


def cover(curves: Curves, designs: tuple[str, ...] = DESIGNS, budgets: tuple[int, ...] = BUDGETS) -> list[float]:
    return [c for d in designs for b in budgets if np.isfinite(c := covered(curves, d, b))]


def _cell(curves: Curves, design: str, b: int) -> str:
    """Coverage / mean half width of the intervals given, and the share given where not every repeat
    gives one."""
    given = float(np.isfinite(curves.half[design][_at(curves, b)]).mean())
    if not given:
        return "none given"
    share = "" if given >= 0.995 else f" ({given:.0%} given)"
    return f"{covered(curves, design, b):.3f} / {np.nanmean(curves.half[design][_at(curves, b)]):.4f}{share}"


def _labels(x: float, lo: float, hi: float, b: int, saved: bool) -> str:
    """A number of labels with its interval and the saving it means ('-' where a curve has no width)."""
    if not all(np.isfinite(v) for v in (x, lo, hi)):
        return "- | -"
    if saved:
        return f"{x:.1f} [{lo:.1f}, {hi:.1f}] | {_pct(1 - x / b)} [{_pct(1 - hi / b)}, {_pct(1 - lo / b)}]"
    return f"{x:.1f} [{lo:.1f}, {hi:.1f}] | {_pct(1 - b / x)} [{_pct(1 - b / lo)}, {_pct(1 - b / hi)}]"


def _pct(x: float) -> str:
    return f"{x:.0%}".replace("-0%", "0%")


def _span(low: str, high: str) -> str:
    """'low-high', or one figure when the two read the same."""
    return low if low == high else f"{low}-{high}"


def table_rows(name: str, curves: Curves, boot: int) -> list[str]:
    """Per budget: coverage / mean half width per design, active's width against human-only, the
    labels active needs for uniform PPI++'s width at the budget and the labels uniform PPI++
    needs for active's, each with its bootstrap interval and the saving it means."""
    rows = []
    for b in BUDGETS:
        cells = [_cell(curves, d, b) for d in DESIGNS]
        if np.isfinite(curves.half["active"][_at(curves, b)]).mean() < 0.995:   # widths of the few given: no saving
            rows.append(f"| {name} | {b} | " + " | ".join(cells) + " | - | - | - | - | - |")
            continue
        rows.append(f"| {name} | {b} | " + " | ".join(cells) + f" | {width_ratio(curves, b):.3f} | "
                    + _labels(*saving(curves, b, boot), b, saved=True) + " | "
                    + _labels(*saving(curves, b, boot, design="uniform PPI++", reference="active"), b, saved=False)
                    + " |")
    return rows


def mean_label_ratio(pop: Population, cap: float = MAX_COST, n: int = 50) -> float:
    """`label_ratio` averaged over the first n populations."""
    u = pop.uncertainty
    p = probabilities(u, FLOOR, max_cost=cap)
    return float(np.mean([label_ratio(p[r], u[r]) for r in range(min(n, len(u)))]))


def cap_rows(pops: dict[str, Population], repeats: int, seed: int, boot: int) -> tuple[list[str], str]:
    """The cost cap's trade-off, and a sentence on the lowest cap whose saving at 10 stories
    reaches 25%: that saving's interval and the useless judge's widest width against human-only."""
    rows = ["| cost cap | predicted label ratio | saving at 10 / 20 / 50 stories | useless judge's width / human-only "
            "at 10 / 20 / 50 | lowest coverage of the two judges' designs at 10, 20, 50 |", "|---|---|---|---|---|"]
    quarter = "no cap in the table reaches 25% at 10"
    for cap in sorted(CAPS):
        got = {name: simulate(pops[name], KS, repeats, floor=FLOOR, seed=seed,
                              probability=probabilities(pops[name].uncertainty, FLOOR, max_cost=cap))
               for name in (SURE, USELESS)}
        save = [1 - saving(got[SURE], b)[0] / b for b in BUDGETS]
        wide = [width_ratio(got[USELESS], b) for b in BUDGETS]
        if save[0] >= 0.25 and quarter.startswith("no cap"):
            _, lo, hi = saving(got[SURE], 10, boot)
            saved = f"saves {_pct(save[0])} [{_pct(1 - hi / 10)}, {_pct(1 - lo / 10)}] there"
            if cap == float("inf"):
                quarter = (f"only drawing with no cap (the floor alone) reaches 25% at 10: it {saved} and makes the "
                           f"useless judge up to {max(wide):.3f}x as wide as human-only, past the limit")
            else:
                quarter = (f"the lowest cap that reaches 25% at 10 ({cap:.2f}) {saved} and makes the useless judge "
                           f"up to {max(wide):.3f}x as wide as human-only. The queue keeps {MAX_COST:.2f}: that 25% "
                           f"is a point estimate whose interval reaches below it, and the useless judge would be "
                           f"{1.10 - max(wide):.3f} under the limit in the one useless judge simulated here")
        rows.append(f"| {'none (the floor alone)' if cap == float('inf') else f'{cap:.2f}'} "
                    f"| {mean_label_ratio(pops[SURE], cap):.3f} | {' / '.join(_pct(s) for s in save)} "
                    f"| {' / '.join(f'{w:.3f}' for w in wide)} | {min(min(cover(c)) for c in got.values()):.3f} |")
    return rows, quarter


def findings(curves: dict[str, Curves], pops: dict[str, Population], repeats: int, seed: int, boot: int) -> list[str]:
    """The prose under the table: every number in it is computed here."""
    sure = curves[SURE]
    need10, lo10, hi10 = saving(sure, 10, boot)
    unif10 = saving(sure, 10, design="uniform PPI++", reference="active")[0]
    s = {b: 1 - saving(sure, b)[0] / b for b in BUDGETS}
    graded = [1 - saving(curves["calibrated, graded"], b)[0] / b for b in BUDGETS]
    cov = [c for n in CHECKED for c in cover(curves[n])]
    cov10 = [c for n in CHECKED for c in cover(curves[n], budgets=(10,))]
    wide = max(width_ratio(curves[n], b) for n in NULL for b in BUDGETS)
    more = max(saving(curves[n], b)[0] / b - 1 for n in NULL for b in BUDGETS)
    lop_u, lop_a = cover(curves[LOPSIDED], ("human-only", "uniform PPI++"), (10, 20)), cover(curves[LOPSIDED], ("active",))
    lop = pops[LOPSIDED]
    assert isinstance(lop.totals, list)
    needs = [min_draws(probabilities(lop.uncertainty[r], FLOOR, size=lop.size[r]), lop.judge[r], lop.size[r],
                       lop.totals[r], seed=r) for r in range(len(lop.uncertainty))]
    given = {b: float(np.isfinite(curves[LOPSIDED].half["active"][_at(curves[LOPSIDED], b)]).mean()) for b in BUDGETS}
    bias = max(abs(float(np.mean(c.error[d][_at(c, 10)]))) for c in curves.values() for d in DESIGNS)
    oracle = simulate(pops[SURE], np.array(BUDGETS), repeats, floor=FLOOR, seed=seed, lam=1.0)
    tuned = {d: rmse(sure, d, 10) for d in ("uniform PPI++", "active")}
    fixed = {d: rmse(oracle, d, 10) for d in ("uniform PPI++", "active")}
    caps, quarter = cap_rows(pops, repeats, seed, boot)
    ratio = mean_label_ratio(pops[SURE])
    return [
        "What the table shows:",
        "",
        f"- **Coverage with a calibrated or useless judge.** It is at least {min(cov):.3f} for all three designs at "
        f"10, 20 and 50 stories; {min(cov10):.3f}-{max(cov10):.3f} at 10, where the Satterthwaite df makes the "
        "intervals conservative.",
        f"- **A useless judge's width.** Active is at most {wide - 1:.1%} wider than human-only (the limit is "
        f"10%). When the useless judge's uncertainty varies between stories, active needs up to {more:.0%} more "
        "labels than uniform PPI++.",
        f"- **Saving with a calibrated judge sure of most stories.** Active reaches uniform PPI++'s width with "
        f"{_pct(s[10])} [{_pct(1 - hi10 / 10)}, {_pct(1 - lo10 / 10)}] fewer labels at 10 stories, {_pct(s[20])} at "
        f"20 and {_pct(s[50])} at 50 (intervals in the table): issue 55's 25% holds at 20 and 50 stories, not at "
        f"10. Read the other way, uniform PPI++ needs {unif10:.1f} labels for the width active gets from 10 "
        f"({_pct(1 - 10 / unif10)} fewer for active).",
        f"- **Saving with graded confidence.** {_span(_pct(min(graded)), _pct(max(graded)))}: the saving is as "
        "large as "
        "the judge's uncertainty is uneven across stories, which `label_ratio` predicts "
        f"({mean_label_ratio(pops['calibrated, graded']):.3f} here).",
        f"- **The lopsided mixture.** At 10 and 20 stories the uniform designs undercover ({min(lop_u):.3f}-"
        f"{max(lop_u):.3f}); see \"Not covered\" above. The judge's probabilities make active's draws skewed: "
        f"the rule (\"Skewed draws\" above) asks {int(np.median(needs))} draws (median; "
        f"{min(needs)}-{max(needs)} over the populations), so active gives an interval in "
        f"{_pct(given[10])} / {_pct(given[20])} / {_pct(given[50])} of the repeats at 10 / 20 / 50, and those given "
        f"cover {_span(f'{min(lop_a):.3f}', f'{max(lop_a):.3f}')}.",
        f"- **Bias.** The mean error of every design at 10 stories is within {bias:.4f}.",
        "",
        "**Why 10 stories is hard.** The saving is a large-sample figure: `label_ratio` predicts "
        f"{ratio:.3f} labels per uniform PPI++ label for the sure judge (a {_pct(1 - ratio)} "
        f"saving), and at 50 stories the table measures {_pct(s[50])}. At 10 stories, costs that fade with more "
        "labels take part of it:",
        "",
        f"- *lam is learnt from 10 draws.* At 10 stories the root mean square error is {tuned['active']:.4f} for "
        f"active and {tuned['uniform PPI++']:.4f} for uniform PPI++ with lam tuned, against {fixed['active']:.4f} "
        f"and {fixed['uniform PPI++']:.4f} with lam fixed at 1 (what an oracle would choose for this judge). In "
        f"variance, active saves {_pct(1 - (tuned['active'] / tuned['uniform PPI++']) ** 2)} with lam tuned and "
        f"{_pct(1 - (fixed['active'] / fixed['uniform PPI++']) ** 2)} with the oracle's lam.",
        "- *The interval's t.* 25% fewer than 10 labels is 7.5, where the t quantile has at most 5.5 df (k-2) "
        f"before Satterthwaite's cut. That cut is what keeps every design above 0.93 at 10 draws (\"Where this "
        f"departs\" above); it also makes uniform PPI++ conservative (coverage "
        f"{sure.covered['uniform PPI++'][_at(sure, 10)].mean():.3f} at 10).",
        f"- *The useless-judge limit.* A higher cost cap draws the uncertain stories more and saves more, and a "
        f"useless judge pays for it (the table below, same populations; the limit is 1.10): {quarter}.",
        f"- *No interval below {MIN} draws.* At a budget of 10, 25% fewer is 7.5 draws, where the queue gives no "
        "interval at all: the saving at 10 is read off the simulated width curve below the budget.",
        "",
        *caps,
    ]


def simulated(repeats: int, boot: int, seed: int) -> tuple[list[str], dict[str, Curves]]:
    """The simulated judges' part of the docs, and its curves."""
    pops = scenarios(repeats, seed)
    curves = {name: simulate(pop, KS, repeats, floor=FLOOR, seed=seed + 1) for name, pop in pops.items()}
    lines = [f"{repeats} repeats, floor {FLOOR} (cost cap {MAX_COST}), {STORIES} stories of {TESTS} tests; "
             f"seed {seed}, {boot} bootstrap resamples.", "", *HEADER]
    for name, c in curves.items():
        lines += table_rows(name, c, boot)
    return lines + [""] + findings(curves, pops, repeats, seed + 1, boot), curves


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
                     vote_uncertainty(v, ci, n), np.bincount(ci, minlength=n).astype(float),
                     Totals.binary(vote_share(v), ci, n))
    info = {"stories": n, "items": len(y), "judges": judges, "pass_rate": float(np.mean(y)),
            "judge_rate": float(share.mean()), "corr": float(np.corrcoef(pop.human, pop.judge)[0, 1])}
    return pop, info


def ttcw(pop: Population, info: dict, repeats: int, boot: int, seed: int) -> tuple[list[str], dict[str, Curves]]:
    """TTCW's part of the docs: the table and the numbers of the prose under it."""
    name = "TTCW, 7 judges' vote share"
    curves = {name: simulate(pop, KS, repeats, floor=FLOOR, seed=seed)}
    c = curves[name]
    s = {b: 1 - saving(c, b)[0] / b for b in BUDGETS}
    ratio = label_ratio(probabilities(pop.uncertainty, FLOOR), pop.uncertainty)
    return [f"{info['stories']} stories, {info['items']} items, judges {', '.join(info['judges'])}; {repeats} repeats, "
            f"seed {seed}, {boot} bootstrap resamples.", "", *HEADER, *table_rows(name, c, boot), "",
            f"On TTCW the queue saves {_pct(s[10])} of the labels at 10 stories, {_pct(s[20])} at 20 and "
            f"{_pct(s[50])} at 50, and every design covers at least {min(cover(c)):.3f}. The reason is the recorded "
            "judges:", "",
            f"- Their vote share is not a calibrated P(Yes): the judges pass {info['judge_rate']:.0%} of the items "
            f"where the experts pass {info['pass_rate']:.0%}.",
            f"- It barely follows the experts: the story-level correlation between the judges' and the experts' "
            f"totals is {info['corr']:.2f}.",
            f"- It is about as uncertain on every story: the predicted label ratio would be {ratio:.2f} even if the "
            "share were calibrated.", "",
            "A judge with a P(Yes) that separates the stories it knows from those it does not is what the queue "
            f"needs. On TTCW uniform PPI++ gains little over human-only too (half width "
            f"{np.nanmean(c.half['uniform PPI++'][_at(c, 10)]):.3f} against "
            f"{np.nanmean(c.half['human-only'][_at(c, 10)]):.3f} at 10 stories)."], curves


def wrapped(lines: list[str], width: int = 100) -> list[str]:
    """Prose lines wrapped as the docs are (a bullet's continuation indented two spaces); table
    rows and blank lines as they are."""
    out: list[str] = []
    for line in lines:
        if not line or line.startswith("|"):
            out.append(line)
        else:
            out += textwrap.wrap(line, width, subsequent_indent="  " if line.startswith("- ") else "",
                                 break_on_hyphens=False, break_long_words=False)
    return out


def write_docs(path: Path, lines: list[str], is_ttcw: bool) -> None:
    """Replace the text between the markers of `path` by `lines`."""
    begin, end = marks(is_ttcw)
    text = path.read_text(encoding="utf-8")
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise SystemExit(f"{path}: expected one '{begin}' before one '{end}'")
    head, rest = text.split(begin)
    tail = rest.split(end)[1]
    path.write_text(head + begin + "\n" + "\n".join(lines) + "\n" + end + tail, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--repeats", type=int, default=REPEATS)
    ap.add_argument("--boot", type=int, default=BOOT, help="bootstrap resamples of the repeats for the saving's interval")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--plot", type=Path, default=Path("docs/annotate-simulation.png"))
    ap.add_argument("--ttcw", action="store_true", help="simulate the queue on TTCW's real stories instead")
    ap.add_argument("--docs", type=Path, help="write the markdown between the markers of this file (docs/annotate.md)")
    a = ap.parse_args(argv)
    start = time.process_time()
    if a.ttcw:
        got = ttcw_population()
        if got is None:
            print("TTCW data not found under the data root (set LITJUDGE_DATA_ROOT to the folder holding ttcw/): "
                  "nothing simulated", file=sys.stderr)
            return 2
        print(json.dumps(got[1]))
        lines, curves = ttcw(*got, a.repeats, a.boot, a.seed)
    else:
        lines, curves = simulated(a.repeats, a.boot, a.seed)
    lines = wrapped(lines)
    print("\n".join(lines))
    if a.docs:
        write_docs(a.docs, lines, a.ttcw)
    path = a.plot.with_name(a.plot.stem + "-ttcw" + a.plot.suffix) if a.ttcw else a.plot
    plot_widths(curves, path, "TTCW: mean half width against labels" if a.ttcw else "Simulated judges: mean half width "
                "against labels")
    print(f"\nplot: {path}; {time.process_time() - start:.1f} CPU s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
