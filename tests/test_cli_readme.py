"""The README and docs/ stay true: every repository path they name exists, links stay in
the repository, the settings table is the code's, and CI runs the README's two commands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from iac_kernel.config import settings_table

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
TOP_COMMANDS = ['pip install -e ".[test]" && iac-kernel demo', "python -m pytest"]
#: Folders a README path may start with; anything else is not a path of this repository.
ROOTS = ("notebooks/", "iac_kernel/", "docs/", "tests/", "bench/", "labextension/", ".ci/")
#: Made by a command the text describes (not shipped).
GENERATED = ("iac-kernel-demo/",)


def code_spans(text: str) -> list[str]:
    return re.findall(r"`([^`\n]+)`", text)


def repo_paths(text: str) -> set[str]:
    """Repository paths named in code spans, commands and links."""
    found = set()
    words = [w for span in code_spans(text) for w in span.split()]
    words += re.findall(r"\]\(([^)]+)\)", text)
    words += [w for block in re.findall(r"```\w*\n(.*?)```", text, re.S) for w in block.split()]
    for word in words:
        word = word.strip("'\",.;:()")
        if word.startswith(ROOTS) and not word.startswith(GENERATED) and "<" not in word:
            found.add(word.split("#")[0])
    return found


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_repository_path_named_exists(doc: Path) -> None:
    paths = repo_paths(doc.read_text())
    if doc.name == "README.md":
        assert {"notebooks/01-quickstart.ipynb", "docs/protocol.md"} <= paths
    missing = sorted(p for p in paths if not (REPO / p).exists())
    assert not missing, f"{doc.name} names paths that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_links_stay_in_the_repository(doc: Path) -> None:
    for target in re.findall(r"\]\(([^)]+)\)", doc.read_text()):
        if target.startswith(("http://", "https://", "#")):
            continue
        resolved = (doc.parent / target.split("#")[0]).resolve()
        assert resolved.is_relative_to(REPO), f"{doc.name} links outside the repository: {target}"
        assert resolved.exists(), f"{doc.name} links to a missing file: {target}"


def test_the_path_check_catches_a_wrong_path() -> None:
    text = "run `notebooks/quickstart.ipynb`, see [the surface](../shared/ACP-SURFACE.md)"
    assert repo_paths(text) == {"notebooks/quickstart.ipynb"}
    assert not (REPO / "notebooks/quickstart.ipynb").exists()


def test_readme_starts_with_the_two_commands_and_ci_runs_exactly_them() -> None:
    readme = (REPO / "README.md").read_text()
    first_block = re.search(r"```bash\n(.*?)```", readme, re.S)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert commands == TOP_COMMANDS
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    for command in TOP_COMMANDS:
        assert command in ci  # a line of its own, exactly as in the README


def test_docs_settings_table_is_the_codes() -> None:
    text = (REPO / "docs" / "settings.md").read_text()
    assert settings_table() in text
