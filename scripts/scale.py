"""How litjudge's own work grows with the run: 10k, 100k and 1M pairwise requests on synthetic data.

For each size, in a fresh process each (so peak memory is that stage's own):
  plan     the whole plan streamed with the tokenizer-only planner of the default judge, as a run
           plans: rendered, tokenized, deduplicated and ordered in chunks in a process of its own
           while this one builds and keys its copy (engine.core.plan_process): wall seconds, peak
           RSS of each process, the planner's stages, its tokenizer rate (prompt tokens planned per
           second of tokenizing: each distinct piece is tokenized once);
  judge    a full `litjudge run` with a replayed judge (recorded answers by item id, no model):
           plan + store + parse + aggregate + outputs. litjudge's own rate is requests per second
           of everything but the (word) tokenizer the replay backend plans with.

Two workloads (--workload):
  synthetic  every pair has texts of its own (prompt ~15 words, texts ~40 words), both orders: a
             text recurs twice, so the tokenizer's share stays visible next to litjudge's;
  recurring  all pairs over a pool of multi-paragraph texts (a tournament, or a TTCW-like run where
             each story meets many questions): each text recurs hundreds of times.

    .venv/bin/python scripts/scale.py --sizes 10000 100000 1000000 --workload synthetic --out scale.json

Stage figures: the main thread's stages are wall time and add up, with the rest (setup, outputs),
to the run's time; the planner's stages (build_and_key, render, tokenize, prepare, order, send) run
in its own process, overlapped with those, and are reported apart as the planner's own time.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = ("the a night river voice old garden letter window silver quiet storm city winter train mother "
         "door secret lamp road bird paper fire dream morning stone song shadow house sea glass field").split()


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def write_data(folder: Path, pairs: int, workload: str = "synthetic", seed: int = 0) -> tuple[Path, Path]:
    """pairs.jsonl + a card beside it, and the replayed judge's answers for every request."""
    rng = random.Random(seed)
    data, answers = folder / "pairs.jsonl", folder / "answers.jsonl"
    if workload == "recurring":
        pool = 2
        while pool * (pool - 1) // 2 < pairs:
            pool += 1
        texts = ["\n\n".join(sentence(rng, 40) for _ in range(3)) for _ in range(pool)]
        prompts = [sentence(rng, 15) for _ in range(8)]
        chosen = ((i, j) for i in range(pool) for j in range(i + 1, pool))
    with data.open("w") as d, answers.open("w") as a:
        for i in range(pairs):
            if workload == "recurring":
                x, y = next(chosen)
                row = {"prompt": prompts[(x + y) % len(prompts)], "text_a": texts[x], "text_b": texts[y]}
            else:
                row = {"prompt": sentence(rng, 15), "text_a": sentence(rng, 40), "text_b": sentence(rng, 40)}
            d.write(json.dumps({"pair_id": f"p{i}", **row, "label": rng.choice("ab")}) + "\n")
            for order in ("ab", "ba"):
                a.write(json.dumps({"id": f"p{i}/{order}", "response": rng.choice("AB")}) + "\n")
    (folder / "card.toml").write_text('name = "synthetic-pairs"\ntitle = "synthetic"\nloader = "pairs_jsonl"\n'
                                      'path = "pairs.jsonl"\nprotocols = ["pairwise"]\n')
    return folder / "card.toml", answers


def config(folder: Path, judge: str) -> Path:
    path = folder / f"run-{judge.split(':')[0]}.toml"
    path.write_text(f'name = "scale"\nprotocol = "pairwise"\ndataset = "{folder / "card.toml"}"\njudge = "{judge}"\n'
                    'mode = "label"\n[options]\nresamples = 200\n')
    return path


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20


