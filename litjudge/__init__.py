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

`litjudge.__version__` (and `litjudge --version`) is the installed distribution's version.

The code lives in `litjudge.engine` (core, data, backends, app), `litjudge.judges` (protocols and
metrics) and `litjudge.grammars` (verdict languages); the packaged cards and configs are data files
under `litjudge/_data/`. Nothing else is installed at the top level.
"""
from typing import TYPE_CHECKING, Any

from litjudge.engine.core.errors import (
    BackendUnavailable,
    ConfigError,
    ContractError,
    DataError,
    JudgeNotFound,
    LitjudgeError,
    PluginError,
    PreflightError,
    StoreError,
    SystemFault,
)

if TYPE_CHECKING:
    from .api import annotate, judge, load, run
    from .engine.core.config import ApiConfig, ClusterConfig, EngineConfig, Sampling, SamplingConfig
    from .result import LitjudgeWarning, Result

    __version__: str

_LAZY = {"judge": "api", "run": "api", "load": "api", "annotate": "api", "Result": "result", "LitjudgeWarning": "result",
         # the typed config tables, taken by judge() and run() as the tables they stand for
         **dict.fromkeys(("EngineConfig", "Sampling", "SamplingConfig", "ApiConfig", "ClusterConfig"),
                         "engine.core.config")}


def __getattr__(name: str) -> Any:
    """The Python API loads on first use: `litjudge.engine.core` modules (the engine's own workers,
    the planner) import this package and must not pull the whole application with it."""
    import importlib

    if name == "__version__":
        value: Any = importlib.import_module("litjudge.engine.core.manifest").litjudge_version()
    elif name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    else:
        raise AttributeError(f"module 'litjudge' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """What tab completion offers: the API (loaded or not yet), not this module's own imports."""
    return sorted({*__all__, "__version__", "__doc__", "__file__", "__name__", "__path__"})


__all__ = ["judge", "run", "load", "annotate", "Result", "LitjudgeWarning", "EngineConfig", "Sampling", "SamplingConfig",
           "ApiConfig", "ClusterConfig", "LitjudgeError", "ConfigError", "DataError", "JudgeNotFound", "BackendUnavailable",
           "ContractError", "PluginError", "PreflightError", "StoreError", "SystemFault"]
