"""The tests' CLI processes forked from a warm interpreter (tests/warm_cli.py) behave as fresh ones:
the same output, streams and exit code; each command its own environment and folder, nothing
carried to the next; a command past its timeout is killed and the next one runs. (A command killed
by a signal is the signal's negative exit code: tests/test_crash_resume.py's SIGKILLs.)"""
import os
import subprocess

import pytest

from tests.conftest import PROJECT_ROOT, write_config
from tests.warm_cli import fresh_cli, run_cli


@pytest.mark.parametrize("args", [["--version"], ["data", "list"], ["run", "no-such-config"], ["protocols"]])
def test_a_warm_command_prints_and_exits_as_a_fresh_one(args):
    env = dict(os.environ)
    warm, cold = run_cli(args, PROJECT_ROOT, env, 300), fresh_cli(args, PROJECT_ROOT, env, 300)
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)


def test_each_command_has_its_own_environment_and_folder(tmp_path):
    env = dict(os.environ)
    moved = run_cli(["data", "list"], tmp_path, {**env, "LITJUDGE_DATA_ROOT": str(tmp_path / "elsewhere")}, 300)
    assert moved.returncode == 0 and str(tmp_path / "elsewhere" / "ttcw") in moved.stdout
    back = run_cli(["data", "list"], PROJECT_ROOT, env, 300)
    assert str(tmp_path / "elsewhere") not in back.stdout                       # nothing carried over
    cfg = write_config(tmp_path / "here.toml", 'name = "x"\nprotocol = "ttcw"\n')
    here = run_cli(["run", "here.toml"], tmp_path, env, 300)                     # a relative path, read from its folder
    assert here.returncode == 2 and "dataset" in here.stderr and cfg.exists()


def test_a_command_past_its_timeout_is_killed_and_the_next_runs(tmp_path):
    cfg = write_config(tmp_path / "slow.toml", 'name = "slow"\nprotocol = "ttcw"\ndataset = "ttcw-demo"\n'
                                               'judge = "smollm2-135m"\n[engine]\nmax_model_len = 2048\nkv_cache_gib = 1\n')
    with pytest.raises(subprocess.TimeoutExpired):
        run_cli(["run", str(cfg), "--quiet", "--out", str(tmp_path / "out")], PROJECT_ROOT, dict(os.environ), 0.5)
    assert run_cli(["--version"], PROJECT_ROOT, dict(os.environ), 300).returncode == 0


def test_what_a_run_in_the_tests_own_process_leaves_in_its_environment_keeps_commands_warm():
    """An engine, a planner, Ray or the console run in the test's process set variables (vLLM's for
    its children, the planner's TOKENIZERS_PARALLELISM, Ray's breakpoint hook, the console's for the
    libraries it imports); the commands after it stay warm (every later CLI command of a worker ran
    in a fresh interpreter when one such variable was compared as it was: seen in a full run)."""
    import tests.warm_cli as warm

    left = {"TOKENIZERS_PARALLELISM": "true", "VLLM_DIST_IDENT": "x", "LOCAL_WORLD_SIZE": "1",
            "VLLM_WORKER_MULTIPROC_METHOD": "fork", "TORCHINDUCTOR_CPP_DYNAMIC_THREADS": "1", "LD_PRELOAD": "",
            "TRANSFORMERS_VERBOSITY": "error", "VLLM_LOGGING_STREAM": "ext://sys.stderr",   # the console's, in-process
            "PYTHONBREAKPOINT": "ray.util.rpdb._driver_set_trace"}                       # ray.init's, in the driver
    assert warm._ZYGOTE is not None
    served = warm._ZYGOTE.run(["--version"], PROJECT_ROOT, {**os.environ, **left}, 300)
    assert served is not None and served.returncode == 0
    moved = warm._ZYGOTE.run(["--version"], PROJECT_ROOT, {**os.environ, "HF_HUB_OFFLINE": "0" if os.environ.get("HF_HUB_OFFLINE") == "1" else "1"}, 300)
    assert moved is None                               # read by huggingface_hub as it is imported: a fresh one
    unset = {k: v for k, v in os.environ.items() if k not in ("VLLM_LOGGING_LEVEL", "TRANSFORMERS_VERBOSITY")}
    verbose = warm._ZYGOTE.run(["--verbose", "--version"], PROJECT_ROOT, unset, 300)
    assert verbose is None                             # vLLM's and transformers' log levels, read as they are imported


def test_litjudge_reads_no_setting_as_it_is_imported():
    """The contract a warm command rests on: litjudge's modules, the console's included, look up no
    LITJUDGE_* variable as they are imported (each is read when used, engine/core/envs.py), so a
    forked command's settings are its own environment's. The warm interpreter records every
    variable its imports look up, set or not."""
    import tests.warm_cli as warm

    assert warm._ZYGOTE is not None
    assert warm._ZYGOTE.run(["--version"], PROJECT_ROOT, dict(os.environ), 300) is not None   # started
    reads = warm._ZYGOTE.import_reads
    assert {"HF_HUB_OFFLINE", "VLLM_LOGGING_LEVEL"} <= reads     # the record sees what libraries read at import
    ours = [name for name in warm.WARM if name.startswith("litjudge.")]
    assert any(name.startswith("litjudge.engine.app.console") for name in ours)
    assert [name for name in ours if name in warm._ZYGOTE.import_missing] == []     # imported, so looked at
    assert sorted(k for k in reads if k.startswith("LITJUDGE_")) == []


SCRIPT = """
import os, pickle, sys
def f():
    return 1
assert pickle.loads(pickle.dumps(f))() == 1            # the script is __main__, as in a fresh interpreter
print(__name__, sys.argv, repr(sys.path[0]), os.getcwd())
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]))
"""


def test_a_warm_script_runs_as_a_fresh_one(tmp_path):
    """`python -c CODE ARGS` forked warm (tests/warm_cli.py run_python): the same output, streams,
    exit code, arguments, sys.path[0] and folder as a fresh interpreter's."""
    import sys

    import tests.warm_cli as warm
    from tests.warm_cli import console_env

    env, args = console_env(dict(os.environ)), ["-c", SCRIPT, "3"]
    assert warm._ZYGOTE is not None
    forked = warm._ZYGOTE.python(args, tmp_path, env, 300)
    fresh = subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert forked is not None and forked.returncode == 3
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    # without the console's settings (which the warm imports read), a script runs in a fresh interpreter
    assert warm._ZYGOTE.python(args, tmp_path, dict(os.environ), 300) is None or "VLLM_LOGGING_STREAM" in os.environ
