"""The ``papermill`` command on an iac-kernel notebook: the session is titled after the
notebook and stores its model, and the run prints no warning nobody can act on."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

from iac_kernel.papermill import IacKernelEngine, kernel_env

SCRIPT = Path(__file__).parent / "scripts" / "kernel_turns.json"
PAPERMILL = shutil.which("papermill") or str(Path(sys.executable).with_name("papermill"))


def tiny_notebook(path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "iac-kernel", "display_name": "IaC Agent"}
    nb.cells = [nbformat.v4.new_code_cell(f"%model scripted:{SCRIPT.name}\n%session")]
    nbformat.write(nb, path)
    return path


def test_papermill_run_is_titled_after_the_notebook(tmp_path: Path, isolated_store: Path):
    shutil.copy(SCRIPT, tmp_path / SCRIPT.name)
    source = tiny_notebook(tmp_path / "nightly-drift.ipynb")
    output = tmp_path / "o.ipynb"
    proc = subprocess.run(
        [PAPERMILL, "-k", "iac-kernel", "--cwd", str(tmp_path), str(source), str(output)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "without encryption" not in proc.stderr and "WARNING" not in proc.stderr

    (meta,) = [json.loads(p.read_text()) for p in isolated_store.glob("*.json")]
    assert meta["title"] == "nightly-drift"
    assert meta["notebook"] == str(source)
    assert meta["model"] == f"scripted:{tmp_path.resolve() / SCRIPT.name}"
    # %session shows the same model (its path relative to the notebook's folder).
    shown = nbformat.read(output, as_version=4).cells[-1].outputs
    text = "".join(str(o.get("data", {}).get("text/plain", "")) for o in shown)
    assert f"model        scripted:{SCRIPT.name}" in text


def test_engine_names_the_notebook_for_iac_kernel_only() -> None:
    env = kernel_env("iac-kernel", "runs/a.ipynb")
    assert env is not None and env["JPY_SESSION_NAME"] == "runs/a.ipynb"
    assert env["PATH"] == os.environ["PATH"]  # the rest of the environment is kept
    assert kernel_env("python3", "runs/a.ipynb") is None
    assert kernel_env("iac-kernel", None) is None
    from papermill.engines import papermill_engines

    assert papermill_engines.get_engine(None) is IacKernelEngine
    assert papermill_engines.get_engine("iac-kernel") is IacKernelEngine
