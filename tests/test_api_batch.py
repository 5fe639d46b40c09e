"""Provider batch APIs (`[api] batch = true`), through the real OpenAI and Anthropic SDKs against a
loopback server implementing the documented batch endpoints (tests/fake_batch_api.py): a sweep in
batch mode gives the same keys and verdicts as the same sweep online at half the price; a kill -9
between submission and collection loses nothing and submits nothing twice; per-request errors
follow the stated rule (invalid: stored failure; the rest: retried in a new batch); expiry; the
`status` command and `--cancel-batches`. Real provider batches were not run (no network here)."""
from __future__ import annotations

import json
import re
import sqlite3

import pytest

from tests.fake_api import FakeAPI, free_port, interrupted_run, refusing_port
from tests.fake_batch_api import FakeBatchAPI
from tests.test_api import SECRET, assert_key_never_written
from tests.test_cli_probe import cli

SWEEP = """name = "{name}"
protocol = "ttcw"
dataset = "ttcw-demo"
mode = "label"
[matrix]
judge = ["{provider}:judge-a", "{provider}:judge-b"]
[api]
base_url = "{url}"
batch = {batch}
batch_poll_s = 0.05
price_in_per_mtok = 2.0
price_out_per_mtok = 8.0
"""

ENV = {"OPENAI_API_KEY": SECRET, "ANTHROPIC_API_KEY": SECRET}


def base(provider: str, url: str) -> str:
    return f"{url}/v1" if provider == "openai" else url


def stored(run_dir) -> dict[str, tuple]:
    db = sqlite3.connect(run_dir / "store.sqlite")
    try:
        return {k: (status, label) for k, status, label in db.execute("SELECT key, status, label FROM results")}
    finally:
        db.close()


