"""``iac-kernel demo``: the quickstart executed headless into a new notebook file."""

from __future__ import annotations

import json
import os
import shlex
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


def run(args: list[str], cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=dict(os.environ)
    )


def check_quickstart_ran(nb) -> list[dict]:
    """The executed quickstart: every card done, the grep ran for real on the workspace."""
    cards = [json.loads(c) if isinstance(c, str) else c for c in outputs(nb, demo.CARD_MIME)]
    assert cards and all(card["status"] == "done" for card in cards)
    grep = next(card for card in cards if card["name"] == "grep" and "0\\.0" in card["title"])
    assert 'modules/web/security_groups.tf:44:    cidr_blocks = ["0.0.0.0/0"]' in grep["output"]
    script = json.loads(SCRIPT.read_text())
    final_words = script["exchanges"][1]["turns"][-1]["text"]
    assert any(final_words in answer for answer in outputs(nb, "text/markdown"))
    return cards


def test_demo_writes_a_notebook_that_runs_again_from_any_folder(
    tmp_path: Path, isolated_store: Path
):
    before = QUICKSTART.read_bytes()
    proc = run([*COMMAND, "demo"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    target = (tmp_path / "iac-kernel-demo" / "01-quickstart.ipynb").resolve()
    assert f"Executed notebook: {target}" in proc.stdout
    # The command to open it, relative to where the demo ran; no warning nobody can act on.
    assert "Open it:   jupyter lab iac-kernel-demo/01-quickstart.ipynb" in proc.stdout
    # Every printed command runs in this install: the re-run line as printed, and
    # `jupyter lab --version` for the line that would start a server.
    commands = dict(printed_commands(proc.stdout))
    assert set(commands) == {"Open it", "Re-run it"}, proc.stdout
    opener = shlex.split(commands["Open it"])
    assert run([*opener[:2], "--version"], cwd=tmp_path).returncode == 0
    rerun = run(shlex.split(commands["Re-run it"]), cwd=tmp_path)
    assert rerun.returncode == 0, rerun.stderr
    assert "WARNING" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert QUICKSTART.read_bytes() == before  # the source is never rewritten
    cards = check_quickstart_ran(nbformat.read(target, as_version=4))
    assert f"{len(cards)} tool calls" in proc.stdout

    # The session is titled after the notebook and stores its model (as %session shows it).
    metas = [json.loads(p.read_text()) for p in isolated_store.glob("*.json")]
    meta = next(m for m in metas if m.get("notebook") == str(target))
    assert meta["title"] == "01-quickstart"
    assert meta["model"] == f"scripted:{target.parent / 'scripts' / 'quickstart.json'}"

    # Re-executed where it was written, from another folder, with nbconvert: it still runs.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    again = run(
        [
            sys.executable,
            "-m",
            "jupyter",
            "nbconvert",
            "--to",
            "notebook",
            "--execute",
            str(target),
            "--output",
            str(elsewhere / "again.ipynb"),
        ],
        cwd=elsewhere,
    )
    assert again.returncode == 0, again.stderr
    assert "WARNING" not in again.stderr, again.stderr
    check_quickstart_ran(nbformat.read(elsewhere / "again.ipynb", as_version=4))


def test_output_beside_other_files_never_overwrites_them(tmp_path: Path, capsys):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "quickstart.json").write_text("{}")  # the user's own file
    assert demo.run_demo(str(tmp_path / "q.ipynb")) == 1
    err = capsys.readouterr().err
    assert "quickstart.json exists and differs" in err
    assert (tmp_path / "scripts" / "quickstart.json").read_text() == "{}"
    assert not (tmp_path / "q.ipynb").exists()


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
    first = tmp_path / "iac-kernel-demo" / demo.QUICKSTART
    assert demo.output_path(None, QUICKSTART) == first
    (tmp_path / "iac-kernel-demo").mkdir()
    (tmp_path / "iac-kernel-demo-1").mkdir()
    assert demo.output_path(None, QUICKSTART) == tmp_path / "iac-kernel-demo-2" / demo.QUICKSTART


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


def test_demo_says_how_to_open_it_and_when_the_extension_is_missing(
    monkeypatch, capsys, tmp_path: Path
):
    """Without running a kernel: the files beside the notebook and what is printed."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(demo, "execute", lambda path: nbformat.read(path, as_version=4))
    monkeypatch.setattr(demo, "labextension_installed", lambda: False)
    assert demo.run_demo("my runs/q.ipynb") == 0
    out = capsys.readouterr().out
    assert "Open it:   jupyter lab 'my runs/q.ipynb'" in out
    assert "Re-run it: jupyter nbconvert --to notebook --execute --inplace 'my runs/q.ipynb'" in out
    assert demo.labextension_note() in out and "install Node.js" in out
    assert (
        tmp_path / "my runs" / "scripts" / "quickstart.json"
    ).read_bytes() == SCRIPT.read_bytes()
    assert (tmp_path / "my runs" / "workspaces" / "aws-web-stack" / "main.tf").is_file()


def printed_commands(stdout: str) -> list[tuple[str, str]]:
    """The ``Open it:`` / ``Re-run it:`` lines the demo printed, as (label, command)."""
    found = []
    for line in stdout.splitlines():
        label, _, command = line.strip().partition(":")
        if label in ("Open it", "Re-run it"):
            found.append((label, command.strip()))
    return found


def test_demo_prints_only_commands_this_install_has(monkeypatch, capsys, tmp_path: Path):
    """Without JupyterLab (a plain `pip install iac-kernel`), no `jupyter lab` line: the
    line that installs it instead."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(demo, "execute", lambda path: nbformat.read(path, as_version=4))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no jupyter on PATH
    assert not demo.jupyter_has("lab", "jupyterlab")
    assert demo.run_demo("q.ipynb") == 0
    out = capsys.readouterr().out
    assert printed_commands(out) == [] and "jupyter " not in out
    assert "pip install '.[lab]' (in the iac-kernel clone)" in out
    has = {"lab": False, "nbconvert": True}
    monkeypatch.setattr(demo, "jupyter_has", lambda sub, _module: has[sub])
    lines = demo.next_steps("q.ipynb")
    assert lines[0].startswith("Re-run it: jupyter nbconvert") and "'.[lab]'" in lines[1]


def test_labextension_installed_looks_where_jupyterlab_looks(monkeypatch, tmp_path: Path):
    import jupyter_core.paths

    monkeypatch.setattr(jupyter_core.paths, "jupyter_path", lambda *parts: [str(tmp_path)])
    assert not demo.labextension_installed()
    (tmp_path / demo.LABEXTENSION).mkdir(parents=True)
    (tmp_path / demo.LABEXTENSION / "package.json").write_text("{}")
    assert demo.labextension_installed()
