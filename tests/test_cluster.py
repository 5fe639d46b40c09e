"""Replicas on a real Ray cluster: two 1-CPU nodes made by Ray's own test-cluster utility on this
machine, one vLLM-CPU engine per node as a Ray actor running litjudge's backend. The committed demo
config runs on them with the same verdicts as one engine, every key stored once, both replicas
working; a replica killed mid-run (a real SIGKILL of its process) loses nothing. The two replicas are
started once, as a run starts them, and serve both runs. The judge is the session's tiny random one
(the replicas' bookkeeping is the point, not what the judge says); float32 engines: bfloat16 numbers
on vLLM-CPU depend on which requests share a batch."""
import dataclasses
import os
import signal

import polars as pl
import pytest

from litjudge.engine import backends
from litjudge.engine.app.run import run
from litjudge.engine.backends.local.sharding import Shards, prefix_groups
from litjudge.engine.core.config import ClusterConfig, EngineConfig, load_config
from litjudge.engine.core.store import Store
from tests.conftest import IN_PROCESS_KV_GIB, PROJECT_ROOT, kv_cache_from_specs, run_on

ray = pytest.importorskip("ray", reason="Ray is a dev dependency (pip install 'litjudge[ray]')")

# One Ray cluster at a time on this machine: heavy, so every test of this module runs on the one
# pytest-xdist worker that runs the heavy tests (conftest).
pytestmark = [pytest.mark.heavy]

DEMO = PROJECT_ROOT / "runs" / "demo.toml"


def demo(judge: str, cluster: ClusterConfig | None = None):
    config = load_config(DEMO, judge=judge)
    engine = EngineConfig(max_model_len=2048, kv_cache_gib=IN_PROCESS_KV_GIB, dtype="float32")
    return dataclasses.replace(config, engine=engine, cluster=cluster or ClusterConfig())


SIGTERM_AFTER_RAY = """
import os, signal, time
from litjudge.engine.app.console.signals import Terminated, stop_on_sigterm
from litjudge.engine.backends.cluster import connect
from litjudge.engine.core.config import ClusterConfig
stop_on_sigterm()
connect(ClusterConfig(replicas=1, local_cpus=1))
try:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)
    print("no interrupt")
except Terminated:
    print("stopped as Ctrl-C stops")
"""


def test_sigterm_stops_a_replicated_run_as_ctrl_c_does(tmp_path):
    """A hostile pass: `ray.init` put its own SIGTERM handler over the console's, so a replicated
    run's SIGTERM was an abort (exit 134: no history line, replicas answering on, paid for and
    lost). Ray started here (first in this module: before the two-node cluster of the tests below)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", SIGTERM_AFTER_RAY], cwd=tmp_path, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0 and done.stdout.strip() == "stopped as Ctrl-C stops", (done.returncode,
                                                                                         done.stderr[-2000:])


@pytest.fixture(scope="module")
def two_nodes():
    from ray.cluster_utils import Cluster

    # The replicas' engines keep the KV cache their config asks for (a quarter GiB, as the session's
    # in-process engines): Ray's workers inherit the nodes' environment, made here without
    # VLLM_CPU_KVCACHE_SPACE (whole GiB only; 1 GiB each made this test's peak 1.5 GB higher).
    with kv_cache_from_specs():
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
        cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, log_to_driver=False)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


@pytest.fixture(scope="module")
def single(tiny, tmp_path_factory):
    """The demo on one engine (float32), the reference: the session's engine, in this process."""
    return run_on(tiny, demo(tiny.spec.name), tmp_path_factory.mktemp("single") / "demo")


def verdicts(outcome) -> pl.DataFrame:
    return outcome.verdicts.select(["item_id", "key", "label", "status"]).sort("item_id")


def stored_once(run_dir) -> bool:
    store = Store.open(run_dir / "store.sqlite", create=False)
    try:
        (count, distinct), = store.db.execute("SELECT count(*), count(DISTINCT key) FROM results").fetchall()
    finally:
        store.close()
    return count == distinct == 12


@pytest.fixture(scope="module")
def replicas(two_nodes, tiny_folder):
    """Two replicas of the float32 tiny judge, one per node, started as a run starts them
    (`backends.create(spec, [cluster])`) and kept for both runs below (each replica start imports
    torch and vLLM and starts an engine in a Ray worker: 43-50 s apiece with two on one core)."""
    config = demo(str(tiny_folder), ClusterConfig(replicas=2, address=two_nodes.address, chunk_requests=2))
    backend = backends.create(backends.resolve(config.judges[0], config), config.cluster)
    yield config, backend
    backend.close()


