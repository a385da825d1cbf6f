"""list_files: sorted entries, depth, skipped directories and caps."""

from __future__ import annotations

import pytest

from iac_kernel.tools import list_files as list_files_mod
from iac_kernel.tools.base import ToolContext, ToolError
from iac_kernel.tools.list_files import ListFilesTool

tool = ListFilesTool()


@pytest.fixture
def tree(tool_ctx: ToolContext):
    root = tool_ctx.cwd
    for rel in (
        "main.tf",
        "variables.tf",
        "modules/vpc/main.tf",
        "modules/vpc/outputs.tf",
        "modules/eks/deep/x.tf",
        ".git/HEAD",
        ".terraform/providers/p",
        "b.md",
    ):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    return root


async def test_lists_sorted_with_directories_marked(tool_ctx: ToolContext, tree):
    result = await tool.run({"path": ".", "depth": 1}, tool_ctx)
    assert result.content.splitlines() == ["b.md", "main.tf", "modules/", "variables.tf"]


async def test_default_path_and_depth(tool_ctx: ToolContext, tree):
    result = await tool.run({}, tool_ctx)
    lines = result.content.splitlines()
    assert lines == [
        "b.md",
        "main.tf",
        "modules/",
        "modules/eks/",
        "modules/vpc/",
        "variables.tf",
    ]


async def test_deeper_listing_nests_children_under_their_directory(tool_ctx: ToolContext, tree):
    result = await tool.run({"depth": 4}, tool_ctx)
    lines = result.content.splitlines()
    assert "modules/eks/deep/x.tf" in lines
    assert lines.index("modules/vpc/") < lines.index("modules/vpc/main.tf")
    assert lines.index("modules/vpc/main.tf") < lines.index("modules/vpc/outputs.tf")


async def test_skips_git_and_terraform_dirs(tool_ctx: ToolContext, tree):
    result = await tool.run({"depth": 5}, tool_ctx)
    assert ".git" not in result.content
    assert ".terraform" not in result.content


async def test_subdirectory_entries_read_from_the_cwd(tool_ctx: ToolContext, tree):
    result = await tool.run({"path": "modules/vpc"}, tool_ctx)
    assert result.content.splitlines() == ["modules/vpc/main.tf", "modules/vpc/outputs.tf"]


async def test_outside_directory_gives_absolute_paths(tool_ctx: ToolContext, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.tf").write_text("")
    result = await tool.run({"path": str(other)}, tool_ctx)
    assert result.content.splitlines() == [str(other / "x.tf")]


async def test_empty_directory(tool_ctx: ToolContext):
    (tool_ctx.cwd / "empty").mkdir()
    result = await tool.run({"path": "empty"}, tool_ctx)
    assert result.content == "(empty directory)"


async def test_entry_cap(tool_ctx: ToolContext, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(list_files_mod, "MAX_ENTRIES", 5)
    for i in range(20):
        (tool_ctx.cwd / f"f{i:02d}.tf").write_text("x")
    result = await tool.run({}, tool_ctx)
    lines = [line for line in result.content.splitlines() if line.endswith(".tf")]
    assert lines == [f"f{i:02d}.tf" for i in range(5)]
    assert "stopped after 5 entries" in result.content
    assert result.raw_output["truncated"] is True


async def test_symlinked_directory_loop_is_not_followed(tool_ctx: ToolContext):
    (tool_ctx.cwd / "a").mkdir()
    (tool_ctx.cwd / "a" / "loop").symlink_to(tool_ctx.cwd / "a")
    result = await tool.run({"depth": 10}, tool_ctx)
    assert result.content.splitlines() == ["a/", "a/loop/"]


async def test_missing_directory(tool_ctx: ToolContext):
    with pytest.raises(ToolError, match="directory not found: nope"):
        await tool.run({"path": "nope"}, tool_ctx)


async def test_file_path_suggests_read_file(tool_ctx: ToolContext):
    (tool_ctx.cwd / "main.tf").write_text("x")
    with pytest.raises(ToolError, match="use read_file"):
        await tool.run({"path": "main.tf"}, tool_ctx)


async def test_bad_depth(tool_ctx: ToolContext):
    with pytest.raises(ToolError, match="'depth' must be >= 1"):
        await tool.run({"depth": 0}, tool_ctx)
    with pytest.raises(ToolError, match="'depth' must be an integer"):
        await tool.run({"depth": "2"}, tool_ctx)
