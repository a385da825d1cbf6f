"""write_file and edit_file: previews, exact edits and atomic writes."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from iac_kernel.tools import write_file as safe_write_mod
from iac_kernel.tools.base import ToolContext, ToolError
from iac_kernel.tools.edit_file import EditFileTool
from iac_kernel.tools.write_file import WriteFileTool

writer = WriteFileTool()
editor = EditFileTool()

MAIN_TF = 'resource "aws_s3_bucket" "logs" {\n  bucket = "logs"\n}\n'


def leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]


# -- write_file --------------------------------------------------------------------


async def test_write_creates_file_and_parents(tool_ctx: ToolContext):
    args = {"path": "modules/vpc/main.tf", "content": MAIN_TF}
    diff = writer.preview(args, tool_ctx)
    assert diff.old_text is None
    assert diff.new_text == MAIN_TF
    assert diff.path == str(tool_ctx.cwd / "modules/vpc/main.tf")
    assert not (tool_ctx.cwd / "modules").exists()  # preview changes nothing
    result = await writer.run(args, tool_ctx)
    assert (tool_ctx.cwd / "modules/vpc/main.tf").read_text() == MAIN_TF
    assert result.content.startswith("Created modules/vpc/main.tf")
    assert result.diff == diff
    assert leftovers(tool_ctx.cwd / "modules/vpc") == []


async def test_write_overwrite_preview_has_old_text(tool_ctx: ToolContext):
    path = tool_ctx.cwd / "main.tf"
    path.write_text("old\n")
    diff = writer.preview({"path": "main.tf", "content": "new\n"}, tool_ctx)
    assert (diff.old_text, diff.new_text) == ("old\n", "new\n")
    await writer.run({"path": "main.tf", "content": "new\n"}, tool_ctx)
    assert path.read_text() == "new\n"


async def test_write_keeps_mode_of_existing_file(tool_ctx: ToolContext):
    script = tool_ctx.cwd / "deploy.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o751)
    await writer.run({"path": "deploy.sh", "content": "#!/bin/sh\necho hi\n"}, tool_ctx)
    assert stat.S_IMODE(script.stat().st_mode) == 0o751
    assert script.read_text().endswith("echo hi\n")


async def test_new_file_gets_umask_mode_not_temp_file_mode(tool_ctx: ToolContext):
    old = os.umask(0o022)
    try:
        await writer.run({"path": "new.tf", "content": "x"}, tool_ctx)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tool_ctx.cwd / "new.tf").stat().st_mode) == 0o644


async def test_write_keeps_line_endings_verbatim(tool_ctx: ToolContext):
    await writer.run({"path": "win.txt", "content": "a\r\nb\n"}, tool_ctx)
    assert (tool_ctx.cwd / "win.txt").read_bytes() == b"a\r\nb\n"


async def test_write_through_symlink_keeps_the_link(tool_ctx: ToolContext):
    real = tool_ctx.cwd / "real.tf"
    real.write_text("old")
    (tool_ctx.cwd / "link.tf").symlink_to(real)
    await writer.run({"path": "link.tf", "content": "new"}, tool_ctx)
    assert (tool_ctx.cwd / "link.tf").is_symlink()
    assert real.read_text() == "new"


async def test_failed_write_leaves_old_file_and_no_temp(
    tool_ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
):
    path = tool_ctx.cwd / "main.tf"
    path.write_text("precious\n")

    def broken_replace(src, dst, **_dir_fds):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(safe_write_mod.os, "replace", broken_replace)
    with pytest.raises(ToolError, match=re.escape("cannot write main.tf: No space left on device")):
        await writer.run({"path": "main.tf", "content": "half"}, tool_ctx)
    assert path.read_text() == "precious\n"
    assert leftovers(tool_ctx.cwd) == []


async def test_write_to_directory_is_refused(tool_ctx: ToolContext):
    (tool_ctx.cwd / "modules").mkdir()
    with pytest.raises(ToolError, match="is a directory"):
        writer.preview({"path": "modules", "content": "x"}, tool_ctx)
    with pytest.raises(ToolError, match="is a directory"):
        await writer.run({"path": "modules", "content": "x"}, tool_ctx)


async def test_write_permission_denied_is_a_tool_error(
    tool_ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
):
    # Simulated: the tests may run as root, which ignores directory permissions.
    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(safe_write_mod.os, "open", denied)
    with pytest.raises(ToolError, match=re.escape("permission denied: x.tf")):
        await writer.run({"path": "x.tf", "content": "x"}, tool_ctx)


async def test_write_parent_is_a_file(tool_ctx: ToolContext):
    (tool_ctx.cwd / "main.tf").write_text("x")
    with pytest.raises(ToolError, match=re.escape("cannot write main.tf/child.tf")):
        await writer.run({"path": "main.tf/child.tf", "content": "x"}, tool_ctx)


async def test_write_schema_errors(tool_ctx: ToolContext):
    with pytest.raises(ToolError, match="missing required field 'content'"):
        await writer.run({"path": "a.tf"}, tool_ctx)
    with pytest.raises(ToolError, match="'content' must be a string"):
        writer.preview({"path": "a.tf", "content": 5}, tool_ctx)


def test_write_title_and_paths(tool_ctx: ToolContext):
    args = {"path": "modules/vpc/main.tf", "content": ""}
    assert writer.title(args) == "write_file: modules/vpc/main.tf"
    assert writer.paths(args, tool_ctx) == [tool_ctx.cwd / "modules/vpc/main.tf"]


# -- edit_file ---------------------------------------------------------------------


async def test_edit_replaces_unique_match(tool_ctx: ToolContext):
    path = tool_ctx.cwd / "main.tf"
    path.write_text(MAIN_TF)
    args = {"path": "main.tf", "old_string": '"logs"\n}', "new_string": '"audit-logs"\n}'}
    diff = editor.preview(args, tool_ctx)
    assert diff.old_text == MAIN_TF
    assert diff.new_text == MAIN_TF.replace('"logs"\n}', '"audit-logs"\n}')
    assert path.read_text() == MAIN_TF  # preview changes nothing
    result = await editor.run(args, tool_ctx)
    assert path.read_text() == diff.new_text
    assert result.content == "Edited main.tf: replaced 1 occurrence."
    assert result.diff == diff


async def test_edit_not_found(tool_ctx: ToolContext):
    (tool_ctx.cwd / "main.tf").write_text(MAIN_TF)
    args = {"path": "main.tf", "old_string": 'bucket = "nope"', "new_string": "x"}
    with pytest.raises(ToolError, match=re.escape("old_string not found in main.tf")):
        editor.preview(args, tool_ctx)
    with pytest.raises(ToolError, match="old_string not found"):
        await editor.run(args, tool_ctx)
    assert (tool_ctx.cwd / "main.tf").read_text() == MAIN_TF


async def test_edit_ambiguous_match_needs_context_or_replace_all(tool_ctx: ToolContext):
    path = tool_ctx.cwd / "vars.tf"
    path.write_text("type = string\ntype = string\ntype = string\n")
    args = {"path": "vars.tf", "old_string": "type = string", "new_string": "type = number"}
    with pytest.raises(ToolError) as err:
        await editor.run(args, tool_ctx)
    assert "occurs 3 times" in str(err.value)
    assert "replace_all" in str(err.value)
    assert path.read_text().count("string") == 3
    result = await editor.run({**args, "replace_all": True}, tool_ctx)
    assert path.read_text() == "type = number\n" * 3
    assert result.content == "Edited vars.tf: replaced 3 occurrences."


async def test_edit_identical_strings_refused(tool_ctx: ToolContext):
    (tool_ctx.cwd / "main.tf").write_text(MAIN_TF)
    with pytest.raises(ToolError, match="identical"):
        await editor.run(
            {"path": "main.tf", "old_string": "bucket", "new_string": "bucket"}, tool_ctx
        )


async def test_edit_missing_file(tool_ctx: ToolContext):
    with pytest.raises(ToolError, match=re.escape("file not found: nope.tf")):
        editor.preview({"path": "nope.tf", "old_string": "a", "new_string": "b"}, tool_ctx)


async def test_edit_binary_and_non_utf8_refused(tool_ctx: ToolContext):
    (tool_ctx.cwd / "bin").write_bytes(b"abc\x00def")
    with pytest.raises(ToolError, match="binary file"):
        await editor.run({"path": "bin", "old_string": "abc", "new_string": "x"}, tool_ctx)
    (tool_ctx.cwd / "latin1.txt").write_bytes(b"caf\xe9 abc")
    with pytest.raises(ToolError, match="not UTF-8"):
        await editor.run({"path": "latin1.txt", "old_string": "abc", "new_string": "x"}, tool_ctx)
    assert (tool_ctx.cwd / "latin1.txt").read_bytes() == b"caf\xe9 abc"


async def test_edit_crlf_file_matches_lf_old_string(tool_ctx: ToolContext):
    path = tool_ctx.cwd / "win.tf"
    path.write_bytes(b"a = 1\r\nb = 2\r\nc = 3\r\n")
    await editor.run(
        {"path": "win.tf", "old_string": "a = 1\nb = 2", "new_string": "a = 1\nb = 20"}, tool_ctx
    )
    assert path.read_bytes() == b"a = 1\r\nb = 20\r\nc = 3\r\n"


async def test_edit_keeps_mode(tool_ctx: ToolContext):
    path = tool_ctx.cwd / "run.sh"
    path.write_text("echo old\n")
    path.chmod(0o700)
    await editor.run({"path": "run.sh", "old_string": "old", "new_string": "new"}, tool_ctx)
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert path.read_text() == "echo new\n"
    assert leftovers(tool_ctx.cwd) == []


async def test_edit_delete_text_with_empty_new_string(tool_ctx: ToolContext):
    path = tool_ctx.cwd / "main.tf"
    path.write_text("keep\ndrop\n")
    await editor.run({"path": "main.tf", "old_string": "drop\n", "new_string": ""}, tool_ctx)
    assert path.read_text() == "keep\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"path": "a.tf", "old_string": "", "new_string": "x"}, "'old_string' must not be empty"),
        ({"path": "a.tf", "old_string": "a"}, "missing required field 'new_string'"),
        (
            {"path": "a.tf", "old_string": "a", "new_string": "b", "replace_all": "yes"},
            "'replace_all' must be a boolean",
        ),
    ],
)
async def test_edit_schema_errors(tool_ctx: ToolContext, args: dict, message: str):
    (tool_ctx.cwd / "a.tf").write_text("a")
    with pytest.raises(ToolError, match=message):
        await editor.run(args, tool_ctx)


def test_edit_title():
    assert editor.title({"path": "modules/vpc/main.tf"}) == "edit_file: modules/vpc/main.tf"
