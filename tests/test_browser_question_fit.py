"""Issue 43 item 4: a question's answer buttons are never cut, in headless Chromium.

A scripted model runs one bash command long enough that the "Always allow …" and
"Always reject …" labels name six command prefixes. In JupyterLab and in Notebook 7, at
1024, 1400 and 1920 px wide, the short answers (*Allow once*, *Reject once*, *Reject with
note*) show their whole text (``scrollWidth <= clientWidth``) inside the cell's output;
the long labels wrap or are cut with their whole text in the tooltip, never pushing a
button out of the cell. Then *Reject once* answers the question. Once more in JupyterLab
with this extension disabled (as VS Code and other frontends draw the kernel's buttons):
the buttons' own layout keeps the short answers whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from browser.jupyter import BROWSER_MARKS, Folder, Server, jupyter_server, write_notebook
from browser.lab import our_errors, run_prompt, server_env, wait_kernel_idle, wait_still

pytestmark = BROWSER_MARKS

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "scripts" / "browser_long_command.json"
WIDTHS = (1024, 1400, 1920)
HEIGHT = 900
SHORT = ("Allow once", "Reject once", "Reject with note")

#: Each button of the question's box: its text, whether the text fits, its tooltip, and
#: its right edge against the output area's.
MEASURE = """box => {
  const area = box.closest('.jp-OutputArea-output') || box;
  const limit = area.getBoundingClientRect().right + 0.5;
  return [...box.querySelectorAll('button')].map(b => ({
    text: b.textContent.trim(),
    fits: b.scrollWidth <= b.clientWidth,
    title: b.title,
    inside: b.getBoundingClientRect().right <= limit,
    width: Math.round(b.getBoundingClientRect().width),
  }));
}"""


def _without_extension(config: Path) -> None:
    """JupyterLab's page config: this extension disabled (the kernel's buttons alone)."""
    labconfig = config / "labconfig"
    labconfig.mkdir(parents=True, exist_ok=True)
    disabled = {"disabledExtensions": {"@iac-kernel/jupyterlab": True}}
    (labconfig / "page_config.json").write_text(json.dumps(disabled))


@contextmanager
def _server(jupyter, tmp_path: Path, app: str, extension: bool) -> Iterator[Folder | Server]:
    """This test's folder on the shared ``app`` server; without the extension, a server of
    its own (its page config disables the extension)."""
    env = server_env(tmp_path, SCRIPT)
    if extension:
        yield jupyter(app, env)
        return
    _without_extension(tmp_path / "config")
    with jupyter_server(app, tmp_path, env) as server:
        yield server


@pytest.mark.parametrize(
    ("app", "extension"),
    [("jupyterlab", True), ("notebook", True), ("jupyterlab", False)],
    ids=["jupyterlab", "notebook", "jupyterlab-without-extension"],
)
def test_the_answer_buttons_are_never_cut(
    jupyter, tmp_path: Path, screenshots: Path, page, app: str, extension: bool
) -> None:
    from playwright.sync_api import expect

    name = app if extension else f"{app}-plain"
    with _server(jupyter, tmp_path, app, extension) as server:
        write_notebook(server.root / "long.ipynb")
        page.goto(server.notebook_url("long.ipynb"))
        try:
            wait_kernel_idle(page)
            run_prompt(page, "Please check the production stack")
            cell = page.locator(".jp-Notebook .jp-Cell").first
            card = cell.locator(".iac-toolcard[data-kind='execute']")
            if extension:
                expect(card).to_have_attribute("data-status", "awaiting_permission")
            box = cell.locator(".iac-question.widget-vbox")
            expect(box.get_by_role("button", name="Allow once")).to_be_visible()
            for width in WIDTHS:
                page.set_viewport_size({"width": width, "height": HEIGHT})
                wait_still(box)  # the layout settles after the resize
                box.scroll_into_view_if_needed()
                buttons = box.evaluate(MEASURE)
                page.screenshot(path=str(screenshots / f"question-fit-{name}-{width}.png"))
                texts = [b["text"] for b in buttons]
                assert set(SHORT) <= set(texts), texts
                for button in buttons:
                    where = f"{app} at {width} px: {button}"
                    assert button["inside"], f"out of the cell: {where}"
                    if button["text"] in SHORT:
                        assert button["fits"], f"cut: {where}"
                    elif not button["fits"]:  # a long label may be cut: its tooltip says all
                        assert button["text"].rstrip("…").strip() in button["title"], where
                long = [b for b in buttons if b["text"].startswith("Always allow")]
                assert long and "`terraform plan`" in long[0]["title"]
            box.get_by_role("button", name="Reject once").click()
            expect(cell).to_contain_text("You rejected it, so nothing ran.")
            if extension:
                expect(card).to_have_attribute("data-status", "denied")
            else:  # the kernel's HTML card: nothing of this extension drew it
                assert cell.locator(".iac-toolcard").count() == 0
        except Exception:
            page.screenshot(path=str(screenshots / f"question-fit-{name}-failure.png"))
            print(server.log_tail())
            raise
        assert our_errors(page) == []
