"""The one error of the grammars layer: a verdict language declared wrongly (empty label set,
duplicate ids, bad range). The CLI prints it as one line like every litjudge error."""
from __future__ import annotations


class GrammarError(ValueError):
    """A verdict language was declared wrongly; says which and how."""