def stage_plan(folder: Path) -> dict:
    """Plan every request with the default judge's tokenizer-only planner, as a run plans: in a
    process of its own, while this one builds and keys its own copy of the requests; nothing is
    generated. Wall time until the last chunk arrived; the planner process's stages apart."""
    from litjudge.engine import backends
    from litjudge.engine.app.run import prepare
    from litjudge.engine.core.config import load_config
    from litjudge.engine.core.plan_process import planned_apart
    from litjudge.engine.core.planner import StreamPlanner

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")     # as the console sets it
    prep = prepare(load_config(config(folder, "smollm2-135m")))
    spec = prep.specs[0]
    stream = StreamPlanner(backends.planner(spec), prep.config.truncation)
    t = time.perf_counter()
    built = prep.protocol.build(prep.context(spec))
    for _ in planned_apart(stream, (("plan", r) for r in built.requests)):
        pass
    seconds = time.perf_counter() - t
    st = stream.stats
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2 ** 20
    return {"requests": st.requests, "distinct": st.distinct_requests, "seconds": round(seconds, 2),
            "peak_rss_gib": round(peak_rss_gib(), 3), "planner_peak_rss_gib": round(children, 3),
            "prompt_tokens": st.prompt_tokens,
            "tokenizer_tokens_per_s": round(st.prompt_tokens / max(st.seconds["tokenize"], 1e-9)),
            "planner_stage_seconds": {k: round(v, 2) for k, v in st.seconds.items()}, "tokenization": st.tokenization}


def stage_judge(folder: Path, answers: Path) -> dict:
    """A whole run with the replayed judge, outputs written."""
    os.environ["LITJUDGE_RUNS_DIR"] = str(folder / "runs")
    from litjudge.engine.app.run import run
    from litjudge.engine.core.config import load_config

    t, cpu = time.perf_counter(), os.times()
    out = run(load_config(config(folder, f"replay:{answers}")), progress=False)
    seconds, cpu_end = time.perf_counter() - t, os.times()
    j = out.manifest.judges[0]
    main = {**j["stage_seconds"], **out.manifest.stage_seconds}     # this thread's stages: wall, they add up
    planner = j["planner_seconds"]                                  # the planner process's, overlapped with them
    own = seconds - planner["tokenize"]
    return {"requests": j["plan"]["requests"], "seconds": round(seconds, 2), "peak_rss_gib": round(peak_rss_gib(), 3),
            "process_cpu_seconds": round(cpu_end.user + cpu_end.system - cpu.user - cpu.system, 2),
            "word_tokenizer_seconds": round(planner["tokenize"], 2), "litjudge_seconds": round(own, 2),
            "litjudge_requests_per_s": round(j["plan"]["requests"] / own), "main_thread_seconds": main,
            "outputs_and_rest_seconds": round(seconds - sum(main.values()), 2), "planner_seconds": planner}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000], help="requests")
    ap.add_argument("--workload", choices=["synthetic", "recurring"], default="synthetic",
                    help="texts of their own per pair, or all pairs over a pool of recurring texts")
    ap.add_argument("--out", default="", help="write the figures (JSON) here")
    ap.add_argument("--stage", choices=["plan", "judge"], help=argparse.SUPPRESS)
    ap.add_argument("--folder", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.stage:                                    # one measurement, in its own process
        folder = Path(args.folder)
        result = stage_plan(folder) if args.stage == "plan" else stage_judge(folder, folder / "answers.jsonl")
        print(json.dumps(result))
        return 0
    rows = []
    for size in args.sizes:
        with tempfile.TemporaryDirectory(prefix="litjudge-scale-") as tmp:
            folder = Path(tmp)
            t = time.perf_counter()
            write_data(folder, size // 2, args.workload)
            print(f"{size:,} requests: data written in {time.perf_counter() - t:.1f} s", file=sys.stderr)
            row = {"requests": size}
            for stage in ("plan", "judge"):
                r = subprocess.run([sys.executable, __file__, "--stage", stage, "--folder", str(folder)], cwd=ROOT,
                                   capture_output=True, text=True)
                if r.returncode:
                    print(r.stderr[-3000:], file=sys.stderr)
                    return r.returncode
                row[stage] = json.loads(r.stdout.strip().splitlines()[-1])
                print(f"  {stage}: {json.dumps(row[stage])}", file=sys.stderr)
            rows.append(row)
    print("| requests | plan s | plan peak RSS GiB | tokenizer tok/s | run s (replay) | run peak RSS GiB "
          "| word-tokenizer s | litjudge req/s |\n|---|---|---|---|---|---|---|---|")
    for r in rows:
        p, j = r["plan"], r["judge"]
        print(f"| {r['requests']:,} | {p['seconds']} | {p['peak_rss_gib']} | {p['tokenizer_tokens_per_s']:,} | "
              f"{j['seconds']} | {j['peak_rss_gib']} | {j['word_tokenizer_seconds']} | {j['litjudge_requests_per_s']:,} |")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
