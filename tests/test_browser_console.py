"""The notebook as an engineer's console, in a real browser (headless Debian Chromium).

The real kernel with the scripted model (``tests/scripts/browser_console.json``), each
test in its own folder (and notebook, kernel and workspace) of the shared JupyterLab
server. Checked:

* the status bar shows the model and mode from the kernel's start, before any answer, and
  highlights ``bypass``;
* a long command output shows its head and tail with an honest note, and "Show full
  output" fetches all of it from the kernel;
* a per-call question (``terraform force-unlock`` through bash, with a fake terraform) is
  drawn in the danger style, command and why first, Reject first and Allow not focused;
* after a page reload mid-question, the page still shows the question and can answer it
  (a rejection with a note), the command never runs, and the rest of the turn (the
  answer's record, the agent's text) appears in the cell it belongs to;
* the same with the cell's restored buttons, and after a later save and reload the cell
  shows the answered card, never "model not found" nor "awaiting permission".

Marked ``browser``; skipped only when /usr/bin/chromium is missing (CI installs it).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from browser.jupyter import BROWSER_MARKS, Folder, write_notebook
from browser.lab import (
    our_errors,
    run_prompt,
    save_and_reload,
    server_env,
    wait_kernel_idle,
)

pytestmark = BROWSER_MARKS

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "scripts" / "browser_console.json"
LOCK_ID = "6f3c1a2e"

#: Records that it ran (the test checks a rejected unlock never does).
FAKE_TERRAFORM = """#!/bin/sh
echo "$@" >> "$(dirname "$0")/../terraform-ran"
if [ "$1" = force-unlock ]; then
  echo "Terraform state has been successfully unlocked!"
fi
"""


@pytest.fixture
def server(jupyter, tmp_path: Path) -> Folder:
    """This test's folder on the shared JupyterLab server, with the fake terraform."""
    server = jupyter("jupyterlab", server_env(tmp_path, SCRIPT))
    terraform = server.root / "bin" / "terraform"
    terraform.parent.mkdir()
    terraform.write_text(FAKE_TERRAFORM)
    terraform.chmod(0o755)
    return server


def shot(page, folder: Path, name: str) -> None:
    page.screenshot(path=str(folder / f"browser-console-{name}.png"), full_page=True)