def sweep(tmp_path, name: str, provider: str, url: str, batch: bool, env=None):
    cfg = tmp_path / f"{name}.toml"
    cfg.write_text(SWEEP.format(name=name, provider=provider, url=base(provider, url), batch=str(batch).lower()))
    return cli("run", str(cfg), "--quiet", cwd=tmp_path, env={**ENV, **(env or {})}), tmp_path / "runs" / "out" / name


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_batch_sweep_equals_the_online_sweep_at_half_price(tmp_path, provider):
    port = free_port()
    with FakeAPI(port=port) as online:
        r, online_dir = sweep(tmp_path, "online", provider, online.url, batch=False)
        assert r.returncode == 0, r.stderr[-3000:]
    with FakeBatchAPI(port=port) as server:
        r, batch_dir = sweep(tmp_path, "batch", provider, server.url, batch=True)
        assert r.returncode == 0, r.stderr[-3000:]
    a, b = stored(online_dir), stored(batch_dir)
    assert len(a) == 24 and a == b                                   # same keys, same verdicts
    assert len(server.created) == 2 and len(server.requests_seen) == 24   # one batch per judge, each request once
    m_online = json.loads((online_dir / "manifest.json").read_text())["judges"]
    m_batch = json.loads((batch_dir / "manifest.json").read_text())["judges"]
    for j_on, j_b in zip(m_online, m_batch, strict=True):
        on, ba = j_on["api"], j_b["api"]
        assert (on["prompt_tokens"], on["completion_tokens"]) == (ba["prompt_tokens"], ba["completion_tokens"])
        assert ba["estimated_cost_usd"] == pytest.approx(on["estimated_cost_usd"] / 2, rel=1e-6)
    assert_key_never_written(batch_dir)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_kill_9_between_submission_and_collection(tmp_path, provider):
    """The process dies right after its first batch is accepted (fault hook): the re-run polls that
    batch instead of submitting again, collects it, submits the rest; each key stored once."""
    with FakeBatchAPI(polls_to_finish=3) as server:
        r, run_dir = sweep(tmp_path, "k", provider, server.url, batch=True,
                           env={"LITJUDGE_FAULT_KILL_AFTER_SUBMIT": "1"})
        assert r.returncode == -9, (r.returncode, r.stderr[-2000:])
        assert len(server.created) == 1 and len(server.requests_seen) == 12
        status = cli("status", str(run_dir), cwd=tmp_path, env=ENV)
        assert status.returncode == 0 and " open " in status.stdout and "12 requests" in status.stdout
        r, run_dir = sweep(tmp_path, "k", provider, server.url, batch=True)
        assert r.returncode == 0, r.stderr[-3000:]
    assert len(server.created) == 2 and len(server.requests_seen) == 24     # nothing submitted twice
    assert len(set(server.requests_seen)) == 24 and len(stored(run_dir)) == 24
    assert "none open" in cli("status", str(run_dir), cwd=tmp_path, env=ENV).stdout


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_kill_9_after_the_provider_accepted_before_the_ledger_knew(tmp_path, provider):
    """The process dies after the provider accepted its first batch but before the batch's id was
    recorded (the ledger still says `submitting`): the re-run finds that batch among the provider's
    (OpenAI: our id in its metadata; Anthropic: created just after the record, as many requests) and
    collects it instead of submitting its keys again."""
    with FakeBatchAPI(polls_to_finish=2) as server:
        r, run_dir = sweep(tmp_path, "w", provider, server.url, batch=True,
                           env={"LITJUDGE_FAULT_KILL_BEFORE_RECORD": "1"})
        assert r.returncode == -9, (r.returncode, r.stderr[-2000:])
        assert len(server.created) == 1
        r, run_dir = sweep(tmp_path, "w", provider, server.url, batch=True)
        assert r.returncode == 0, r.stderr[-3000:]
    assert len(server.created) == 2 and len(server.requests_seen) == 24     # nothing submitted twice
    assert len(set(server.requests_seen)) == 24 and len(stored(run_dir)) == 24


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_per_request_errors_follow_the_rule(tmp_path, provider):
    """In the first batch: request 0 invalid (stored as a failure with the provider's reason), 1 a
    server error and 2 missing (not stored: unanswered, exit 3); the re-run sends those two in a
    new batch and stores them."""
    with FakeBatchAPI(faults={0: "invalid", 1: "server", 2: "missing"}) as server:
        cfg = tmp_path / "e.toml"
        cfg.write_text(SWEEP.format(name="e", provider=provider, url=base(provider, server.url), batch="true")
                       .replace("[matrix]\n", "").replace(f'judge = ["{provider}:judge-a", "{provider}:judge-b"]',
                                                           f'judge = "{provider}:judge-a"'))
        r = cli("run", str(cfg), "--quiet", cwd=tmp_path, env=ENV)
        assert r.returncode == 3 and "2 request(s) were left without an answer" in r.stderr, r.stderr[-3000:]
        rows = stored(tmp_path / "runs" / "out" / "e")
        assert len(rows) == 10 and sum(s == "unparsed" for s, _ in rows.values()) == 1
        db = sqlite3.connect(tmp_path / "runs" / "out" / "e" / "store.sqlite")
        reason = db.execute("SELECT reason FROM results WHERE status = 'unparsed'").fetchone()[0]
        assert "injected invalid" in reason
        r = cli("run", str(cfg), "--quiet", cwd=tmp_path, env=ENV)
        assert r.returncode == 0, r.stderr[-3000:]
    assert len(stored(tmp_path / "runs" / "out" / "e")) == 12
    assert len(server.created) == 2 and len(server.batches[server.created[1]]["lines"]) == 2


def test_a_request_named_twice_in_the_results_is_read_once(tmp_path):
    """A provider's output naming a request twice (its answer twice, then an error line for it):
    each line was read, so its tokens counted twice against the caps and the last line won (the
    answer thrown away, a failure stored). The first answer is read, once."""
    with FakeBatchAPI(faults={0: "twice", 3: "twice"}) as server:
        cfg = tmp_path / "d.toml"
        cfg.write_text(SWEEP.format(name="d", provider="openai", url=base("openai", server.url), batch="true")
                       .replace("[matrix]\n", "").replace('judge = ["openai:judge-a", "openai:judge-b"]',
                                                           'judge = "openai:judge-a"'))
        r = cli("run", str(cfg), "--quiet", cwd=tmp_path, env=ENV)
        assert r.returncode == 0 and "4 duplicate line(s) in the results of batch" in r.stderr, r.stderr[-3000:]
    rows = stored(tmp_path / "runs" / "out" / "d")
    assert len(rows) == 12 and all(status == "ok" for status, _ in rows.values())
    api = json.loads((tmp_path / "runs" / "out" / "d" / "manifest.json").read_text())["judges"][0]["api"]
    assert api["requests"] == 12, api


