"""A headless notebook run (nbclient, as papermill and nbval use): no hang, policy decides,
and the saved notebook holds each answer's final text."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from iac_kernel.kernel.app import KERNEL_NAME, write_spec
from iac_kernel.kernel.render.cards import CARD_MIME
from iac_kernel.kernel.render.footer import FOOTER_MIME
from kernel_harness import CREDENTIAL_ENV

SCRIPT = Path(__file__).parent / "scripts" / "kernel_turns.json"


def test_nbclient_runs_a_notebook_headless(
    tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in CREDENTIAL_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("IAC_KERNEL_SCRIPT", str(SCRIPT))
    monkeypatch.setenv("IAC_KERNEL_MODEL", "scripted")
    (workspace / "notes.txt").write_text("hello from the notes\n")
    (workspace / "config.txt").write_text("original\n")
    write_spec(tmp_path / "kernels" / KERNEL_NAME)
    ksm = KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")])

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%mode default"),
        nbformat.v4.new_code_cell("Please stream a long answer"),
        nbformat.v4.new_code_cell("read the notes"),
        nbformat.v4.new_code_cell("write the config"),
    ]
    km = KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=ksm)
    client = NotebookClient(
        nb, km=km, timeout=90, resources={"metadata": {"path": os.fspath(workspace)}}
    )
    client.execute()

    stream_cell, read_cell, write_cell = nb.cells[1:]
    answer, footer_output = stream_cell.outputs  # the answer, then the turn's footer
    assert FOOTER_MIME in footer_output.data and " out · " in footer_output.data["text/plain"]
    assert answer.data["text/plain"].endswith("The end.")
    assert "▍" not in answer.data["text/markdown"]
    cards = [o for o in read_cell.outputs if CARD_MIME in o.get("data", {})]
    assert cards[0].data[CARD_MIME]["status"] == "done"
    assert (workspace / "config.txt").read_text() == "original\n"
    write_text = "\n".join(o.data.get("text/plain", "") for o in write_cell.outputs)
    assert "Denied by policy" in write_text
