"""Symlink loops in the workspace do not stop list_files, glob or grep; runtime files of
dead kernels go when ``iac-kernel acp`` starts."""

from __future__ import annotations

import json
import os
import socket as sockets
import subprocess
import sys
from pathlib import Path

from iac_kernel.acp.attach import runtime
from iac_kernel.tools.base import ToolContext
from iac_kernel.tools.glob import GlobTool
from iac_kernel.tools.grep import GrepTool
from iac_kernel.tools.list_files import ListFilesTool
from test_acp_support import RawServer, server_env


def make_loops(root: Path) -> None:
    (root / "main.tf").write_text('resource "aws_vpc" "main" {}\n')
    (root / "sub").mkdir()
    (root / "sub" / "net.tf").write_text('resource "aws_subnet" "a" {}\n')
    os.symlink("loop_b", root / "loop_a")  # a -> b -> a: ELOOP on stat
    os.symlink("loop_a", root / "loop_b")
    os.symlink("..", root / "sub" / "up")  # a directory cycle through a symlink


async def test_list_files_skips_symlink_loops_with_a_note(tool_ctx: ToolContext):
    make_loops(tool_ctx.cwd)
    result = await ListFilesTool().run({"path": ".", "depth": 5}, tool_ctx)
    assert not result.is_error
    lines = result.content.splitlines()
    assert "main.tf" in lines and "sub/net.tf" in lines
    assert "[skipped loop_a: Too many levels of symbolic links]" in lines
    assert "[skipped loop_b: Too many levels of symbolic links]" in lines
    assert "sub/up/" in lines and not any(line.startswith("sub/up/sub") for line in lines)


async def test_glob_and_grep_are_not_trapped_by_symlink_loops(tool_ctx: ToolContext):
    make_loops(tool_ctx.cwd)
    found = await GlobTool().run({"pattern": "**/*.tf"}, tool_ctx)
    assert found.content.splitlines() == ["main.tf", "sub/net.tf"]
    hits = await GrepTool().run({"pattern": "resource"}, tool_ctx)
    assert "main.tf" in hits.content and "sub/net.tf" in hits.content
    assert "sub/up" not in hits.content


def dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout)


def plant(directory: Path, pid: int) -> tuple[Path, Path]:
    runtime.ensure_private_dir(directory)
    sock = directory / f"kernel-{pid}.sock"
    info = runtime.EndpointInfo(pid=pid, socket=str(sock), token="t", started="")
    path = runtime.write_info(directory, info)
    with sockets.socket(sockets.AF_UNIX) as server:
        server.bind(str(sock))
    return path, sock


def test_remove_dead_keeps_live_kernels(tmp_path: Path):
    directory = tmp_path / "run"
    dead_file, dead_sock = plant(directory, dead_pid())
    live_file, live_sock = plant(directory, os.getpid())
    assert runtime.remove_dead(directory) == 1
    assert not dead_file.exists() and not dead_sock.exists()
    assert live_file.exists() and live_sock.exists()


async def test_acp_start_removes_runtime_files_of_dead_kernels(tmp_path: Path):
    directory = tmp_path / "run"
    dead_file, dead_sock = plant(directory, dead_pid())
    env = server_env(**{runtime.ENV_VAR: str(directory)})
    async with RawServer.start(env, tmp_path / "stderr.log") as server:
        answer = await server.initialize()
        assert "result" in answer
        listed = await server.call("session/list", {})
        assert "result" in listed, json.dumps(listed)
    assert not dead_file.exists() and not dead_sock.exists()
