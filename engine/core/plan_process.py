"""A plan made in a process of its own, streamed to the runner chunk by chunk.

Two Python threads share one interpreter lock, so a planner thread "overlapping" the run still
adds its Python work (rendering, tokenizing, ordering) to the run's wall time on a small machine.
Here a forked child does that work. Sending whole planned requests back would cost as much as
planning them (pickling a 20k-request chunk out and in: ~2 s), so the work is split instead:

- both processes walk the same request stream (a protocol's build over its data files is
  deterministic; the fork gives the child its own copy of the not-yet-started iterator);
- the runner's process builds and keys its copy as before (so what a build records, the items it
  skips and its warnings, the store lookups and resume are exactly as without the child);
- the child renders, tokenizes, deduplicates and orders, and sends only what the runner lacks:
  each new key in prefix order with its token ids (packed, 4 bytes each) and budget, the keys
  whose prompts do not fit, and its figures. The runner renders the new keys' prompts again (as
  fast as reading them from the pipe, and the prompts of a million requests are gigabytes to
  pickle, send and read). The ids stay packed here (an array slice per prompt): making 200 Python
  ints of every prompt cost the runner 1.7 s per 100k requests, and only an engine's step reads
  them one by one.

Memory stays bounded: the pipe holds about one chunk, and the child waits for the runner to read.
The child ignores Ctrl-C (the runner decides) and ends when the runner stops reading or dies (its
next send fails). Only streams that read nothing but files may be planned this way: a stream that
reads the run's store as it goes (the turns of a conversation) would use the store's connection
in two processes, so its callers plan in a thread (`planned_ahead`).
"""
from __future__ import annotations

import gc
import hashlib
import logging
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
from array import array
from collections.abc import Generator, Iterable, Iterator
from contextlib import contextmanager
from itertools import islice
from typing import Any

from . import envs
from .console import say
from .errors import ContractError, LitjudgeError, SystemFault
from .planner import PlanChunk, PlanEntry, StreamPlanner, cycles_collected_after
from .requests import IDS, JudgeRequest, Prepared, content_key


def available() -> bool:
    """Forking is what makes the child cheap (it inherits the judge's tokenizer and the stream). Not
    after Ray started in this process (its gRPC threads do not survive a fork), nor where
    LITJUDGE_PLAN_PROCESS=0 asks for the planner thread."""
    ray = sys.modules.get("ray")
    return ("fork" in multiprocessing.get_all_start_methods() and envs.LITJUDGE_PLAN_PROCESS
            and not (ray is not None and getattr(ray, "is_initialized", lambda: False)()))


def planned_apart(stream: StreamPlanner, requests: Iterable[tuple[str, JudgeRequest]]
                  ) -> Generator[PlanChunk, None, None]:
    """The chunks `stream.chunks(requests)` would give, planned in a child process (see the module).
    `stream.stats` holds the child's figures as each chunk arrives."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    # The tokenizer's Rust thread pool does not survive a fork: a child that tokenizes in parallel
    # after this process started the pool waits forever. Only the tokenizers library knows whether it
    # did (a setting of TOKENIZERS_PARALLELISM says nothing of what ran before it was set), and its
    # own fork handler turns parallelism off in the child exactly then, unless the variable is set:
    # so the child is forked with it unset (and tokenizes in parallel when that is safe).
    setting = os.environ.pop("TOKENIZERS_PARALLELISM", None)
    child = context.Process(target=_child, args=(stream, requests, send, receive), name="litjudge-planner",
                            daemon=True)
    it, skipped = iter(requests), set[str]()
    try:
        try:
            with stops_held():
                child.start()
        finally:
            if setting is not None:
                os.environ["TOKENIZERS_PARALLELISM"] = setting
            send.close()
        while True:
            with cycles_collected_after():
                batch = list(islice(it, stream.chunk))      # this process's own copy of the stream
                keys = [content_key(r, stream.identity) for _, r in batch]
            message = _receive(receive, child)
            if message is None:
                if batch:                               # the child's walk ended before this one
                    raise _not_repeatable(batch, ended=True)
                return
            new, packed, lengths, budgets, too_long, stats, digest = message
            stream.stats = stats
            skipped.update(too_long)
            if digest != _digest(key for key in keys if key not in skipped):
                raise _not_repeatable(batch, ended=False)
            first: dict[str, JudgeRequest] = {}
            for (_, r), key in zip(batch, keys):
                first.setdefault(key, r)
            ids, at, unique = array(IDS), 0, []
            ids.frombytes(packed)
            render = stream.planner.render
            for key, n, budget in zip(new, lengths, budgets, strict=True):
                r = first[key]
                unique.append(Prepared(key, r, render(r), ids[at:at + n], budget))   # the ids stay packed
                at += n
            yield PlanChunk([PlanEntry(key, r, run) for (run, r), key in zip(batch, keys) if key not in skipped],
                            unique)
    finally:
        receive.close()
        if child.pid is not None:       # started
            child.join(timeout=5)
            if child.is_alive():
                child.kill()
                child.join()


STOPS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def stops_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM that arrive while forking are raised after the fork, as their handlers raise
    them. Python runs a handler at the main thread's next bytecode, and during `os.fork` that is an
    at-fork callback (logging's), whose exception Python prints and drops ("Exception ignored in"):
    a sweep stopped as one judge handed over to the next went on to its end and exited 0."""
    if threading.current_thread() is not threading.main_thread():
        yield                           # only the main thread runs (and sets) handlers
        return
    caught: list[int] = []
    before = {s: signal.signal(s, lambda signum, _frame: caught.append(signum)) for s in STOPS}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
        if caught:
            stop = signal.Signals(caught[0])
            if callable(then := before[stop]):
                then(stop, None)                         # KeyboardInterrupt, the console's Terminated
            elif then == signal.SIG_DFL:
                signal.raise_signal(stop)                # the default: the process ends, as it would have


