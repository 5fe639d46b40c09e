"""A mirror of the datasets' pinned upstream files, with GitHub's raw-file layout
(OWNER/REPO/COMMIT/PATH), built from the shared copies and served on 127.0.0.1 by a loopback HTTP
server: `litjudge data fetch` tested without a network (LITJUDGE_DATA_BASE_URL points at it)."""
from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from litjudge.engine.core.paths import data_root
from litjudge.engine.data.cards import load_card


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextmanager
def data_mirror(root: Path, names: tuple[str, ...]) -> Iterator[str]:
    """Every upstream file of the named cards under `root`, served; yields the base URL."""
    for name in names:
        card = load_card(name)
        up = card.upstream
        for local, entry in up["files"].items():
            target = root / up["repository"] / up["commit"] / entry["upstream"]
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(data_root() / card.path / local, target)
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
