"""Issue 33: a reload without a save keeps the call; outcome words say what happened.

Headless Chromium, JupyterLab and Notebook 7, each in the Light, Dark and Dark High
Contrast themes (one page per app, the theme switched in place and the cells run again
for each; the words and lines checked keep 4.5:1 contrast). A scripted model
runs ``terraform apply tfplan`` through bash; the guard reviews the saved plan (a
``terraform`` on PATH that prints a small ``show -json`` and, on apply, three lines a
second apart) and asks.

* Reload without a save while the apply's question waits: the cell has lost the card.
  Answered from the status item's dialog (the destroy's typed confirmation in it: Allow
  stays disabled until the workspace's name is typed), the apply runs and the cell gets
  the whole card back from the kernel (status comm ``call_card``): the card with its
  output lines and final status, the plan card of the question, and the record of the
  answer, above the closing text (before, only the closing text and the footer came).
* A rejected apply shows as rejected: the card says "Rejected" (not a red "Failed"), and
  the scripted model's denied branch plays (the result tells the model it was rejected).
* A ``terraform_plan`` question says what it runs, not "It runs a command or a sub-agent".
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from browser.apply import apply_env, apply_workspace
from browser.contrast import MINIMUM, contrast
from browser.jupyter import BROWSER_MARKS, Folder, write_notebook
from browser.lab import our_errors, wait_kernel_idle
from browser.themes import APPS, THEMES, reload_page, slug, switch_theme

pytestmark = BROWSER_MARKS

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "scripts" / "browser_reload.json"
GENERIC = "It runs a command or a sub-agent."


def _run_cell(page, index: int = 0) -> None:
    page.locator(".jp-Cell .jp-InputArea-editor .cm-content").nth(index).click()
    page.keyboard.press("Shift+Enter")


def _status_item(page, app: str):
    if app == "jupyterlab":
        return page.locator("#jp-main-statusbar .iac-status-item")
    return page.locator(".iac-status-toolbar").first


def _start(page, server: Folder, name: str, run: int, theme: str) -> None:
    """The notebook in ``theme``: loaded the first time (the same page and kernel for the
    next runs, whose cells run again), the theme switched in place."""
    if run == 1:
        page.goto(server.notebook_url(name))
        wait_kernel_idle(page)
    switch_theme(page, theme)


def _readable(theme: str, **locators) -> None:
    """Each locator's text keeps 4.5:1 contrast in ``theme``."""
    low = {what: round(contrast(loc), 2) for what, loc in locators.items()}
    low = {what: ratio for what, ratio in low.items() if ratio < MINIMUM}
    assert not low, f"{theme}: contrast below {MINIMUM}:1: {low}"


def _shot(page, folder: Path, name: str) -> None:
    page.screenshot(path=str(folder / f"browser-reload-{name}.png"), full_page=True)


