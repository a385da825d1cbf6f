"""Turns through a real kernel process (jupyter_client): streaming, tool cards, permission
buttons clicked while the cell runs, headless policy, stdin, interrupts."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from iac_kernel.kernel.render.cards import CARD_MIME
from iac_kernel.kernel.session.status import SESSION_MIME
from iac_kernel.sessions.store import SessionStore
from kernel_harness import KernelHarness, button_comm_id, scripted_kernel

SCRIPT = Path(__file__).parent / "scripts" / "kernel_turns.json"
EXCHANGES = {e["match"]: e for e in json.loads(SCRIPT.read_text())["exchanges"]}
LONG_TEXT = EXCHANGES["stream a long answer"]["turns"][0]["text"]
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kernel-turns")


@pytest.fixture(scope="module")
def work(root: Path) -> Path:
    path = root / "work"
    path.mkdir()
    (path / "notes.txt").write_text("hello from the notes\n")
    return Path(os.path.realpath(path))


@pytest.fixture(scope="module")
def kernel(root: Path, work: Path) -> Iterator[KernelHarness]:
    harness = scripted_kernel(root, work, SCRIPT)
    try:
        yield harness
    finally:
        harness.stop()


@pytest.fixture
def store(root: Path) -> SessionStore:
    return SessionStore(root / "sessions")


def assert_history_valid(store: SessionStore) -> None:
    """Every tool_use in the stored history has a tool_result in the next message."""
    metas = store.list()
    assert metas, "the kernel's session is in the store"
    for meta in metas:
        messages = store.read(meta.session_id).messages
        for index, message in enumerate(messages):
            if message["role"] != "assistant" or isinstance(message["content"], str):
                continue
            uses = {b["id"] for b in message["content"] if b.get("type") == "tool_use"}
            if not uses:
                continue
            assert index + 1 < len(messages), "a tool_use is left without a result"
            following = messages[index + 1]
            results = {
                b["tool_use_id"]
                for b in following["content"]
                if isinstance(b, dict) and b.get("type") == "tool_result"
            }
            assert uses <= results


# -- streaming ---------------------------------------------------------------------------------


def test_answer_streams_into_one_display_with_coalesced_updates(kernel: KernelHarness) -> None:
    result = kernel.execute("Please stream a long answer")
    assert result.status == "ok"
    [text_id] = result.text_ids()
    sent = [
        m
        for m in result.of_type("display_data", "update_display_data")
        if m["content"]["transient"]["display_id"] == text_id
    ]
    assert sent[0]["msg_type"] == "display_data"
    assert all(m["msg_type"] == "update_display_data" for m in sent[1:])
    chunks = len(re.findall(r"\S+\s*|\s+", LONG_TEXT))
    assert 2 <= len(sent) < chunks
    # Streaming updates carry Markdown only; text/plain is sent once, at the end.
    bundles = [m["content"]["data"] for m in sent]
    assert all(set(b) == {"text/markdown"} for b in bundles[:-1])
    assert "▍" in bundles[0]["text/markdown"]
    # The last update is the whole answer, without the streaming cursor.
    assert result.answer() == LONG_TEXT
    assert bundles[-1] == {"text/markdown": LONG_TEXT, "text/plain": LONG_TEXT}


def test_thinking_is_its_own_display_styled_as_thinking(kernel: KernelHarness) -> None:
    result = kernel.execute("think first")
    created = result.created()
    assert [d.split("-")[1] for d in created] == ["thinking", "text", "footer"]
    thinking = result.final(created[0])
    assert '<details class="iac-thinking">' in thinking["text/markdown"]
    assert "<blockquote" in thinking["text/markdown"]
    assert "weigh the options" in thinking["text/markdown"]
    assert thinking["text/plain"].startswith("(thinking)")
    assert result.answer() == "I thought about it: **use modules**."
    assert "weigh" not in result.final(created[1])["text/markdown"]


# -- tool cards ----------------------------------------------------------------------------------


def test_read_tool_card_goes_from_running_to_done(kernel: KernelHarness) -> None:
    result = kernel.execute("read the notes please")
    assert result.status == "ok"
    [card] = result.cards()
    statuses = [p["status"] for p in card]
    assert statuses[0] == "running" and statuses[-1] == "done"
    last = card[-1]
    assert last["name"] == "read_file" and last["kind"] == "read"
    assert last["title"] == "read_file: notes.txt"
    assert last["input"] == {"path": "notes.txt"}
    assert "hello from the notes" in last["output"]
    assert last["outputTruncated"] is False
    assert last["sessionId"]
    bundles = [b for d, bs in result.displays().items() if d.startswith("iac-tool-") for b in bs]
    assert all({"text/plain", "text/html", CARD_MIME} <= set(b) for b in bundles)
    assert "hello from the notes" in bundles[-1]["text/plain"]
    assert result.answer() == "I will read the notes.\n\nThe notes say hello."
    # Text, then the card where the call happened, then the text written after it.
    created = result.created()
    assert [d.split("-")[1] for d in created] == ["text", "tool", "text", "footer"]
    # The turn's last text display carries the session info for the extension's status bar.
    final = [
        m
        for m in result.of_type("display_data", "update_display_data")
        if m["content"]["transient"]["display_id"] == result.text_ids()[-1]
    ][-1]
    info = final["content"]["metadata"][SESSION_MIME]
    assert info["sessionId"] == last["sessionId"] and info["model"] == "scripted"
    assert info["turnUsage"]["total_tokens"] > 0
    assert info["usage"]["total_tokens"] >= info["turnUsage"]["total_tokens"]


def test_failed_tool_card(kernel: KernelHarness) -> None:
    result = kernel.execute("read a missing file")
    [card] = result.cards()
    assert card[-1]["status"] == "failed"
    assert card[-1]["output"]


# -- permission buttons ---------------------------------------------------------------------------


def _click_when_shown(label: str) -> tuple[Any, list[str]]:
    """An on_message hook: remember the button's comm id, click once the buttons display."""
    comm_ids: dict[str, str] = {}
    clicked: list[str] = []

    def on_message(message: dict[str, Any], harness: KernelHarness) -> None:
        comm_id = button_comm_id(message, label)
        if comm_id:
            comm_ids[label] = comm_id
        data = message["content"].get("data", {})
        if message["msg_type"] == "display_data" and WIDGET_VIEW in data and not clicked:
            assert label in comm_ids, "the button's comm_open came before its display"
            clicked.append(comm_ids[label])
            harness.click(comm_ids[label])

    return on_message, clicked


