"""The annotation page: one HTML file with its style and script inline (page.html, page.css,
page.js, shipped as package data; no download, works offline). Judged text reaches the page only
as JSON and is put in with textContent: it never becomes markup. The estimates' plot is inline SVG
built with DOM calls."""
from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def page() -> str:
    """The whole page (nothing of the run in it: the script asks the API)."""
    here = resources.files(__package__)
    style, body, script = ((here / name).read_text(encoding="utf-8") for name in ("page.css", "page.html", "page.js"))
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>litjudge annotate</title>"
            f"<meta name=viewport content='width=device-width'><link rel=icon href='data:,'>"   # no /favicon.ico 404
            f"<style>{style}</style></head>"
            f"<body>{body}<script>{script}</script></body></html>")
