"""The ``iac-kernel`` command line: --version, help pages, bad settings, install's answer."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from jupyter_core import paths as jupyter_paths

from iac_kernel import __version__
from iac_kernel.cli import build_parser, main
from iac_kernel.kernel.app import KERNEL_NAME, install, write_spec

COMMAND = (
    [shutil.which("iac-kernel")]
    if shutil.which("iac-kernel")
    else [sys.executable, "-m", "iac_kernel"]
)
SUBCOMMANDS = ("acp", "kernel", "install", "demo")


def help_text(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_:
        main([*args, "--help"])
    assert exit_.value.code == 0
    return out.getvalue()


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"iac-kernel {__version__}"


def test_top_level_help_describes_and_shows_examples() -> None:
    proc = subprocess.run([*COMMAND, "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert text == help_text()
    assert "infrastructure-as-code agent" in text
    assert "examples:" in text and "iac-kernel demo" in text
    for name in SUBCOMMANDS:
        assert f"    {name} " in text
    assert "`" not in text  # no raw reST or Markdown marks


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_every_subcommand_help_has_a_description_examples_and_environment(name: str) -> None:
    text = help_text(name)
    usage, _, rest = text.partition("\n\n")
    assert usage.startswith(f"usage: iac-kernel {name}")
    assert len(rest.split("\n\n")[0]) > 60  # a description, not just the usage line
    assert "example" in text
    assert "environment:" in text
    assert "IAC_KERNEL_" in text or "JUPYTER_" in text
    assert "`" not in text


def test_acp_help_names_its_logging_variables() -> None:
    sub = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    text = sub["acp"].format_help()
    for variable in ("IAC_KERNEL_LOG_LEVEL", "IAC_KERNEL_LOG_FILE", "IAC_KERNEL_SESSIONS_DIR"):
        assert variable in text


def test_acp_starts_with_a_bad_setting_and_names_the_variable() -> None:
    env = {**os.environ, "IAC_KERNEL_MAX_TURN_REQUESTS": "abc"}
    proc = subprocess.run(
        [*COMMAND, "acp"], input="", capture_output=True, text=True, timeout=60, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "IAC_KERNEL_MAX_TURN_REQUESTS='abc' is not valid (expects a whole number, 0 or more); "
        "using the default 25"
    ) in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""  # stdout stays JSON-RPC only


# -- install: which kernelspec Jupyter will pick -------------------------------------------------


def _spec_in(share: Path) -> Path:
    write_spec(share / "kernels" / KERNEL_NAME, executable="/elsewhere/python")
    return share / "kernels" / KERNEL_NAME


def test_install_says_jupyter_uses_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "user"))
    monkeypatch.setenv("JUPYTER_PREFER_ENV_PATH", "0")
    message = install(user=True)
    mine = tmp_path / "user" / "kernels" / KERNEL_NAME
    assert f"Jupyter will use this kernelspec ({mine})" in message


def test_install_user_in_a_venv_names_the_kernelspec_that_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a virtualenv Jupyter prefers the environment's kernelspec (pip put one there)."""
    venv = tmp_path / "venv"
    winner = _spec_in(venv / "share" / "jupyter")
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(jupyter_paths, "ENV_JUPYTER_PATH", [str(venv / "share" / "jupyter")])
    monkeypatch.setenv("JUPYTER_PREFER_ENV_PATH", "1")
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "user"))
    message = install(user=True)
    assert f"Installed kernelspec {KERNEL_NAME}" in message
    assert f"Jupyter will use {winner} instead" in message
    assert "prefers the environment's kernels" in message
    assert "iac-kernel install --sys-prefix" in message


def test_install_names_a_kernelspec_earlier_on_jupyter_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    winner = _spec_in(tmp_path / "extra")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "extra"))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "user"))
    message = install(user=True)
    assert f"Jupyter will use {winner} instead" in message
    assert "earlier on Jupyter's search path" in message
