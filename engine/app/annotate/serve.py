"""Starting the annotation app: the queue and its store for a run folder, a token when bound beyond
loopback, uvicorn serving it (in this process for `litjudge annotate`, in a thread for
`litjudge.annotate(result)`); and the store's import and export from the console."""
from __future__ import annotations

import hashlib
import ipaddress
import json
import math
import os
import socket
import threading
import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from ...core.errors import ConfigError, DataError, Option
from ...data.readers import read_csv
from ...data.table import check_header, csv_header
from .export import FIELDS, csv_text, draw_positions, jsonl, records, stored_records, uncell
from .labels import KeyReused, Labels
from .queue import Queue
from .queue_store import Options, open_queue, per_item
from .server import NAME, NAME_RULE, Settings, annotator_name, create_app, loopback_hosts, new_token


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def queue_token(labels: Labels, new: bool = False) -> str:
    """The token of a queue served beyond loopback: made at its first such start (or when `new`:
    the old one revoked) and kept in its store, so that a restart keeps every printed URL and open
    tab working (a new user's restart made a new one, and each open tab said "a token is required"
    though its URL carried the old one)."""
    token = labels.meta("token")
    if token is None or new:
        token = new_token()
        labels.set_meta("token", token)
    return token


def url_of(host: str, port: int, token: str | None, annotator: str | None = None) -> str:
    shown = f"[{host}]" if ":" in host else host
    query = urlencode([(k, v) for k, v in (("token", token), ("annotator", annotator)) if v])
    return f"http://{shown}:{port}/" + (f"?{query}" if query else "")


