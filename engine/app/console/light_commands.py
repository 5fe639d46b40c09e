"""The commands that answer at once, with no model, table library or plot: `judges` (the registry
judges, `--prepare` to obtain and convert them, and the backends), `protocols` (the protocols and
dataset loaders), `data` (list the cards, fetch their data) and `status` (a run folder's provider
batches). The listings say where each entry came from: built in, or a plugin's distribution."""
from __future__ import annotations

import time
from pathlib import Path

from litjudge.judges import PROTOCOLS

from ...backends.api_batch import cancel_open
from ...backends.local.models import ALIASES, resolve_judge
from ...backends.registry import BACKENDS, PLAIN
from ...core.console import terminal
from ...core.errors import ConfigError, LitjudgeError, StoreError
from ...core.paths import cards_dir, data_root
from ...core.registry import Registry
from ...core.store import Store
from ...data.cards import load_card
from ...data.fetch import fetch, presence
from ...data.loaders import LOADERS
from ..manifest import KEY_ENV_NOTE
from ..outputs import read_manifest
from .columns import aligned


def warn_plugins(*registries: Registry) -> None:
    """Load every plugin of these registries; each that cannot be used is one warning line naming its
    distribution (the listing goes on with the rest)."""
    for registry in registries:
        for line in registry.check_plugins():
            print(f"litjudge: warning: {line}", file=terminal())


def cmd_protocols(args) -> int:
    """Every protocol (version, the kind of data it reads, its verdict modes) and every dataset loader
    (the kinds of data it gives), each with where it came from."""
    warn_plugins(PROTOCOLS, LOADERS)
    rows = []
    for name in PROTOCOLS.names():
        declared = PROTOCOLS.get(name).declared
        rows.append([name, declared.version, declared.reads, ", ".join(declared.modes), PROTOCOLS.origin(name)])
    print("\n".join(aligned(["protocol", "version", "reads", "modes", "from"], rows)))
    kinds: dict[tuple[str, str], list[str]] = {}
    for name in LOADERS.names():
        loader, _, kind = name.partition(".")
        kinds.setdefault((loader, str(LOADERS.origin(name))), []).append(kind)
    loaders = [[loader, ", ".join(given), origin] for (loader, origin), given in sorted(kinds.items())]
    print("\n" + "\n".join(aligned(["dataset loader", "gives", "from"], loaders)))
    return 0


def backend_lines() -> list[str]:
    """Each backend, how a judge selects it, and where it came from."""
    rows = []
    for name in BACKENDS.names():
        prefix = BACKENDS.meta(name).get("prefix")
        how = (f"{prefix}NAME" if prefix else "NAME (the default)" if name == PLAIN[0]
               else f'NAME with backend = "{name}"' if name in PLAIN else "(used by the others)")
        rows.append([name, how, BACKENDS.origin(name)])
    return aligned(["backend", "judges it runs", "from"], rows)


def cmd_judges(args) -> int:
    unknown = [n for n in args.names if n not in ALIASES]
    if unknown:
        raise ConfigError(f"unknown judge alias {unknown[0]!r} (aliases: {', '.join(ALIASES)}); a model folder or hub "
                          "id needs no preparing")
    rows = []
    for name, m in ALIASES.items():
        if args.names and name not in args.names:
            continue
        rows.append([name, m.hf_name, m.architecture, "chat" if m.chat else "base", m.license,
                     *([resolve_judge(name).path] if args.prepare else [])])
    header = ["judge", "model", "architecture", "kind", "license", *(["prepared in"] if args.prepare else [])]
    print("\n".join(aligned(header, rows)))
    if not args.names:                     # the whole listing: the backends too, plugins' included
        warn_plugins(BACKENDS)
        print("\n" + "\n".join(backend_lines()))
    return 0


def cmd_data(args) -> int:
    """`data list [NAME ...]`: every card (or those named), where its data is, whether it is there;
    `data fetch NAME`: get it."""
    root = Path(args.data_root) if args.data_root else data_root()
    if args.action == "list":                       # names: those cards only (an unknown one is one line)
        for name in args.names or [p.stem for p in sorted(cards_dir().glob("*.toml"))]:
            card = load_card(name)
            where = card.folder(str(root))
            source = card.upstream.get("repository", "") if card.upstream else "(your data, or shipped)"
            print(f"{card.name:22s} {presence(card, root):8s} {where}  {source}")
        return 0
    if not args.names:
        raise ConfigError("data fetch needs dataset names (see `litjudge data list`)")
    for name in args.names:
        card = load_card(name)
        done = fetch(card, root)
        counts = {a: sum(f.action == a for f in done) for a in ("downloaded", "derived", "kept")}
        print(f"{name}: {len(done)} files verified in {root / card.path} "
              f"({counts['downloaded']} downloaded, {counts['derived']} derived, {counts['kept']} already there)")
    return 0


def recorded_key_env(run_dir: Path, store: Store) -> str:
    """The run's `[api] key_env`: noted in its store when it started (a run killed with batches open
    has no manifest yet), else from its manifest (a sweep's or a run's, of an older litjudge)."""
    noted = store.meta(KEY_ENV_NOTE)
    if noted is not None:
        return noted
    try:
        return read_manifest(run_dir).api_key_env
    except (LitjudgeError, AttributeError):
        return ""


def cmd_status(args) -> int:
    """A run folder's provider batches: open ones (requests, age), and the ones collected or
    cancelled; `--cancel-batches` cancels the open ones."""
    path = Path(args.run_dir) / "store.sqlite"
    if not path.exists():
        raise StoreError(f"{args.run_dir}: not a run folder (no store.sqlite)")
    store = Store.open(path, create=False, readonly=not args.cancel_batches)     # listing writes nothing
    try:
        if args.cancel_batches:
            cancelled = cancel_open(store, recorded_key_env(Path(args.run_dir), store))
            print(f"cancelled {len(cancelled)} open provider batch(es){': ' + ', '.join(cancelled) if cancelled else ''}")
        records = store.batches(states=("submitting", "open", "collected", "cancelled"))
    finally:
        store.close()
    if not records:
        print(f"{args.run_dir}: no provider batches (an online or local run)")
        return 0
    now = time.time()
    for r in records:
        print(f"{r.batch_id or '(not accepted)':32s} {r.provider:10s} {r.status:10s} {len(r.keys):6d} requests  "
              f"{(now - r.created) / 60:8.1f} min old")
    still = sum(r.status in ("open", "submitting") for r in records)
    print(f"{still} open: `litjudge run CONFIG` again collects them (nothing is submitted twice)" if still
          else "none open")
    return 0