@pytest.mark.slow
def test_two_replicas_equal_one_engine_and_one_killed_mid_run_loses_nothing(replicas, single, tmp_path):
    config, backend = replicas
    out = run(config, progress=False, run_dir=tmp_path / "demo", backends={config.judges[0]: backend})
    assert verdicts(out).equals(verdicts(single))
    assert stored_once(out.run_dir)
    judge = out.manifest.judges[0]
    per_replica = judge["replicas"]
    assert len(per_replica) == 2 and all(r["requests"] > 0 for r in per_replica)      # both did work
    assert len({r["node"] for r in per_replica}) == 2                                   # one per node
    assert sum(r["requests"] for r in per_replica) == 12 and judge["cluster"]["requeued"] == 0
    single_hit = single.manifest.judges[0]["throughput"]
    hit = single_hit["cached_tokens"] / single_hit["prompt_tokens"]
    assert abs(judge["cluster"]["cache_hit_rate"] - hit) <= 0.10, (judge["cluster"]["cache_hit_rate"], hit)

    # Replica 1 dies mid-run: its process is stopped (SIGSTOP) before the run, so it finishes
    # nothing, and killed (a real SIGKILL) once replica 0's first verdict is stored. Its requests
    # go to replica 0, and the verdicts are again the single engine's.
    victim = backend.described[1]["pid"]
    os.kill(victim, signal.SIGSTOP)
    killed: list[int] = []

    def kill_once(_row) -> None:
        if not killed:
            os.kill(victim, signal.SIGKILL)
            killed.append(victim)

    again = run(config, progress=False, run_dir=tmp_path / "killed", backends={config.judges[0]: backend},
                on_result=kill_once)
    assert killed
    cluster = again.manifest.judges[0]["cluster"]
    assert cluster["replica_deaths"] == [1] and cluster["requeued"] >= 1, cluster
    assert [r["alive"] for r in again.manifest.judges[0]["replicas"]] == [True, False]
    assert verdicts(again).equals(verdicts(single)) and stored_once(again.run_dir)


def test_replicas_the_cluster_has_no_room_for_or_an_address_nobody_answers_are_one_line(two_nodes, tiny_folder):
    """A hostile pass: 3 replicas on a cluster of 2 CPUs waited for ever, printing nothing (Ray queues
    an actor until resources free up), and `ray.init` at a HOST:PORT nothing listens on waited
    without end: each is refused in one line, before any actor or engine starts."""
    from litjudge.engine.backends.cluster import ClusterBackend, reachable
    from litjudge.engine.core.errors import BackendUnavailable

    config = demo(str(tiny_folder), ClusterConfig(replicas=3, address=two_nodes.address))
    spec = backends.resolve(config.judges[0], config)
    with pytest.raises(BackendUnavailable, match=r"asks 3 replicas x 1 CPU \(cpus_per_replica\) = 3 CPUs, and the "
                                                 r"Ray cluster has 2: its replicas would wait for ever"):
        ClusterBackend(spec, config.cluster)
    import socket
    with socket.socket() as s:                    # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
        with pytest.raises(BackendUnavailable, match=rf"address '{address}': nothing answers at 127.0.0.1:{port}"):
            reachable(address)
    reachable(two_nodes.address)                  # a cluster that is there


# -- sharding, by hand ---------------------------------------------------------------------------
def test_prefix_groups_stay_whole_and_shards_balance_then_steal():
    from litjudge.engine.core.requests import Prepared

    def p(key, tokens):
        return Prepared(key, None, "", tuple(tokens), 1)   # type: ignore[arg-type]

    story = list(range(200))
    plan = [p("a1", story + [1]), p("a2", story + [2]), p("b1", [7] * 300 + [1]), p("b2", [7] * 300 + [2]),
            p("c1", [9] * 50)]
    groups = prefix_groups(plan)
    assert [[x.key for x in g] for g in groups] == [["a1", "a2"], ["b1", "b2"], ["c1"]]
    shards = Shards.deal(groups, [0, 1])
    assert {k: [[x.key for x in g] for g in q] for k, q in shards.queues.items()} == \
        {0: [["b1", "b2"]], 1: [["a1", "a2"], ["c1"]]}                  # largest first, to the least loaded
    assert [x.key for x in shards.take(0, 1)] == ["b1", "b2"]            # whole groups only
    assert [x.key for x in shards.take(0, 1)] == ["c1"]                  # idle: steals from the back of 1
    assert [x.key for x in shards.take(1, 10)] == ["a1", "a2"] and shards.empty


def test_replicas_that_die_as_they_start_are_one_line_naming_why(two_nodes, tmp_path):
    """A hostile pass: a replica killed as its engine started was an internal error (ActorDiedError
    from the start's ray.get). A replica that dies then is dropped and counted, as one dying
    mid-run is; none left is one line with the reason (here each replica's recording is gone)."""
    from litjudge.engine.core.errors import BackendUnavailable

    recording = tmp_path / "answers.jsonl"
    recording.write_text('{"id": "p1/ab", "response": "A"}\n')
    config = dataclasses.replace(load_config(DEMO, judge=f"replay:{recording}"),
                                 cluster=ClusterConfig(replicas=2, address=two_nodes.address))
    spec = backends.resolve(config.judges[0], config)
    recording.unlink()                                       # each replica's backend now fails to start
    with pytest.raises(BackendUnavailable) as caught:
        backends.create(spec, config.cluster)
    said = str(caught.value)
    assert said.startswith("every replica died as it started ([0, 1]; ") and said.endswith("): nothing was judged")
    assert "answers.jsonl" in said and "\n" not in said, said