def test_allow_once_click_reaches_the_waiting_agent(kernel: KernelHarness, work: Path) -> None:
    target = work / "config.txt"
    target.unlink(missing_ok=True)
    on_message, clicked = _click_when_shown("Allow once")
    result = kernel.execute("write the config", allow_stdin=True, on_message=on_message)
    assert clicked, "the permission buttons were shown"
    assert result.status == "ok"
    assert target.read_text() == "written by the agent\n"
    [card] = result.cards()
    statuses = [p["status"] for p in card]
    assert "awaiting_permission" in statuses and statuses[-1] == "done"
    assert card[-1]["diff"]["newText"] == "written by the agent\n"
    assert "Allowed once" in result.markdown()
    assert result.answer().endswith("Finished with the config.")


def test_reject_once_click_leaves_the_file_alone(kernel: KernelHarness, work: Path) -> None:
    target = work / "config.txt"
    target.write_text("original\n")
    on_message, clicked = _click_when_shown("Reject once")
    result = kernel.execute("write the config", allow_stdin=True, on_message=on_message)
    assert clicked
    assert result.status == "ok"
    assert target.read_text() == "original\n"
    assert result.cards()[0][-1]["status"] == "denied"
    assert "Rejected once" in result.markdown()


def test_headless_run_denies_by_policy_and_says_so(kernel: KernelHarness, work: Path) -> None:
    target = work / "config.txt"
    target.write_text("original\n")
    result = kernel.execute("write the config", allow_stdin=False)
    assert result.status == "ok"
    assert target.read_text() == "original\n"
    assert result.cards()[0][-1]["status"] == "denied"
    assert "Denied by policy" in result.markdown()
    assert not result.of_type("comm_open"), "no buttons when nobody can click"


