"""The kernel's own HTML (what frontends without the extension and nbconvert's HTML show:
tool cards, the destructive question, diffs, the plan card, the footer) is readable in
dark themes, in headless Chromium.

Three pages: nbconvert's HTML with JupyterLab's dark theme; nbconvert's default (light)
HTML with ``prefers-color-scheme: dark`` emulated; and a dark page without JupyterLab's
variables (a dark frontend of its own). On each, the command text and the other texts of
the cards have a contrast of at least 4.5:1 (WCAG AA) against what they are drawn on.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from browser.contrast import MINIMUM, contrast
from browser.jupyter import BROWSER_MARKS
from iac_kernel.agent.permissions import PermissionRequest
from iac_kernel.events import Diff, Usage
from iac_kernel.kernel.ask.widgets import label_html
from iac_kernel.kernel.render import footer, plan_card
from iac_kernel.kernel.render.cards import ToolCard

pytestmark = BROWSER_MARKS

REPO = Path(__file__).resolve().parents[1]
COMMAND = "terraform destroy -auto-approve -target=aws_db_instance.main"
PLAN = {
    "summary": "Plan: 1 to add, 1 to change, 1 to destroy.",
    "file": {"path": "tfplan", "short_hash": "0123abcd", "time": "2026-12-03 22:00"},
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
            "changes": [{"path": "bucket", "before": None, "after": "logs"}],
        },
        {
            "address": "aws_instance.web",
            "action": "update",
            "why": "tags changed",
            "changes": [{"path": "tags.env", "before": "dev", "after": "prod"}],
        },
    ],
    "groups": [],
}
#: The texts whose contrast is measured: (what, CSS selector).
TEXTS = [
    ("danger card's command", ".iac-toolcall.iac-danger code"),
    ("danger question's command", "div.iac-danger:not(.iac-toolcall) pre"),
    ("danger question's reason", "div.iac-danger:not(.iac-toolcall) > div:last-child"),
    ("card kind (muted)", ".iac-toolcall > div:first-child > span:nth-of-type(2)"),
    ("input JSON", ".iac-toolcall details pre"),
    ("added diff line", ".iac-diff span:nth-last-child(1)"),
    ("output", ".iac-toolcall[data-status='done'] details:last-of-type pre"),
    ("plan summary", ".iac-plan-summary"),
    ("plan row address", ".iac-plan-row[data-action='delete'] code"),
    ("plan row reason (muted)", ".iac-plan-row[data-action='update'] td:last-child"),
    ("footer", ".iac-turn-footer"),
    # Accent words: red, green and orange status words, a plan's action words.
    ("danger card's status word", ".iac-toolcall.iac-danger .iac-status"),
    ("done status word", ".iac-toolcall[data-status='done'] .iac-status"),
    ("plan action word (delete)", ".iac-plan-row[data-action='delete'] td:first-child"),
    ("plan action word (update)", ".iac-plan-row[data-action='update'] td:first-child"),
    ("danger question's heading", "div.iac-danger:not(.iac-toolcall) > div:first-child"),
]


def fragments() -> list[str]:
    """The HTML forms of a turn: a destructive question's card and box, an edit with its
    diff, a command's output, a plan card and the footer."""
    danger = ToolCard("t1", "bash", f"bash: {COMMAND}", "execute", "s1")
    danger.input = {"command": COMMAND}
    danger.status = "awaiting_permission"
    danger.question = {"id": "q", "state": "pending", "danger": True, "options": []}
    request = PermissionRequest(
        call_id="t1",
        tool_name="bash",
        title=f"bash: {COMMAND}",
        kind="execute",
        input={"command": COMMAND},
        options=["reject_once", "allow_once"],
        reason="It changes real infrastructure: a destroy.",
        danger=True,
    )
    edit = ToolCard("t2", "write_file", "write_file: main.tf", "edit", "s1", status="done")
    edit.input = {"path": "main.tf"}
    edit.diff = Diff("main.tf", 'bucket = "old"\n', 'bucket = "new"\nacl = "private"\n')
    run = ToolCard("t3", "bash", "bash: terraform validate", "execute", "s1", status="done")
    run.input = {"command": "terraform validate"}
    run.output = "Success! The configuration is valid.\n"
    run.elapsed = 1.2
    usage = Usage(input_tokens=2000, output_tokens=300, cache_read_tokens=6000)
    return [
        danger.bundle()["text/html"],
        label_html(request, danger=True),
        edit.bundle()["text/html"],
        run.bundle()["text/html"],
        plan_card.render_html(PLAN),
        footer.bundle("anthropic:claude-sonnet-4-6", usage, 4.2, "end_turn", 0.0123)["text/html"],
    ]


