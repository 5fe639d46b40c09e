"""Debian's Chromium in the tests (browser downloads fail here, so Playwright drives the installed
binary through `executable_path`), and one way to read what a page says once it is ready: wait for
the page's own mark, never a fixed or virtual-time budget (`--dump-dom` under one took 0.6 s alone
and, once, 100 s beside a busy test worker)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def browser_env() -> dict[str, str]:
    """The browser's environment: the session's, with its configuration and cache folders (crash
    reports in ~/.config/chromium, dconf's ~/.cache/dconf: written by every launch, measured) in
    the session's temporary folder rather than the user's."""
    from tests.session_settings import SESSION_TMP

    return {**os.environ, "XDG_CONFIG_HOME": str(SESSION_TMP / "browser-config"),
            "XDG_CACHE_HOME": str(SESSION_TMP / "browser-cache")}


def page_value(url: str, ready: str, value: str, viewport: dict[str, int] | None = None,
               file_access: bool = False, screenshot: Path | None = None) -> Any:
    """`value` (a JavaScript expression) evaluated on `url` once `ready` (another) is true; with
    `file_access`, the page may read other file:// documents (a frame of a report); with
    `screenshot`, the viewport is saved there as a PNG, by the same browser, once `value` is read.

    Through Playwright, whose every step has a timeout: Chromium's own `--screenshot` switch
    hung past its 120 s limit twice in one session (two report tests took 223 and 257 s, one
    failed), and it shoots whenever the load event fires, not once the page says it is ready."""
    from playwright import sync_api

    assert CHROMIUM is not None, "Debian's chromium is not installed"
    args = ["--no-sandbox", "--disable-gpu", *(["--allow-file-access-from-files"] if file_access else [])]
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=args, env=browser_env())
        try:
            tab = browser.new_page(viewport=viewport or {"width": 1280, "height": 800})
            tab.goto(url, timeout=60_000)
            tab.wait_for_function(ready, timeout=60_000)
            result = tab.evaluate(value)
            if screenshot is not None:
                tab.screenshot(path=str(screenshot), timeout=60_000)
            return result
        finally:
            browser.close()
