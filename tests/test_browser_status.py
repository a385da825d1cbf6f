"""The agent's state, as the kernel knows it, in a real browser (headless Chromium):
JupyterLab's status bar item and Notebook 7's toolbar item say idle, running while the
model writes, and waiting for you while a question waits (the page title then carries a
marker); the question takes the focus when it arrives, is announced in an aria-live
region and is answered with the `r` key; then idle again. The tokens of the last turn
are there after the turn and after a reload (the status comm says them).

Waits are for conditions on the page, never a sleep followed by an assertion.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from browser.jupyter import BROWSER_MARKS, write_notebook
from browser.lab import our_errors, run_prompt, server_env, wait_kernel_idle

pytestmark = BROWSER_MARKS

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "scripts" / "browser_status.json"
FAKE_TERRAFORM = "#!/bin/sh\necho unlocked\n"
ITEM = {
    "jupyterlab": "#jp-main-statusbar .iac-status-item",
    "notebook": ".jp-NotebookPanel-toolbar .iac-status-item",
}


@pytest.mark.parametrize("app", ["jupyterlab", "notebook"])
def test_status_says_running_waiting_and_idle(
    jupyter, tmp_path: Path, screenshots: Path, page, app: str
) -> None:
    from playwright.sync_api import expect

    server = jupyter(app, server_env(tmp_path, SCRIPT))
    terraform = server.root / "bin" / "terraform"
    terraform.parent.mkdir()
    terraform.write_text(FAKE_TERRAFORM)
    terraform.chmod(0o755)
    write_notebook(server.root / "status.ipynb")
    page.goto(server.notebook_url("status.ipynb"))
    item = page.locator(ITEM[app])
    try:
        wait_kernel_idle(page)
        expect(item).to_have_attribute("data-state", "idle")

        run_prompt(page, "Please stream slowly")
        expect(item).to_have_attribute("data-state", "running")
        expect(item.locator(".iac-status-state")).to_have_text("running")
        expect(item).to_have_attribute("data-state", "idle")
        expect(item.locator(".iac-status-tokens")).to_contain_text("tokens")
        # The turn's tokens come over the status comm (the streamed answer's final
        # update carries no session info for a page that renders deltas).
        expect(item).to_have_attribute("title", re.compile(r"Tokens \(last turn\): [1-9]"))

        run_prompt(page, "Please release the lock", cell=1)
        expect(item).to_have_attribute("data-state", "waiting")
        expect(item.locator(".iac-status-state")).to_have_text("waiting for you")
        expect(page).to_have_title(re.compile(r"^\(1 waiting\) "))
        page.screenshot(path=str(screenshots / f"browser-status-{app}.png"))

        second = page.locator(".jp-Notebook .jp-Cell").nth(1)
        # The question took the focus (Reject first: it is destructive) and was
        # announced; the `r` key answers it.
        focused = second.locator(".iac-question button:focus")
        expect(focused).to_have_text("Reject once")
        announcer = page.locator("[aria-live='assertive'].iac-sr-only")
        expect(announcer).to_contain_text("Destructive question from the agent")
        expect(announcer).to_contain_text("force-unlock")
        page.keyboard.press("r")
        expect(second.locator(".iac-toolcard[data-kind='execute']")).to_have_attribute(
            "data-status", "denied"
        )
        expect(item).to_have_attribute("data-state", "idle")
        expect(page).not_to_have_title(re.compile(r"waiting"))
        # A reloaded page reads the same from the kernel, the last turn's tokens too.
        page.reload()
        wait_kernel_idle(page)
        expect(item).to_have_attribute("data-state", "idle")
        expect(item).to_have_attribute("title", re.compile(r"Tokens \(last turn\): [1-9]"))
    except Exception:
        page.screenshot(path=str(screenshots / f"browser-status-{app}-failure.png"))
        print(server.log_tail())
        raise
    assert our_errors(page) == []