def test_expired_batches_are_retried_and_open_ones_can_be_cancelled(tmp_path):
    port = free_port()
    with FakeBatchAPI(expire=True, port=port) as server:
        r, run_dir = sweep(tmp_path, "x", "openai", server.url, batch=True)
        assert r.returncode == 3 and "24 request(s) were left without an answer" in r.stderr
        assert stored(run_dir) == {}
    with FakeBatchAPI(polls_to_finish=10**6, port=port) as server:      # never ends on its own
        r, run_dir = sweep(tmp_path, "c", "openai", server.url, batch=True, env={"LITJUDGE_FAULT_KILL_AFTER_SUBMIT": "1"})
        assert r.returncode == -9
        cancel = cli("status", str(run_dir), "--cancel-batches", cwd=tmp_path, env=ENV)
        assert cancel.returncode == 0 and "cancelled 1 open provider batch" in cancel.stdout, cancel.stderr[-2000:]
        assert server.batches[server.created[0]]["cancelled"]
    assert "none open" in cli("status", str(run_dir), cwd=tmp_path, env=ENV).stdout


def test_batch_mode_is_refused_for_other_servers(tmp_path):
    cfg = tmp_path / "b.toml"
    cfg.write_text('name = "b"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\n'
                   'judge = "openai-compatible:http://127.0.0.1:9/v1:m"\n[api]\nbatch = true\n')
    r = cli("plan", str(cfg), cwd=tmp_path)
    assert r.returncode == 2 and "api.batch: the OpenAI-compatible API has no provider batches" in r.stderr
    assert "api.batch: api.batch" not in r.stderr, r.stderr


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_batch_mode_keeps_its_budget(tmp_path, provider):
    """A batch is paid for once submitted: with a cap below any request's worst case (its bytes,
    not its words) nothing is submitted and the run exits 3 (it used to submit all 12 and exit 0);
    with a cap for a few worst cases only those are submitted and the spend stays under it; without
    a cap all go."""
    with FakeBatchAPI() as server:
        cfg = tmp_path / "b.toml"
        text = SWEEP.format(name="b", provider=provider, url=base(provider, server.url), batch="true")
        text = text.replace(f'judge = ["{provider}:judge-a", "{provider}:judge-b"]', f'judge = ["{provider}:judge-a"]')
        cfg.write_text(text + "max_cost_usd = 1e-9\n")
        r = cli("run", str(cfg), "--quiet", cwd=tmp_path, env=ENV)
        assert r.returncode == 3, (r.returncode, r.stderr[-2000:])
        assert not server.created and "held back by the budget cap" in r.stderr
        api = json.loads((tmp_path / "runs" / "out" / "b" / "manifest.json").read_text())["judges"][0]["api"]
        assert api["not_sent_over_budget"] == 12 and api["estimated_cost_usd"] == 0
        # a cap for a few worst cases: only those are submitted, and what was spent stays under it
        cfg.write_text(text + "max_tokens_total = 6000\n")
        r = cli("run", str(cfg), "--quiet", cwd=tmp_path, env=ENV)
        assert r.returncode == 3, (r.returncode, r.stderr[-2000:])
        api = json.loads((tmp_path / "runs" / "out" / "b" / "manifest.json").read_text())["judges"][0]["api"]
        sent = len(server.requests_seen)
        assert 1 <= sent < 12 and api["not_sent_over_budget"] == 12 - sent
        assert api["prompt_tokens"] + api["completion_tokens"] <= 6000
        cfg.write_text(text)                                     # no cap: the rest are submitted
        r = cli("run", str(cfg), "--quiet", cwd=tmp_path, env=ENV)
        assert r.returncode == 0, r.stderr[-2000:]
        assert len(server.requests_seen) == 12 and len(stored(tmp_path / "runs" / "out" / "b")) == 12


