"""The destructive question is readable in every theme: JupyterLab Light, Dark and Dark
High Contrast (switched in place while the question waits), in headless Chromium. For the
"Destructive" heading, the command and the reason on the card (the question is shown
once: the buttons carry no copy) and the first button, the text's contrast against the
background it is drawn on (the page's backgrounds blended, as the browser computes them)
is at least 4.5:1 (WCAG AA), and the focused answer button has a focus ring that shows.
The `a` key then allows the call.
"""

from __future__ import annotations

import re
from pathlib import Path

from browser.contrast import MINIMUM, contrast
from browser.jupyter import BROWSER_MARKS, write_notebook
from browser.lab import our_errors, run_prompt, server_env, wait_kernel_idle
from browser.themes import THEMES, slug, switch_theme

pytestmark = BROWSER_MARKS

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "scripts" / "browser_console.json"
FAKE_TERRAFORM = "#!/bin/sh\necho unlocked\n"


def test_the_danger_question_is_readable(jupyter, tmp_path: Path, screenshots: Path, page) -> None:
    from playwright.sync_api import expect

    server = jupyter("jupyterlab", server_env(tmp_path, SCRIPT))
    terraform = server.root / "bin" / "terraform"
    terraform.parent.mkdir()
    terraform.write_text(FAKE_TERRAFORM)
    terraform.chmod(0o755)
    write_notebook(server.root / "theme.ipynb")
    page.goto(server.notebook_url("theme.ipynb"))
    name = "light"
    try:
        wait_kernel_idle(page)
        run_prompt(page, "Please release the lock")
        cell = page.locator(".jp-Notebook .jp-Cell").first
        card = cell.locator(".iac-toolcard[data-kind='execute']")
        expect(card).to_have_attribute("data-status", "awaiting_permission")
        question = card.locator(".iac-toolcard-question-danger")
        expect(question.locator(".iac-toolcard-question-command")).to_contain_text("force-unlock")
        # The question is shown once: on the card; the buttons below carry no copy.
        expect(cell.locator(".iac-question button").first).to_be_visible()
        expect(cell.locator(".iac-danger")).to_have_count(0)
        texts = {
            "danger heading": question.locator(".iac-toolcard-question-title"),
            "card command": question.locator(".iac-toolcard-question-command"),
            "card reason": question.locator(".iac-toolcard-question-why"),
            "card status word": card.locator(".iac-toolcard-status").first,
            "Reject button": cell.locator(".iac-question button").first,
        }
        focused = cell.locator(".iac-question button:focus")
        # Every theme, switched in place while the question waits.
        for theme in THEMES:
            name = slug(theme)
            switch_theme(page, theme)
            ratios = {what: contrast(node) for what, node in texts.items()}
            page.screenshot(path=str(screenshots / f"browser-theme-{name}.png"))
            low = {what: round(r, 2) for what, r in ratios.items() if r < MINIMUM}
            assert not low, f"{theme}: contrast below {MINIMUM}:1: {low}"
            # A focus ring that shows: a solid outline of at least 2 px, not 1 px light blue.
            expect(focused).to_have_count(1)
            style, width = focused.evaluate(
                "n => [getComputedStyle(n).outlineStyle, getComputedStyle(n).outlineWidth]"
            )
            assert style == "solid" and float(width.rstrip("px")) >= 2, (theme, style, width)

        # Allowed with the `a` key on the focused question, the call ran: the card
        # shows the success state, not the destructive question's red border.
        page.keyboard.press("a")
        expect(card).to_have_attribute("data-status", "done")
        expect(card).to_have_class(re.compile(r"\biac-toolcard-is-done\b"))
        expect(card).not_to_have_class(re.compile(r"\biac-toolcard-danger\b"))
    except Exception:
        page.screenshot(path=str(screenshots / f"browser-theme-{name}-failure.png"))
        print(server.log_tail())
        raise
    assert our_errors(page) == []
