"""The JupyterLab extension in a real browser: headless Debian Chromium through Playwright.

JupyterLab (and Notebook 7) run on 127.0.0.1 with the real kernel and the scripted
model. The Lab test types a prompt, sees the answer stream in, sees the extension's tool
cards (its own DOM, not the kernel's HTML fallback), answers the permission buttons with
"Allow once" and checks the file on disk. Screenshots go to the test's temporary folder;
with IAC_DOC_PICTURES set (``python docs/img/make.py``) the Lab test also draws the
README's picture, docs/img/lab-permission.png.

Marked ``browser``; skipped only when /usr/bin/chromium is missing (CI installs it).
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

from browser.jupyter import BROWSER_MARKS, write_notebook
from browser.lab import (
    SESSION_MIME,
    WAIT_MS,
    our_errors,
    run_prompt,
    server_env,
    wait_kernel_idle,
)
from browser.pictures import doc_picture

pytestmark = BROWSER_MARKS

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "scripts" / "browser_lab.json"
#: The README's picture (docs/img), drawn only when asked (browser/pictures.py);
#: tests/test_cli_readme.py checks it stays small.
README_PICTURE = "lab-permission.png"

MAIN_TF = """resource "aws_s3_bucket" "logs" {
  bucket = "acme-logs"

  tags = {
    env = "prod"
  }
}
"""
PROMPT = "Tag the bucket in main.tf with its owner"


def expected_hunks() -> list[str]:
    """The hunk headers `diff -u` gives for the script's write_file over MAIN_TF."""
    script = json.loads(SCRIPT.read_text())
    new_text = script["exchanges"][0]["turns"][1]["tool_use"][0]["input"]["content"]
    lines = difflib.unified_diff(MAIN_TF.splitlines(), new_text.splitlines(), lineterm="")
    return [line for line in lines if line.startswith("@@")]


def session_info_wired() -> bool:
    """Whether the kernel publishes session info (model, mode, tokens) for the status bar."""
    import iac_kernel.kernel

    package = Path(iac_kernel.kernel.__file__).parent
    return any(SESSION_MIME in path.read_text() for path in package.rglob("*.py"))


