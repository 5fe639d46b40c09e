"""Faults a test injects into a real litjudge process it starts; never part of the package.

tests/conftest.py puts this folder on PYTHONPATH, so every Python process the tests start imports
this module first (as Python does with any `sitecustomize` on the path). With none of the
variables below set it does nothing and imports nothing. Otherwise it installs its Hooks into the
run's patch points (litjudge.engine.core.hooks):

- LITJUDGE_FAULT_KILL_AFTER=N: the process commits its N-th stored verdict on its own (all judges,
  all cells) and kills itself right after (SIGKILL; LITJUDGE_FAULT_SIGNAL=INT: a Ctrl-C instead).
- LITJUDGE_FAULT_KILL_AFTER_SUBMIT=1: killed once the first provider batch is accepted and recorded.
- LITJUDGE_FAULT_KILL_BEFORE_RECORD=1: killed after the provider accepted a batch, before the
  run's ledger records its id.
"""
import os


def _install() -> None:
    if not any(k.startswith("LITJUDGE_FAULT_") for k in os.environ):
        return
    import signal

    from litjudge.engine.core import hooks

    def asked(name: str) -> str:          # read when the point is reached: a test that clears it is obeyed
        return os.environ.get(name, "")

    class Faults(hooks.Hooks):
        def commit_now(self, rows: int) -> bool:
            after = int(asked("LITJUDGE_FAULT_KILL_AFTER") or 0)
            return bool(after) and rows >= after

        def rows_committed(self, rows: int) -> None:
            after = int(asked("LITJUDGE_FAULT_KILL_AFTER") or 0)
            if after and rows >= after:
                os.kill(os.getpid(), getattr(signal, "SIG" + (asked("LITJUDGE_FAULT_SIGNAL") or "KILL")))

        def batch_submitted(self, recorded: bool) -> None:
            if asked("LITJUDGE_FAULT_KILL_AFTER_SUBMIT" if recorded else "LITJUDGE_FAULT_KILL_BEFORE_RECORD"):
                os.kill(os.getpid(), signal.SIGKILL)

    hooks.install(Faults())


_install()
