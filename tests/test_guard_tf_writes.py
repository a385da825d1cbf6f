"""guard/tfcover/writes.py: terraform writes its sensitive files to regular files only
(``-out``/``-state``/``-state-out``/``-backup``), symlinks resolved as the sandbox sees
them; ``TF_LOG_PATH`` is refused. Controls: a new file, a regular file, ``-backup=-``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from iac_kernel.guard.tfcover.writes import outputs, refusal


def same(path: str) -> str:
    return path


@pytest.mark.parametrize(
    "argv",
    [
        ["terraform", "plan", "-out=/dev/stdout"],
        ["terraform", "plan", "-out", "/dev/stderr"],
        ["terraform", "plan", "--out=/proc/self/fd/1"],
        ["terraform", "apply", "-auto-approve", "-state-out=/dev/tty"],
        ["terraform", "apply", "-backup=/sys/x"],
        ["terraform", "-chdir=/dev", "plan", "-out=stdout"],
        ["terraform", "plan", "-out=link"],  # a symlink to /dev/stdout
        ["terraform", "plan", "-out=d/stdout"],  # a folder symlink to /dev
        ["terraform", "plan", "-out=fifo"],
        ["terraform", "apply", "-state=fifo"],
    ],
)
def test_special_outputs_are_refused(argv: list[str], tmp_path: Path):
    os.symlink("/dev/stdout", tmp_path / "link")
    os.symlink("/dev", tmp_path / "d")
    os.mkfifo(tmp_path / "fifo")
    problem = refusal(argv, str(tmp_path), {}, same)
    assert problem is not None and "refused as an output" in problem


@pytest.mark.parametrize(
    "argv",
    [
        ["terraform", "plan", "-out=new.plan"],
        ["terraform", "plan", "-out", "plain"],
        ["terraform", "apply", "-backup=-"],
        ["terraform", "apply", "-state-out=sub/new.tfstate"],
        ["terraform", "plan", "-out=tolink"],  # a symlink to a regular file
        ["terraform", "plan", "-input=false"],
    ],
)
def test_regular_and_new_files_are_fine(argv: list[str], tmp_path: Path):
    (tmp_path / "plain").write_text("")
    os.symlink("plain", tmp_path / "tolink")
    assert refusal(argv, str(tmp_path), {}, same) is None


def test_symlinks_resolve_as_the_sandbox_sees_them(tmp_path: Path):
    """A target under the sandbox's private /tmp (here ``/inside-tmp``) is read through
    ``host_path``."""
    host_tmp = tmp_path / "hosttmp"
    host_tmp.mkdir()
    os.mkfifo(host_tmp / "f")
    (tmp_path / "ws").mkdir()
    os.symlink("/inside-tmp/f", tmp_path / "ws" / "p")

    def host(path: str) -> str:
        inner = "/inside-tmp"
        return str(host_tmp) + path[len(inner) :] if path.startswith(inner) else path

    problem = refusal(["terraform", "plan", "-out=p"], str(tmp_path / "ws"), {}, host)
    assert problem is not None and "not a regular file" in problem


def test_the_log_path_is_refused():
    assert "TF_LOG_PATH" in (refusal(["terraform", "plan"], "/", {"TF_LOG_PATH": "x"}, same) or "")
    assert refusal(["terraform", "plan"], "/", {"TF_LOG": "trace"}, same) is None


def test_outputs_parses_both_spellings():
    argv = ["terraform", "-chdir=sub", "apply", "-state", "a", "-state-out=b", "-backup", "c"]
    assert outputs(argv) == ("sub", ["a", "b", "c"])


def test_the_words_of_tf_cli_args_count():
    env = {"TF_CLI_ARGS_plan": "-out=/dev/stdout"}
    assert "refused as an output" in (refusal(["terraform", "plan"], "/", env, same) or "")
    env = {"TF_CLI_ARGS": "-state-out='/dev/tty'"}
    assert "refused as an output" in (refusal(["terraform", "apply"], "/", env, same) or "")
    env = {"TF_CLI_ARGS_apply": "-out=/dev/stdout"}  # another command's
    assert refusal(["terraform", "plan"], "/", env, same) is None
    assert outputs(["terraform", "plan", "-input=false"], {"TF_CLI_ARGS": "-out x"}) == (
        None,
        ["x"],
    )