def test_status_bar_before_the_first_answer_and_full_output(
    server: Folder, page, screenshots: Path
) -> None:
    from playwright.sync_api import expect

    # The launcher can show the kernel's logo.
    specs = page.request.get(f"{server.url}/api/kernelspecs?token={server.token}").json()
    resources = specs["kernelspecs"]["iac-kernel"]["resources"]
    assert {"logo-32x32", "logo-64x64", "logo-svg"} <= set(resources)
    logo = page.request.get(f"{server.url}{resources['logo-64x64']}?token={server.token}")
    assert logo.ok and logo.body()[:4] == b"\x89PNG"

    write_notebook(server.root / "status.ipynb")
    page.goto(server.notebook_url("status.ipynb"))
    try:
        wait_kernel_idle(page)
        status = page.locator("#jp-main-statusbar .iac-status-item")
        # Nothing was run yet: model and mode come from the kernel itself.
        expect(status.locator(".iac-status-model")).to_have_text("scripted")
        expect(status.locator(".iac-status-mode")).to_have_text("default")
        assert page.locator(".jp-Cell .jp-OutputArea-output").count() == 0

        run_prompt(page, "%mode bypass")
        mode = status.locator(".iac-status-mode")
        expect(mode).to_have_text("bypass")
        expect(mode).to_have_class(re.compile(r"\biac-mode-bypass\b"))
        assert mode.evaluate("n => getComputedStyle(n).color") == "rgb(255, 255, 255)"

        run_prompt(page, "count to 200", cell=1)
        cell = page.locator(".jp-Notebook .jp-Cell").nth(1)
        card = cell.locator(".iac-toolcard[data-kind='execute']")
        expect(card).to_have_attribute("data-status", "done")
        expect(cell).to_contain_text("That printed 200 lines")
        # Expanded thinking is set apart from the answer (muted, dashed rule, own box).
        thinking = cell.locator("details.iac-thinking")
        expect(thinking).to_have_count(1)
        thinking.locator("summary").click()
        expect(thinking).to_contain_text("seq prints them")
        assert "That printed" not in thinking.inner_text()
        style = thinking.evaluate(
            "n => { const s = getComputedStyle(n); return [s.borderLeftStyle, s.backgroundColor]; }"
        )
        assert style[0] == "dashed" and style[1] != "rgba(0, 0, 0, 0)", style
        output = card.locator("details.iac-toolcard-output")
        expect(output.locator("summary")).to_have_text("Output (200 lines, part hidden)")
        if output.get_attribute("open") is None:
            output.locator("summary").click()
        note = output.locator(".iac-toolcard-hidden-note")
        expect(note).to_have_text(
            re.compile(r"^lines \d+–\d+ of 200 hidden; the agent saw all of it\.$")
        )
        # Head, marker and tail scroll in one box, not one box each.
        expect(output.locator(".iac-toolcard-scroll")).to_have_count(1)
        inner = output.locator(".iac-toolcard-scroll pre").first
        assert inner.evaluate("n => getComputedStyle(n).overflowY") == "visible"
        first, last = map(int, re.findall(r"\d+", note.inner_text())[:2])
        shown = "".join(output.locator("pre.iac-toolcard-output-text").all_inner_texts())
        numbers = [int(n) for n in shown.split()]
        assert numbers == [*range(1, first), *range(last + 1, 201)]
        assert "model saw" not in card.inner_text()

        output.get_by_role("button", name="Show full output").click()
        full = output.locator("pre.iac-toolcard-output-text")
        expect(full).to_have_count(1)
        expect(output.locator(".iac-toolcard-full-note")).to_have_text(
            "Full output: 200 lines, as the agent saw it."
        )
        assert [int(n) for n in full.inner_text().split()] == list(range(1, 201))
        expect(output.locator("summary")).to_have_text("Output (200 lines)")
        shot(page, screenshots, "full-output")

        # A slow command: its output shows in the card while it runs, with a clock.
        run_prompt(page, "stream three lines", cell=2)
        third = page.locator(".jp-Notebook .jp-Cell").nth(2)
        live = third.locator(".iac-toolcard[data-kind='execute']")
        expect(live.locator("details.iac-toolcard-output summary")).to_contain_text("Output so far")
        expect(live).to_have_attribute("data-status", "running")
        expect(live.locator(".iac-toolcard-output-text")).to_contain_text("line 1")
        expect(live.locator(".iac-toolcard-elapsed")).to_have_text(re.compile(r"^\d+\.\d s$"))
        expect(live).to_have_attribute("data-status", "done")
        expect(live.locator(".iac-toolcard-output-text")).to_have_text("line 1\nline 2\nline 3\n")

        # Longer output the reader watched stays open after the command ends (it is
        # more than a short output, which is shown open anyway).
        run_prompt(page, "stream many lines", cell=3)
        fourth = page.locator(".jp-Notebook .jp-Cell").nth(3)
        many = fourth.locator(".iac-toolcard[data-kind='execute']")
        expect(many.locator(".iac-toolcard-output-text")).to_contain_text("line 1")
        expect(many).to_have_attribute("data-status", "done")
        expect(fourth).to_contain_text("All sixteen lines arrived.")
        expect(many.locator("details.iac-toolcard-output")).to_have_attribute("open", "")
        expect(third).to_contain_text("All three lines arrived.")
    except Exception:
        shot(page, screenshots, "status-failure")
        print(server.log_tail())
        raise
    assert our_errors(page) == []


