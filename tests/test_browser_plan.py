"""The plan card in JupyterLab (headless Chromium; the extension's renderer of a saved
plan output), in the Light and the Dark theme (switched in place on one page): it is
framed, a destructive plan has the red edge, every row's action, address and reason keep
4.5:1 contrast (WCAG AA), opening or closing a row's attribute diff (a long line) leaves
every column where it was, and the copy buttons copy one line per row without the rows'
folded diffs. (The review list itself: tests/test_browser_big_plan.py.)
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from browser.contrast import MINIMUM, contrast
from browser.jupyter import BROWSER_MARKS, write_notebook
from browser.lab import our_errors, server_env
from browser.themes import slug, switch_theme
from iac_kernel.kernel.render import plan_card

pytestmark = BROWSER_MARKS

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "scripts" / "browser_footer.json"
LONG = "x" * 400
PLAN = {
    "summary": "Plan: 1 to add, 0 to change, 1 to destroy.",
    "resources": [
        {
            "address": "aws_db_instance.main",
            "action": "delete",
            "why": "deleted from the configuration",
            "changes": [{"path": "engine", "before": "postgres", "after": None}],
        },
        {
            "address": "aws_s3_bucket.logs",
            "action": "create",
            "why": "new in the configuration",
            "changes": [{"path": "policy", "before": None, "after": LONG}],
        },
    ],
    "drift": [
        {
            "address": "aws_security_group.web",
            "action": "update",
            "changes": [{"path": "ingress[0].cidr", "before": "10.0.0.0/8", "after": "0/0"}],
        }
    ],
}
#: The themes checked (switched in place on one page).
THEMES = ["JupyterLab Light", "JupyterLab Dark"]
#: Where each row's action, address and reason start, and how wide they are.
COLUMNS = """n => [...n.querySelectorAll('.iac-plan-vline')].map(l =>
  [...l.children].map(c => { const r = c.getBoundingClientRect();
    return [Math.round(r.left), Math.round(r.width)]; }))"""


def test_the_plan_card_is_framed_readable_and_its_columns_stay(
    jupyter, tmp_path: Path, screenshots: Path, page
) -> None:
    from playwright.sync_api import expect

    server = jupyter("jupyterlab", server_env(tmp_path, SCRIPT))
    path = write_notebook(server.root / "plan.ipynb", "Plan the change")
    nb = nbformat.read(path, as_version=4)
    bundle = plan_card.bundle(PLAN, "toolu_plan_1", "s1")
    nb.cells[0].outputs = [nbformat.v4.new_output("display_data", data=bundle)]
    nbformat.write(nb, path)
    page.goto(server.notebook_url("plan.ipynb"))
    name = "light"
    try:
        card = page.locator(".iac-plan").first
        expect(card).to_be_visible()
        rows = card.locator(".iac-plan-list")
        opener = card.locator(".iac-plan-vrow", has_text="aws_s3_bucket.logs").locator(
            ".iac-plan-address"
        )
        diff = card.locator(".iac-plan-vrow[data-address='aws_s3_bucket.logs'] pre.iac-plan-diff")
        # Each theme switched in place on the one page.
        for theme in THEMES:
            name = slug(theme)
            switch_theme(page, theme)
            expect(card).to_have_class("iac-plan iac-plan-has-danger")
            frame = card.evaluate(
                "n => { const s = getComputedStyle(n);"
                " return [s.borderTopStyle, s.borderTopWidth, s.borderLeftWidth]; }"
            )
            assert frame == ["solid", "1px", "4px"], (theme, frame)

            ratios = {}
            for row in card.locator(".iac-plan-vrow").all():
                action = row.get_attribute("data-action")
                for part in ("iac-plan-action", "iac-plan-address", "iac-plan-reason"):
                    ratios[f"{action} {part}"] = contrast(row.locator(f".{part}"))
            low = {what: round(r, 2) for what, r in ratios.items() if r < MINIMUM}
            assert not low, f"{theme}: contrast below {MINIMUM}:1: {low}"

            # Opening (or, after the previous theme, closing) the row's diff of a long
            # line leaves every column where it was.
            opened = opener.get_attribute("aria-expanded") == "true"
            before = rows.evaluate(COLUMNS)
            opener.click()
            if opened:
                expect(diff).to_have_count(0)
            else:
                expect(diff).to_be_visible()
                expect(diff).to_contain_text(LONG[:50])
            after = rows.evaluate(COLUMNS)
            assert after == before, (theme, before, after)

            # "Copy": one line per row, the action and the address; no folded diff text.
            page.evaluate(
                "() => { window.__copied = []; navigator.clipboard.writeText ="
                " async t => { window.__copied.push(t); }; }"
            )
            card.locator(".iac-plan-list-box .iac-copy-button").click()
            card.locator(".iac-plan-drift .iac-copy-button").click()
            page.wait_for_function("() => window.__copied.length === 2")
            plan_text, drift_text = page.evaluate("() => window.__copied")
            assert plan_text == "delete\taws_db_instance.main\ncreate\taws_s3_bucket.logs"
            assert drift_text == "~ update\taws_security_group.web\t", drift_text
            page.screenshot(path=str(screenshots / f"browser-plan-card-{name}.png"))
    except Exception:
        page.screenshot(path=str(screenshots / f"browser-plan-{name}-failure.png"))
        print(server.log_tail())
        raise
    assert our_errors(page) == []
