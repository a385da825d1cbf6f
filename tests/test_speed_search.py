"""grep and glob run ripgrep on every core and sort what they return themselves: the
output is the same on every run and in ripgrep's ``--sort=path`` order, also when it is
cut short (then ripgrep is run again sorted, so the kept part is deterministic)."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from iac_kernel.tools import glob as glob_mod
from iac_kernel.tools.base import ToolContext
from iac_kernel.tools.glob import GlobTool, name_prefilter
from iac_kernel.tools.grep import GrepTool, path_key
from iac_kernel.tools.rg import BASE_FLAGS, rg_binary

RUNS = 4


@pytest.fixture
def tree(tool_ctx: ToolContext) -> Path:
    """~600 files in nested folders whose names sort differently as strings and as
    paths ("a-b" vs "a/b"), so ordering mistakes show."""
    root = tool_ctx.cwd
    for top in ("a", "a-b", "a.b", "b", "Z"):
        for sub in range(12):
            folder = root / top / f"m{sub:02d}"
            folder.mkdir(parents=True)
            for n in range(10):
                text = f'resource "aws_s3_bucket" "b{n}" {{}}\n' if n % 3 == 0 else "x = 1\n"
                (folder / f"f{n}.tf").write_text(text + "variable v {}\n")
    (root / "a" / "top.tf").write_text('resource "aws_s3_bucket" "t" {}\n')
    return root


def sorted_rg(root: Path, *args: str) -> list[str]:
    """What ripgrep prints with --sort=path (its single-threaded, ordered mode)."""
    out = subprocess.run(
        [rg_binary(), *BASE_FLAGS, "--sort=path", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.splitlines()


async def test_grep_modes_are_deterministic_and_in_path_order(tool_ctx, tree):
    grep = GrepTool()
    for mode in ("files_with_matches", "count", "content"):
        args = {"pattern": "aws_s3_bucket", "output_mode": mode}
        results = {(await grep.run(args, tool_ctx)).content for _ in range(RUNS)}
        assert len(results) == 1, mode
    files = (await grep.run({"pattern": "aws_s3_bucket", "output_mode": "files_with_matches"},
                            tool_ctx)).content.splitlines()  # fmt: skip
    assert files == sorted_rg(tree, "--files-with-matches", "aws_s3_bucket")
    assert files == sorted(files, key=path_key) and len(files) == 5 * 12 * 4 + 1
    content = (await grep.run({"pattern": "aws_s3_bucket", "context": 1}, tool_ctx)).content
    expected = sorted_rg(tree, "--context=1", "--line-number", "--with-filename",
                         "--no-heading", "aws_s3_bucket")  # fmt: skip
    assert content.splitlines() == expected


async def test_truncated_grep_keeps_the_same_first_files(tool_ctx, tree):
    ctx = dataclasses.replace(
        tool_ctx, settings=dataclasses.replace(tool_ctx.settings, output_limit=1000)
    )
    grep = GrepTool()
    args = {"pattern": "variable", "output_mode": "content"}
    results = [(await grep.run(args, ctx)).content for _ in range(RUNS)]
    assert len(set(results)) == 1
    assert "[output truncated" in results[0]
    first = results[0].splitlines()[0]
    assert first == "Z/m00/f0.tf:2:variable v {}", first  # byte order: "Z" < "a"


async def test_glob_is_deterministic_and_sorted_also_when_cut_short(tool_ctx, tree, monkeypatch):
    globber = GlobTool()
    results = {(await globber.run({"pattern": "**/*.tf"}, tool_ctx)).content for _ in range(RUNS)}
    assert len(results) == 1
    listed = results.pop().splitlines()
    assert listed == sorted(listed) and len(listed) == 5 * 12 * 10 + 1
    # A listing cut short: rg runs again in sorted order, so the same files are kept.
    monkeypatch.setattr(glob_mod, "MAX_LIST_BYTES", 3000)
    cut = {(await globber.run({"pattern": "**/*.tf"}, tool_ctx)).content for _ in range(RUNS)}
    assert len(cut) == 1
    text = cut.pop()
    kept = [line for line in text.splitlines() if line.endswith(".tf")]
    prefix = sorted_rg(tree, "--files")[: len(kept) + 1]
    assert sorted(kept) == kept and set(kept) <= set(prefix)
    assert "+ files" in text


def test_name_prefilter_only_for_a_plain_last_segment():
    assert name_prefilter("**/*.tf") == ["--type-add=iacglob:*.tf", "--type=iacglob"]
    assert name_prefilter("modules/*/main.tf")[0] == "--type-add=iacglob:main.tf"
    for pattern in ("modules/**", "modules/", "a:b", "x/\\*"):
        assert name_prefilter(pattern) == [], pattern


async def test_exact_file_type_shortcut_agrees_with_the_glob_regex(tool_ctx, tree, monkeypatch):
    (tree / ".hidden.tf").write_text("x\n")
    (tree / "a" / "notes.tfvars").write_text("x\n")
    patterns = ["**/*.tf", "*.tf", "f1.tf", "*", "**", ".*", "*.tfvars", "**/**/f*.tf"]
    fast = {p: await glob_mod.matching_files(tree, p) for p in patterns}
    monkeypatch.setattr(glob_mod, "_type_is_exact", lambda pattern: False)
    for pattern in patterns:
        assert fast[pattern] == await glob_mod.matching_files(tree, pattern), pattern


# -- the fast listing (rg --glob) and the ignore rules it must not miss ------------------


@pytest.fixture
def no_global_git(tmp_path, monkeypatch) -> Path:
    """HOME and XDG_CONFIG_HOME of this test only (rg reads git's global excludes too)."""
    home = tmp_path / "home"
    (home / ".config" / "git").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    return home


def _ignore_tree(root: Path) -> None:
    for folder in ("a", "a/sub", "b", ".hidden", "skipped"):
        (root / folder).mkdir(parents=True, exist_ok=True)
        for name in ("main.tf", "secret.tf", "local.tf", "keep.tf", "notes.md"):
            (root / folder / name).write_text("x\n")


PATTERNS = ["**/*.tf", "*.tf", "main.tf", "a/*.tf", "**/sub/*.tf", "*.md", ".gitignore", "*"]
#: (file, rules): each scenario's ignore rules must give the same files both ways.
SCENARIOS = [
    [],
    [(".gitignore", "skipped/\n*.log\n")],  # folder rules only: the fast listing stays
    [(".gitignore", "secret.tf\n")],
    [("a/.gitignore", "/local.tf\n")],
    [("a/.ignore", "*.tf\n!keep.tf\n")],
    [(".rgignore", "b/main.tf\n")],
    [(".git/info/exclude", "keep.tf\n")],
    [("../.gitignore", "*.tf\n")],  # above the searched folder
    [("HOME/.config/git/ignore", "main.tf\n")],  # git's global excludes
    [("HOME/.gitconfig", "[core]\n\texcludesFile = ~/my-ignore\n"), ("HOME/my-ignore", "k*.tf\n")],
    [(".gitignore", "# comment\n\n  \n\\#odd.tf\n")],
    [(".gitignore", "odd.tf/\n"), ("odd.tf/main.tf", "x\n")],  # an ignored folder "*.tf"
    [(".gitignore", "*.tf/\n"), ("b/odd.tf/main.tf", "x\n")],
    [(".gitignore", "a/odd.tf/\n"), ("a/odd.tf/main.tf", "x\n")],
    [("b/.ignore", "odd.tf\n"), ("b/odd.tf/x/main.tf", "x\n")],
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=range(len(SCENARIOS)))
async def test_fast_listing_gives_the_exact_listing(tmp_path, no_global_git, monkeypatch, scenario):
    root = tmp_path / "ws" / "root"
    _ignore_tree(root)
    (root / ".git" / "info").mkdir(parents=True)
    for name, text in scenario:
        path = no_global_git / name[5:] if name.startswith("HOME/") else root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    fast = {p: await glob_mod.matching_files(root, p) for p in PATTERNS}
    used = await glob_mod._fast_listing(root, "**/*.tf")
    monkeypatch.setattr(glob_mod, "_fast_listing", _none)
    for pattern in PATTERNS:
        assert fast[pattern] == await glob_mod.matching_files(root, pattern), pattern
    # The fast listing is taken exactly when no rule can drop a listed .tf file.
    assert (used is not None) == (scenario in (SCENARIOS[0], SCENARIOS[1])), used


async def test_fast_listing_is_what_a_plain_tree_gets(tool_ctx, tree, no_global_git, monkeypatch):
    calls: list[list[str]] = []
    real = glob_mod.run_rg

    async def spy(args, cwd, max_bytes):
        calls.append(args)
        return await real(args, cwd, max_bytes)

    monkeypatch.setattr(glob_mod, "run_rg", spy)
    listed = (await GlobTool().run({"pattern": "**/*.tf"}, tool_ctx)).content.splitlines()
    assert len(listed) == 5 * 12 * 10 + 1 and listed == sorted(listed)
    assert len(calls) == 1 and "--glob=*.tf" in calls[0]


async def _none(*_args):
    return None
