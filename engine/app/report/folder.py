"""The report folder: what a report may clear there and where it may write.

A report folder holds the current report, and may hold the user's own files too (a figure they
annotated, their notes, a folder of theirs). The report's mark file (REPORT_MARK) lists the files
the report writes, before it writes them: the next report deletes exactly those, never a file it
did not list (a hostile pass: it deleted every *.png and tables/*.csv of a folder it took for its
own, and through a `tables` link into the user's folder). A folder of a report from before the
list (an empty mark, or only litjudge's page) gives up only its report.html and report.md.
"""
from __future__ import annotations

import re
from functools import partial
from pathlib import Path

from ...core.errors import ConfigError
from ..outputs import STALE, guarded, write_text

REPORT_MARK = ".litjudge-report"
PAGES = ("report.html", "report.md")
OPENING = "<!doctype html><html><head><meta charset='utf-8'><title>"   # every report page's first bytes
# what a report writes besides its pages: a plot beside them, a table under tables/ (names from
# the protocols' panels, never from the judged data; a listed name of another form is not deleted)
_WRITTEN = re.compile(r"(tables/)?[A-Za-z0-9_][A-Za-z0-9_.-]*\.(png|csv)")


def prepare_report_folder(out: Path, files: list[str]) -> None:
    """Make `out` ready for a report writing `files` (paths relative to it): the files an earlier
    report listed are removed (another protocol's tables and plots, say), the user's are kept. A
    folder that is not a report's (a run folder: `compare --out RUN_B` overwrote RUN_B's tables, or
    one with other files in it) is refused, and so is a link where the report writes (it would
    write, or delete, in the folder the link points to)."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} is a file: give a folder for the report (--out, or report(out=...) in Python)")
    if (out / "tables").is_symlink():
        files = ["tables", *files]                      # said before anything is cleared
    elif out.is_dir():
        _clear(out)
    links = [name for name in files if (out / name).is_symlink()]
    if links:
        raise ConfigError(f"--out {out}: {links[0]} is a link (to {(out / links[0]).resolve()}): a report writes its "
                          "files into its own folder; remove the link or give a new folder")
    guarded(lambda: (out / "tables").mkdir(parents=True, exist_ok=True), out, "--out (report(out=...) in Python)")
    write_text(out / REPORT_MARK, "".join(f"{name}\n" for name in [*PAGES, *files]))  # before any: an
    # interrupted report is still known as one, with every file it may have written


def _clear(out: Path) -> None:
    entries = [p for p in out.iterdir() if p.name != STALE]
    marked = (out / REPORT_MARK).exists()
    if entries and not marked and not _ours(out / "report.html"):
        what = "a run folder" if (out / "manifest.json").exists() or (out / "store.sqlite").exists() else \
            "a folder with other files"
        raise ConfigError(f"--out {out} is {what}, not a report's: give a new or empty folder (a report folder is "
                          "cleared and rewritten)")
    for name in dict.fromkeys([*PAGES, *(_listed(out / REPORT_MARK) if marked else [])]):
        path = out / name
        guarded(partial(path.unlink, missing_ok=True), path)   # a link itself, never its target


def _listed(mark: Path) -> list[str]:
    """The files a report's mark lists (none in a mark from before the list)."""
    try:
        lines = mark.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    return [line for line in lines if _WRITTEN.fullmatch(line)]


def _ours(page: Path) -> bool:
    """A report.html litjudge wrote (a report from before the mark file): any page of that name
    let its folder's other pictures and tables be deleted."""
    try:
        with page.open("rb") as f:
            ours = (OPENING + "litjudge ").encode()            # its title: "litjudge report: ...", "litjudge compare: ..."
            return f.read(len(ours)) == ours
    except OSError:
        return False
