"""write_file / edit_file against symlink swaps: a swap while the permission question
waits never redirects a write outside the working directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from iac_kernel.agent.permissions import ALLOW_ONCE, PermissionGate, PermissionRequest
from iac_kernel.config import Settings
from iac_kernel.tools.base import Tool, ToolContext, ToolError
from iac_kernel.tools.edit_file import EditFileTool
from iac_kernel.tools.write_file import WriteFileTool


async def run_like_the_loop(tool: Tool, args: dict, cwd: Path, during_question) -> None:
    """Preview, ask (running ``during_question`` while the user "thinks"), then run."""
    ctx = ToolContext(cwd=cwd, settings=Settings())
    request = PermissionRequest("c1", tool.name, tool.name, tool.kind, args, [], "")
    request.diff = tool.preview(args, ctx)

    async def ask(_request: PermissionRequest) -> str:
        during_question()
        return ALLOW_ONCE

    decision = await PermissionGate().check(tool, args, ctx, request, ask)
    assert decision.allowed
    await tool.run(args, ctx)


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    cwd, outside = tmp_path / "ws", tmp_path / "outside"
    cwd.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    return Path(os.path.realpath(cwd)), Path(os.path.realpath(outside))


def swap_file(link: Path, target: Path):
    def swap() -> None:
        link.unlink()
        link.symlink_to(target)

    return swap


async def test_write_file_swapped_to_a_symlink_is_refused(dirs):
    cwd, outside = dirs
    (cwd / "main.tf").write_text("old\n")
    swap = swap_file(cwd / "main.tf", outside / "secret.txt")
    with pytest.raises(ToolError, match="outside the working directory"):
        await run_like_the_loop(
            WriteFileTool(), {"path": "main.tf", "content": "pwned\n"}, cwd, swap
        )
    assert (outside / "secret.txt").read_text() == "secret\n"


async def test_edit_file_swapped_to_a_symlink_is_refused(dirs):
    cwd, outside = dirs
    (cwd / "main.tf").write_text("secret\n")
    swap = swap_file(cwd / "main.tf", outside / "secret.txt")
    args = {"path": "main.tf", "old_string": "secret", "new_string": "pwned"}
    with pytest.raises(ToolError, match="outside the working directory"):
        await run_like_the_loop(EditFileTool(), args, cwd, swap)
    assert (outside / "secret.txt").read_text() == "secret\n"


async def test_a_directory_swapped_to_a_symlink_is_refused(dirs):
    cwd, outside = dirs
    (cwd / "mod").mkdir()

    def swap() -> None:
        (cwd / "mod").rmdir()
        (cwd / "mod").symlink_to(outside)

    with pytest.raises(ToolError):
        await run_like_the_loop(
            WriteFileTool(), {"path": "mod/secret.txt", "content": "pwned\n"}, cwd, swap
        )
    assert (outside / "secret.txt").read_text() == "secret\n"


async def test_an_approved_outside_path_swapped_elsewhere_is_refused(dirs, tmp_path):
    cwd, outside = dirs
    other = tmp_path / "other.txt"
    other.write_text("other\n")
    (outside / "notes.txt").write_text("notes\n")
    swap = swap_file(outside / "notes.txt", other)
    args = {"path": str(outside / "notes.txt"), "content": "new\n"}
    with pytest.raises(ToolError, match="as when it was approved"):
        await run_like_the_loop(WriteFileTool(), args, cwd, swap)
    assert other.read_text() == "other\n"


async def test_symlinks_inside_the_cwd_still_work(dirs):
    cwd, _outside = dirs
    (cwd / "real.tf").write_text("a\n")
    (cwd / "link.tf").symlink_to(cwd / "real.tf")
    await run_like_the_loop(
        WriteFileTool(), {"path": "link.tf", "content": "b\n"}, cwd, lambda: None
    )
    assert (cwd / "link.tf").is_symlink() and (cwd / "real.tf").read_text() == "b\n"
    await run_like_the_loop(
        WriteFileTool(), {"path": "new/dir/x.tf", "content": "c\n"}, cwd, lambda: None
    )
    assert (cwd / "new/dir/x.tf").read_text() == "c\n"