STOPPED_SAY_S = 2.0        # a planner the system reports stopped is named after this long (not the watchdog's wait)


def _receive(receive: Any, child: Any) -> Any:
    """The child's next message: a chunk, None when the plan is done, or its error (raised here). A
    planner that dies is one line (what killed it; a re-run resumes); one that goes silent (stopped,
    swapping) is named, with its pid, after LITJUDGE_PLAN_WATCHDOG_S (60 s) and again after each doubling of the wait;
    one the system reports stopped (SIGSTOP, Ctrl-Z) after STOPPED_SAY_S, once each time it stops."""
    started, say_after, told_stopped = time.monotonic(), envs.LITJUDGE_PLAN_WATCHDOG_S, False
    while not receive.poll(min(1.0, say_after)):
        silent = time.monotonic() - started
        stopped = _stopped(child.pid) if silent >= min(STOPPED_SAY_S, say_after) else ""
        if silent >= say_after:
            say(f"litjudge: the planner process (pid {child.pid}) has not answered for {silent:.0f} s"
                  f"{stopped}; the run waits for it (Ctrl-C stops the run; a re-run resumes)", logging.WARNING)
            say_after *= 2
        elif stopped and not told_stopped:     # stopped is certain (the system says): said now, not at the watchdog
            say(f"litjudge: the run waits for its planner process (pid {child.pid}), which is stopped "
                  f"(SIGSTOP or Ctrl-Z): `kill -CONT {child.pid}` resumes it (Ctrl-C stops the run; a re-run "
                  "resumes)", logging.WARNING)
        told_stopped = bool(stopped)
    try:
        message = receive.recv()
    except (EOFError, OSError):         # OSError: killed mid-message ("got end of file during message")
        child.join(timeout=5)
        code = child.exitcode
        how = (f"was killed ({signal.Signals(-code).name})" if code is not None and code < 0 and -code in
               signal.valid_signals() else f"ended (exit code {code})")
        raise SystemFault(f"the planner process (pid {child.pid}) {how} before the plan was finished; finished "
                          "verdicts are stored: run again to resume") from None
    if isinstance(message, BaseException):
        raise message
    return message


def _stopped(pid: int) -> str:
    """Why a live planner may be silent, where the system says: stopped (SIGSTOP, Ctrl-Z)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return ""
    return f" (it is stopped: `kill -CONT {pid}` resumes it)" if state in ("T", "t") else ""


def _child(stream: StreamPlanner, requests: Iterable[tuple[str, JudgeRequest]], send: Any, inherited: Any) -> None:
    inherited.close()          # the runner's end: held here too, the pipe would outlive the runner (found by a kill -9)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)     # not the console's handler (a SIGTERM raised here too)
    # This process only plans, and a plan makes no reference cycles: the cyclic collector stays off
    # for its life (resumed between chunks, each collection walked what the chunk had made: 2.5 s of
    # every 14 s at 200k requests); everything is freed by reference counting, or at its exit.
    gc.disable()
    sent_skips = 0
    try:
        for part in stream.chunks(requests):
            t = time.perf_counter()
            message = _packed(part, stream, sent_skips)
            stream.stats.seconds["send"] = stream.stats.seconds.get("send", 0.0) + time.perf_counter() - t
            send.send(message)            # (the time spent here waiting for the runner to read is not counted)
            sent_skips = len(stream.skipped_keys)
        send.send(None)
    except (BrokenPipeError, ConnectionResetError):
        return                                          # the runner stopped reading: nothing to do
    except BaseException as exc:  # noqa: BLE001  (handed to the runner, raised there)
        try:
            send.send(exc if _picklable(exc) else LitjudgeError(f"while planning: {exc!r}"))
        except (BrokenPipeError, ConnectionResetError):
            pass


def _packed(part: PlanChunk, stream: StreamPlanner, sent_skips: int) -> tuple:
    """What the runner lacks of a planned chunk (see the module), and a digest of the chunk's keys
    (the runner checks that its own walk of the stream gave the same)."""
    ids = b"".join([p.token_ids.tobytes() for p in part.unique])
    return ([p.key for p in part.unique], ids,
            [len(p.token_ids) for p in part.unique], [p.max_tokens for p in part.unique],
            stream.skipped_keys[sent_skips:], stream.stats, _digest(e.key for e in part.entries))


def _digest(keys: Iterable[str]) -> str:
    """The chunk's keys in order, as one digest."""
    return hashlib.sha256("".join(keys).encode()).hexdigest()


def _not_repeatable(batch: list[tuple[str, JudgeRequest]], ended: bool) -> ContractError:
    """Both processes walk the request stream (see the module): a build that is not the same each
    time it runs over the same data cannot be planned, and would not resume either."""
    protocol = batch[0][1].meta.protocol if batch else "?"
    return ContractError(f"protocol {protocol!r}: its build is not repeatable: walked twice over the same data, it gave "
                         + ("a different number of requests" if ended or not batch else "different requests")
                         + " (a build must give the same requests each time: no unseeded randomness, no clock, no "
                         "set order, no state kept between runs)")


def _picklable(exc: BaseException) -> bool:
    try:
        pickle.loads(pickle.dumps(exc))
        return True
    except Exception:  # noqa: BLE001
        return False
