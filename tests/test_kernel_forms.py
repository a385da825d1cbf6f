"""A question's form in the notebook kernel: the widgets (a typed confirmation, every field
kind), the stdin prompts, the headless policy, the status channel's answers with values
(a real kernel and real terraform: tests/test_kernel_forms_live.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from iac_kernel.agent.forms import (
    BOOLEAN,
    CHOICE,
    NUMBER,
    Form,
    FormField,
)
from iac_kernel.agent.permissions import ALLOW_ONCE, REJECT_ONCE, PermissionRequest
from iac_kernel.kernel.ask.permission_ui import PermissionUI, parse_field, policy_answer
from iac_kernel.kernel.ask.questions import (
    PendingQuestions,
    Question,
    form_payload,
    question_state,
)
from iac_kernel.kernel.ask.widgets import NOTE_BUTTON, FormWidgets, WidgetPrompt


def confirmation(name: str = "prod") -> Form:
    return Form(
        "Typed confirmation",
        [FormField("workspace", "Workspace name", description=f"Type {name}", must_equal=name)],
    )


def request_with(form: Form, danger: bool = True) -> PermissionRequest:
    return PermissionRequest(
        call_id="c1",
        tool_name="terraform_apply",
        title="terraform apply",
        kind="execute",
        input={"plan": "p.tfplan"},
        reason="It destroys 2 resources.",
        options=[ALLOW_ONCE, REJECT_ONCE],
        danger=danger,
        form=form,
    )


ALL_KINDS = Form(
    "Which way?",
    [
        FormField("region", "Region", kind=CHOICE, choices=["eu-west-1", "us-east-1"]),
        FormField("force", "Force", kind=BOOLEAN, required=False, default=False),
        FormField("count", "Count", kind=NUMBER, default=2),
        FormField("note", "Note", required=False),
    ],
)


# -- widgets ------------------------------------------------------------------------------------


def test_the_approve_button_waits_for_the_typed_name() -> None:
    loop = asyncio.new_event_loop()
    try:
        prompt = WidgetPrompt(request_with(confirmation()), loop)
        [allow] = [b for b in prompt.buttons if b.description == "Allow once"]
        text = prompt.form.fields["workspace"]
        assert text.placeholder == "type prod to approve"
        assert allow.disabled
        # The box says what a wrong name does: nothing (Allow stays disabled).
        notes = [w.value for w in prompt.form.box.children if hasattr(w, "value")]
        assert "Allow once stays disabled until you type prod exactly." in notes
        assert not any("rejects" in str(n) for n in notes)
        text.value = "pro"
        assert allow.disabled
        text.value = " prod "
        assert not allow.disabled
        text.value = "Prod"
        assert allow.disabled
        prompt.close()
    finally:
        loop.close()


def test_a_click_with_the_wrong_name_rejects_and_the_right_name_approves() -> None:
    async def click(typed: str) -> Any:
        prompt = WidgetPrompt(request_with(confirmation()), asyncio.get_running_loop())
        prompt.form.fields["workspace"].value = typed
        [allow] = [b for b in prompt.buttons if b.description == "Allow once"]
        allow.click()  # a stale view may click a disabled button: the kernel checks
        answer = await prompt.wait()
        prompt.close()
        return answer

    wrong = asyncio.run(click("staging"))
    assert wrong == REJECT_ONCE and "did not match" in wrong.note
    right = asyncio.run(click("prod"))
    assert right == ALLOW_ONCE and right.values == {"workspace": "prod"}


def test_every_field_kind_renders_as_a_widget() -> None:
    import ipywidgets as widgets

    form = FormWidgets(ALL_KINDS)
    kinds = {name: type(w) for name, w in form.fields.items()}
    assert kinds == {
        "region": widgets.ToggleButtons,
        "force": widgets.Checkbox,
        "count": widgets.FloatText,
        "note": widgets.Text,
    }
    assert form.problem() == "Region is required"
    form.fields["region"].value = "us-east-1"
    assert form.problem() is None
    assert form.values() == {"region": "us-east-1", "force": False, "count": 2.0, "note": ""}
    many = FormWidgets(Form("t", [FormField("x", "X", kind=CHOICE, choices=list("abcde"))]))
    assert isinstance(many.fields["x"], widgets.Dropdown)


def test_with_the_card_drawing_the_form_the_box_only_rejects_with_a_note() -> None:
    loop = asyncio.new_event_loop()
    try:
        prompt = WidgetPrompt(request_with(confirmation()), loop, card_shown=True)
        labels = [b.description for b in prompt.buttons]
        assert labels == [NOTE_BUTTON] and prompt.form is None
        prompt.close()
    finally:
        loop.close()


# -- policy, stdin, status channel -------------------------------------------------------------


def test_headless_allow_never_approves_a_form_question() -> None:
    answer, note = policy_answer("allow", request_with(ALL_KINDS, danger=False), False)
    assert answer == REJECT_ONCE and "form" in note
    answer, _ = policy_answer("allow", request_with(confirmation(), danger=True), False)
    assert answer == REJECT_ONCE


class Out:
    def __init__(self) -> None:
        self.texts: list[str] = []

    def markdown(self, text: str) -> None:
        self.texts.append(text)

    def display(self, *_args: Any, **_kwargs: Any) -> None:
        pass


def stdin_ask(replies: list[str]) -> tuple[PermissionUI, list[str], Out]:
    prompts: list[str] = []

    async def ask_stdin(prompt: str) -> str:
        prompts.append(prompt)
        return replies.pop(0)

    out = Out()
    ui = PermissionUI(
        out,  # type: ignore[arg-type]
        ui="stdin",
        allow_stdin=True,
        policy=lambda: "deny",
        ask_stdin=ask_stdin,
    )
    return ui, prompts, out


@pytest.mark.parametrize(
    ("typed", "expected"), [("prod", ALLOW_ONCE), ("production", REJECT_ONCE), ("", REJECT_ONCE)]
)
def test_stdin_asks_for_the_typed_name(typed: str, expected: str) -> None:
    ui, prompts, out = stdin_ask(["y", typed])
    answer = asyncio.run(ui.ask(request_with(confirmation())))
    assert answer == expected
    # One-shot: the prompt says that a different name rejects, and it does.
    assert "type prod exactly to approve; a different name rejects" in prompts[1]
    if expected == REJECT_ONCE:
        assert "Rejected" in out.texts[-1]
    else:
        assert answer.values == {"workspace": "prod"}


def test_stdin_fills_every_field_kind() -> None:
    ui, prompts, _out = stdin_ask(["1", "2", "y", "3", "hi"])
    answer = asyncio.run(ui.ask(request_with(ALL_KINDS, danger=False)))
    assert answer == ALLOW_ONCE
    assert answer.values == {"region": "us-east-1", "force": True, "count": 3, "note": "hi"}
    assert "[1] eu-west-1 [2] us-east-1" in prompts[1]
    assert parse_field(ALL_KINDS.fields[2], "2.5") == 2.5


def test_the_status_channel_needs_the_values_to_approve() -> None:
    async def scenario() -> list[Any]:
        loop = asyncio.get_running_loop()
        questions = PendingQuestions()
        future: asyncio.Future[str] = loop.create_future()
        request = request_with(confirmation())
        questions.add(Question("q1", request, loop, future, "d1"))
        errors = [
            questions.answer("q1", ALLOW_ONCE),
            questions.answer("q1", ALLOW_ONCE, values={"workspace": "dev"}),
            questions.answer("q1", ALLOW_ONCE, values={"workspace": "prod"}),
        ]
        answer = await future
        return [*errors, answer, answer.values]

    no_values, wrong, right, answer, values = asyncio.run(scenario())
    assert "send its values" in no_values
    assert "did not match" in wrong
    assert right is None and answer == ALLOW_ONCE and values == {"workspace": "prod"}


def test_the_card_payload_carries_every_field() -> None:
    payload = form_payload(ALL_KINDS)
    assert [f["kind"] for f in payload["fields"]] == ["choice", "boolean", "number", "text"]
    assert payload["fields"][0]["choices"] == ["eu-west-1", "us-east-1"]
    assert form_payload(confirmation())["fields"][0]["mustEqual"] == "prod"
    assert form_payload(None) is None


def test_an_agent_question_sends_its_values_with_any_answer_but_a_rejection() -> None:
    """The agent's own question (kind "question", options of its own): choosing an option
    carries the values; the card lists the options with their labels."""
    request = request_with(ALL_KINDS, danger=False)
    request.kind, request.options = "question", ["answer", "reject_once"]
    request.labels = {"answer": "Send answer"}

    async def choose(option: str, region: str | None) -> Any:
        prompt = WidgetPrompt(request, asyncio.get_running_loop())
        if region:
            prompt.form.fields["region"].value = region
        [button] = [b for b in prompt.buttons if b.description == option]
        disabled = button.disabled
        button.click()
        answer = await prompt.wait()
        prompt.close()
        return disabled, answer

    disabled, answer = asyncio.run(choose("Send answer", "eu-west-1"))
    assert not disabled and answer == "answer"
    assert answer.values == {"region": "eu-west-1", "force": False, "count": 2.0, "note": ""}
    disabled, answer = asyncio.run(choose("Send answer", None))
    assert disabled and answer == REJECT_ONCE and "Region is required" in answer.note
    disabled, answer = asyncio.run(choose("Reject once", None))
    assert not disabled and answer == REJECT_ONCE and getattr(answer, "values", None) is None
    state = question_state("q", request, "pending")
    assert state["labels"] == {"answer": "Send answer", "reject_once": "Reject once"}
    assert state["form"]["title"] == "Which way?"
