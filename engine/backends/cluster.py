"""Many engines on a Ray cluster: each replica is a Ray actor running litjudge's own backend (the
same `backends.create(spec)` the single-engine path uses, so grammars, listwise slot decoding and
every mode behave exactly as there), and this driver-side backend spreads a plan over them.

- Prefix affinity: prefix groups go whole to one replica, balanced by prompt tokens; an idle
  replica steals unstarted groups from the most loaded one (`engine.backends.local.sharding`).
- Streaming: a replica's `generate` is a Ray generator, so verdicts come back one by one as they
  finish; the driver (the runner) is the only writer of the store.
- Nothing lost: when a replica dies (process killed, node lost) its unfinished requests are dealt
  again to the living replicas and counted (`requeued`); the run ends with every verdict once.
- One node, N replicas = data parallelism; `gpus_per_replica` > 1 = tensor parallelism inside a
  replica (the actor holds its GPUs on one node; vLLM splits the model over them).
"""
from __future__ import annotations

import dataclasses
import functools
import os
import re
import signal
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from ..core.backend import Backend, Capabilities, JudgeSpec
from ..core.config import ClusterConfig, RunConfig
from ..core.errors import BackendUnavailable, ConfigError
from ..core.progress import Throughput
from ..core.requests import Generation, JudgeIdentity, JudgeRequest, Prepared
from .local.sharding import Shards, prefix_groups
from .registry import BACKENDS

try:
    import ray
    from ray.exceptions import RayActorError
except ImportError as exc:  # the optional extra
    raise BackendUnavailable(f"running replicas needs Ray: pip install 'litjudge[ray]' ({exc})") from None


class Replica:
    """One engine in a Ray actor: litjudge's backend for the judge, started in the actor's process.
    `env`: vLLM's own settings for this engine (`VLLM_*`, which vLLM reads only from the
    environment), set once as the actor's process starts, before vLLM loads there."""

    def __init__(self, spec: JudgeSpec, index: int, env: dict[str, str]):
        os.environ.update(env)
        self.index, self.backend, self.served = index, BACKENDS.get(spec.backend).create(spec), 0

    def identity(self) -> JudgeIdentity:
        return self.backend.identity()

    def describe(self) -> dict:
        return {**self.backend.describe(), "node": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}

    def generate(self, chunk: list[Prepared]):
        for g in self.backend.generate(chunk):
            yield g
            self.served += 1


    def close(self) -> None:
        """The engine shut down as a run's own is (a killed actor left vLLM's /tmp/vllm_dist_* file)."""
        self.backend.close()


def connect(cluster: ClusterConfig) -> None:
    """`local`: start Ray on this machine; `auto` or `ray://host:port`: join a running cluster.
    SIGTERM keeps the handler it had: `ray.init` sets its own, which ended a replicated run with an
    abort (exit 134) and no history line while its replicas went on answering (a hostile pass)."""
    if ray.is_initialized():
        return
    before = signal.getsignal(signal.SIGTERM)
    try:
        _init(cluster)
    finally:
        if before is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, before)


def _init(cluster: ClusterConfig) -> None:
    if cluster.address in ("", "local"):
        ray.init(num_cpus=cluster.local_cpus or None, include_dashboard=False, log_to_driver=False,
                 configure_logging=False, _node_ip_address="127.0.0.1")      # a one-machine Ray stays on loopback
        return
    reachable(cluster.address)
    try:
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    except ConnectionError as exc:              # an OSError: it was said as a path fault ("a file: ...")
        said = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BackendUnavailable(f"[cluster] address {cluster.address!r}: no Ray cluster there ({said[:160]})") from None


