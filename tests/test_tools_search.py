"""glob and grep: ripgrep-backed search that respects .gitignore."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from iac_kernel.tools import glob as glob_mod
from iac_kernel.tools.base import ToolContext, ToolError
from iac_kernel.tools.glob import GlobTool
from iac_kernel.tools.grep import GrepTool
from iac_kernel.tools.rg import rg_binary

globber = GlobTool()
grepper = GrepTool()


@pytest.fixture
def repo(tool_ctx: ToolContext) -> Path:
    root = tool_ctx.cwd
    files = {
        "main.tf": 'module "vpc" {\n  source = "./modules/vpc"\n  cidr   = "10.0.0.0/16"\n}\n',
        "variables.tf": 'variable "region" {\n  default = "eu-west-1"\n}\n',
        "modules/vpc/main.tf": (
            'resource "aws_vpc" "this" {\n  cidr_block = var.cidr\n}\n'
            'resource "aws_subnet" "a" {\n  vpc_id = aws_vpc.this.id\n}\n'
        ),
        "modules/vpc/variables.tf": 'variable "cidr" {}\n',
        "modules/eks/main.tf": 'resource "aws_eks_cluster" "this" {}\n',
        "ignored/secret.tf": 'resource "aws_vpc" "ignored" {}\n',
        "build.log": "aws_vpc noise\n",
        ".terraform/modules/vpc/main.tf": 'resource "aws_vpc" "cached" {}\n',
        ".github/workflows/plan.yml": "run: terraform plan # aws_vpc\n",
        ".gitignore": "ignored/\n*.log\n",
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_rg_is_found():
    assert Path(rg_binary()).is_file()


# -- glob --------------------------------------------------------------------------


async def test_glob_finds_sorted_files(tool_ctx: ToolContext, repo: Path):
    result = await globber.run({"pattern": "**/*.tf"}, tool_ctx)
    assert result.content.splitlines() == [
        "main.tf",
        "modules/eks/main.tf",
        "modules/vpc/main.tf",
        "modules/vpc/variables.tf",
        "variables.tf",
    ]


async def test_glob_respects_gitignore_and_skips_terraform_dir(tool_ctx: ToolContext, repo: Path):
    result = await globber.run({"pattern": "**/*"}, tool_ctx)
    listed = result.content.splitlines()
    assert "ignored/secret.tf" not in listed
    assert "build.log" not in listed
    assert not any(p.startswith(".terraform/") for p in listed)
    # Hidden but not ignored: CI workflows are found.
    assert ".github/workflows/plan.yml" in listed


async def test_glob_pattern_naming_ignored_files_still_skips_them(
    tool_ctx: ToolContext, repo: Path
):
    assert "No files match" in (await globber.run({"pattern": "*.log"}, tool_ctx)).content
    result = await globber.run({"pattern": "ignored/**"}, tool_ctx)
    assert "No files match" in result.content


async def test_glob_braces(tool_ctx: ToolContext, repo: Path):
    (repo / "prod.tfvars").write_text("")
    result = await globber.run({"pattern": "*.{tfvars,yml}"}, tool_ctx)
    assert result.content.splitlines() == [".github/workflows/plan.yml", "prod.tfvars"]


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("**/*.tf", "main.tf", True),
        ("**/*.tf", "a/b/main.tf", True),
        ("*.tf", "a/b/main.tf", True),
        ("*.tf", "a/main.tfvars", False),
        ("modules/*/main.tf", "modules/vpc/main.tf", True),
        ("modules/*/main.tf", "modules/a/b/main.tf", False),
        ("modules/*/main.tf", "x/modules/vpc/main.tf", False),
        ("a/**/b.tf", "a/b.tf", True),
        ("a/**/b.tf", "a/x/y/b.tf", True),
        ("modules/", "modules/vpc/main.tf", True),
        ("/main.tf", "a/main.tf", False),
        ("[!m]*.tf", "main.tf", False),
        ("ma?n.tf", "main.tf", True),
        ("env/{dev,prod}/*.tfvars", "env/prod/x.tfvars", True),
        ("env/{dev,prod}/*.tfvars", "env/test/x.tfvars", False),
    ],
)
def test_compile_glob(pattern: str, path: str, expected: bool):
    assert bool(glob_mod.compile_glob(pattern).match(path)) is expected


async def test_glob_with_directory_pattern(tool_ctx: ToolContext, repo: Path):
    result = await globber.run({"pattern": "modules/*/main.tf"}, tool_ctx)
    assert result.content.splitlines() == ["modules/eks/main.tf", "modules/vpc/main.tf"]


async def test_glob_in_subpath_gives_paths_from_cwd(tool_ctx: ToolContext, repo: Path):
    result = await globber.run({"pattern": "*.tf", "path": "modules/vpc"}, tool_ctx)
    assert result.content.splitlines() == ["modules/vpc/main.tf", "modules/vpc/variables.tf"]


async def test_glob_outside_cwd_gives_absolute_paths(tool_ctx: ToolContext, tmp_path: Path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.tf").write_text("")
    result = await globber.run({"pattern": "*.tf", "path": str(other)}, tool_ctx)
    assert result.content.splitlines() == [str(other / "x.tf")]


async def test_glob_no_match_is_not_an_error(tool_ctx: ToolContext, repo: Path):
    result = await globber.run({"pattern": "**/*.hcl"}, tool_ctx)
    assert not result.is_error
    assert "No files match" in result.content


async def test_glob_caps_results(
    tool_ctx: ToolContext, repo: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(glob_mod, "MAX_RESULTS", 2)
    result = await globber.run({"pattern": "**/*.tf"}, tool_ctx)
    assert result.content.splitlines()[:2] == ["main.tf", "modules/eks/main.tf"]
    assert "first 2 of 5 files" in result.content


async def test_glob_missing_or_file_path(tool_ctx: ToolContext, repo: Path):
    with pytest.raises(ToolError, match="directory not found"):
        await globber.run({"pattern": "*.tf", "path": "nope"}, tool_ctx)
    with pytest.raises(ToolError, match="not a directory"):
        await globber.run({"pattern": "*.tf", "path": "main.tf"}, tool_ctx)


async def test_glob_schema_error(tool_ctx: ToolContext):
    with pytest.raises(ToolError, match="'pattern' must be a string"):
        await globber.run({"pattern": ["*.tf"]}, tool_ctx)


def test_glob_title():
    assert globber.title({"pattern": "**/*.tf"}) == "glob: **/*.tf"
    assert globber.title({"pattern": "*.tf", "path": "modules"}) == "glob: *.tf in modules"


# -- grep --------------------------------------------------------------------------


async def test_grep_content_has_paths_and_line_numbers(tool_ctx: ToolContext, repo: Path):
    result = await grepper.run({"pattern": r'resource "aws_vpc"'}, tool_ctx)
    assert result.content.splitlines() == ['modules/vpc/main.tf:1:resource "aws_vpc" "this" {']
    assert result.raw_output["matches"] == 1


async def test_grep_respects_gitignore_but_searches_hidden(tool_ctx: ToolContext, repo: Path):
    result = await grepper.run(
        {"pattern": "aws_vpc", "output_mode": "files_with_matches"}, tool_ctx
    )
    assert result.content.splitlines() == [".github/workflows/plan.yml", "modules/vpc/main.tf"]


async def test_grep_context_lines(tool_ctx: ToolContext, repo: Path):
    result = await grepper.run(
        {"pattern": "cidr_block|vpc_id", "path": "modules/vpc", "context": 1}, tool_ctx
    )
    assert result.content.splitlines() == [
        'modules/vpc/main.tf-1-resource "aws_vpc" "this" {',
        "modules/vpc/main.tf:2:  cidr_block = var.cidr",
        "modules/vpc/main.tf-3-}",
        'modules/vpc/main.tf-4-resource "aws_subnet" "a" {',
        "modules/vpc/main.tf:5:  vpc_id = aws_vpc.this.id",
        "modules/vpc/main.tf-6-}",
    ]


async def test_grep_separates_distant_groups(tool_ctx: ToolContext):
    (tool_ctx.cwd / "f.txt").write_text("hit\n" + "x\n" * 10 + "hit\n")
    result = await grepper.run({"pattern": "hit"}, tool_ctx)
    assert result.content.splitlines() == ["f.txt:1:hit", "--", "f.txt:12:hit"]


async def test_grep_count_mode(tool_ctx: ToolContext, repo: Path):
    result = await grepper.run(
        {"pattern": "^resource", "output_mode": "count", "glob": "*.tf"}, tool_ctx
    )
    assert result.content.splitlines() == ["modules/eks/main.tf:1", "modules/vpc/main.tf:2"]


async def test_grep_case_insensitive_and_glob_filter(tool_ctx: ToolContext, repo: Path):
    args = {"pattern": "AWS_VPC", "output_mode": "files_with_matches", "glob": "*.tf"}
    assert "No matches" in (await grepper.run(args, tool_ctx)).content
    result = await grepper.run({**args, "case_insensitive": True}, tool_ctx)
    assert result.content.splitlines() == ["modules/vpc/main.tf"]


async def test_grep_glob_never_reincludes_ignored_files(tool_ctx: ToolContext, repo: Path):
    # build.log is ignored by "*.log"; a glob naming it must not bring it back.
    result = await grepper.run({"pattern": "noise", "glob": "*.log"}, tool_ctx)
    assert result.content == "No matches found."
    result = await grepper.run({"pattern": "aws_vpc", "glob": "ignored/**"}, tool_ctx)
    assert "No files match" in result.content


async def test_grep_glob_with_directories(tool_ctx: ToolContext, repo: Path):
    result = await grepper.run(
        {"pattern": "resource", "glob": "modules/**/*.tf", "output_mode": "files_with_matches"},
        tool_ctx,
    )
    assert result.content.splitlines() == ["modules/eks/main.tf", "modules/vpc/main.tf"]


async def test_grep_negated_glob(tool_ctx: ToolContext, repo: Path):
    result = await grepper.run(
        {"pattern": "aws_vpc", "glob": "!*.yml", "output_mode": "files_with_matches"}, tool_ctx
    )
    assert result.content.splitlines() == ["modules/vpc/main.tf"]


async def test_grep_single_file(tool_ctx: ToolContext, repo: Path):
    result = await grepper.run({"pattern": "default", "path": "variables.tf"}, tool_ctx)
    assert result.content == 'variables.tf:2:  default = "eu-west-1"'


async def test_grep_pattern_starting_with_dash(tool_ctx: ToolContext):
    (tool_ctx.cwd / "Makefile").write_text("plan:\n\tterraform plan -var-file=prod.tfvars\n")
    result = await grepper.run({"pattern": "-var-file"}, tool_ctx)
    assert "Makefile:2:" in result.content


async def test_grep_no_matches_is_a_normal_result(tool_ctx: ToolContext, repo: Path):
    result = await grepper.run({"pattern": "google_compute_instance"}, tool_ctx)
    assert not result.is_error
    assert result.content == "No matches found."


async def test_grep_bad_regex_reports_rg_message(tool_ctx: ToolContext, repo: Path):
    with pytest.raises(ToolError) as err:
        await grepper.run({"pattern": "resource ("}, tool_ctx)
    assert "regex parse error" in str(err.value)
    assert "unclosed group" in str(err.value)


async def test_grep_huge_output_is_truncated(tool_ctx: ToolContext):
    ctx = dataclasses.replace(
        tool_ctx, settings=dataclasses.replace(tool_ctx.settings, output_limit=2000)
    )
    (ctx.cwd / "big.txt").write_text("match this line\n" * 50_000)
    result = await grepper.run({"pattern": "match"}, ctx)
    assert len(result.content) < 2500
    assert "output truncated" in result.content
    assert result.content.startswith("big.txt:1:match this line\nbig.txt:2:")


async def test_grep_missing_path(tool_ctx: ToolContext):
    with pytest.raises(ToolError, match="path not found: nope"):
        await grepper.run({"pattern": "x", "path": "nope"}, tool_ctx)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"pattern": "x", "output_mode": "lines"}, "'output_mode' must be one of"),
        ({"pattern": "x", "context": 99}, "'context' must be <= 20"),
        ({"pattern": "x", "case_insensitive": "yes"}, "'case_insensitive' must be a boolean"),
        ({"regex": "x"}, "missing required field 'pattern'"),
    ],
)
async def test_grep_schema_errors(tool_ctx: ToolContext, args: dict, message: str):
    with pytest.raises(ToolError, match=message):
        await grepper.run(args, tool_ctx)


def test_grep_title():
    assert grepper.title({"pattern": "aws_vpc", "path": "modules"}) == "grep: aws_vpc in modules"
