"""The model's ``update_plan`` checklist in a notebook cell, in headless Chromium
(JupyterLab and Notebook 7): one task list per turn, updated in place, a checked box per
completed step, the running step in bold with "(in progress)", the pending ones unchecked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from browser.jupyter import BROWSER_MARKS, write_notebook
from browser.lab import our_errors, run_prompt, server_env, wait_kernel_idle

pytestmark = BROWSER_MARKS

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "scripts" / "browser_checklist.json"


@pytest.mark.parametrize("app", ["jupyterlab", "notebook"])
def test_the_plan_shows_as_a_checklist(
    jupyter, tmp_path: Path, screenshots: Path, page, app: str
) -> None:
    from playwright.sync_api import expect

    server = jupyter(app, server_env(tmp_path, SCRIPT))
    write_notebook(server.root / "plan.ipynb")
    page.goto(server.notebook_url("plan.ipynb"))
    try:
        wait_kernel_idle(page)
        run_prompt(page, "Keep a checklist while you work")
        cell = page.locator(".jp-Notebook .jp-Cell").first
        expect(cell).to_contain_text("Working through the checklist.")
        # One checklist, updated in place by the second update_plan call.
        checklist = cell.locator(".jp-RenderedMarkdown", has_text="Plan (")
        expect(checklist).to_have_count(1)
        expect(checklist).to_contain_text("Plan (1 of 3 done)")
        items = checklist.locator("li")
        expect(items).to_have_count(3)
        boxes = checklist.locator("input[type=checkbox]")
        expect(boxes).to_have_count(3)
        assert [boxes.nth(i).is_checked() for i in range(3)] == [True, False, False]
        expect(items.nth(0)).to_have_text("Read main.tf")
        running = items.nth(1).locator("strong")
        expect(running).to_have_text("Run terraform plan")
        expect(items.nth(1)).to_contain_text("(in progress)")
        expect(items.nth(2)).to_have_text("Summarize the plan")
        page.screenshot(path=str(screenshots / f"browser-checklist-{app}.png"))
    except Exception:
        page.screenshot(path=str(screenshots / f"browser-checklist-{app}-failure.png"))
        print(server.log_tail())
        raise
    assert our_errors(page) == []