def listening_socket(host: str, port: int) -> socket.socket:
    """The server's socket, bound before the URL is printed (a port in use is one line, not a URL
    that answers nothing); port 0 takes a free one."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ConfigError(f"cannot listen on {host} port {port} ({e.strerror}): give another --port (0 takes a free "
                          "one) or --host") from e
    return sock


class Annotation:
    """A running annotation app (`litjudge.annotate`): its `url`, and `stop()`."""

    def __init__(self, run: Path, options: Options, annotator: str | None = None):
        name = annotator_name(annotator) if isinstance(annotator, str) else None
        if annotator is not None and not (name is not None and NAME.fullmatch(name)):
            raise ConfigError([Option("--annotator", "annotator"), f" must be {NAME_RULE} (as the page takes it), "
                               f"got {annotator!r}"])
        annotator = name
        if options.new_token and loopback(options.host):       # it was ignored, and the kept token came back later
            raise ConfigError([Option("--new-token", "new_token"), " replaces the token of a queue served beyond loopback: "
                               f"{options.host} takes none (give --host, host=, an address beyond it)"])
        self.queue, self.labels = open_queue(run, options)
        self.sock = listening_socket(options.host, options.port)
        self.port = port = self.sock.getsockname()[1]
        self.token = None if loopback(options.host) else queue_token(self.labels, options.new_token)
        hosts = loopback_hosts(options.host, port) if self.token is None else frozenset()
        served = Settings(per_item(self.labels, options), options.lock_seconds, self.token, hosts)
        app = create_app(self.queue, self.labels, served)
        import uvicorn  # the server, imported when one is served (`import litjudge` stays quick)

        self.server = uvicorn.Server(uvicorn.Config(app, host=options.host, port=port, log_level="warning",
                                                    access_log=False, lifespan="off"))
        self.url = url_of(options.host, port, self.token, annotator)
        self.thread: threading.Thread | None = None

    def run(self) -> None:
        """Serve in this thread until interrupted."""
        try:
            self.server.run(sockets=[self.sock])
        finally:
            self.labels.close()

    def start(self) -> Annotation:
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       name="litjudge-annotate", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started and self.thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(10)
        self.labels.close()

    def __repr__(self) -> str:
        return f"<litjudge annotation queue at {self.url}>"


# -- import and export ---------------------------------------------------------------------------
def read_rows(path: Path) -> list[tuple[int, dict[str, str]]]:
    """Labels collected elsewhere: (line, row) for each CSV or JSONL row with annotator, item, label
    (and time), in UTF-8 (a spreadsheet's byte order mark is read past; a CSV cell the export guarded
    is unguarded). A CSV is read as a data file is (`readers.read_csv`): its empty rows (`,,`) are
    blank lines, and each row is named by its own line, not its place among the rows read."""
    if not path.is_file():
        raise DataError("no such file to import", path=str(path))
    if path.suffix not in (".csv", ".jsonl"):
        raise DataError("import takes .csv or .jsonl (columns annotator, item, label; time optional)", path=str(path))
    if path.suffix == ".csv":
        header = csv_header(path)
        _check_header(header, path)
        return [(n, {k: uncell(v or "") for k, v in r.items() if k}) for n, r in read_csv(path, header)]
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise DataError(f"not UTF-8 text (byte {e.start}): save the file as UTF-8", path=str(path)) from e
    rows: list[tuple[int, dict[str, str]]] = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rec = json.loads(line, object_pairs_hook=_once)
            except json.JSONDecodeError as e:
                raise DataError(f"not JSON ({e.msg})", path=str(path), row=n) from e
            except KeyError as e:                    # a key named twice: the last was read, unsaid
                raise DataError(f"key {e.args[0]!r} is named twice in the row: keep one", path=str(path), row=n) from e
            if not isinstance(rec, dict):
                raise DataError("not a JSON object", path=str(path), row=n)
            rows.append((n, {k: "" if v is None else str(v) for k, v in rec.items()}))
    return rows


def _once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are each named once (KeyError naming the first named twice)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise KeyError(key)
        out[key] = value
    return out


def _check_header(header: list[str], path: Path) -> None:
    """An import's CSV header: a data file's rules (`table.check_header`: each named column named
    once, commas between them), and annotator, item and label among them: a file of other columns
    was refused at its first row with "no annotator", which showed nothing of what the header held,
    and one with two label columns was read by the last."""
    check_header(header, path)
    missing = [c for c in ("annotator", "item", "label") if c not in header]
    if header and missing:
        found = ", ".join(repr(c[:40]) for c in header[:8]) + (", ..." if len(header) > 8 else "")
        raise DataError(f"no {missing[0]!r} column: the header holds {found}; an import's columns are annotator, "
                        "item, label (time optional)", path=str(path), row=1)


def _refuse_other_design(rows: list[tuple[int, dict[str, str]]], cluster_of: dict[str, str], positions: dict[str, str],
                         probability: Mapping[str, float], path: Path) -> None:
    """An export's rows name where their story was drawn (`draws`) and with what probability: a
    queue started by importing them must have drawn it there too, with that probability (a floor
    changes the probabilities more than the positions), in one line naming the first that differs."""
    for n, r in rows:
        given, cluster = r.get("draws", "").split(), cluster_of.get(r.get("item", ""))
        if cluster is None:
            continue
        if given and given != positions.get(cluster, "").split():
            here = ", ".join(positions.get(cluster, "").split()) or "never"
            said = (f"was drawn at draw {', '.join(given)} by the queue this file comes from, and by this queue at "
                    f"{'draw ' * (here != 'never')}{here}")
        elif (p := _number(r.get("probability", ""))) is not None and not (
                (ours := probability.get(cluster)) is not None and math.isclose(p, ours, rel_tol=1e-9)):
            here = "not drawn" if ours is None else f"with {ours:.6g}"
            said = f"was drawn with probability {r['probability'][:12]} by the queue this file comes from, here {here}"
        else:
            continue
        reach = max((int(x) for _, row in rows for x in row.get("draws", "").split() if x.isdigit()), default=-1)
        budget = f" (at least {reach + 1}: the file's draws reach draw {reach}, counted from 0)" if reach >= 0 else ""
        raise DataError(f"item {r['item'][:60]!r} {said}: start the queue with the --budget{budget}, --floor and --seed "
                        "it had (if it had these, its run's judges differ from this run's, which draw by their own "
                        "uncertainty: import into a run of the same judges)", path=str(path), row=n)


def _number(text: str) -> float | None:
    try:
        return float(text) if text.strip() else None
    except ValueError:
        return None


def _iso_time(text: str) -> bool:
    try:
        datetime.fromisoformat(text.strip())
    except ValueError:
        return False
    return True


def import_labels(queue: Queue, labels: Labels, path: Path, per_item: int = 1, starts: bool = False) -> tuple[int, int]:
    """Store the file's labels (each (annotator, cluster) one submission, keyed by its `key` column
    where litjudge's export gave one, else by its content: a second import of the same file, or an
    export imported back, stores nothing). A story takes at most `per_item` annotators, as the page
    hands it out: a file that would give one more is refused whole, before anything is stored.
    `starts`: this import started the queue, so an export's `draws` and `probability` must be this
    queue's (else it came from a queue started with another --budget, --floor or --seed, which this
    one would silently replace). Returns (submissions stored, already there)."""
    rows = read_rows(path)
    if not rows:
        raise DataError("no rows to import (columns: annotator, item, label; time optional)", path=str(path))
    cluster_of = queue.cluster_of_item()
    if starts:
        _refuse_other_design(rows, cluster_of, draw_positions(labels), labels.probability, path)
    # one submission per (annotator, cluster, key): an export's rows carry their submission's key, so
    # one person's two answers to a story (two tabs) are two submissions, the later standing, as stored
    groups: dict[tuple[str, str, str], dict[str, tuple[str, str]]] = {}
    shown: dict[tuple[str, str, str], str] = {}         # the order a pair was shown in (an export's)
    for n, r in rows:
        missing = [c for c in ("annotator", "item", "label") if not r.get(c)]
        if missing:
            raise DataError(f"no {missing[0]} (columns: annotator, item, label; time optional)", path=str(path), row=n)
        if r["item"] not in cluster_of:
            raise DataError(f"item {r['item'][:60]!r} is not an item of this run's queue", path=str(path), row=n)
        if cluster_of[r["item"]] not in labels.first_draw:      # as the page refuses it: not in the estimate's design
            whose = "" if cluster_of[r["item"]] == r["item"] else f" (of {cluster_of[r['item']][:60]!r})"
            raise DataError(f"item {r['item'][:60]!r}{whose} was not drawn by this queue (only drawn items' labels "
                            "enter the estimate)", path=str(path), row=n)
        if r.get("time") and not _iso_time(r["time"]):
            raise DataError(f"time {r['time'][:40]!r} is not an ISO 8601 time (e.g. 2026-11-30T14:05:00+0000)",
                            path=str(path), row=n)
        r["annotator"] = annotator_name(r["annotator"])            # as the page keeps it (one name per person)
        if not NAME.fullmatch(r["annotator"]):
            raise DataError(f"annotator {r['annotator'][:40]!r}: {NAME_RULE}",
                            path=str(path), row=n)
        label = queue.canonical(r["item"], r["label"])
        if label is None:
            raise DataError(_not_an_answer(queue, r["item"], r["label"]), path=str(path), row=n)
        answers = groups.setdefault((r["annotator"], cluster_of[r["item"]], r.get("key", "")), {})
        if r["item"] in answers and answers[r["item"]][0] != label:   # which one stands? not the file's row order
            raise DataError(f"{r['annotator']!r} answers item {r['item'][:60]!r} twice ({answers[r['item']][0]!r}, "
                            f"then {label!r}): keep one row per annotator and item (an export's rows whose standing is "
                            "false were replaced later: drop them)", path=str(path), row=n)
        answers[r["item"]] = (label, r.get("time", ""))
        if r.get("shown", "") not in ("", "ab", "ba"):
            raise DataError(f"shown {r['shown'][:10]!r}: the order a pair's texts were shown in, ab or ba (or empty)",
                            path=str(path), row=n)
        shown.setdefault((r["annotator"], cluster_of[r["item"]], r.get("key", "")), r.get("shown", ""))
    _refuse_past_per_item({(a, c): items for (a, c, _), items in groups.items()}, labels, per_item, path)
    stored = again = 0
    for (annotator, cluster, given), items in groups.items():
        content = json.dumps([annotator, cluster, sorted(items.items())])
        # a file litjudge exported carries each submission's own key: imported again (into this
        # store or the one it came from) it is the same submission, stored once
        key = given or "import:" + hashlib.sha256(content.encode()).hexdigest()[:32]
        at = max((t for _, t in items.values()), default="") or None
        try:
            fresh = labels.submit(key, annotator, cluster, {i: v for i, (v, _) in items.items()}, source="import", at=at,
                                  shown=shown[(annotator, cluster, given)])
        except KeyReused as e:
            raise DataError(f"{e} (an edited export: remove its key column)", path=str(path)) from e
        stored, again = stored + fresh, again + (not fresh)
    return stored, again


def unfinished(queue: Queue, labels: Labels) -> list[str]:
    """A line per drawn cluster some of whose items have an answer and some none: the estimates
    read the longest prefix of draws whose clusters are all answered, so it ends at such a cluster's
    first draw until someone finishes it (an import of some of a story's tests)."""
    answered: dict[str, set[str]] = {}
    who: dict[str, set[str]] = {}
    for (annotator, cluster), items in labels.answered().items():
        answered.setdefault(cluster, set()).update(items)
        who.setdefault(cluster, set()).add(annotator)
    out = []
    for cluster, items in sorted(answered.items(), key=lambda kv: labels.first_draw.get(kv[0], -1)):
        total = len(queue.clusters[queue.index(cluster)].questions)
        if len(items) < total and cluster in labels.first_draw:
            out.append(f"{cluster!r}: {len(items)} of its {total} items answered (by {', '.join(sorted(who[cluster]))}): "
                       f"the estimates read no draw from its first (draw {labels.first_draw[cluster] + 1}) on until it "
                       "is finished; the page gives it to them to finish")
    return out


def _not_an_answer(queue: Queue, item: str, label: str) -> str:
    """Why an imported label is refused. A new user's pair labelled A / B (as the data's label column
    takes them) read "not an answer" alone: a capital names a position as shown, which the page
    records apart (`shown`), where an import names the text picked."""
    question = queue.question(item)
    takes = ", ".join(a.value for a in question.answers)
    why = (": an import names the text picked, a (the data's text_a) or b (text_b), not the position it was "
           "shown in" if question.pairwise and label.strip() in ("A", "B") else "")
    return f"label {label[:40]!r} is not an answer of this protocol ({takes}){why}"


def _refuse_past_per_item(groups: dict[tuple[str, str], Any], labels: Labels, per_item: int, path: Path) -> None:
    """One DataError when the stored answers and the file's would give a story more annotators than
    `per_item` (the page's rule: a K+1th answer moved the estimate past the queue's design)."""
    stored: dict[str, set[str]] = {}
    for annotator, cluster in labels.answered():
        stored.setdefault(cluster, set()).add(annotator)
    reading = labels.reading()                 # a place the page has handed out counts, as on the page
    who = {c: stored.get(c, set()) | reading.get(c, set()) for _, c in groups}
    for annotator, cluster in groups:
        who[cluster] = who[cluster] | {annotator}
    # a story the file gives a new annotator (an export imported back adds none)
    over = next((c for c, names in who.items() if names - stored.get(c, set()) - reading.get(c, set())
                 and len(names) > per_item), None)
    if over is not None:
        names = ", ".join(sorted(who[over])[:4])
        # a lock, not a person seen reading: it was shown to them, and is theirs until it runs out
        now = (f"; {', '.join(sorted(reading[over]))} holding it, shown on their page, until the lock runs out"
               if reading.get(over) else "")
        raise DataError(f"cluster {over[:60]!r} would have {len(who[over])} annotators ({names}{now}), and the queue "
                        f"takes {per_item} per item, as the page does (--per-item: the last given, else 1): import "
                        f"with --per-item {len(who[over])} for more; nothing was imported", path=str(path))


def export_labels(queue: Queue | None, labels: Labels, path: Path) -> int:
    """Every label, each marked `standing` or not (`export.records`; without a queue, a run judged again since it was
    drawn, `export.stored_records`) to a new .csv or .jsonl file, or a new Hugging Face dataset
    folder (never over an existing file or folder)."""
    if path.exists():
        raise ConfigError("exists: --export writes a new file or folder only (give another name, or move it aside)",
                          where=str(path))
    rows = records(queue, labels) if queue is not None else stored_records(labels)
    if path.suffix == ".jsonl":
        path.write_text(jsonl(rows))
    elif path.suffix == ".csv":
        path.write_text(csv_text(rows), newline="")
    elif path.suffix == "":
        import datasets  # a Hugging Face dataset folder (datasets.load_from_disk)

        empty: dict[str, list] = {f: [] for f in FIELDS}
        table = datasets.Dataset.from_list(rows) if rows else datasets.Dataset.from_dict(empty)
        table.save_to_disk(str(path))
    else:
        raise ConfigError("--export writes a .csv or .jsonl file, or a Hugging Face dataset folder (a name without "
                          "a suffix)", where=str(path))
    return len(rows)


def annotate(run: Any, *, budget: int | None = None, per_item: int | None = None, floor: float | None = None,
             seed: int | None = None, host: str = "127.0.0.1", port: int = 0, annotator: str | None = None,
             lock_seconds: float = 600.0, new_token: bool = False) -> Annotation:
    """`litjudge.annotate`: the annotation app of a finished run (a Result or its folder), served
    from a thread of this process on a free port; returns it running (`.url`, `.stop()`)."""
    folder = getattr(run, "run_dir", run)
    if not isinstance(folder, str | os.PathLike):
        raise ConfigError(f"annotate takes a finished run (a Result, or its folder as a str or Path), got "
                          f"{type(run).__name__} {run!r:.60}", parameter="run")
    options = Options(budget, floor, seed, per_item, lock_seconds, host, port, new_token)
    return Annotation(Path(folder), options, annotator).start()
