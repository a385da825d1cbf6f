"""A guarded program that cannot start says why in one line, with the shell's status.

Each cause runs through the bash tool in a real bubblewrap sandbox (the launcher, the
approval server and the sibling sandbox's exec helper all take part): the tool's output,
which the notebook cell and the ACP tool call show, holds exactly one line
``guard: cannot start PROGRAM: WHY``, and the exit status is 127 (something not found) or
126 (found but cannot run).
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest

from guard_support import Asker, Harness, make_fakes
from iac_kernel.guard import call as guard_call
from iac_kernel.guard.sandbox import bwrap as sandbox
from iac_kernel.guard.sandbox.launcher import write_launchers
from iac_kernel.tools.base import ToolResult

pytestmark = pytest.mark.skipif(sandbox.unusable_reason() is not None, reason="no bwrap")


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    bin_dir, log = make_fakes(tmp_path)
    return Harness(tmp_path / "ws", bin_dir, log)


def install(harness: Harness, name: str, data: bytes, mode: int = 0o755) -> Path:
    """``name`` in the harness's bin folder, guarded (alone)."""
    path = harness.bin_dir / name
    path.write_bytes(data)
    path.chmod(mode)
    harness.settings.guarded_programs = name
    return path


def said(result: ToolResult | None, program: str) -> str:
    """The one ``guard:`` line of the output (asserted to be the only one)."""
    assert result is not None
    lines = [line for line in result.content.splitlines() if line.startswith("guard:")]
    assert len(lines) == 1, result.content
    assert lines[0].startswith(f"guard: cannot start {program}: "), result.content
    assert "bwrap:" not in result.content and "Traceback" not in result.content
    return lines[0]


def status(result: ToolResult | None) -> int:
    assert result is not None
    return result.raw_output["exit_code"]


async def test_a_program_not_on_path_is_not_found(harness: Harness):
    harness.settings.guarded_programs = "nosuchcli"
    result = await harness.run("nosuchcli --version", Asker())
    assert "not found on PATH" in said(result, "nosuchcli")
    assert status(result) == 127


async def test_a_program_that_is_not_executable_says_so(harness: Harness):
    path = install(harness, "noexeccli", b"#!/bin/sh\necho ran\n", mode=0o644)
    result = await harness.run("noexeccli --version", Asker())
    assert f"{path} is not executable" in said(result, "noexeccli")
    assert status(result) == 126 and "ran" not in result.content


async def test_a_missing_interpreter_in_the_shebang_is_named(harness: Harness):
    install(harness, "badshebang", b"#!/nonexistent/interp -x\necho ran\n")
    result = await harness.run("badshebang --version", Asker())
    line = said(result, "badshebang")
    assert "its interpreter /nonexistent/interp (the #! line) is not found" in line
    assert status(result) == 127


@pytest.fixture
def interp() -> Path:
    """A file that is no program, where the sandbox sees it (not under the private /tmp)."""
    folder = Path(tempfile.mkdtemp(prefix="iac-interp-", dir="/var/tmp"))
    path = folder / "interp"
    path.write_text("not a program\n")
    path.chmod(0o644)
    yield path
    shutil.rmtree(folder, ignore_errors=True)


async def test_an_interpreter_that_is_not_executable_is_named(harness: Harness, interp: Path):
    install(harness, "noexecinterp", f"#!{interp}\necho ran\n".encode())
    result = await harness.run("noexecinterp --version", Asker())
    assert f"its interpreter {interp} (the #! line) is not executable" in said(
        result, "noexecinterp"
    )
    assert status(result) == 126


async def test_a_file_of_an_unknown_format_is_an_exec_format_error(harness: Harness):
    install(harness, "garbagecli", b"\x7fELF\x02\x01\x01" + bytes(range(200)))
    result = await harness.run("garbagecli --version", Asker())
    assert "exec format error" in said(result, "garbagecli")
    assert status(result) == 126


def _without_loader(binary: str) -> bytes:
    """``binary`` (ELF64, little-endian) with its PT_INTERP naming a missing loader."""
    data = bytearray(Path(binary).resolve().read_bytes())
    assert data[:6] == b"\x7fELF\x02\x01", "needs a 64-bit little-endian ELF"
    (phoff,) = struct.unpack_from("<Q", data, 0x20)
    size, count = struct.unpack_from("<HH", data, 0x36)
    for i in range(count):
        base = phoff + i * size
        (kind,) = struct.unpack_from("<I", data, base)
        if kind == 3:  # PT_INTERP
            (offset,) = struct.unpack_from("<Q", data, base + 8)
            (length,) = struct.unpack_from("<Q", data, base + 32)
            name = b"/nonexistent/ld.so"
            assert len(name) < length
            data[offset : offset + length] = name.ljust(length, b"\0")
            return bytes(data)
    raise AssertionError("no PT_INTERP")