def test_lab_streams_renders_cards_and_allows_a_write(
    jupyter, tmp_path: Path, screenshots: Path, page
) -> None:
    from playwright.sync_api import expect

    # The README's picture shows the folder's name.
    server = jupyter("jupyterlab", server_env(tmp_path, SCRIPT), name="infra")
    (server.root / "main.tf").write_text(MAIN_TF)
    write_notebook(server.root / "agent.ipynb")
    page.goto(server.notebook_url("agent.ipynb"))
    try:
        wait_kernel_idle(page)
        run_prompt(page, PROMPT)

        cell = page.locator(".jp-Notebook .jp-Cell").first
        read_card = cell.locator(".iac-toolcard[data-kind='read']")
        write_card = cell.locator(".iac-toolcard[data-kind='edit']")

        # The turn stops at the permission request: the answer so far is on screen
        # while the cell still runs, so it was streamed, not sent at the end.
        expect(write_card).to_have_attribute("data-status", "awaiting_permission")
        expect(cell.locator(".jp-InputPrompt")).to_contain_text("[*]")
        expect(cell).to_contain_text("Let me read the Terraform first.")
        expect(cell).to_contain_text("The bucket has no owner tag")

        # The extension's renderer, not the kernel's text/html fallback.
        expect(read_card).to_have_attribute("data-status", "done")
        expect(read_card.locator(".iac-toolcard-title")).to_contain_text("main.tf")
        expect(read_card.locator(".iac-toolcard-output")).to_contain_text("acme-logs")
        assert cell.locator(".iac-toolcall").count() == 0

        # The diff view: a new line added to the existing tags, line numbers on both sides.
        added = write_card.locator("tr.iac-diff-insert .iac-diff-text")
        expect(added.filter(has_text='owner = "platform-team"')).to_have_count(1)
        expect(write_card.locator("tr.iac-diff-delete")).to_have_count(1)
        expect(write_card.locator(".iac-diff-hunk")).to_have_text(expected_hunks())
        expect(write_card.locator(".iac-toolcard-ask")).to_be_visible()

        # The status bar shows the pending request.
        pending = page.locator("#jp-main-statusbar .iac-status-pending")
        expect(pending).to_have_text(re.compile(r"1 awaiting permission"))
        picture = doc_picture(README_PICTURE)
        if picture is not None:
            expect(cell).not_to_contain_text("setting ignored")  # nothing stray in it
            size = page.viewport_size
            page.set_viewport_size({"width": 1280, "height": 1100})
            cell.evaluate("e => e.scrollIntoView({block: 'start'})")
            page.screenshot(path=str(picture), scale="css")
            page.set_viewport_size(size)

        # Clicking the status bar item brings the waiting card into view and flashes it.
        page.locator("#jp-main-statusbar .iac-status-item").click()
        expect(write_card).to_have_class(re.compile(r"\biac-toolcard-flash\b"))

        # Open the card's Input section: it must stay open across the in-place update.
        input_section = write_card.locator("details.iac-toolcard-input")
        expect(input_section).not_to_have_attribute("open", "")
        input_section.locator("summary").click()
        expect(input_section).to_have_attribute("open", "")

        page.get_by_role("button", name="Allow once").scroll_into_view_if_needed()
        page.screenshot(path=str(screenshots / "browser-lab-permission.png"), full_page=True)

        page.get_by_role("button", name="Allow once").click()

        expect(write_card).to_have_attribute("data-status", "done", timeout=WAIT_MS)
        expect(cell).to_contain_text("now tags the bucket with its owner")
        expect(cell.locator(".jp-InputPrompt")).to_contain_text("[1]")
        expect(write_card.locator("details.iac-toolcard-input")).to_have_attribute("open", "")
        expect(write_card.locator(".iac-toolcard-status")).to_have_text("Done")
        expect(pending).to_have_count(0)
        assert cell.locator(".iac-toolcall").count() == 0

        status = page.locator("#jp-main-statusbar .iac-status-item")
        if session_info_wired():
            expect(status.locator(".iac-status-model")).to_contain_text("scripted")
            expect(status.locator(".iac-status-tokens")).to_contain_text("tokens")
        else:
            expect(status.locator(".iac-status-model")).to_have_text("iac-kernel")

        page.screenshot(path=str(screenshots / "browser-lab.png"), full_page=True)

        # A card's location opens the file in JupyterLab's editor.
        read_card.locator(".iac-toolcard-location").first.click()
        expect(page.locator(".jp-FileEditor .cm-content")).to_contain_text("acme-logs")
    except Exception:
        page.screenshot(path=str(screenshots / "browser-lab-failure.png"), full_page=True)
        print(server.log_tail())
        raise

    written = (server.root / "main.tf").read_text()
    assert 'owner = "platform-team"' in written
    assert 'resource "aws_s3_bucket_versioning" "logs"' in written
    assert our_errors(page) == []


def test_notebook7_renders_the_card(jupyter, tmp_path: Path, screenshots: Path, page) -> None:
    from playwright.sync_api import expect

    server = jupyter("notebook", server_env(tmp_path, SCRIPT))
    (server.root / "main.tf").write_text(MAIN_TF)
    write_notebook(server.root / "agent7.ipynb")
    page.goto(server.notebook_url("agent7.ipynb"))
    try:
        wait_kernel_idle(page)
        run_prompt(page, "What is in main.tf?")
        cell = page.locator(".jp-Notebook .jp-Cell").first
        card = cell.locator(".iac-toolcard[data-kind='read']")
        expect(card).to_have_attribute("data-status", "done")
        expect(cell).to_contain_text("It defines one S3 bucket")
        expect(cell.locator(".jp-InputPrompt")).to_contain_text("[1]")
        assert cell.locator(".iac-toolcall").count() == 0
        # Short output is shown open, and the section folds on click.
        output = card.locator("details.iac-toolcard-output")
        expect(output).to_have_attribute("open", "")
        output.locator("summary").click()
        expect(output).not_to_have_attribute("open", "")
        page.screenshot(path=str(screenshots / "browser-notebook7.png"), full_page=True)
    except Exception:
        page.screenshot(path=str(screenshots / "browser-notebook7-failure.png"), full_page=True)
        print(server.log_tail())
        raise
    assert our_errors(page) == []