def test_batch_mode_survives_its_provider(tmp_path):
    """The hostile pass over batch mode: a closed port, the provider gone while polling, a malformed
    output line, a cancel while the provider is down, and a crash before the ledger knew the batch
    then --cancel-batches: each a one-line report and the right exit, never an internal error."""
    with refusing_port() as port:
        r, run_dir = sweep(tmp_path, "down", "openai", f"http://127.0.0.1:{port}", batch=True)    # nobody listens
    assert r.returncode == 3 and "did not answer while submitting" in r.stderr, r.stderr[-2000:]
    assert "internal error" not in r.stderr and stored(run_dir) == {}
    with FakeBatchAPI(polls_to_finish=10**6, port=port) as server:       # accepted, then gone mid-poll
        r, run_dir = sweep(tmp_path, "gone", "openai", server.url, batch=True,
                           env={"LITJUDGE_FAULT_KILL_AFTER_SUBMIT": "1"})
        assert r.returncode == -9
    r, run_dir = sweep(tmp_path, "gone", "openai", f"http://127.0.0.1:{port}", batch=True)
    assert r.returncode == 3 and "did not answer while polling" in r.stderr, r.stderr[-2000:]
    assert "internal error" not in r.stderr
    cancel = cli("status", str(run_dir), "--cancel-batches", cwd=tmp_path, env=ENV)          # provider still down
    assert cancel.returncode == 2 and "did not answer" in cancel.stderr and "internal error" not in cancel.stderr
    with FakeBatchAPI(faults={0: "malformed"}) as server:
        r, run_dir = sweep(tmp_path, "bad", "openai", server.url, batch=True)
        assert r.returncode == 3 and "1 malformed line(s)" in r.stderr, r.stderr[-2000:]
        assert len(stored(run_dir)) == 23
        r, run_dir = sweep(tmp_path, "bad", "openai", server.url, batch=True)                 # asked again
        assert r.returncode == 0 and len(stored(run_dir)) == 24


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_cancel_finds_the_batch_a_crash_left_unrecorded(tmp_path, provider):
    """Killed after the provider accepted a batch, before the ledger recorded it: --cancel-batches
    said "cancelled 0" while the batch ran on. It now adopts the batch first, then cancels it."""
    with FakeBatchAPI(polls_to_finish=10**6) as server:
        r, run_dir = sweep(tmp_path, "w", provider, server.url, batch=True, env={"LITJUDGE_FAULT_KILL_BEFORE_RECORD": "1"})
        assert r.returncode == -9
        cancel = cli("status", str(run_dir), "--cancel-batches", cwd=tmp_path, env=ENV)
        assert cancel.returncode == 0 and "cancelled 1 open provider batch" in cancel.stdout, cancel.stderr[-2000:]
        assert server.batches[server.created[0]]["cancelled"]


def test_results_outside_a_smaller_limit_are_kept(tmp_path):
    """Killed after submitting 12 requests; the re-run with --limit 1 wants 4 of them: it stores
    those and leaves the batch open; the run without the limit collects the other 8 from the same
    batch (they were dropped and submitted again: 12 submitted for 8 distinct)."""
    with FakeBatchAPI(polls_to_finish=2) as server:
        cfg = tmp_path / "l.toml"
        cfg.write_text(SWEEP.format(name="l", provider="openai", url=base("openai", server.url), batch="true")
                       .replace("[matrix]\n", "").replace('judge = ["openai:judge-a", "openai:judge-b"]',
                                                           'judge = "openai:judge-a"'))
        r = cli("run", str(cfg), "--quiet", cwd=tmp_path, env={**ENV, "LITJUDGE_FAULT_KILL_AFTER_SUBMIT": "1"})
        assert r.returncode == -9 and len(server.requests_seen) == 12
        r = cli("run", str(cfg), "--quiet", "--limit", "1", cwd=tmp_path, env=ENV)
        assert r.returncode == 0, r.stderr[-2000:]
        run_dir = tmp_path / "runs" / "out" / "l"
        assert len(stored(run_dir)) == 4 and " open " in cli("status", str(run_dir), cwd=tmp_path, env=ENV).stdout
        r = cli("run", str(cfg), "--quiet", cwd=tmp_path, env=ENV)
        assert r.returncode == 0, r.stderr[-2000:]
    assert len(server.created) == 1 and len(server.requests_seen) == 12 and len(stored(run_dir)) == 12
    assert "none open" in cli("status", str(run_dir), cwd=tmp_path, env=ENV).stdout


