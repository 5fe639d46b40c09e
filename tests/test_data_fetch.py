"""`litjudge data fetch`: the datasets from their pinned public sources, verified, tested without a
network: a loopback HTTP server started here serves a mirror with GitHub's raw-file layout
(OWNER/REPO/COMMIT/PATH), built from the shared copies (tests/mirror.py); one file is corrupted on purpose."""
import pytest

from litjudge.engine.data.cards import load_card
from tests.conftest import DATA, litjudge, needs_data
from tests.mirror import data_mirror


@pytest.fixture
def mirror(tmp_path):
    """Every upstream file of the three cards, where GitHub would serve it, on 127.0.0.1."""
    root = tmp_path / "mirror"
    with data_mirror(root, ("ttcw", "confederacy", "aut-ocsai")) as url:
        yield root, url


@needs_data
def test_fetch_verifies_every_file_and_the_run_works(mirror, tmp_path):
    _, url = mirror
    data = tmp_path / "data"
    env = {"LITJUDGE_DATA_BASE_URL": url, "LITJUDGE_RUNS_DIR": str(tmp_path / "runs")}
    cfg = "runs/ttcw-replay.toml"
    r = litjudge("run", cfg, "--judge", "replay:gpt4", "--quiet", "--data-root", str(data), env=env)
    assert r.returncode == 2 and "run `litjudge data fetch ttcw`" in r.stderr          # missing: one line, the fix
    r = litjudge("data", "fetch", "ttcw", "confederacy", "--data-root", str(data), env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ttcw: 13 files verified" in r.stdout and "(13 downloaded" in r.stdout
    assert "confederacy: 70 files verified" in r.stdout and "1 derived" in r.stdout
    for f in ("ttcw/stories.json", "ttcw/judge_outputs/gemini-pro.jsonl", "confederacy/user_ratings.csv"):
        assert (data / f).read_bytes() == (DATA / f).read_bytes(), f              # byte-identical, the ratings too
    again = litjudge("data", "fetch", "ttcw", "--data-root", str(data), env=env)
    assert "13 already there" in again.stdout                                    # nothing is fetched twice
    r = litjudge("run", cfg, "--judge", "replay:gpt4", "--quiet", "--data-root", str(data), env=env)
    assert r.returncode == 0, r.stderr[-2000:]


@needs_data
def test_a_corrupted_file_is_refused_and_never_lands(mirror, tmp_path):
    root, url = mirror
    up = load_card("aut-ocsai").upstream
    served = root / up["repository"] / up["commit"] / up["files"]["test.jsonl"]["upstream"]
    served.write_bytes(served.read_bytes().replace(b"paperclip", b"paperclap", 1))
    data = tmp_path / "data"
    r = litjudge("data", "fetch", "aut-ocsai", "--data-root", str(data), env={"LITJUDGE_DATA_BASE_URL": url})
    assert r.returncode == 2 and r.stderr.count("litjudge: error:") == 1
    assert "checksum mismatch for test.jsonl" in r.stderr and "refused, nothing written" in r.stderr
    assert not (data / "aut-ocsai" / "test.jsonl").exists()
    r = litjudge("data", "fetch", "aut-ocsai", "--data-root", str(data),
                 env={"LITJUDGE_DATA_BASE_URL": "http://127.0.0.1:9"})                 # nothing listens there
    assert r.returncode == 2 and "not reachable" in r.stderr


@needs_data
def test_a_write_refused_midway_leaves_no_partial_file_and_says_how_to_resume(mirror, tmp_path):
    """A file-size limit (as a full disk would) refuses a write in the middle of a fetch: one line
    naming the file, the count already verified, how to resume; no temporary file is left, and
    `data list` says the dataset is partial."""
    import resource
    import subprocess
    import sys

    from tests.conftest import PROJECT_ROOT

    _, url = mirror
    data = tmp_path / "data"

    def limit():                  # stories.json (352 kB) and tests.json fit; expert_annotations.json (1.1 MB) does not
        resource.setrlimit(resource.RLIMIT_FSIZE, (500_000, 500_000))
    r = subprocess.run([sys.executable, "-m", "litjudge", "data", "fetch", "ttcw", "--data-root", str(data)],
                       cwd=PROJECT_ROOT, env={**__import__("os").environ, "LITJUDGE_DATA_BASE_URL": url},
                       capture_output=True, text=True, timeout=300, preexec_fn=limit)
    assert r.returncode == 2 and r.stderr.count("litjudge: error:") == 1, r.stderr[-2000:]
    assert "file-size limit" in r.stderr and "run `litjudge data fetch ttcw` again" in r.stderr
    assert not [p for p in (data / "ttcw").rglob(".*") if p.is_file()]          # no partial temporary file
    listed = litjudge("data", "list", "--data-root", str(data))
    assert "ttcw" in listed.stdout and "partial (" in next(ln for ln in listed.stdout.splitlines()
                                                           if ln.startswith("ttcw "))


def test_names_after_an_option_are_read_as_names(tmp_path, capsys):
    """A hostile pass: `data list --data-root X aut-ocsai` was "unrecognized arguments: aut-ocsai"
    (argparse ends a command's list of names at the first option); the list goes on after it, and an
    unknown option is still argparse's one line."""
    from litjudge.engine.app.console.cli import main

    assert main(["data", "list", "--data-root", str(tmp_path), "aut-ocsai"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == 1 and listed[0].startswith("aut-ocsai") and "missing" in listed[0], listed
    with pytest.raises(SystemExit) as refused:
        main(["data", "list", "--data-root", str(tmp_path), "aut-ocsai", "--bogus"])
    assert refused.value.code == 2 and "unrecognized arguments" in capsys.readouterr().err
