"""Path rules, argument validation, the registry and what fronts show of a call (titles,
locations, checklists, stored diffs): shared by every tool, each tool's own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from iac_kernel.events import Diff, Location
from iac_kernel.tools.agent import AgentTool
from iac_kernel.tools.ask_user import AskUserTool
from iac_kernel.tools.base import (
    Category,
    ToolContext,
    ToolError,
    display_path,
    is_inside,
    resolve_path,
    validate_args,
)
from iac_kernel.tools.bash import BashTool
from iac_kernel.tools.edit_file import EditFileTool
from iac_kernel.tools.glob import GlobTool
from iac_kernel.tools.grep import GrepTool
from iac_kernel.tools.list_files import ListFilesTool
from iac_kernel.tools.pull_request import PullRequestTool
from iac_kernel.tools.read_file import ReadFileTool
from iac_kernel.tools.registry import build_tools
from iac_kernel.tools.tf_apply import TerraformApplyTool
from iac_kernel.tools.tf_plans import TerraformPlanDetailTool, TerraformPlanTool
from iac_kernel.tools.update_plan import UpdatePlanTool
from iac_kernel.tools.web_fetch import WebFetchTool
from iac_kernel.tools.write_file import WriteFileTool

SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1},
        "limit": {"type": "integer", "minimum": 1},
        "ratio": {"type": "number", "exclusiveMinimum": 0},
        "flag": {"type": "boolean", "default": False},
        "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
    },
    "required": ["path"],
    "additionalProperties": False,
}

ACP_KINDS = {
    ReadFileTool: ("read", Category.READ),
    ListFilesTool: ("read", Category.READ),
    GlobTool: ("search", Category.READ),
    GrepTool: ("search", Category.READ),
    WriteFileTool: ("edit", Category.WRITE),
    EditFileTool: ("edit", Category.WRITE),
    BashTool: ("execute", Category.EXECUTE),
    AgentTool: ("execute", Category.EXECUTE),
    WebFetchTool: ("fetch", Category.READ),
    TerraformPlanTool: ("execute", Category.EXECUTE),
    TerraformPlanDetailTool: ("read", Category.READ),
    TerraformApplyTool: ("execute", Category.EXECUTE),
    UpdatePlanTool: ("think", Category.READ),
    AskUserTool: ("think", Category.READ),
    PullRequestTool: ("execute", Category.EXECUTE),
}


# -- paths -------------------------------------------------------------------------


def test_relative_paths_resolve_against_cwd(tool_ctx: ToolContext):
    assert resolve_path(tool_ctx, "modules/vpc/main.tf") == tool_ctx.cwd / "modules/vpc/main.tf"
    assert resolve_path(tool_ctx, "a/../b.tf") == tool_ctx.cwd / "b.tf"
    assert resolve_path(tool_ctx, "/etc/hosts") == Path("/etc/hosts")


def test_tilde_expands(tool_ctx: ToolContext, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve_path(tool_ctx, "~/x.tf") == tmp_path / "home" / "x.tf"


@pytest.mark.parametrize("raw", ["", "   ", "a\x00b"])
def test_bad_paths_are_tool_errors(tool_ctx: ToolContext, raw: str):
    with pytest.raises(ToolError):
        resolve_path(tool_ctx, raw)


def test_is_inside(workspace: Path, tmp_path: Path):
    (workspace / "sub").mkdir()
    assert is_inside(workspace, workspace)
    assert is_inside(workspace / "sub" / "new.tf", workspace)  # need not exist
    assert not is_inside(workspace / ".." / "other", workspace)
    assert not is_inside(Path("/etc/passwd"), workspace)
    # A sibling whose name merely starts with the cwd's name is outside.
    assert not is_inside(Path(str(workspace) + "-evil") / "x", workspace)


def test_symlink_out_of_cwd_counts_as_outside(workspace: Path, tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "link").symlink_to(outside)
    assert not is_inside(workspace / "link" / "secret.tf", workspace)
    (workspace / "inner").mkdir()
    (workspace / "inlink").symlink_to(workspace / "inner")
    assert is_inside(workspace / "inlink" / "x", workspace)


def test_display_path(workspace: Path):
    assert display_path(workspace / "a" / "b.tf", workspace) == os.path.join("a", "b.tf")
    assert display_path(Path("/etc/hosts"), workspace) == "/etc/hosts"


# -- validation --------------------------------------------------------------------


def test_validate_fills_defaults_and_keeps_values():
    args = validate_args("t", SCHEMA, {"path": "x", "limit": 3})
    assert args == {"path": "x", "limit": 3, "flag": False, "mode": "a"}


def test_validate_treats_null_optional_as_absent():
    assert validate_args("t", SCHEMA, {"path": "x", "limit": None})["flag"] is False


def test_validate_accepts_integral_float_for_integer():
    assert validate_args("t", SCHEMA, {"path": "x", "limit": 5.0})["limit"] == 5


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "missing required field 'path'"),
        ({"path": 3}, "'path' must be a string (got integer)"),
        ({"path": ""}, "'path' must not be empty"),
        ({"path": "x", "limit": "10"}, "'limit' must be an integer (got string)"),
        ({"path": "x", "limit": True}, "'limit' must be an integer (got boolean)"),
        ({"path": "x", "limit": 1.5}, "'limit' must be an integer (got number)"),
        ({"path": "x", "limit": 0}, "'limit' must be >= 1"),
        ({"path": "x", "ratio": 0}, "'ratio' must be > 0"),
        ({"path": "x", "flag": "yes"}, "'flag' must be a boolean"),
        ({"path": "x", "mode": "c"}, "'mode' must be one of 'a', 'b'"),
        ({"path": "x", "bogus": 1}, "unknown field 'bogus'"),
    ],
)
def test_validate_rejects_bad_input(args: dict, message: str):
    with pytest.raises(ToolError) as err:
        validate_args("t", SCHEMA, args)
    assert message in str(err.value)
    assert str(err.value).startswith("Invalid input for t:")


def test_validate_lists_every_problem():
    with pytest.raises(ToolError) as err:
        validate_args("t", SCHEMA, {"limit": "x", "extra": 1})
    text = str(err.value)
    assert "missing required field 'path'" in text
    assert "'limit' must be an integer" in text
    assert "unknown field 'extra'" in text


@pytest.mark.parametrize("args", [None, [], "path", 3])
def test_validate_rejects_non_objects(args):
    with pytest.raises(ToolError, match="must be a JSON object"):
        validate_args("t", SCHEMA, args)


# -- registry ----------------------------------------------------------------------


def test_registry_has_every_tool_with_its_acp_kind():
    tools = build_tools()
    assert [type(t) for t in tools] == list(ACP_KINDS)
    assert len({t.name for t in tools}) == len(tools)
    for tool in tools:
        assert (tool.kind, tool.category) == ACP_KINDS[type(tool)], tool.name
        assert tool.description
        schema = tool.definition()["input_schema"]
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False
        assert set(schema["required"]) <= set(schema["properties"])


def test_build_tools_gives_fresh_instances():
    first, second = build_tools(), build_tools()
    assert all(a is not b for a, b in zip(first, second, strict=True))


async def test_every_tool_rejects_unknown_fields(tool_ctx: ToolContext):
    for tool in build_tools():
        with pytest.raises(ToolError, match="unknown field 'nonsense'"):
            await tool.run({"nonsense": 1}, tool_ctx)


async def test_every_tool_with_required_fields_reports_them(tool_ctx: ToolContext):
    for tool in build_tools():
        required = tool.input_schema["required"]
        if not required:
            continue
        with pytest.raises(ToolError) as err:
            await tool.run({}, tool_ctx)
        for name in required:
            assert f"missing required field '{name}'" in str(err.value), tool.name


def test_titles_paths_and_previews_never_crash_on_bad_input(tool_ctx: ToolContext):
    searched_by_default = (ListFilesTool, GlobTool, GrepTool)
    for tool in build_tools():
        expected = [tool_ctx.cwd] if isinstance(tool, searched_by_default) else []
        assert tool.paths({}, tool_ctx) == expected, tool.name
        for args in ({}, {"path": 3, "command": None}, {"path": ""}):
            assert tool.title(args).startswith(tool.name)
            if args:
                assert tool.paths(args, tool_ctx) == [], tool.name
            assert tool.gate_reason(args, tool_ctx)[0] is False
            shown = [str(path) for path in tool.paths(args, tool_ctx)]
            assert [loc.path for loc in tool.locations(args, tool_ctx, None)] == shown
            try:
                tool.preview(args, tool_ctx)
            except ToolError:
                pass


# -- what fronts show of a call: each tool's own -----------------------------------------


def test_tools_say_where_a_call_is_and_what_it_found(tool_ctx: ToolContext):
    cwd = tool_ctx.cwd
    path = str(cwd / "a.txt")
    read = ReadFileTool()
    assert read.locations({"path": "a.txt", "offset": 7}, tool_ctx, None) == [Location(path, 7)]
    assert read.locations({"path": "a.txt"}, tool_ctx, None) == [Location(path, 1)]
    edit = Diff(path, "a\nb\nc\n", "a\nB\nc\n")
    assert EditFileTool().locations({"path": "a.txt"}, tool_ctx, edit) == [Location(path, 2)]
    assert ListFilesTool().locations({}, tool_ctx, None) == [Location(str(cwd), None)]
    assert Diff(path, None, "new\n").first_changed_line() == 1
    assert Diff(path, "a\n", "a\nb\n").first_changed_line() == 2
    output = "a.txt:3:needle\na.txt-4-context\n--\nsub/b.tf:10:needle\na.txt:3:needle again"
    found = GrepTool().result_locations(output, cwd)
    assert found == [Location(path, 3), Location(str(cwd / "sub" / "b.tf"), 10)]
    assert GrepTool().result_locations("No matches found.", cwd) == []
    assert read.result_locations(output, cwd) == []  # only grep reads places in its output


def test_only_update_plan_sets_a_checklist_and_only_edits_have_stored_diffs():
    steps = [{"step": "plan", "status": "in_progress"}]
    shown = [{"step": "plan", "status": "in_progress", "priority": "medium"}]
    assert UpdatePlanTool().checklist({"steps": steps}) == shown
    assert UpdatePlanTool().checklist({"steps": "not a list"}) is None
    others = [t for t in build_tools() if not isinstance(t, UpdatePlanTool)]
    assert all(t.checklist({"steps": steps}) is None for t in others)
    assert WriteFileTool().stored_diff({"path": "a", "content": "x"}) == Diff("a", None, "x")
    edit = {"path": "a", "old_string": "o", "new_string": "n"}
    assert EditFileTool().stored_diff(edit) == Diff("a", "o", "n")
    assert ReadFileTool().stored_diff({"path": "a", "content": "x"}) is None
    assert ReadFileTool().title({"path": "main.tf"}) == f"{ReadFileTool.name}: main.tf"


async def test_a_tools_own_flags_decide_its_terraform_notes(tmp_path: Path, monkeypatch):
    """A result that can show file contents says when the sensitive-value scan stopped
    early, and a ``.tfstate`` it names makes it a state read; a listing does neither."""
    from iac_kernel.tools import tf_masking
    from iac_kernel.tools.base import ToolResult

    monkeypatch.setattr(tf_masking, "limit_note", lambda cwd: "[scan stopped]")
    (tmp_path / "x.tfstate").write_text("{}")
    args = {"path": "x.tfstate"}
    read = await tf_masking.after_tool_call(ReadFileTool(), args, tmp_path, ToolResult("{}"))
    assert read.content.startswith("[scan stopped]\n[Terraform state/plan data: 0 ")
    assert read.raw_output == {"terraform_state": {"masked": 0}}
    listed = ToolResult("x.tfstate")
    listed = await tf_masking.after_tool_call(ListFilesTool(), args, tmp_path, listed)
    assert listed.content == "x.tfstate" and listed.raw_output is None