def exported(theme: str) -> str:
    """A notebook whose outputs are only the HTML forms, as nbconvert exports it."""
    from nbconvert import HTMLExporter

    nb = nbformat.v4.new_notebook()
    outputs = [
        nbformat.v4.new_output("display_data", data={"text/html": part, "text/plain": "."})
        for part in fragments()
    ]
    nb.cells.append(nbformat.v4.new_code_cell("Destroy the database", outputs=outputs))
    body, _resources = HTMLExporter(theme=theme).from_notebook_node(nb)
    return body


def own_dark_page() -> str:
    """A dark frontend that defines none of JupyterLab's variables."""
    return (
        "<!doctype html><html><body style='background:#1e1e1e;color:#d4d4d4;"
        "font-family:sans-serif'>" + "".join(fragments()) + "</body></html>"
    )


@pytest.mark.parametrize("page_kind", ["nbconvert-dark", "nbconvert-light-dark-os", "own-dark"])
def test_fallback_html_is_readable_on_a_dark_page(
    tmp_path: Path, screenshots: Path, browser, page_kind
) -> None:
    if page_kind == "own-dark":
        html = own_dark_page()
    else:
        html = exported("dark" if page_kind == "nbconvert-dark" else "light")
    path = tmp_path / "turn.html"
    path.write_text(html)
    context = browser.new_context(color_scheme="dark", viewport={"width": 1100, "height": 1400})
    # Offline: the export's CDN scripts (MathJax, require.js) are not fetched.
    context.route(
        "**/*",
        lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort(),
    )
    page = context.new_page()
    try:
        page.goto(path.as_uri(), wait_until="domcontentloaded")
        # Folded parts (input, a long output) are read once opened.
        page.evaluate("() => document.querySelectorAll('details').forEach(d => (d.open = true))")
        ratios = {}
        for what, selector in TEXTS:
            node = page.locator(selector).first
            assert node.count() == 1, f"{page_kind}: nothing matches {what} ({selector})"
            assert node.inner_text().strip(), f"{page_kind}: {what} is empty"
            ratios[what] = contrast(node)
        page.screenshot(path=str(screenshots / f"fallback-theme-{page_kind}.png"), full_page=True)
        command = page.locator("div.iac-danger:not(.iac-toolcall) pre").first.inner_text()
        assert COMMAND in command
        low = {what: round(r, 2) for what, r in ratios.items() if r < MINIMUM}
        assert not low, f"{page_kind}: contrast below {MINIMUM}:1: {low}"
        if page_kind == "nbconvert-dark":
            # The page really is dark: the test would catch dark text on it.
            background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
            assert background not in ("rgb(255, 255, 255)", "rgba(0, 0, 0, 0)"), background
    finally:
        context.close()


def test_the_old_light_card_would_fail_the_check(browser) -> None:
    """The check can fail: light text (a dark theme's) on the light pink the danger card
    once had is reported."""
    page = browser.new_page()
    try:
        page.set_content(
            "<body style='background:#111;color:#fff'>"
            "<div style='background:#ffebe9'><pre id='cmd'>terraform destroy</pre></div></body>"
        )
        assert contrast(page.locator("#cmd")) < 1.5
    finally:
        page.close()
