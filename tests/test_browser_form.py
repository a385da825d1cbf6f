"""A destroying apply's typed confirmation on the tool card, in headless Chromium.

A scripted model runs ``terraform apply tfplan`` through bash; the guard reviews the saved
plan (a fake ``terraform`` on PATH printing a plan that destroys) and the gate attaches a
typed confirmation: the workspace's name. In JupyterLab Light, Dark and Dark High
Contrast (and once in Notebook 7):

* the card shows the form: a labelled text field that has the focus, its hint, and an
  Allow button that stays disabled until the name is typed exactly; the buttons below the
  card only offer "Reject with note" (no way to approve without the name);
* Enter with a wrong name, and the `a` key on the card's question, do not approve;
* the form's text is readable (contrast at least 4.5:1);
* the exact name and Enter approve: the apply runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from browser.apply import apply_env, apply_workspace
from browser.contrast import CONTRAST, MINIMUM
from browser.jupyter import BROWSER_MARKS, jupyter_server, write_notebook
from browser.lab import our_errors, run_prompt, server_env, wait_kernel_idle

pytestmark = BROWSER_MARKS

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "scripts" / "browser_reload.json"
THEMES = ["JupyterLab Light", "JupyterLab Dark", "JupyterLab Dark High Contrast"]
CASES = [("jupyterlab", theme) for theme in THEMES] + [("notebook", "default")]


def _theme(tmp_path: Path, theme: str) -> None:
    themes = tmp_path / "lab-settings" / "@jupyterlab" / "apputils-extension"
    themes.mkdir(parents=True, exist_ok=True)
    (themes / "themes.jupyterlab-settings").write_text(json.dumps({"theme": theme}))


def _contrast(page, node) -> float:
    """The node's contrast ratio; read again if the card was drawn anew (a detached node
    has no computed colour)."""
    for _ in range(20):
        ratio = node.evaluate(f"n => n.isConnected ? ({CONTRAST})(n) : null")
        if ratio is not None:
            return ratio
        page.wait_for_timeout(100)
    raise AssertionError("the node stayed detached")


@pytest.mark.parametrize(("app", "theme"), CASES)
def test_a_destroy_needs_the_typed_workspace_name(
    tmp_path: Path, screenshots: Path, page, app: str, theme: str
) -> None:
    from playwright.sync_api import expect

    root = tmp_path / "root"
    apply_workspace(root)
    env = apply_env(tmp_path, root, SCRIPT)
    name = "notebook" if app == "notebook" else theme.split()[-1].lower()
    with jupyter_server(app, tmp_path, env) as server:
        if app == "jupyterlab":
            _theme(tmp_path, theme)
        write_notebook(server.root / "form.ipynb")
        path = "lab/tree/form.ipynb" if app == "jupyterlab" else "notebooks/form.ipynb"
        page.goto(server.page_url(path))
        try:
            if app == "jupyterlab":
                expect(page.locator("body")).to_have_attribute("data-jp-theme-name", theme)
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
            ratios = {what: _contrast(page, node) for what, node in texts.items()}
            page.screenshot(path=str(screenshots / f"browser-form-{name}.png"))
            low = {what: round(r, 2) for what, r in ratios.items() if r < MINIMUM}
            assert not low, f"{theme}: contrast below {MINIMUM}:1: {low}"

            field.press("Enter")
            expect(card).to_have_attribute("data-status", "done")
            expect(cell).to_contain_text("The plan is applied.")
            expect(cell).to_contain_text("Allowed once")
        except Exception:
            page.screenshot(path=str(screenshots / f"browser-form-{name}-failure.png"))
            print(server.log_tail())
            raise
        assert our_errors(page) == []


def test_the_agents_question_is_a_form_on_the_card(tmp_path: Path, screenshots: Path, page) -> None:
    """ask_user with all four field kinds: labelled controls on the card, Answer disabled
    until the required fields are filled, the values reach the model."""
    from playwright.sync_api import expect

    script = REPO / "tests" / "scripts" / "browser_ask.json"
    with jupyter_server("jupyterlab", tmp_path, server_env(tmp_path, script)) as server:
        write_notebook(server.root / "ask.ipynb")
        page.goto(server.page_url("lab/tree/ask.ipynb"))
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
