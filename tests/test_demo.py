"""``iac-kernel demo``: the quickstart executed headless into a new notebook file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from iac_kernel import demo

REPO = Path(__file__).resolve().parent.parent
QUICKSTART = REPO / "notebooks" / "01-quickstart.ipynb"
SCRIPT = REPO / "notebooks" / "scripts" / "quickstart.json"
#: The README's command; ``python -m iac_kernel`` when the script is not on PATH.
COMMAND = (
    [shutil.which("iac-kernel")]
    if shutil.which("iac-kernel")
    else [sys.executable, "-m", "iac_kernel"]
)


def outputs(nb, mime: str) -> list:
    return [
        out["data"][mime]
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if mime in out.get("data", {})
    ]


def test_demo_executes_the_quickstart_into_a_new_file(tmp_path: Path):
    before = QUICKSTART.read_bytes()
    proc = subprocess.run(
        [*COMMAND, "demo", "-o", "tmp/out.ipynb"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert proc.returncode == 0, proc.stderr
    target = (tmp_path / "tmp" / "out.ipynb").resolve()
    assert target.is_file()
    assert f"Executed notebook: {target}" in proc.stdout
    assert QUICKSTART.read_bytes() == before  # the source is never rewritten

    nb = nbformat.read(target, as_version=4)
    cards = [json.loads(c) if isinstance(c, str) else c for c in outputs(nb, demo.CARD_MIME)]
    assert cards and all(card["status"] == "done" for card in cards)
    grep = next(card for card in cards if card["name"] == "grep" and "0\\.0" in card["title"])
    # The tool ran for real on the sample workspace.
    assert 'modules/web/security_groups.tf:44:    cidr_blocks = ["0.0.0.0/0"]' in grep["output"]

    script = json.loads(SCRIPT.read_text())
    final_words = script["exchanges"][1]["turns"][-1]["text"]
    answers = outputs(nb, "text/markdown")
    assert any(final_words in answer for answer in answers)
    assert f"{len(cards)} tool calls" in proc.stdout


def test_missing_kernelspec_is_a_readable_error(monkeypatch, capsys, tmp_path: Path):
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    def missing(self, name):
        raise NoSuchKernel(name)

    monkeypatch.setattr(KernelSpecManager, "get_kernel_spec", missing)
    assert demo.run_demo(str(tmp_path / "out.ipynb")) == 1
    err = capsys.readouterr().err
    assert "kernelspec 'iac-kernel' is not installed" in err
    assert "iac-kernel install" in err and "Traceback" not in err
    assert not (tmp_path / "out.ipynb").exists()


def test_default_output_never_clobbers(monkeypatch, tmp_path: Path):
    monkeypatch.chdir(tmp_path)
    assert demo.output_path(None, QUICKSTART) == tmp_path / "iac-kernel-demo.ipynb"
    (tmp_path / "iac-kernel-demo.ipynb").write_text("{}")
    (tmp_path / "iac-kernel-demo-1.ipynb").write_text("{}")
    assert demo.output_path(None, QUICKSTART) == tmp_path / "iac-kernel-demo-2.ipynb"


@pytest.mark.parametrize(
    ("output", "message"),
    [
        (str(QUICKSTART), "refusing to overwrite the quickstart"),
        (".", "is a directory"),
        ("out.txt", "must be a .ipynb file"),
    ],
)
def test_bad_output_paths(capsys, output: str, message: str):
    assert demo.run_demo(output) == 1
    assert message in capsys.readouterr().err
