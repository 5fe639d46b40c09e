"""The quickstart notebook (runs/quickstart.ipynb), executed headless as a user would run it top to
bottom: a real Jupyter kernel (ipykernel) driven by nbclient, the replay judge and the default local
judge (smollm2-135m under vLLM), the report shown inline."""
import os
import re
import shutil

import nbformat
from nbclient import NotebookClient

from tests.conftest import OWN_KV_CACHE, PROJECT_ROOT


def test_quickstart_notebook_runs_top_to_bottom(tmp_path):
    shutil.copy(PROJECT_ROOT / "runs" / "quickstart.ipynb", tmp_path / "quickstart.ipynb")
    nb = nbformat.read(tmp_path / "quickstart.ipynb", as_version=4)
    env = {**os.environ, "LITJUDGE_RUNS_DIR": str(tmp_path / "runs")}
    saved = dict(os.environ)
    os.environ.update(env)                       # the kernel inherits this environment
    for name in OWN_KV_CACHE:                    # the notebook's engines keep the KV cache its cells ask for
        os.environ.pop(name, None)
    try:
        NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    outputs = {i: c.get("outputs", []) for i, c in enumerate(nb.cells) if c.cell_type == "code"}
    errors = [o for out in outputs.values() for o in out if o.get("output_type") == "error"]
    assert not errors, errors[0]["evalue"] if errors else ""
    html = "\n".join(o.get("data", {}).get("text/html", "") for out in outputs.values() for o in out)
    assert "8 verdicts (0 unparsed)" in html                  # the replay Result's own view
    assert "<iframe srcdoc=" in html and "section class=&#x27;viewer&#x27;" in html
    # a cell shows its result, and the local judge's cell its progress bar too: nothing else (vLLM's
    # and torch's warnings, a TqdmWarning, IPython's IFrame hint: in the run's engine.log)
    streams = {i: "".join(o.get("text", "") for o in out if o.get("output_type") == "stream")
               for i, out in outputs.items()}
    for run in ("quickstart-local", "quickstart-rubric"):
        local = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and f'"{run}"' in c.source)
        bar = [line for line in re.split(r"[\r\n]+", streams.pop(local)) if line.strip()]
        assert bar and all(line.startswith("smollm2-135m: ") and "req" in line for line in bar), (run, bar)
    assert not any(streams.values()), {i: text[:300] for i, text in streams.items() if text}
    assert all(o.get("output_type") in ("execute_result", "display_data") for out in outputs.values() for o in out
               if o.get("output_type") != "stream")
    for name in ("quickstart-replay", "quickstart-local", "quickstart-rubric"):
        assert (tmp_path / "runs" / name / "verdicts.parquet").exists()
    assert (tmp_path / "runs" / "quickstart-replay" / "report" / "report.html").exists()