def _first_line(exc: BaseException) -> str:
    """What killed an actor, in one line: the error its creation raised (the last line of the
    remote traceback Ray puts in the message), else the message's first line."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in str(exc).splitlines() if line.strip()]
    raised = [line for line in lines[1:] if re.match(r"[A-Za-z_][\w.]*(Error|Exception|Interrupt)\b", line)]
    return (raised[-1] if raised else lines[0] if lines else type(exc).__name__)[:300]


def reachable(address: str) -> None:
    """A HOST:PORT (or ray://HOST:PORT) that nothing answers at is one line now: `ray.init` waited
    on it without end."""
    if address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
    except (OSError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or type(exc).__name__
        raise BackendUnavailable(f"[cluster] address {address!r}: nothing answers at {host}:{port} ({why}): start "
                                 "the Ray cluster there, or give its address") from None


def placeable(cluster: ClusterConfig) -> None:
    """Replicas the cluster has no room for wait for ever (Ray queues an actor until resources
    free up; 3 replicas on 2 CPUs showed nothing for minutes): refused, naming what is asked and
    what the cluster has. (A cluster that scales up: start it at its size first.)"""
    have = ray.cluster_resources()
    for resource, each, key in (("CPU", cluster.cpus_per_replica, "cpus_per_replica"),
                                ("GPU", cluster.gpus_per_replica, "gpus_per_replica")):
        asked = cluster.replicas * each
        if asked > have.get(resource, 0.0) + 1e-9:
            raise BackendUnavailable(
                f"[cluster] asks {cluster.replicas} replicas x {each:g} {resource} ({key}) = {asked:g} {resource}s, "
                f"and the Ray cluster has {have.get(resource, 0.0):g}: its replicas would wait for ever; ask fewer "
                "replicas, or a cluster that has them")


class ClusterBackend(Backend):
    """A Backend whose engines are Ray actors; it plans as the backend its replicas run."""

    name = "cluster"
    # never consulted: a judge's mode is checked against the backend its replicas run (factory.resolve)
    capabilities = Capabilities(frozenset())

    @classmethod
    def resolve(cls, name: str, config: RunConfig, prefix: str = "") -> JudgeSpec:
        raise ConfigError("the cluster backend is chosen by [cluster] (replicas of the judge's own backend), "
                          "not by a judge name", parameter="backend")

    @functools.cached_property
    def planner(self) -> Backend:
        return BACKENDS.get(self.spec.backend).plan(self.spec)

    def render(self, request: JudgeRequest) -> str:
        return self.planner.render(request)

    def encode(self, prompt: str) -> Sequence[int]:
        return self.planner.encode(prompt)

    def encode_batch(self, prompts: list[str]) -> Sequence[Sequence[int]]:
        return self.planner.encode_batch(prompts)

    def context_window(self) -> int:
        return self.planner.context_window()

    def __init__(self, spec: JudgeSpec, cluster: ClusterConfig):
        connect(cluster)
        placeable(cluster)
        self.spec, self.cluster = spec, cluster
        if cluster.gpus_per_replica > 1:
            spec = dataclasses.replace(spec, engine=dataclasses.replace(spec.engine,
                                                                        tensor_parallel_size=cluster.gpus_per_replica))
        actor: Any = ray.remote(Replica)
        cores = os.cpu_count() or 1
        self.replicas: dict[int, Any] = {}       # Ray actor handles
        for i in range(cluster.replicas):
            env = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0",
                   "VLLM_LOGGING_LEVEL": os.environ.get("VLLM_LOGGING_LEVEL", "WARNING")}
            if not cluster.gpus_per_replica:
                env["VLLM_CPU_OMP_THREADS_BIND"] = str(i % cores)   # one core per CPU replica on a shared node
            self.replicas[i] = actor.options(num_cpus=cluster.cpus_per_replica, num_gpus=cluster.gpus_per_replica,
                                             max_restarts=0, max_task_retries=0).remote(spec, i, env)
        self.requeued = 0
        self.deaths: list[int] = []
        t0 = time.perf_counter()
        identities = set(self._from_each("identity").values())
        self.start_seconds = round(time.perf_counter() - t0, 1)
        if len(identities) != 1:
            raise BackendUnavailable(f"replicas disagree on the judge's identity: {identities}")
        self._identity = identities.pop()
        self.described: dict[int, dict] = self._from_each("describe")
        self.stats = {i: Throughput() for i in self.described}

    def _from_each(self, method: str) -> dict[int, Any]:
        """`method` of every living replica; one that died (killed as its engine started: an internal
        error) is dropped and counted, as a death mid-run is; none left is one line."""
        calls = {i: getattr(r, method).remote() for i, r in self.replicas.items()}
        out, why = {}, ""
        for i, call in calls.items():
            try:
                out[i] = ray.get(call)
            except RayActorError as exc:
                self.replicas.pop(i, None)
                self.deaths.append(i)
                why = _first_line(exc)
        if not out:
            raise BackendUnavailable(f"every replica died as it started ({self.deaths}; {why}): nothing was judged")
        return out

    def identity(self) -> JudgeIdentity:
        return self._identity

    def describe(self) -> dict:
        per = []
        for i, s in self.stats.items():
            d = self.described[i]
            per.append({"replica": i, "node": d.get("node"), "alive": i in self.replicas, "requests": s.requests,
                        "prompt_tokens": s.prompt_tokens, "cached_tokens": s.cached_tokens,
                        "cache_hit_rate": round(s.cache_hit_rate, 4)})
        total = Throughput()
        for s in self.stats.values():
            total.prompt_tokens += s.prompt_tokens
            total.cached_tokens += s.cached_tokens
        first = next(iter(self.described.values()))
        return {**{k: v for k, v in first.items() if k not in ("node", "pid")},
                "engine_started": True, "engine_starts": len(self.described), "replicas": per,
                "cluster": {"address": self.cluster.address or "local", "replicas": self.cluster.replicas,
                            "gpus_per_replica": self.cluster.gpus_per_replica, "start_seconds": self.start_seconds,
                            "requeued": self.requeued, "replica_deaths": self.deaths,
                            "cache_hit_rate": round(total.cache_hit_rate, 4)}}

    def close(self) -> None:
        closing = [r.close.remote() for r in self.replicas.values()]      # each engine shut down (a dead
        if closing:                                                          # replica's answers at once)
            ray.wait(closing, num_returns=len(closing), timeout=60)
        for r in self.replicas.values():
            ray.kill(r)
        self.replicas.clear()
        if "planner" in vars(self):
            self.planner.close()

    # -- the plan over the replicas --------------------------------------------------------------
    def progress_note(self) -> str:
        """Per replica: verdicts so far and prefix-cache hit rate (the progress bar shows it)."""
        return " ".join(f"r{i}:{s.requests}/{100 * s.cache_hit_rate:.0f}%" + ("" if i in self.replicas else "(dead)")
                        for i, s in self.stats.items())

    def generate(self, batch: Sequence[Prepared]) -> Iterator[Generation]:
        shards = Shards.deal(prefix_groups(batch), list(self.replicas))
        inflight: dict[Any, tuple[int, dict[str, Prepared]]] = {}

        def dispatch(i: int) -> None:
            chunk = shards.take(i, self.cluster.chunk_requests)
            if chunk:
                inflight[self.replicas[i].generate.remote(chunk)] = (i, {p.key: p for p in chunk})

        def lost(i: int) -> None:
            """Replica i died: its unfinished requests go back to the living replicas."""
            self.replicas.pop(i, None)
            if i not in self.deaths:
                self.deaths.append(i)
            back = shards.drop(i)
            for gen in [g for g, (j, _) in inflight.items() if j == i]:
                back.append(list(inflight.pop(gen)[1].values()))
            self.requeued += sum(len(g) for g in back)
            if not self.replicas:
                raise BackendUnavailable(f"every replica died ({self.deaths}); finished verdicts are stored, "
                                         "a re-run resumes")
            shards.give_back([g for g in back if g], list(self.replicas))
            for j in self.replicas:                 # a replica that was idle may now have work
                if sum(1 for _, (k, _) in inflight.items() if k == j) < 2:
                    dispatch(j)

        for i in list(self.replicas):
            dispatch(i)
            dispatch(i)                           # two chunks queued per replica: no gap between chunks
        while inflight:
            ready, _ = ray.wait(list(inflight), num_returns=1)
            gen: Any = ready[0]                       # a Ray ObjectRefGenerator
            i, pending = inflight[gen]
            try:
                g = ray.get(next(gen))
            except StopIteration:
                inflight.pop(gen)
                dispatch(i)
                continue
            except RayActorError:
                lost(i)
                continue
            pending.pop(g.key, None)
            self.stats[i].add(g)
            yield g
