"""read_file: numbered lines, paging, caps and refusals."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from iac_kernel.tools import read_file as read_file_mod
from iac_kernel.tools.base import ToolContext, ToolError
from iac_kernel.tools.read_file import ReadFileTool

tool = ReadFileTool()


def write_lines(path: Path, count: int) -> None:
    path.write_text("".join(f"line {i}\n" for i in range(1, count + 1)))


async def test_reads_numbered_lines_like_cat_n(tool_ctx: ToolContext):
    (tool_ctx.cwd / "main.tf").write_text('resource "null_resource" "x" {}\n\n# end\n')
    result = await tool.run({"path": "main.tf"}, tool_ctx)
    assert not result.is_error
    assert result.content == ('     1\tresource "null_resource" "x" {}\n     2\t\n     3\t# end')
    assert result.raw_output["lines"] == 3


async def test_offset_and_limit_page_through_the_file(tool_ctx: ToolContext):
    write_lines(tool_ctx.cwd / "big.tf", 50)
    result = await tool.run({"path": "big.tf", "offset": 10, "limit": 3}, tool_ctx)
    lines = result.content.splitlines()
    assert lines[:3] == ["    10\tline 10", "    11\tline 11", "    12\tline 12"]
    assert "showing lines 10-12 of 50" in result.content
    assert "offset=13" in result.content


async def test_line_cap_truncates_and_says_how_to_continue(
    tool_ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(read_file_mod, "DEFAULT_LINE_LIMIT", 5)
    write_lines(tool_ctx.cwd / "big.tf", 20)
    result = await tool.run({"path": "big.tf", "limit": 100}, tool_ctx)
    numbered = [line for line in result.content.splitlines() if "\tline " in line]
    assert len(numbered) == 5
    assert "5-line limit" in result.content
    assert "offset=6" in result.content


async def test_byte_cap_truncates(tool_ctx: ToolContext):
    ctx = dataclasses.replace(
        tool_ctx, settings=dataclasses.replace(tool_ctx.settings, read_limit_bytes=100)
    )
    write_lines(ctx.cwd / "big.tf", 1000)
    result = await tool.run({"path": "big.tf"}, ctx)
    numbered = [line for line in result.content.splitlines() if "\tline " in line]
    assert 1 <= len(numbered) < 10
    assert "100-byte read limit" in result.content
    assert f"offset={len(numbered) + 1}" in result.content


async def test_whole_file_has_no_truncation_note(tool_ctx: ToolContext):
    write_lines(tool_ctx.cwd / "small.tf", 3)
    result = await tool.run({"path": "small.tf"}, tool_ctx)
    assert "offset=" not in result.content
    assert "stopped" not in result.content


async def test_very_long_lines_are_cut(tool_ctx: ToolContext):
    (tool_ctx.cwd / "min.json").write_text("x" * 10_000 + "\n")
    result = await tool.run({"path": "min.json"}, tool_ctx)
    assert len(result.content) < 3000
    assert "line cut" in result.content


async def test_missing_file(tool_ctx: ToolContext):
    with pytest.raises(ToolError, match=re.escape("file not found: nope.tf")):
        await tool.run({"path": "nope.tf"}, tool_ctx)


async def test_directory_suggests_list_files(tool_ctx: ToolContext):
    (tool_ctx.cwd / "modules").mkdir()
    with pytest.raises(ToolError, match="directory; use list_files"):
        await tool.run({"path": "modules"}, tool_ctx)


async def test_binary_file_is_refused(tool_ctx: ToolContext):
    (tool_ctx.cwd / "plugin").write_bytes(b"\x7fELF\x00\x01\x02binary")
    with pytest.raises(ToolError, match="binary file"):
        await tool.run({"path": "plugin"}, tool_ctx)


async def test_nul_after_the_sniffed_head_is_still_binary(tool_ctx: ToolContext):
    # Past the 8 KiB sniffed up front, but inside the lines being shown.
    (tool_ctx.cwd / "late").write_bytes(b"text\n" * 1700 + b"\x00\n")
    with pytest.raises(ToolError, match="binary file"):
        await tool.run({"path": "late"}, tool_ctx)


async def test_fifo_is_refused_without_blocking(tool_ctx: ToolContext):
    import os

    os.mkfifo(tool_ctx.cwd / "pipe")
    with pytest.raises(ToolError, match="not a regular file"):
        await tool.run({"path": "pipe"}, tool_ctx)


async def test_empty_file(tool_ctx: ToolContext):
    (tool_ctx.cwd / "empty.tf").write_text("")
    result = await tool.run({"path": "empty.tf"}, tool_ctx)
    assert result.content == "(empty file)"
    assert not result.is_error


async def test_offset_past_the_end(tool_ctx: ToolContext):
    write_lines(tool_ctx.cwd / "a.tf", 3)
    with pytest.raises(ToolError, match=r"offset 9 is past the end of a.tf \(3 lines\)"):
        await tool.run({"path": "a.tf", "offset": 9}, tool_ctx)


async def test_invalid_utf8_is_replaced_not_fatal(tool_ctx: ToolContext):
    (tool_ctx.cwd / "latin1.txt").write_bytes(b"caf\xe9\n")
    result = await tool.run({"path": "latin1.txt"}, tool_ctx)
    assert "caf\ufffd" in result.content


async def test_absolute_and_outside_paths_are_read(tool_ctx: ToolContext, tmp_path: Path):
    # Refusing outside paths is the permission gate's job, not the tool's.
    outside = tmp_path / "outside.tf"
    outside.write_text("hello\n")
    result = await tool.run({"path": str(outside)}, tool_ctx)
    assert "hello" in result.content
    assert tool.paths({"path": str(outside)}, tool_ctx) == [outside]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"path": "a.tf", "offset": 0}, "'offset' must be >= 1"),
        ({"path": "a.tf", "limit": "ten"}, "'limit' must be an integer"),
        ({"file": "a.tf"}, "missing required field 'path'"),
    ],
)
async def test_schema_errors(tool_ctx: ToolContext, args: dict, message: str):
    with pytest.raises(ToolError, match=message):
        await tool.run(args, tool_ctx)


def test_title():
    assert tool.title({"path": "main.tf"}) == "read_file: main.tf"
