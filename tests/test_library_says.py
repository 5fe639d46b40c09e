"""What the library says (notes, warnings) goes through the `litjudge` logger, never `print`: a
Python caller routes it with logging (or `judge(progress=...)`), the console shows it all on the
terminal (engine.core.console `say` and `shown`)."""
from __future__ import annotations

import ast
import logging
from pathlib import Path

from litjudge.engine.core.cache import warn_left_aside
from litjudge.engine.core.console import say, shown
from litjudge.engine.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
CONSOLE = ROOT / "engine" / "app" / "console"


def test_no_library_module_outside_the_console_calls_print():
    found = [f"{path.relative_to(ROOT)}:{node.lineno}" for folder in ("engine", "judges", "grammars", "litjudge")
             for path in sorted((ROOT / folder).rglob("*.py")) if CONSOLE not in path.parents
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"]
    assert not found, f"print in library modules (use engine.core.console.say): {found}"


def test_a_library_warning_is_a_log_record_a_caller_routes(caplog):
    with caplog.at_level(logging.INFO, logger="litjudge"):
        warn_left_aside(Path("/nowhere/verdicts.sqlite"), ConfigError("it is read-only"))
    assert [(r.name, r.levelno) for r in caplog.records] == [("litjudge", logging.WARNING)]
    assert "the shared verdict cache is left aside for this run (it is read-only)" in caplog.records[0].getMessage()


def test_shown_prints_each_line_once_and_notes_only_where_asked(capfd):
    with shown(logging.WARNING):                       # judge(progress=False): warnings, no notes
        say("litjudge: a note")
        say("litjudge: warning: one", logging.WARNING)
        with shown():                                  # another call at once, with progress: notes too, once
            say("litjudge: a second note")
    say("litjudge: a note nobody asked to see")        # outside: logging's rules, a note stays quiet
    assert capfd.readouterr().err.splitlines() == ["litjudge: warning: one", "litjudge: a second note"]
    assert not logging.getLogger("litjudge").handlers or all(
        isinstance(h, logging.NullHandler) for h in logging.getLogger("litjudge").handlers)
