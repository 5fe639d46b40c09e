"""litjudge from Python: judge a DataFrame, run a config, reopen a finished run.

    import litjudge

    result = litjudge.judge(df, protocol="pairwise", judge="smollm2-135m",
                            columns={"text_a": "story_1", "text_b": "story_2", "label": "winner"})
    result.tables["agreement"]      # the same tables the console prints and the run folder holds
    result.verdicts                 # one row per verdict (polars)
    result.report()                 # the HTML report, with the per-item viewer

    litjudge.run("runs/demo.toml", limit=2)         # a TOML config (or its table as a dict)
    litjudge.load("runs/out/demo")                  # a finished run folder

The same store, shared verdict cache, resume and content keys as `litjudge run`: a call repeated on
the same data generates nothing, and Ctrl-C loses no stored verdict. Every error a user can cause
raises `LitjudgeError` (one of the subclasses below) with the console's one-line message.
"""
from engine.core.errors import (
    BackendUnavailable,
    ConfigError,
    DataError,
    JudgeNotFound,
    LitjudgeError,
    PreflightError,
    StoreError,
    SystemFault,
)

from .api import judge, load, run
from .result import LitjudgeWarning, Result

__all__ = ["judge", "run", "load", "Result", "LitjudgeWarning", "LitjudgeError", "ConfigError", "DataError", "JudgeNotFound",
           "BackendUnavailable", "PreflightError", "StoreError", "SystemFault"]