async def test_a_binary_whose_loader_is_missing_says_so(harness: Harness):
    install(harness, "noloader", _without_loader(shutil.which("true") or "/bin/true"))
    result = await harness.run("noloader; echo rc=$?", Asker())
    assert "its dynamic loader" in said(result, "noloader")
    assert "rc=127" in result.content


async def test_the_launchers_python_missing_says_so(harness: Harness, monkeypatch):
    """The launcher's own interpreter cannot start (a venv reached through a symlink
    gave this): the ``/bin/sh`` line names it, instead of bash's 'required file not
    found' and no question at all."""
    monkeypatch.setattr(guard_call, "sandbox_python", lambda: "/nonexistent/bin/python3")
    install(harness, "nopython", b"#!/bin/sh\necho ran\n")
    result = await harness.run("nopython --version", Asker())
    line = said(result, "nopython")
    assert "the guard's Python /nonexistent/bin/python3 is missing" in line
    assert status(result) == 127 and "ran" not in result.content


def test_a_launcher_with_no_approval_socket_says_so(tmp_path: Path):
    """A launcher run where no bash call's approval socket is (here: a bare sandbox)."""
    folder = Path(tempfile.mkdtemp(prefix="iac-launchers-", dir="/var/tmp"))
    try:
        write_launchers(folder, ["terraform"], guard_call.sandbox_python())
        argv = [sandbox.bwrap_path(), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        argv += ["--tmpfs", "/tmp"]
        for path in sandbox.own_paths_under_tmp():  # this interpreter, if under /tmp
            argv += ["--ro-bind", path, path]
        argv += ["--unshare-pid", "--"]
        argv += [str(folder / "terraform"), "version"]
        env = {"PATH": os.environ["PATH"], "IAC_GUARD_SOCKET": "/tmp/nowhere/sock"}
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert done.returncode == 126, done.stderr
    assert done.stderr.splitlines() == [
        "guard: cannot start terraform: the guard's approval socket is not reachable "
        "(/tmp/nowhere/sock: No such file or directory); guarded programs run only in "
        "the agent's bash calls"
    ]


@pytest.fixture
def reduced(monkeypatch: pytest.MonkeyPatch):
    """Pretend bubblewrap cannot create namespaces here (programs run directly)."""
    why = "bwrap cannot create a sandbox here: No permissions to create new namespace"
    monkeypatch.setattr(sandbox, "unusable_reason", lambda: why)
    monkeypatch.setattr(guard_call, "unusable_reason", lambda: why)


async def test_without_the_sandbox_the_same_line_is_said(harness: Harness, reduced):
    install(harness, "badshebang", b"#!/nonexistent/interp\necho ran\n")
    result = await harness.run("badshebang --version", Asker())
    assert result is not None and result.raw_output["sandbox"] == "reduced"
    assert "its interpreter /nonexistent/interp (the #! line) is not found" in said(
        result, "badshebang"
    )
    assert status(result) == 127


async def test_the_line_reaches_the_acp_tool_call(tmp_path: Path, workspace: Path):
    """What the chat panel shows: the bash tool call's content over ACP."""
    from acp import text_block

    from test_acp_support import SCRIPTS, acp_server, server_env

    script = SCRIPTS / "guard_cannot_start.json"
    env = server_env(script, IAC_KERNEL_GUARDED_PROGRAMS="nosuchcli")
    async with acp_server(tmp_path, env=env) as (conn, _p, client, _w):
        sid = (await conn.new_session(cwd=str(workspace))).session_id
        answer = await conn.prompt(session_id=sid, prompt=[text_block("run the missing cli")])
        assert answer.stop_reason == "end_turn"
    (call,) = client.tool_ids(sid)
    last = client.tool_updates(sid, call)[-1]
    assert last.status == "failed" and last.raw_output["exit_code"] == 127
    text = last.content[0].content.text
    assert [line for line in text.splitlines() if line.startswith("guard:")] == [
        "guard: cannot start nosuchcli: not found on PATH (not installed, or not on the "
        "call's PATH)"
    ]
