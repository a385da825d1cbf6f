"""A destroying apply's typed confirmation on the tool card, in headless Chromium.

A scripted model runs ``terraform apply tfplan`` through bash; the guard reviews the saved
plan (a fake ``terraform`` on PATH printing a plan that destroys) and the gate attaches a
typed confirmation: the workspace's name. In JupyterLab (the form read in the Light, Dark
and Dark High Contrast themes, switched in place while the question waits) and Notebook 7:

* the card shows the form: a labelled text field that has the focus, its hint, and an
  Allow button that stays disabled until the name is typed exactly; the buttons below the
  card only offer "Reject with note" (no way to approve without the name);
* Enter with a wrong name, and the `a` key on the card's question, do not approve, and the
  card says Allow stays disabled until the exact name (never that a wrong name rejects);
* the form's text is readable (contrast at least 4.5:1);
* the exact name and Enter approve: the apply runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from browser.apply import apply_env, apply_workspace
from browser.contrast import MINIMUM, contrast
from browser.jupyter import BROWSER_MARKS, write_notebook
from browser.lab import our_errors, run_prompt, server_env, wait_kernel_idle
from browser.themes import APPS, THEMES, slug, switch_theme

pytestmark = BROWSER_MARKS

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "scripts" / "browser_reload.json"
#: The themes each front end is read in (switched in place; Notebook 7 in its default).
FRONT_THEMES = {"jupyterlab": THEMES, "notebook": THEMES[:1]}


@pytest.mark.parametrize("app", APPS)
def test_a_destroy_needs_the_typed_workspace_name(
    jupyter, tmp_path: Path, screenshots: Path, page, app: str
) -> None:
    from playwright.sync_api import expect

    server = jupyter(app)
    apply_workspace(server.root)
    server.kernel_env(apply_env(tmp_path, server.root, SCRIPT))
    write_notebook(server.root / "form.ipynb")
    page.goto(server.notebook_url("form.ipynb"))
    name = app
    try:
        wait_kernel_idle(page)
        run_prompt(page, "Please apply the plan")
        cell = page.locator(".jp-Notebook .jp-Cell").first
        card = cell.locator(".iac-toolcard[data-kind='execute']")
        expect(card).to_have_attribute("data-status", "awaiting_permission")
        form = card.locator(".iac-toolcard-form")
        field = form.get_by_label("Workspace name")
        expect(field).to_be_visible()
        expect(field).to_be_focused()
        hint = field.get_attribute("placeholder") or ""
        assert hint.startswith("type ") and hint.endswith(" to approve"), hint
        workspace = hint[len("type ") : -len(" to approve")]
        allow = form.get_by_role("button", name="Allow once")
        expect(allow).to_be_disabled()
        # Below the card only "Reject with note": no approval without the name.
        widgets = cell.locator(".iac-question.widget-vbox")
        expect(widgets.get_by_role("button", name="Reject with note")).to_be_visible()
        expect(widgets.get_by_role("button")).to_have_count(1)

        # A wrong name and Enter, then `a` on the card's question: nothing approves.
        field.fill(workspace + "x")
        field.press("Enter")
        expect(allow).to_be_disabled()
        # The card says what a wrong name does (nothing), never that it rejects.
        locked = f"Allow once stays disabled until you type {workspace} exactly."
        expect(form.locator(".iac-form-status")).to_have_text(locked)
        assert "rejects" not in form.inner_text()
        form.get_by_role("button", name="Reject once").focus()
        page.keyboard.press("a")
        page.wait_for_timeout(300)
        expect(card).to_have_attribute("data-status", "awaiting_permission")

        field.fill(workspace[:-1])
        expect(allow).to_be_disabled()
        texts = {
            "label": form.locator(".iac-form-label"),
            "help": form.locator(".iac-form-help"),
            "status": form.locator(".iac-form-status"),
            "reject": form.get_by_role("button", name="Reject once"),
        }
        field.fill(workspace)
        expect(allow).to_be_enabled()
        texts["allow"] = allow
        texts["typed name"] = field
        for theme in FRONT_THEMES[app]:
            name = f"{app}-{slug(theme)}"
            switch_theme(page, theme)
            ratios = {what: contrast(node) for what, node in texts.items()}
            page.screenshot(path=str(screenshots / f"browser-form-{name}.png"))
            low = {what: round(r, 2) for what, r in ratios.items() if r < MINIMUM}
            assert not low, f"{theme}: contrast below {MINIMUM}:1: {low}"
        expect(allow).to_be_enabled()  # the typed name is still there

        field.press("Enter")
        expect(card).to_have_attribute("data-status", "done")
        expect(cell).to_contain_text("The plan is applied.")
        expect(cell).to_contain_text("Allowed once")
    except Exception:
        page.screenshot(path=str(screenshots / f"browser-form-{name}-failure.png"))
        print(server.log_tail())
        raise
    assert our_errors(page) == []


def test_the_agents_question_is_a_form_on_the_card(
    jupyter, tmp_path: Path, screenshots: Path, page
) -> None:
    """ask_user with all four field kinds: labelled controls on the card, Answer disabled
    until the required fields are filled, the values reach the model."""
    from playwright.sync_api import expect

    script = REPO / "tests" / "scripts" / "browser_ask.json"
    server = jupyter("jupyterlab", server_env(tmp_path, script))
    write_notebook(server.root / "ask.ipynb")
    page.goto(server.notebook_url("ask.ipynb"))
    try:
        wait_kernel_idle(page)
        run_prompt(page, "Please ask me about the bucket")
        cell = page.locator(".jp-Notebook .jp-Cell").first
        form = cell.locator(".iac-toolcard-form")
        expect(form).to_contain_text("How should I set up the bucket?")
        expect(cell.locator(".iac-toolcard-question-title")).to_have_text("The agent asks you")
        answer = form.get_by_role("button", name="Answer")
        expect(answer).to_be_disabled()
        form.get_by_label("Region").select_option("us-east-1")
        form.get_by_label("Versioning").check()
        form.get_by_label("Retention days").fill("30")
        expect(answer).to_be_disabled()  # the bucket name is still missing
        form.get_by_label("Bucket name").fill("logs")
        expect(answer).to_be_enabled()
        page.screenshot(path=str(screenshots / "browser-form-question.png"))
        answer.click()
        card = cell.locator(".iac-toolcard").first
        expect(card).to_have_attribute("data-status", "done")
        expect(cell).to_contain_text("Thanks for the answers.")
        output = cell.locator(".iac-toolcard-output-text").first
        expect(output).to_contain_text('"region": "us-east-1"')
        expect(output).to_contain_text('"versioning": true')
        expect(output).to_contain_text('"days": 30')
        expect(output).to_contain_text('"bucket": "logs"')
    except Exception:
        page.screenshot(path=str(screenshots / "browser-form-question-failure.png"))
        print(server.log_tail())
        raise
    assert our_errors(page) == []
