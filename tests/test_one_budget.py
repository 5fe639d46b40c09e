"""One invocation, one budget: two API judges under one `max_cost_usd` spend that cap once,
whichever entry started them (`litjudge.judge()`, `litjudge.run(dict)`, the console's `litjudge
run`), because all three go through engine.app.execute and the invocation's spend travels in its
Session, handed to each backend by `Backend.attach`. judge() used to give each judge the whole cap
(twice the tokens, money spent past the cap). And no ContextVar is left to carry state ambiently."""
from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import litjudge
from tests.conftest import PROJECT_ROOT, write_config
from tests.conftest import litjudge as cli
from tests.fake_api import FakeAPI
from tests.test_python_api import COLUMNS, VALUES, pairs

CAP = 150                            # dollars, at $1 a token: a cap of 150 tokens
API = {"concurrency": 1, "max_cost_usd": CAP, "price_in_per_mtok": 1e6, "price_out_per_mtok": 1e6}
PACKAGE = [PROJECT_ROOT / d for d in ("engine", "judges", "grammars", "litjudge")]


def judges(url: str) -> list[str]:
    return [f"openai-compatible:{url}/v1:fake-{tag}" for tag in ("a", "b")]


def spent(run_dir: Path) -> list[tuple[int, int]]:
    """Each judge's (requests sent, tokens spent), from the run's manifest."""
    api = [j["api"] for j in json.loads((run_dir / "manifest.json").read_text())["judges"]]
    return [(a["requests"], a["prompt_tokens"] + a["completion_tokens"]) for a in api]


def toml(value) -> str:
    return json.dumps(value) if not isinstance(value, dict) else \
        "{" + ", ".join(f"{k} = {toml(v)}" for k, v in value.items()) + "}"


def test_two_api_judges_spend_one_cap_through_every_entry(tmp_path):
    rows = pairs(6)
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = {}
    with FakeAPI() as server, warnings.catch_warnings():
        warnings.simplefilter("ignore", litjudge.LitjudgeWarning)   # "requests left unanswered": the cap's doing
        got["judge"] = spent(litjudge.judge(rows, protocol="pairwise", judge=judges(server.url), columns=COLUMNS,
                                            values=VALUES, out=tmp_path / "py", cache=False, progress=False,
                                            api=API).run_dir)
        table = {"name": "capped", "protocol": "pairwise", "judge": judges(server.url),
                 "dataset": {"path": str(data), "columns": COLUMNS, "values": VALUES}, "api": API}
        got["run"] = spent(litjudge.run(table, out=tmp_path / "run", cache=False, progress=False).run_dir)
        config = write_config(tmp_path / "capped.toml", "".join(f"{k} = {toml(v)}\n" for k, v in table.items()))
        r = cli("run", str(config), "--out", str(tmp_path / "console"), "--no-cache", "--quiet")
        assert r.returncode == 3 and "held back by the budget cap" in r.stderr, r.stderr[-2000:]
        got["console"] = spent(tmp_path / "console" / "capped")
    for entry, ((sent_a, tokens_a), (sent_b, tokens_b)) in got.items():
        # concurrency 1: a request goes while the spend is under the cap, so the cap is passed by
        # at most the last request, and the second judge finds it spent and sends nothing
        assert sent_a > 1 and CAP <= tokens_a < CAP + tokens_a / sent_a and (sent_b, tokens_b) == (0, 0), (entry, got)
    assert got["judge"] == got["run"] == got["console"], got


def test_no_context_variable_carries_state_in_the_package():
    """The invocation's state (folders, cache, API spend) is passed in a Session, never ambient."""
    found = [str(p.relative_to(PROJECT_ROOT)) for folder in PACKAGE for p in folder.rglob("*.py")
             if re.search(r"\bContextVar\b|\bcontextvars\b", p.read_text(encoding="utf-8"))]
    assert found == [], found