@pytest.mark.parametrize("batch", [True, False])
def test_one_cap_holds_for_every_judge_of_a_sweep(tmp_path, batch):
    """Two API judges under one `max_cost_usd`: the cap is the sweep's, not each judge's (each judge
    used to get the whole cap: all 24 requests sent for $0.0055 under a $0.003 cap, exit 0)."""
    server_kind = FakeBatchAPI if batch else FakeAPI
    with server_kind() as server:
        cfg = tmp_path / "two.toml"
        cfg.write_text(SWEEP.format(name="two", provider="openai", url=base("openai", server.url),
                                    batch=str(batch).lower()) + "max_cost_usd = 0.003\nconcurrency = 1\n")
        r = cli("run", str(cfg), "--quiet", cwd=tmp_path, env=ENV)
        assert r.returncode == 3 and "held back by the budget cap" in r.stderr, (r.returncode, r.stderr[-2000:])
        judges = json.loads((tmp_path / "runs" / "out" / "two" / "manifest.json").read_text())["judges"]
        spent = sum(j["api"]["estimated_cost_usd"] for j in judges)
        sent = sum(j["api"]["requests"] for j in judges)
        assert 0 < sent < 24, sent
        # batch: nothing submitted whose worst case passes the cap; online (concurrency 1): a request
        # is sent while the spend is under the cap, so only the last one sent may pass it
        assert spent <= 0.003 if batch else spent - spent / sent < 0.003, (spent, sent)
        assert judges[-1]["api"]["not_sent_over_budget"] > 0


