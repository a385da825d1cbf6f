"""A question's form through a real kernel (jupyter_client, widget comm messages as a
browser sends them): the typed confirmation of a destroying apply with real terraform
(a wrong name applies nothing, the right one applies), and the agent's own question."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core_support import write_script
from kernel_harness import KernelHarness, button_comm_id, scripted_kernel
from terraform_support import (
    STAGE1,
    STAGE2,
    addresses,
    applied_fixture,  # noqa: F401 (the applied fixture)
    needs_terraform,
    no_checkov_by_default,  # noqa: F401 (autouse fixture)
    stage2_copy,
)

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture
def ws(applied: Path, tmp_path: Path) -> Path:
    return stage2_copy(applied, tmp_path / "ws", plan="p.tfplan")


def typed_then_click(typed: str) -> tuple[Any, list[str]]:
    """An on_message hook: once the question's widgets display, type ``typed`` in the
    workspace field (a widget state update, as a browser sends it) and click Allow once."""
    comms: dict[str, str] = {}
    done: list[str] = []

    def on_message(message: dict[str, Any], harness: KernelHarness) -> None:
        allow = button_comm_id(message, "Allow once")
        if allow:
            comms["allow"] = allow
        if message["msg_type"] == "comm_open":
            state = message["content"].get("data", {}).get("state", {})
            if state.get("_model_name") == "TextModel" and state.get("description") == (
                "Workspace name"
            ):
                comms["text"] = message["content"]["comm_id"]
        data = message["content"].get("data", {})
        if message["msg_type"] == "display_data" and WIDGET_VIEW in data and not done:
            assert {"allow", "text"} <= comms.keys(), "the form's field and button were opened"
            update = {"method": "update", "state": {"value": typed}, "buffer_paths": []}
            harness.send_comm_msg(comms["text"], update)
            harness.click(comms["allow"])
            done.append(typed)

    return on_message, done


@needs_terraform
@pytest.mark.parametrize(("typed", "applies"), [("defualt", False), ("default", True)])
def test_a_destroying_apply_needs_the_typed_workspace_name(
    ws: Path, tmp_path: Path, typed: str, applies: bool
) -> None:
    script = write_script(
        tmp_path / "apply.json",
        [
            {
                "match": "apply",
                "turns": [
                    {"tool_use": [{"name": "terraform_apply", "input": {"plan": "p.tfplan"}}]},
                    {"text": "Finished."},
                ],
            }
        ],
    )
    env = {"TF_CLI_CONFIG_FILE": "/dev/null", "TF_IN_AUTOMATION": "1", "CHECKPOINT_DISABLE": "1"}
    harness = scripted_kernel(tmp_path / "k", ws, script, env)
    try:
        on_message, done = typed_then_click(typed)
        result = harness.execute("apply the plan", allow_stdin=True, on_message=on_message)
    finally:
        harness.stop()
    assert done == [typed], "the typed confirmation was asked with widgets"
    assert result.status == "ok"
    [card] = result.cards()
    question = next(p["question"] for p in card if p.get("question"))
    assert question["form"]["fields"][0]["mustEqual"] == "default"
    if applies:
        assert addresses(ws) == STAGE2
        assert card[-1]["status"] == "done"
        assert "Allowed once" in result.markdown()
    else:
        assert addresses(ws) == STAGE1
        assert card[-1]["status"] == "denied"
        assert "did not match" in result.markdown()


def test_the_agents_question_is_answered_with_widgets(tmp_path: Path) -> None:
    """ask_user through a real kernel: the choice (toggle buttons) and the number field are
    set as a browser sets them, Answer is clicked, and the model gets the values."""
    script = write_script(
        tmp_path / "ask.json",
        [
            {
                "match": "ask me",
                "turns": [
                    {
                        "tool_use": [
                            {
                                "name": "ask_user",
                                "input": {
                                    "question": "Where and how many?",
                                    "fields": [
                                        {
                                            "name": "region",
                                            "kind": "choice",
                                            "choices": ["eu-west-1", "us-east-1"],
                                        },
                                        {"name": "size", "kind": "number"},
                                    ],
                                },
                            }
                        ]
                    },
                    {"text": "Thanks."},
                ],
            }
        ],
    )
    work = tmp_path / "work"
    work.mkdir()
    comms: dict[str, str] = {}
    done: list[bool] = []

    def on_message(message: dict[str, Any], harness: KernelHarness) -> None:
        answer = button_comm_id(message, "Answer")
        if answer:
            comms["answer"] = answer
        if message["msg_type"] == "comm_open":
            state = message["content"].get("data", {}).get("state", {})
            model = state.get("_model_name")
            if model in ("ToggleButtonsModel", "FloatTextModel"):
                comms[model] = message["content"]["comm_id"]
        data = message["content"].get("data", {})
        if message["msg_type"] == "display_data" and WIDGET_VIEW in data and not done:
            for model, state in (
                ("ToggleButtonsModel", {"index": 1}),
                ("FloatTextModel", {"value": 3}),
            ):
                update = {"method": "update", "state": state, "buffer_paths": []}
                harness.send_comm_msg(comms[model], update)
            harness.click(comms["answer"])
            done.append(True)

    harness = scripted_kernel(tmp_path / "k", work, script)
    try:
        result = harness.execute("ask me something", allow_stdin=True, on_message=on_message)
    finally:
        harness.stop()
    assert done, "the question's form was shown with widgets"
    [card] = result.cards()
    assert card[-1]["status"] == "done"
    assert '"region": "us-east-1"' in card[-1]["output"]
    assert '"size": 3' in card[-1]["output"]
