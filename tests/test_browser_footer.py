"""The per-turn footer in a real browser (headless Chromium, JupyterLab): it renders
under the turn with the model, tokens and time; the command's copy button puts the
command on the clipboard, and a table in the agent's text copies as tab-separated text;
the fold button hides the turn's cards and shows them again; an
output the reader watched live folds when the next card of the turn starts.

Waits are for conditions on the page, never a sleep followed by an assertion.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from browser.jupyter import BROWSER_MARKS, write_notebook
from browser.lab import our_errors, run_prompt, server_env, wait_kernel_idle

pytestmark = BROWSER_MARKS

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "scripts" / "browser_footer.json"


@pytest.fixture
def page(page) -> object:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    return page


def test_footer_renders_and_copy_and_fold_work(
    jupyter, tmp_path: Path, screenshots: Path, page
) -> None:
    from playwright.sync_api import expect

    server = jupyter("jupyterlab", server_env(tmp_path, SCRIPT))
    write_notebook(server.root / "footer.ipynb")
    page.goto(server.notebook_url("footer.ipynb"))
    try:
        wait_kernel_idle(page)
        run_prompt(page, "Please say hello")
        cell = page.locator(".jp-Notebook .jp-Cell").first
        cell.get_by_role("button", name="Allow once").click()  # bash asks in default mode
        footer = cell.locator(".iac-turn-footer")
        expect(footer).to_contain_text("scripted")
        expect(footer).to_contain_text("(75% cached)")
        expect(footer).to_contain_text(" out · ")
        expect(footer).to_contain_text(" s")
        # No cost: the scripted model has no list price (tests/test_prices.py).
        expect(footer).not_to_contain_text("$")

        card = cell.locator(".iac-toolcard-widget")
        expect(card).to_have_count(1)
        expect(card).to_have_attribute("data-status", "done")
        card.locator(".iac-toolcard-input > summary").click()
        copy = card.get_by_role("button", name="Copy the command")
        copy.click()
        expect(copy).to_have_text("Copied")
        assert page.evaluate("navigator.clipboard.readText()") == "echo hello-footer"
        output_copy = card.get_by_role("button", name="Copy the output (as shown)")
        output_copy.click()
        expect(output_copy).to_have_text("Copied")
        assert "hello-footer" in page.evaluate("navigator.clipboard.readText()")

        fold = footer.get_by_role("button", name="Fold cards")
        fold.click()
        expect(card).to_be_hidden()
        expect(cell.get_by_text("It printed hello.")).to_be_visible()
        unfold = footer.locator(".iac-turn-fold")
        expect(unfold).to_have_text("Show cards (1)")
        expect(unfold).to_have_attribute("aria-pressed", "true")
        page.screenshot(path=str(screenshots / "browser-footer-folded.png"))
        unfold.click()
        expect(card).to_be_visible()

        # Output the reader watched live stays open after its command ends, and folds
        # when the next card of the turn starts.
        run_prompt(page, "watch then read", cell=1)
        second = page.locator(".jp-Notebook .jp-Cell").nth(1)
        watched = second.locator(".iac-toolcard[data-kind='execute']")
        second.get_by_role("button", name="Allow once").click()
        expect(watched.locator(".iac-toolcard-output-text")).to_contain_text("line 1")
        expect(second).to_contain_text("Both done.")
        expect(second.locator(".iac-toolcard-widget")).to_have_count(2)
        expect(watched.locator("details.iac-toolcard-output")).not_to_have_attribute("open", "")

        # A Markdown table in the answer gets a copy button: tab-separated cells.
        run_prompt(page, "compare the buckets", cell=2)
        third = page.locator(".jp-Notebook .jp-Cell").nth(2)
        expect(third.locator(".iac-turn-footer")).to_be_visible()
        table = third.locator(".jp-RenderedMarkdown table")
        expect(table).to_have_count(1)
        copy_table = third.get_by_role("button", name="Copy the table (tab-separated)")
        expect(copy_table).to_have_count(1)
        table.hover()
        copy_table.click()
        expect(copy_table).to_have_text("Copied")
        assert page.evaluate("navigator.clipboard.readText()") == (
            "bucket\tregion\tversioning\nlogs\teu-west-1\ton\nassets\tus-east-1\toff"
        )
        # One button a table, however often the output re-renders.
        expect(page.locator(".iac-table-copyable .iac-table-copyable")).to_have_count(0)
        page.screenshot(path=str(screenshots / "browser-table-copy.png"))
    except Exception:
        page.screenshot(path=str(screenshots / "browser-footer-failure.png"))
        print(server.log_tail())
        raise
    assert our_errors(page) == []