@pytest.mark.parametrize("app", APPS)
def test_a_reload_without_a_save_gets_the_whole_card_back(
    jupyter, tmp_path: Path, screenshots: Path, page, app: str
) -> None:
    from playwright.sync_api import expect

    server = jupyter(app)
    apply_workspace(server.root)
    server.kernel_env(apply_env(tmp_path, server.root, SCRIPT))
    write_notebook(server.root / "apply.ipynb", "Please apply the plan")
    name = app
    try:
        for run, theme in enumerate(THEMES, start=1):
            name = f"{app}-{slug(theme)}"
            _start(page, server, "apply.ipynb", run, theme)
            _run_cell(page)
            cell = page.locator(".jp-Notebook .jp-Cell").first
            card = cell.locator(".iac-toolcard[data-kind='execute']")
            expect(card).to_have_attribute("data-status", "awaiting_permission")
            expect(cell.locator(".iac-plan-review")).to_be_visible()
            # The question's last display update (the card's question, with its typed
            # confirmation) came before the reload: the reload loses the card for sure.
            expect(card.locator(".iac-toolcard-form")).to_be_visible()

            reload_page(page, idle=False)
            cell = page.locator(".jp-Notebook .jp-Cell").first
            pending = _status_item(page, app).locator(".iac-status-pending")
            expect(pending).to_have_text(re.compile(r"1 awaiting permission"))
            # Nothing was saved: the cell has no card now.
            expect(cell.locator(".iac-toolcard")).to_have_count(0)

            _status_item(page, app).click()
            dialog = page.locator(".jp-Dialog")
            expect(dialog).to_contain_text("terraform apply")
            # A destroy: the dialog asks for the typed workspace name (focused), and
            # its Allow stays disabled until the name matches.
            field = dialog.get_by_label("Workspace name")
            expect(field).to_be_focused()
            allow = dialog.get_by_role("button", name="Allow once")
            expect(allow).to_be_disabled()
            field.fill("defaul")
            field.press("Enter")
            expect(allow).to_be_disabled()
            expect(pending).to_have_text(re.compile(r"1 awaiting permission"))
            field.fill("default")
            allow.click()
            expect(pending).to_have_count(0)

            # The whole card came back into its cell, and went on updating there.
            card = cell.locator(".iac-toolcard[data-kind='execute']")
            expect(card).to_have_count(1)
            expect(card).to_have_attribute("data-status", "done")
            lines = card.locator(".iac-toolcard-output-text")
            expect(lines).to_contain_text("terraform_data.r[3]: Destroying...")
            expect(lines).to_contain_text("Apply complete! Resources: 9 added")
            expect(cell).to_contain_text("The plan is applied.")
            expect(cell).to_contain_text("Allowed once")
            expect(cell.locator(".iac-plan-review")).to_have_count(1)
            expect(cell.locator(".jupyter-widgets button")).to_have_count(0)
            # In the order the kernel made them: card, plan card, record, closing text.
            order = cell.locator(".jp-OutputArea-output").evaluate_all(
                """outs => outs.map(o => o.matches('.iac-toolcard, :has(.iac-toolcard)')
                    ? 'card'
                    : o.querySelector('.iac-plan-review') ? 'plan'
                    : /Allowed once/.test(o.textContent) ? 'record'
                    : /The plan is applied/.test(o.textContent) ? 'text' : 'other')"""
            )
            kept = [o for o in order if o != "other"]
            assert kept == ["card", "plan", "record", "text"], (theme, order)
            _readable(
                theme,
                status=card.locator(".iac-toolcard-status"),
                output=lines,
                record=cell.get_by_text("Allowed once"),
            )
            _shot(page, screenshots, f"restored-{name}")
    except Exception:
        _shot(page, screenshots, f"restored-{name}-failure")
        print(server.log_tail())
        raise
    assert our_errors(page) == []


@pytest.mark.parametrize("app", APPS)
def test_a_rejected_apply_is_rejected_and_a_plan_question_says_what_it_runs(
    jupyter, tmp_path: Path, screenshots: Path, page, app: str
) -> None:
    from playwright.sync_api import expect

    server = jupyter(app)
    apply_workspace(server.root)
    server.kernel_env(apply_env(tmp_path, server.root, SCRIPT))
    path = write_notebook(server.root / "reject.ipynb", "Please apply the plan")
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("Please make a plan"))
    nbformat.write(nb, path)
    name = app
    try:
        for run, theme in enumerate(THEMES, start=1):
            name = f"{app}-{slug(theme)}"
            _start(page, server, "reject.ipynb", run, theme)
            _run_cell(page)
            cell = page.locator(".jp-Notebook .jp-Cell").first
            card = cell.locator(".iac-toolcard[data-kind='execute']")
            expect(card).to_have_attribute("data-status", "awaiting_permission")
            cell.get_by_role("button", name="Reject once").click()
            expect(cell).to_contain_text("You rejected the apply, so nothing changed.")
            expect(card).to_have_attribute("data-status", "denied")
            status = card.locator(".iac-toolcard-status")
            expect(status).to_have_text("Rejected")
            assert "Failed" not in card.inner_text()
            assert "apply failed" not in cell.inner_text()
            _readable(theme, rejected=status)
            _shot(page, screenshots, f"rejected-apply-{name}")

            # A plan's question names the command and what it reads.
            _run_cell(page, 1)
            second = page.locator(".jp-Notebook .jp-Cell").nth(1)
            plan = second.locator(".iac-toolcard[data-kind='execute']")
            expect(plan).to_have_attribute("data-status", "awaiting_permission")
            why = plan.locator(".iac-toolcard-question-why")
            expect(why).to_contain_text("It runs `terraform plan -out=tfplan` in this folder")
            expect(why).to_contain_text("It changes no infrastructure")
            assert GENERIC not in why.inner_text()
            _readable(theme, why=why)
            second.get_by_role("button", name="Reject once").click()
            expect(second).to_contain_text("You rejected the plan, so none was made.")
            expect(plan.locator(".iac-toolcard-status")).to_have_text("Rejected")
    except Exception:
        _shot(page, screenshots, f"rejected-{name}-failure")
        print(server.log_tail())
        raise
    assert our_errors(page) == []
