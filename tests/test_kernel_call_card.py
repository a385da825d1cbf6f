"""Issue 33: a page loaded mid-turn gets a call's whole card back from the kernel.

Through a real kernel process (jupyter_client): while a call's question waits, a second
client (a reloaded page) asks the status comm for the card by its display id and by its
call id: the card (title, question, status) and the question's buttons come back, in
order. Once answered and running, the card comes back with the answer, its output lines
so far and the record of the answer in place of the buttons. A call no running turn has
gives ``outputs: null``. Unit: :class:`CallDisplays` keeps each display's latest form.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from iac_kernel.kernel.render.cards import CARD_MIME
from iac_kernel.kernel.render.turn import CallDisplays
from iac_kernel.kernel.session.status import STATUS_TARGET
from kernel_harness import KernelHarness, scripted_kernel
from kernel_support import SecondClient

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
#: Asked per call (it names force-unlock), then prints a line every 0.6 s.
COMMAND = (
    "echo terraform force-unlock -force 0000-lock; for i in 1 2 3; do echo tick$i; sleep 0.6; done"
)
SCRIPT = {
    "name": "call-card",
    "exchanges": [
        {
            "match": "unlock it",
            "turns": [
                {
                    "text": "Unlocking.",
                    "tool_use": [{"name": "bash", "input": {"command": COMMAND}}],
                },
                {"text": "Done."},
            ],
        }
    ],
}


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[KernelHarness]:
    work = tmp_path / "work"
    work.mkdir()
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    harness = scripted_kernel(tmp_path, Path(os.path.realpath(work)), script)
    try:
        yield harness
    finally:
        harness.stop()


def _ask(other: SecondClient, comm_id: str, **names: str) -> dict[str, Any]:
    other.shell("comm_msg", {"comm_id": comm_id, "data": {"request": "call_card", **names}})
    return other.comm_data(comm_id, "call_card")


def test_a_reloaded_page_gets_the_whole_card_of_a_running_call(kernel: KernelHarness) -> None:
    seen: dict[str, Any] = {}

    def on_message(message: dict[str, Any], harness: KernelHarness) -> None:
        content = message["content"]
        data = content.get("data", {})
        display_id = content.get("transient", {}).get("display_id", "")
        if display_id.startswith("iac-tool-"):
            seen.setdefault("card_display", display_id)
        if message["msg_type"] == "display_data" and WIDGET_VIEW in data and "other" not in seen:
            seen["question_display"] = display_id
            other = SecondClient(harness)
            seen["other"] = other
            comm_id = uuid.uuid4().hex
            seen["comm_id"] = comm_id
            other.shell("comm_open", {"comm_id": comm_id, "target_name": STATUS_TARGET, "data": {}})
            info = other.comm_data(comm_id, "session_info")["info"]
            seen["asking_by_display"] = _ask(other, comm_id, displayId=seen["card_display"])
            call_id = seen["asking_by_display"]["callId"]
            seen["asking_by_call"] = _ask(other, comm_id, callId=call_id)
            seen["unknown"] = _ask(other, comm_id, callId="no-such-call")
            [question] = info["questions"]
            answer = {"request": "answer", "questionId": question["id"], "option": "allow_once"}
            other.shell("comm_msg", {"comm_id": comm_id, "data": answer})
            seen["answer"] = other.comm_data(comm_id, "answer")
        card = data.get(CARD_MIME)
        if card and "tick1" in (card.get("output") or "") and "running" not in seen:
            other, comm_id = seen["other"], seen["comm_id"]
            seen["running"] = _ask(other, comm_id, displayId=seen["question_display"])

    result = kernel.execute("unlock it", allow_stdin=True, on_message=on_message)
    other = seen["other"]
    try:
        assert result.status == "ok" and seen["answer"]["ok"] is True
        asking = seen["asking_by_display"]
        assert asking["displayId"] == seen["card_display"]
        card_output, buttons = asking["outputs"]
        assert card_output["displayId"] == seen["card_display"]
        card = card_output["data"][CARD_MIME]
        assert card["status"] == "awaiting_permission" and card["title"].startswith("bash")
        assert card["question"]["state"] == "pending" and card["question"]["danger"] is True
        assert card["input"]["command"] == COMMAND
        assert buttons["displayId"] == seen["question_display"]
        assert WIDGET_VIEW in buttons["data"]
        assert buttons["metadata"]["iac_display_id"] == seen["question_display"]
        assert seen["asking_by_call"]["outputs"] == asking["outputs"]
        assert seen["unknown"]["outputs"] is None

        # Answered and running: the answer, the output lines so far, the answer's record.
        running = seen["running"]
        assert running["callId"] == asking["callId"]
        card_output, record = running["outputs"]
        card = card_output["data"][CARD_MIME]
        assert card["status"] == "running" and "tick1" in card["output"]
        assert card["question"]["state"] == "answered"
        assert card["question"]["answer"] == "allow_once"
        assert record["displayId"] == seen["question_display"]
        assert "Allowed once" in record["data"]["text/markdown"]
        assert WIDGET_VIEW not in record["data"]
    finally:
        other.stop()
    # The turn is over: no running turn has the call any more.
    again = SecondClient(kernel)
    try:
        comm_id = uuid.uuid4().hex
        again.shell("comm_open", {"comm_id": comm_id, "target_name": STATUS_TARGET, "data": {}})
        again.comm_data(comm_id, "session_info")
        assert _ask(again, comm_id, callId=asking["callId"])["outputs"] is None
    finally:
        again.stop()


def test_call_displays_keep_the_latest_form_of_each_display_in_order() -> None:
    displays = CallDisplays()
    displays.shown("c1", "card-1", {"text/plain": "asking"})
    displays.shown("c2", "card-2", {"text/plain": "other call"})
    displays.shown("c1", "question-1", {"text/plain": "buttons"}, {"iac_display_id": "q"})
    displays.shown("c1", "card-1", {"text/plain": "running"})
    displays.shown("c1", "question-1", {"text/plain": "Allowed once"}, {"iac_display_id": "q"})
    call_id, outputs = displays.find(display_id="question-1")
    assert call_id == "c1"
    assert [(o["displayId"], o["data"]["text/plain"]) for o in outputs] == [
        ("card-1", "running"),
        ("question-1", "Allowed once"),
    ]
    assert outputs[1]["metadata"] == {"iac_display_id": "q"}
    assert outputs[0]["output_type"] == "display_data"
    assert displays.find(call_id="c2")[1][0]["data"] == {"text/plain": "other call"}
    assert displays.find(display_id="nope") is None and displays.find() is None
    # What it hands out is a copy: changing it changes nothing kept.
    outputs[0]["data"]["text/plain"] = "changed"
    assert displays.find(call_id="c1")[1][0]["data"]["text/plain"] == "running"
