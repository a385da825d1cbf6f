"""Path rules, argument validation and the registry, shared by every tool."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from iac_kernel.tools.base import Category, ToolContext, ToolError
from iac_kernel.tools.paths import display_path, is_inside, resolve_path
from iac_kernel.tools.registry import build_tools
from iac_kernel.tools.validate import validate_args

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
    "read_file": ("read", Category.READ),
    "list_files": ("read", Category.READ),
    "glob": ("search", Category.READ),
    "grep": ("search", Category.READ),
    "write_file": ("edit", Category.WRITE),
    "edit_file": ("edit", Category.WRITE),
    "bash": ("execute", Category.EXECUTE),
    "agent": ("execute", Category.EXECUTE),
    "web_fetch": ("fetch", Category.READ),
    "terraform_plan": ("execute", Category.EXECUTE),
    "terraform_plan_detail": ("read", Category.READ),
    "terraform_apply": ("execute", Category.EXECUTE),
    "update_plan": ("think", Category.READ),
    "ask_user": ("think", Category.READ),
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
    names = [t.name for t in tools]
    assert sorted(names) == sorted(ACP_KINDS)
    for tool in tools:
        assert (tool.kind, tool.category) == ACP_KINDS[tool.name], tool.name
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
    searched_by_default = {"list_files", "glob", "grep"}
    for tool in build_tools():
        expected = [tool_ctx.cwd] if tool.name in searched_by_default else []
        assert tool.paths({}, tool_ctx) == expected, tool.name
        for args in ({}, {"path": 3, "command": None}, {"path": ""}):
            assert tool.title(args).startswith(tool.name)
            if args:
                assert tool.paths(args, tool_ctx) == [], tool.name
            assert tool.is_dangerous(args) is False
            try:
                tool.preview(args, tool_ctx)
            except ToolError:
                pass