def test_danger_question_survives_a_reload(
    server: Folder, page, screenshots: Path, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    write_notebook(server.root / "unlock.ipynb")
    page.goto(server.notebook_url("unlock.ipynb"))
    ran = server.root / "terraform-ran"
    try:
        wait_kernel_idle(page)
        run_prompt(page, "Please release the lock")
        cell = page.locator(".jp-Notebook .jp-Cell").first
        card = cell.locator(".iac-toolcard[data-kind='execute']")
        expect(card).to_have_attribute("data-status", "awaiting_permission")

        # Danger style: the command and why come first on the card, in red.
        expect(card).to_have_class(re.compile(r"\biac-toolcard-danger\b"))
        question = card.locator(".iac-toolcard-question-danger")
        expect(question.locator(".iac-toolcard-question-command")).to_have_text(
            f"$ ./bin/terraform force-unlock -force {LOCK_ID}"
        )
        expect(question.locator(".iac-toolcard-question-why")).not_to_be_empty()
        first_block = card.locator(":scope > :nth-child(2)")
        expect(first_block).to_have_class(re.compile(r"\biac-toolcard-question\b"))
        border = card.evaluate("n => getComputedStyle(n).borderLeftWidth")
        assert border == "6px", border

        # The kernel's buttons: Reject first, and Allow does not have the focus.
        buttons = cell.locator(".jupyter-widgets button, button.jupyter-button")
        expect(buttons.first).to_be_visible()
        labels = [b.strip() for b in buttons.all_inner_texts() if b.strip()]
        assert labels[0].startswith("Reject"), labels
        assert "Allow always" not in labels, labels
        focused = page.evaluate("() => document.activeElement?.textContent ?? ''")
        assert "Allow" not in focused, focused
        # No streaming cursor left while the question waits.
        assert "▍" not in cell.locator(".jp-OutputArea").inner_text()

        status = page.locator("#jp-main-statusbar .iac-status-item")
        pending = status.locator(".iac-status-pending")
        expect(pending).to_have_text(re.compile(r"1 awaiting permission"))
        # Clicking the status bar shows the card and leaves the notebook in command mode.
        status.click()
        expect(card).to_have_class(re.compile(r"\biac-toolcard-flash\b"))
        expect(page.locator(".jp-Notebook").first).to_have_class(
            re.compile(r"\bjp-mod-commandMode\b")
        )
        shot(page, screenshots, "danger")

        # Save (autosave would do it too), then reload while the question waits.
        save_and_reload(page)

        # The reloaded page knows the question still waits, and shows it.
        expect(pending).to_have_text(re.compile(r"1 awaiting permission"))
        restored = page.locator(".iac-toolcard[data-kind='execute']").first
        expect(restored).to_have_attribute("data-status", "awaiting_permission")
        status.click()
        # Until the widget manager has the kernel's widgets again, the page has no live
        # buttons and asks in a dialog; once they are back, the click shows them instead
        # (which comes first depends on the machine; the dialog alone is in test_browser_reload).
        dialog = page.locator(".jp-Dialog")
        live_buttons = page.locator(".jp-Notebook .jp-Cell").first.locator(
            ".jupyter-widgets button"
        )
        expect(dialog.or_(live_buttons).first).to_be_visible()
        if dialog.count():
            expect(dialog).to_contain_text(f"force-unlock -force {LOCK_ID}")
            dialog_buttons = dialog.locator(".jp-Dialog-footer button")
            expect(dialog_buttons.first).to_have_text("Reject once")
            assert "Allow" not in page.evaluate("() => document.activeElement?.textContent ?? ''")
            dialog.locator("input.iac-answer-note").fill("not on a Friday")
            shot(page, screenshots, "reload-question")
            dialog_buttons.first.click()
        else:
            expect(restored).to_have_class(re.compile(r"\biac-toolcard-flash\b"))
            page.locator(".jp-Notebook .jp-Cell").first.locator(".jupyter-widgets input").fill(
                "not on a Friday"
            )
            live_buttons.filter(has_text="Reject with note").click()

        expect(pending).to_have_count(0)
        # The kernel pushed the answered card: the restored copy says so too.
        expect(restored).to_have_attribute("data-status", "denied")
        expect(restored.locator(".iac-toolcard-note-text")).to_have_text("not on a Friday")
        expect(page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_have_count(1)
        # The rest of the turn went into its cell: the answer's record in place of the
        # saved buttons (no "model not found" later), and the agent's following text.
        first = page.locator(".jp-Notebook .jp-Cell").first
        expect(first).to_contain_text("You rejected the unlock, so the lock is still held.")
        expect(first).to_contain_text("Rejected with a note")
        expect(first.locator(".jupyter-widgets button")).to_have_count(0)
        assert "model not found" not in first.inner_text()

        # A rejected edit: its diff folds, and the scripted answer says it was rejected.
        run_prompt(page, "Please write the notes file", cell=1)
        second = page.locator(".jp-Notebook .jp-Cell").nth(1)
        edit = second.locator(".iac-toolcard[data-kind='edit']")
        expect(edit).to_have_attribute("data-status", "awaiting_permission")
        diff = edit.locator("details.iac-toolcard-diff")
        expect(diff).to_have_attribute("open", "")
        expect(edit).not_to_have_class(re.compile(r"\biac-toolcard-danger\b"))
        second.get_by_role("button", name="Reject once").click()
        expect(edit).to_have_attribute("data-status", "denied")
        expect(diff).not_to_have_attribute("open", "")
        expect(diff.locator("summary")).to_have_text("Proposed changes (not applied)")
        expect(second).to_contain_text("You rejected the write, so notes.md was not created.")
        shot(page, screenshots, "rejected-edit")
    except Exception:
        shot(page, screenshots, "danger-failure")
        print(server.log_tail())
        raise
    assert not ran.exists(), ran.read_text()
    assert not (server.root / "notes.md").exists()
    # The user's words reached the agent in place of a bare "Permission denied.".
    logs = "".join(p.read_text() for p in (tmp_path / "sessions").rglob("*.jsonl"))
    assert "not on a Friday" in logs
    assert our_errors(page) == []


def test_restored_buttons_answer_after_a_reload(server: Folder, page, screenshots: Path) -> None:
    from playwright.sync_api import expect

    write_notebook(server.root / "restored.ipynb")
    page.goto(server.notebook_url("restored.ipynb"))
    try:
        wait_kernel_idle(page)
        run_prompt(page, "Please release the lock")
        cell = page.locator(".jp-Notebook .jp-Cell").first
        card = cell.locator(".iac-toolcard[data-kind='execute']")
        expect(card).to_have_attribute("data-status", "awaiting_permission")
        # Saved once the buttons are in the cell (a file saved before has none to restore).
        expect(cell.get_by_role("button", name="Reject once")).to_be_visible()
        save_and_reload(page)

        # The cell's own buttons came back with the kernel's widgets: they answer.
        cell = page.locator(".jp-Notebook .jp-Cell").first
        # The turn still runs: the cell says so as before the reload.
        prompt = cell.locator(".jp-InputPrompt")
        expect(prompt).to_have_text("[*]:")
        restored = cell.get_by_role("button", name="Reject once")
        expect(restored).to_be_visible()
        assert "model not found" not in cell.inner_text()
        restored.click()
        card = cell.locator(".iac-toolcard[data-kind='execute']")
        expect(card).to_have_attribute("data-status", "denied")
        expect(cell).to_contain_text("You rejected the unlock, so the lock is still held.")
        expect(cell.locator(".iac-turn-footer")).to_have_count(1)
        expect(cell.locator(".jupyter-widgets button")).to_have_count(0)
        expect(prompt).to_have_text("[1]:")  # the kernel's count for the turn's request
        shot(page, screenshots, "restored-answered")

        # Saved after the turn and opened again: the answered card, nothing stale.
        expect(page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_have_count(1)
        save_and_reload(page)
        cell = page.locator(".jp-Notebook .jp-Cell").first
        card = cell.locator(".iac-toolcard[data-kind='execute']")
        expect(card).to_have_attribute("data-status", "denied")
        expect(cell).to_contain_text("You rejected the unlock, so the lock is still held.")
        expect(page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_have_count(1)
        text = cell.inner_text()
        assert "model not found" not in text and "Awaiting permission" not in text, text
    except Exception:
        shot(page, screenshots, "restored-failure")
        print(server.log_tail())
        raise
    assert our_errors(page) == []


def test_console_has_the_status_bar_and_the_launcher_the_logo(
    server: Folder, page, screenshots: Path
) -> None:
    from playwright.sync_api import expect

    page.goto(server.notebook_url())
    try:
        card = page.locator(".jp-LauncherCard[data-category='Console'][title='IaC Agent']")
        expect(card.locator("img")).to_have_attribute(
            "src", re.compile(r"/kernelspecs/iac-kernel/logo-(svg\.svg|64x64\.png)")
        )
        card.click()
        prompt = page.locator(".jp-CodeConsole-input .cm-content")
        expect(prompt).to_be_visible()
        status = page.locator("#jp-main-statusbar .iac-status-item")
        expect(status.locator(".iac-status-model")).to_have_text("scripted")
        expect(status.locator(".iac-status-mode")).to_have_text("default")

        prompt.click()
        page.keyboard.type("%mode read_only")
        page.keyboard.press("Shift+Enter")
        mode = status.locator(".iac-status-mode")
        expect(mode).to_have_text("read_only")
        expect(mode).to_have_class(re.compile(r"\biac-mode-read_only\b"))
        shot(page, screenshots, "console")
    except Exception:
        shot(page, screenshots, "console-failure")
        print(server.log_tail())
        raise
    assert our_errors(page) == []
