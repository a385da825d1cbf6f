"""The agent's own questions (``ask_user``): the input checked, the question asked through
the one permission/question channel as a form, and what came of it as the tool's result.
An approval without values (a headless policy) is never an answer."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from iac_kernel.agent import questions
from iac_kernel.agent.forms import BOOLEAN, CHOICE, NUMBER, TEXT
from iac_kernel.agent.permissions import ALLOW_ONCE, CANCELLED, REJECT_ONCE, Answer
from iac_kernel.config import Settings
from iac_kernel.tools.ask_user import NOBODY, AskUserTool, question_fields
from iac_kernel.tools.base import ToolContext, ToolError


class Front:
    """Answers each question with the next answer, keeping what it was asked."""

    def __init__(self, *answers) -> None:
        self.answers = list(answers)
        self.requests = []

    async def __call__(self, request):
        self.requests.append(request)
        return self.answers.pop(0)


def _ctx(tmp_path: Path, ask=None) -> ToolContext:
    ctx = ToolContext(cwd=tmp_path, settings=Settings())
    if ask is not None:
        ctx.ask_user = questions.user_asker("call-7", "ask_user", ask)
    return ctx


async def _run(tmp_path, args, ask=None):
    return await AskUserTool().run(args, _ctx(tmp_path, ask))


def test_choices_fields_and_a_plain_question_make_their_fields():
    (one,) = question_fields({"question": "q", "choices": ["dev", " prod ", "dev"]})
    assert one["kind"] == CHOICE and one["choices"] == ["dev", "prod"]
    (text,) = question_fields({"question": "q"})
    assert (text["name"], text["kind"]) == ("answer", TEXT)
    fields = question_fields(
        {
            "question": "q",
            "fields": [
                {"name": "region", "kind": "choice", "choices": ["eu-west-1", "us-east-1"]},
                {"name": "count", "kind": "number", "title": "Instances"},
                {"name": "public", "kind": "boolean", "required": False},
            ],
        }
    )
    assert [(f["name"], f["kind"]) for f in fields] == [
        ("region", CHOICE),
        ("count", NUMBER),
        ("public", BOOLEAN),
    ]
    assert fields[1]["title"] == "Instances" and fields[2]["required"] is False


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ({"question": "q", "choices": ["a", "b"], "fields": [{"name": "x"}]}, "either"),
        ({"question": "q", "choices": ["a", "a"]}, "two different"),
        ({"question": "q", "choices": ["a", 3]}, "non-empty strings"),
        ({"question": "q", "fields": [{"name": "x y"}]}, "identifier"),
        ({"question": "q", "fields": [{"name": "x"}, {"name": "x"}]}, "repeated"),
        ({"question": "q", "fields": [{"name": "x", "kind": "date"}]}, "'kind'"),
        ({"question": "q", "fields": [{"name": "x", "kind": "choice"}]}, "needs some"),
        ({"question": "q", "fields": [{"name": "x", "choices": ["a"]}]}, "needs some"),
        ({"question": "q", "fields": [{"name": "x", "colour": "red"}]}, "only"),
        ({"question": "q", "fields": []}, "1 to"),
    ],
)
def test_malformed_questions_are_tool_errors(args, words):
    with pytest.raises(ToolError, match=words):
        question_fields(args)


async def test_a_form_answer_is_the_result(tmp_path):
    front = Front(Answer(ALLOW_ONCE, by="ACP client (x), form", values={"answer": "staging"}))
    result = await _run(
        tmp_path, {"question": "Which workspace?", "choices": ["dev", "staging"]}, front
    )
    assert not result.is_error
    assert json.loads(result.content.removeprefix("The user answered: ")) == {"answer": "staging"}
    assert result.raw_output == {
        "answered": True,
        "values": {"answer": "staging"},
        "by": "ACP client (x), form",
    }
    (request,) = front.requests
    assert request.kind == questions.QUESTION and request.call_id == "call-7"
    assert request.options == [ALLOW_ONCE, REJECT_ONCE] and not request.danger
    assert request.form.schema()["properties"]["answer"]["enum"] == ["dev", "staging"]
    assert request.asked["answer"] == ALLOW_ONCE


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (Answer(ALLOW_ONCE, by="headless policy (allow)"), "policy"),  # no values: no answer
        (Answer(REJECT_ONCE, by="headless policy (deny)"), "declined"),
        (Answer(REJECT_ONCE, note="not now"), "declined"),
        (Answer(ALLOW_ONCE, values={"answer": "qa"}), "mismatch"),  # not a choice offered
        (Answer(questions.UNSUPPORTED), "unsupported"),
        (Answer("allow_always", values={"answer": "dev"}), "declined"),  # not offered
    ],
)
async def test_anything_but_fitting_values_is_not_an_answer(tmp_path, answer, why):
    result = await _run(tmp_path, {"question": "Which?", "choices": ["dev", "prod"]}, Front(answer))
    assert result.raw_output["answered"] is False and result.raw_output["why"] == why
    assert "The user answered" not in result.content
    if why == "policy":
        assert "headless policy (allow)" in result.content and "not an answer" in result.content
    if why == "unsupported":
        assert "Ask the question in your reply" in result.content
    if answer.note:
        assert "not now" in result.content


async def test_typed_values_are_checked_by_kind(tmp_path):
    fields = [{"name": "count", "kind": "number"}, {"name": "public", "kind": "boolean"}]
    args = {"question": "How many?", "fields": fields}
    good = Answer(ALLOW_ONCE, values={"count": 3, "public": False})
    result = await _run(tmp_path, args, Front(good))
    assert result.raw_output["values"] == {"count": 3, "public": False}
    bad = Answer(ALLOW_ONCE, values={"count": "three", "public": False})
    result = await _run(tmp_path, args, Front(bad))
    assert result.raw_output["why"] == "mismatch" and "must be a number" in result.content


async def test_nobody_to_ask_says_so(tmp_path):
    result = await _run(tmp_path, {"question": "Which?"})
    assert result.content == NOBODY and result.raw_output["why"] == "nobody"


async def test_a_cancelled_question_cancels_the_call(tmp_path):
    with pytest.raises(asyncio.CancelledError):
        await _run(tmp_path, {"question": "Which?"}, Front(CANCELLED))


async def test_the_question_is_shown_inert(tmp_path):
    question = "Pick one\x1b[2J\u202eevil\nsecond line"
    front = Front(Answer(REJECT_ONCE))
    args = {"question": question, "fields": [{"name": "x", "title": "T\x1b]0;x\x07"}]}
    await _run(tmp_path, args, front)
    (request,) = front.requests
    assert "\x1b" not in request.title and "\n" not in request.title
    assert "\u202e" not in request.reason and "\x1b" not in request.reason
    assert "second line" in request.reason  # its lines kept
    assert "\x1b" not in request.form.fields[0].title
    assert "\x1b" not in json.dumps(request.form.schema(), ensure_ascii=False)


@pytest.mark.parametrize("policy", ["allow", "deny", "stdin"])
async def test_the_notebooks_headless_policy_never_answers_a_question(tmp_path, policy):
    """The kernel's headless policy decides without a person: whatever it says, the
    question stays unanswered (``allow`` approves, which is not an answer)."""
    from iac_kernel.kernel.ask.permission_ui import policy_answer

    async def headless(request):
        option, _note = policy_answer(policy, request, allow_stdin=False)
        return Answer(option, by=f"headless policy ({policy})")

    result = await _run(tmp_path, {"question": "Which?", "choices": ["dev", "prod"]}, headless)
    assert result.raw_output["answered"] is False
    assert "The user answered" not in result.content
