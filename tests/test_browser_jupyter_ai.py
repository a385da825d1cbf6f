"""The IaC Agent persona in JupyterLab's chat, in a real browser (headless Debian Chromium
through Playwright): JupyterLab with Jupyter AI 3 runs on 127.0.0.1, the chat file opens
with the persona already picked (its name in the input toolbar), a message
gets the agent's streamed answer, and an edit card's "Allow once" button lets the edit
land. Screenshots go to the test's temporary folder.

Needs the ``[jupyter-ai]`` extra (``.ci/jupyter-ai``) and /usr/bin/chromium.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip(
    "jupyter_ai_acp_client",
    reason="needs Jupyter AI 3 + jupyter-ai-acp-client (pip install -e '.[jupyter-ai]'; "
    "CI: .ci/jupyter-ai)",
)

from browser.jupyter import BROWSER_MARKS, jupyter_server
from browser.lab import server_env

pytestmark = BROWSER_MARKS

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "scripts" / "jupyter_ai.json"


def test_chat_with_the_persona_streams_its_answer_and_edit_buttons_work(
    tmp_path, screenshots, page
):
    from playwright.sync_api import expect

    env = server_env(tmp_path, SCRIPT)
    # Only our persona: the vendored ones (claude, codex, ...) are skipped.
    env["JUPYTER_AI_ACP_CLIENT_E2E_TESTING_ONLY"] = "1"
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "infra.chat").write_text("{}")
    # A server of its own: the persona runs in the server, with the server's environment.
    with jupyter_server("jupyterlab", tmp_path, env) as server:
        try:
            page.goto(server.page_url("lab/tree/infra.chat"))
            toolbar = page.locator(".jp-chat-input-toolbar")
            expect(toolbar.get_by_text("IaC Agent", exact=True).first).to_be_visible()

            box = page.get_by_placeholder("Type a chat message")
            box.click()
            page.keyboard.type("first message")
            page.keyboard.press("Enter")
            expect(page.get_by_text("First answer from the agent.")).to_be_visible()
            page.screenshot(path=str(screenshots / "jupyter-ai-answer.png"))

            box.click()
            page.keyboard.type("write the file")
            page.keyboard.press("Enter")
            allow = page.get_by_role("button", name="Allow once")
            expect(allow).to_be_visible()
            expect(page.get_by_role("button", name="Reject always")).to_be_visible()
            page.screenshot(path=str(screenshots / "jupyter-ai-question.png"))
            allow.click()
            expect(page.get_by_text("Done writing.")).to_be_visible()
            page.screenshot(path=str(screenshots / "jupyter-ai-edit.png"))
        except Exception as exc:
            page.screenshot(path=str(screenshots / "jupyter-ai-failure.png"))
            raise AssertionError(f"{exc}\nserver log:\n{server.log_tail()}") from exc
        assert (server.root / "out.txt").read_text() == "written by the agent\n"