def test_stdin_policy_asks_with_an_input_request(kernel: KernelHarness, work: Path) -> None:
    target = work / "config.txt"
    target.unlink(missing_ok=True)
    assert kernel.execute("%config headless_policy stdin").status == "ok"
    try:
        result = kernel.execute("write the config", allow_stdin=True, on_stdin=lambda _p: "2")
        assert len(result.stdin_prompts) == 1
        assert "write_file: config.txt" in result.stdin_prompts[0]
        assert target.read_text() == "written by the agent\n"
        assert "Allowed always" in result.markdown()
        # "Allow always" is remembered: the next write does not ask.
        target.unlink()
        again = kernel.execute("write the config", allow_stdin=True, on_stdin=lambda _p: "n")
        assert again.stdin_prompts == []
        assert target.exists()
    finally:
        kernel.execute("%config headless_policy deny\n%permissions reset")


# -- interrupt --------------------------------------------------------------------------------


def test_interrupt_mid_stream_cancels_the_turn(kernel: KernelHarness, store: SessionStore) -> None:
    interrupted: list[bool] = []

    def on_message(message: dict[str, Any], harness: KernelHarness) -> None:
        data = message["content"].get("data", {})
        streaming = data.get("text/markdown", "")
        if message["msg_type"] == "update_display_data" and "Here is" in streaming:
            if not interrupted:
                interrupted.append(True)
                harness.interrupt()

    result = kernel.execute("slow stream", on_message=on_message)
    assert interrupted
    assert result.status == "error"
    assert result.reply["content"]["ename"] == "Cancelled"
    [error] = result.of_type("error")
    assert "interrupted" in error["content"]["evalue"]
    assert len(error["content"]["traceback"]) == 1
    answer = result.answer()
    assert answer.startswith("Here is") and len(answer) < len(LONG_TEXT) * 2
    assert_history_valid(store)
    after = kernel.execute("quick question")
    assert after.status == "ok" and after.answer() == "Quick answer."


def test_interrupt_mid_tool_cancels_the_command(kernel: KernelHarness, store: SessionStore) -> None:
    interrupted: list[bool] = []

    def on_message(message: dict[str, Any], harness: KernelHarness) -> None:
        payload = message["content"].get("data", {}).get(CARD_MIME)
        if payload and payload["status"] == "running" and payload["input"] and not interrupted:
            interrupted.append(True)
            harness.interrupt()

    code = "%mode bypass\n%config bash_grace 1\nsleep a while"
    try:
        result = kernel.execute(code, on_message=on_message)
    finally:
        kernel.execute("%mode default")
    assert interrupted
    assert result.reply["content"]["ename"] == "Cancelled"
    [card] = result.cards()
    assert card[-1]["status"] == "cancelled"
    assert_history_valid(store)
    assert kernel.execute("quick question").answer() == "Quick answer."


def test_interrupt_while_idle_keeps_the_kernel(kernel: KernelHarness) -> None:
    kernel.interrupt()
    result = kernel.execute("quick question")
    assert result.status == "ok" and result.answer() == "Quick answer."


def test_interrupt_while_the_buttons_wait(kernel: KernelHarness, work: Path) -> None:
    target = work / "config.txt"
    target.write_text("original\n")
    interrupted: list[bool] = []

    def on_message(message: dict[str, Any], harness: KernelHarness) -> None:
        data = message["content"].get("data", {})
        if message["msg_type"] == "display_data" and WIDGET_VIEW in data and not interrupted:
            interrupted.append(True)
            harness.interrupt()

    result = kernel.execute("write the config", allow_stdin=True, on_message=on_message)
    assert interrupted
    assert result.reply["content"]["ename"] == "Cancelled"
    assert target.read_text() == "original\n"
    assert result.cards()[0][-1]["status"] == "cancelled"
    assert result.cards()[0][-1]["question"]["state"] == "cancelled"
    assert "Cancelled** while waiting for approval" in result.markdown()
    opened = {m["content"]["comm_id"] for m in result.of_type("comm_open")}
    closed = {m["content"]["comm_id"] for m in result.of_type("comm_close")}
    assert opened and opened <= closed, "the button widgets are closed"
    assert kernel.execute("quick question").answer() == "Quick answer."


def test_headless_allow_policy_approves(kernel: KernelHarness, work: Path) -> None:
    target = work / "config.txt"
    target.unlink(missing_ok=True)
    assert kernel.execute("%config headless_policy allow").status == "ok"
    try:
        result = kernel.execute("write the config", allow_stdin=False)
    finally:
        kernel.execute("%config headless_policy deny")
    assert target.read_text() == "written by the agent\n"
    assert "Allowed by policy" in result.markdown()
    assert result.cards()[0][-1]["status"] == "done"