def test_a_cache_left_aside_stays_aside_for_the_next_judge(tmp_path):
    """`--cache FOLDER` holds verdicts.sqlite there (a folder was opened as the database: "is not
    writable"); a cache locked by another process is waited for once, then left aside for every
    judge of the invocation (the sweep's second judge used to wait again), and every verdict is
    still in the run's own store."""
    import subprocess
    import sys

    cache = tmp_path / "cache"
    cache.mkdir()
    env = {**ENV, "LITJUDGE_VERDICT_CACHE": "on", "LITJUDGE_LOCK_WAIT_S": "2"}
    with FakeAPI() as server:
        first = SWEEP.format(name="a", provider="openai", url=base("openai", server.url), batch="false")
        (tmp_path / "a.toml").write_text(first)
        r = cli("run", str(tmp_path / "a.toml"), "--quiet", "--cache", str(cache), cwd=tmp_path, env=env)
        assert r.returncode == 0 and "left aside" not in r.stderr, r.stderr[-2000:]
        db = cache / "verdicts.sqlite"
        holder = subprocess.Popen([sys.executable, "-c", "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], "
                                   "isolation_level=None); c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); "
                                   "time.sleep(120)", str(db)], stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().strip() == "locked"
            (tmp_path / "b.toml").write_text(first.replace('name = "a"', 'name = "b"').replace("judge-", "other-"))
            r = cli("run", str(tmp_path / "b.toml"), "--quiet", "--cache", str(cache), cwd=tmp_path, env=env)
        finally:
            holder.kill()
            holder.wait()
        assert r.returncode == 0, r.stderr[-2000:]
        assert r.stderr.count("is locked by another process; waiting") == 1, r.stderr[-2000:]
        assert r.stderr.count("left aside for this run") == 1
        assert len(stored(tmp_path / "runs" / "out" / "b")) == 24


def test_a_batch_left_open_by_a_failed_poll_is_held_against_the_cap(tmp_path):
    """A hostile pass: the first judge's batch poll failed (a 500), its batch stayed open, unread and
    uncounted, and the second judge submitted as much again: twice the cap. A submitted batch's
    worst case is held against the invocation's caps until its results are read."""
    with FakeBatchAPI(failed_polls=1) as server:
        cfg = tmp_path / "f.toml"
        cfg.write_text(SWEEP.format(name="f", provider="openai", url=f"{server.url}/v1", batch="true")
                       + "max_tokens_total = 6000\nmax_retries = 0\n")
        r = cli("run", str(cfg), "--quiet", cwd=tmp_path, env=ENV)
        assert r.returncode == 3 and "polling batch" in r.stderr, (r.returncode, r.stderr[-2000:])
        by_judge = [sum(line["body"]["model"] == judge for b in server.batches.values() for line in b["lines"])
                    for judge in ("judge-a", "judge-b")]
    assert 1 <= by_judge[0] < 12 and by_judge[1] <= 1, by_judge


def test_plan_says_when_its_api_judges_together_pass_a_cap(tmp_path):
    """The caps hold for the whole invocation, so the plan holds its two judges' estimates together
    against them: each judge alone is under the dollar cap, both are over it (the run would hold
    requests back and exit 3); a cap above the sum, or none, says nothing."""
    cfg = tmp_path / "p.toml"
    text = SWEEP.format(name="p", provider="openai", url="http://127.0.0.1:9/v1", batch="false")
    cfg.write_text(text)
    r = cli("plan", str(cfg), "--no-calibrate", cwd=tmp_path, env=ENV)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr[-2000:]
    costs = [float(x) for x in re.findall(r"┆\s*([0-9.]+)\s*│\s*$", r.stdout, re.M)]   # est_cost_usd, to 3 decimals
    assert len(costs) == 2 and costs[0] > 0, r.stdout
    for cap, over in ((1.5 * costs[0], True), (2.5 * costs[0], False)):
        cfg.write_text(text + f"max_cost_usd = {cap}\n")
        r = cli("plan", str(cfg), "--no-calibrate", cwd=tmp_path, env=ENV)
        warned = [line for line in r.stderr.splitlines() if "warning" in line]
        assert r.returncode == 0 and len(warned) == over, r.stderr[-2000:]
        if over:
            said = re.search(r"2 API judge\(s\) would spend about \$([0-9.]+), over api.max_cost_usd = ([0-9.]+)", warned[0])
            assert said and float(said[1]) == pytest.approx(sum(costs), abs=1e-3) and float(said[2]) == pytest.approx(cap), warned
    cfg.write_text(text + "max_tokens_total = 100\n")
    assert "over api.max_tokens_total = 100: requests past the cap are held back" in cli(
        "plan", str(cfg), "--no-calibrate", cwd=tmp_path, env=ENV).stderr


def test_a_stopped_then_resumed_sweep_keeps_each_invocation_s_api_spend(tmp_path):
    """A sweep kept no history: stopped by Ctrl-C and run again, its manifest held the second
    invocation's API spend alone. Now each invocation is a line of history.jsonl (the stopped one
    `interrupted`), and their answered requests add up to what the server received."""
    from litjudge.engine.app.summary import history

    with FakeAPI(faults={n: "timeout" for n in range(3, 25)}) as server:       # each answer after the second: 3 s
        cfg = tmp_path / "s.toml"
        cfg.write_text(SWEEP.format(name="s", provider="openai", url=base("openai", server.url), batch="false")
                       + "concurrency = 1\ntimeout_s = 30\n")
        code, err = interrupted_run(cfg, server, 3, ENV, cwd=tmp_path)
        assert code != 0, err[-2000:]
        server.faults = {}
        r = cli("run", str(cfg), "--quiet", cwd=tmp_path, env=ENV)
        assert r.returncode == 0, r.stderr[-3000:]
        received = len(server.received)
    run_dir = tmp_path / "runs" / "out" / "s"
    lines = history(run_dir)
    assert len(lines) == 2 and lines[0].get("interrupted") is True and "interrupted" not in lines[1]
    assert sum(j["api_requests"] for line in lines for j in line["judges"]) == received == 24
