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


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_repository_path_named_exists(doc: Path) -> None:
    paths = repo_paths(doc.read_text())
    if doc == REPO / "README.md":
        assert {"notebooks/01-quickstart.ipynb", "docs/protocol.md"} <= paths
    missing = sorted(p for p in paths if not (REPO / p).exists())
    assert not missing, f"{doc.name} names paths that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_links_stay_in_the_repository(doc: Path) -> None:
    for target in re.findall(r"\]\(([^)]+)\)", doc.read_text()):
        if target.startswith(("http://", "https://", "#")):
            continue
        resolved = (doc.parent / target.split("#")[0]).resolve()
        assert resolved.is_relative_to(REPO), f"{doc.name} links outside the repository: {target}"
        assert resolved.exists(), f"{doc.name} links to a missing file: {target}"


def heading_anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings (``## The turn's footer`` ->
    ``the-turns-footer``); fenced code is not a heading."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    headings = re.findall(r"(?m)^#{1,6} (.+?)\s*$", text)
    return {re.sub(r"[^\w\- ]", "", h.replace("`", "").lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_link_anchors_name_a_heading(doc: Path) -> None:
    for target in re.findall(r"\]\(([^)]+)\)", doc.read_text()):
        if target.startswith(("http://", "https://")) or "#" not in target:
            continue
        page, anchor = target.split("#", 1)
        text = (doc.parent / page).read_text() if page else doc.read_text()
        assert anchor in heading_anchors(text), f"{doc.name}: no heading for {target}"


def test_the_anchor_check_catches_a_wrong_anchor() -> None:
    page = "# Safety\n\n## Permissions and modes\n\n### Guarded execution (bash sandbox)\n"
    assert heading_anchors(page) == {
        "safety", "permissions-and-modes", "guarded-execution-bash-sandbox"
    }  # fmt: skip
    assert "guarded-execution" not in heading_anchors(page)


def test_docs_has_an_index_of_its_pages() -> None:
    """docs/README.md lists every page of docs/ once, as a link on a line of its own."""
    index = (REPO / "docs" / "README.md").read_text()
    pages = sorted(p.name for p in (REPO / "docs").glob("*.md") if p.name != "README.md")
    listed = re.findall(r"(?m)^\| \[[^\]]+\]\(([^)#]+)\) \| .+ \|$", index)
    assert sorted(listed) == pages


def test_what_the_plan_card_says_about_checkov_points_to_its_install() -> None:
    """The card's "checkov is not installed (see PAGE, SECTION)" names a page that has
    that section (a heading or a bold list item) and says how to install checkov."""
    from iac_kernel.terraform import policy

    page, section = policy.INSTALL_DOC
    assert f"see {page}, {section}" in policy.NOT_INSTALLED
    text = (REPO / page).read_text()
    found = re.search(rf"(?m)^(#+ |- \*\*){re.escape(section)}\b.*", text)
    assert found is not None, f"{page} has no section {section!r}"
    assert "pip install checkov" in text[found.start() :].split("\n## ", 1)[0]


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


def test_ci_installs_into_a_new_environment_each_run() -> None:
    """A CI run sees what a new machine sees: its own virtualenv (pip resolves today's
    releases), the suite shuffled, then the lowest declared versions (.ci/lowest)."""
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    venv = next(i for i, line in enumerate(ci) if line.startswith("python -m venv "))
    activate = next(i for i, line in enumerate(ci) if line.startswith(". ") and "activate" in line)
    install = ci.index(TOP_COMMANDS[0])
    assert venv < activate < install and "mktemp -d" in " ".join(ci[:venv])
    assert any("-p randomly" in line for line in ci[: install + 40])
    assert any(line.startswith("bash .ci/lowest") for line in ci)
    lowest = (REPO / ".ci" / "lowest").read_text()
    assert "--resolution lowest-direct pyproject.toml --extra test" in lowest
    assert "python -m venv" in lowest and "tests/test_acp_prompt.py" in lowest


def test_the_user_install_line_names_a_real_extra() -> None:
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    names = {re.split(r"[<>=!~\[ ]", d, maxsplit=1)[0] for d in extras["lab"]}
    assert {"jupyterlab", "nbconvert", "papermill"} <= names
    assert "iac-kernel[lab]" in extras["test"]
    assert any(d.startswith("pytest-randomly") for d in extras["test"])
    readme = (REPO / "README.md").read_text()
    assert 'pip install ".[lab]"' in readme
    # Not on PyPI: the README says so rather than give a line an index cannot answer.
    assert "not published on PyPI" in readme and 'pip install "iac-kernel[lab]"' not in readme


def test_the_readme_screenshot_is_a_small_png() -> None:
    """docs/img/lab-permission.png is made by tests/test_browser_lab.py (when
    ``python docs/img/make.py`` asks it to) and committed small."""
    shot = REPO / "docs" / "img" / "lab-permission.png"
    assert "](docs/img/lab-permission.png)" in (REPO / "README.md").read_text()
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) < 150_000


def test_the_readme_starts_with_the_user() -> None:
    """The two commands first, then what it is, a picture, install, a real model, the
    notebook, editors, the safety model and troubleshooting, in that order."""
    readme = (REPO / "README.md").read_text()
    headings = re.findall(r"(?m)^## (.+)$", readme)
    assert headings[:7] == ["What it is", "Install", "Use it with a real model",
                            "The notebook", "Editors", "The safety model",
                            "Troubleshooting"]  # fmt: skip
    assert readme.index("```bash") < readme.index("## What it is") < readme.index("![")
    for trouble in ("bubblewrap", "Node.js", "launcher", "kernelspec", "Credentials"):
        assert trouble in readme.split("## Troubleshooting", 1)[1]
    # Implementation notes live in docs/, not here.
    for note in ("IOPub", "bytecode", "PYDANTIC_DISABLE_PLUGINS"):
        assert note not in readme
