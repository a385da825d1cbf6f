"""A notebook saved while a question waited, opened later in JupyterLab (headless Chromium):
the card does not say "awaiting permission" forever but that it was saved mid-question and
what became of the call (here nobody knows: its session is not in this store), and the
saved buttons never show "Error displaying widget: model not found". Saved again, the
file's HTML and plain forms (what nbconvert shows) say the same.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from browser.jupyter import BROWSER_MARKS, write_notebook
from browser.lab import our_errors, server_env, wait_kernel_idle

pytestmark = BROWSER_MARKS

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "scripts" / "browser_stream.json"
CARD = {
    "version": 1,
    "callId": "toolu_saved_1",
    "name": "bash",
    "title": "bash: terraform apply",
    "kind": "execute",
    "status": "awaiting_permission",
    "input": {"command": "terraform apply"},
    "output": None,
    "outputTruncated": False,
    "locations": [],
    "sessionId": "00000000-0000-0000-0000-000000000000",
    "question": {
        "id": "q1",
        "state": "pending",
        "danger": True,
        "reason": "It changes real infrastructure.",
        "options": ["reject_once", "allow_once"],
        "answer": None,
        "note": None,
    },
}


def saved_mid_question(path: Path) -> None:
    write_notebook(path, "Apply the plan")
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={
                "application/vnd.iac-kernel.toolcall+json": CARD,
                "text/plain": "bash: terraform apply (awaiting permission)",
                "text/html": "<div>✋ awaiting permission <code>bash: terraform apply</code></div>",
            },
        ),
        nbformat.v4.new_output(
            "display_data",
            data={
                "application/vnd.jupyter.widget-view+json": {
                    "model_id": "0123456789abcdef",
                    "version_major": 2,
                    "version_minor": 0,
                },
                "text/plain": "Permission needed",
            },
            metadata={"iac_display_id": "iac-permission-q1"},
        ),
    ]
    nbformat.write(nb, path)


def test_a_card_saved_mid_question_says_so(
    jupyter, tmp_path: Path, screenshots: Path, page
) -> None:
    from playwright.sync_api import expect

    server = jupyter("jupyterlab", server_env(tmp_path, SCRIPT))
    saved_mid_question(server.root / "saved.ipynb")
    page.goto(server.notebook_url("saved.ipynb"))
    try:
        wait_kernel_idle(page)
        card = page.locator(".iac-toolcard").first
        expect(card.locator(".iac-toolcard-status")).to_have_text("Saved mid-question")
        expect(card.locator(".iac-toolcard-saved-note")).to_contain_text(
            "Saved while this question waited"
        )
        cell = page.locator(".jp-Notebook .jp-Cell").first
        expect(cell).to_contain_text("no longer asked")
        assert "model not found" not in cell.inner_text()
        assert "Awaiting permission" not in cell.inner_text()
        # Saved again, the file's HTML and plain forms say so too (nbconvert shows them).
        page.locator(".jp-NotebookPanel-toolbar [data-command='docmanager:save']").click()
        expect(page.locator(".jp-mod-current.jp-mod-dirty")).to_have_count(0)
        data = nbformat.read(server.root / "saved.ipynb", as_version=4).cells[0].outputs[0].data
        for form in ("text/html", "text/plain"):
            assert "awaiting permission" not in data[form], data[form]
            assert "Saved while this question waited" in data[form], data[form]
    except Exception:
        page.screenshot(path=str(screenshots / "browser-saved-failure.png"))
        print(server.log_tail())
        raise
    assert our_errors(page) == []
