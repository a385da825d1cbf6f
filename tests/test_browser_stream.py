"""The answer as it is written, in a real browser (headless Chromium): JupyterLab and
Notebook 7 with the extension get the text as deltas, and the cell's text grows while the
model writes (several times, before the turn ends); at the end the text is JupyterLab's
own Markdown rendering of the whole answer.

Waits are for conditions on the page, never a sleep followed by an assertion.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from browser.jupyter import BROWSER_MARKS, jupyter_server, write_notebook
from browser.lab import (
    WAIT_MS,
    our_errors,
    run_prompt,
    server_env,
    wait_kernel_idle,
)

pytestmark = BROWSER_MARKS

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts"
SCRIPT = REPO / "tests" / "scripts" / "browser_stream.json"
#: Lengths of the live text the page must see, one after the other, while the cell runs.
GROWTH_STEPS = 3

GROWS = """([selector, previous]) => {
  const live = document.querySelector(selector);
  const running = [...document.querySelectorAll('.jp-Cell .jp-InputPrompt')]
    .some(p => p.textContent.includes('[*]'));
  if (!live || !running) return null;
  const length = live.textContent.length;
  return length > previous ? length : null;
}"""


@pytest.mark.parametrize("app", ["jupyterlab", "notebook"])
def test_text_grows_while_the_model_writes(tmp_path: Path, page, app: str) -> None:
    from playwright.sync_api import expect

    with jupyter_server(app, tmp_path, server_env(tmp_path, SCRIPT)) as server:
        write_notebook(server.root / "stream.ipynb")
        path = "lab/tree/stream.ipynb" if app == "jupyterlab" else "notebooks/stream.ipynb"
        page.goto(server.page_url(path))
        try:
            wait_kernel_idle(page)
            run_prompt(page, "Please stream slowly")
            cell = page.locator(".jp-Notebook .jp-Cell").first
            selector = ".jp-Notebook .jp-Cell .iac-text-live"
            seen = [0]
            for _ in range(GROWTH_STEPS):
                handle = page.wait_for_function(GROWS, arg=[selector, seen[-1]], timeout=WAIT_MS)
                seen.append(handle.json_value())
            assert seen == sorted(seen) and len(set(seen)) == len(seen)
            # Markdown already while streaming: the heading is a heading.
            expect(cell.locator(".iac-text-live h2")).to_have_text("Plan review")

            expect(cell.locator(".jp-InputPrompt")).to_contain_text("[1]")
            expect(cell.locator(".iac-text-live")).to_have_count(0)
            final = cell.locator(".jp-RenderedMarkdown").filter(has_text="Plan review")
            expect(final).to_contain_text("word159")
            expect(final.locator("strong")).to_have_text("all")
            assert "▍" not in cell.inner_text()
        except Exception:
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / f"browser-stream-{app}-failure.png"))
            print(server.log_tail())
            raise
        assert our_errors(page) == []
