"""Asking the notebook user whether a tool call may run: buttons, a stdin prompt, or a policy.

The ``permission_ui`` setting (``IAC_KERNEL_PERMISSION_UI``, ``%permissions ui MODE``;
docs/notebook.md) picks the way, :func:`choose_ui`: ``auto`` shows ipywidgets buttons
when the execute_request allows stdin (interactive frontends; an ``input_request`` when
the headless policy is ``stdin``, for frontends without widgets) and lets the headless
policy decide when it does not (nbclient, papermill, nbval); ``widgets`` always buttons;
``stdin`` an ``input_request`` (the policy without stdin); ``policy`` never asks. The
headless policy (:func:`policy_answer`): ``deny`` rejects; ``allow`` approves, except a
per-call question (``PermissionRequest.danger``) or a form, which no policy answers for a
person; ``stdin`` asks on stdin where it can and otherwise rejects.

A click arrives as a ``comm_msg`` while the cell's execute_request still runs, possibly on
a subshell thread, so the waiting future is resolved with ``loop.call_soon_threadsafe``.
Interrupting the kernel cancels the wait: the buttons close and the card says cancelled.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from iac_kernel.agent.forms import BOOLEAN, CHOICE, NUMBER, FormField
from iac_kernel.agent.permissions import (
    ALLOW_ALWAYS,
    ALLOW_ONCE,
    OPTION_NAMES,
    REJECT_ALWAYS,
    REJECT_ONCE,
    Answer,
    PermissionRequest,
)
from iac_kernel.kernel.ask.questions import (
    PendingQuestions,
    Question,
    answers_form,
    question_state,
)
from iac_kernel.kernel.ask.widgets import WidgetPrompt
from iac_kernel.kernel.io.publish import Publisher, plain_text
from iac_kernel.kernel.render import plan_card
from iac_kernel.kernel.render.turn import CallDisplays

#: Who answered, by how the question was asked (for audit records).
APPROVERS = {"widgets": "notebook (buttons)", "stdin": "notebook (stdin prompt)"}
#: Output metadata naming a question's display id: display ids are not saved with a
#: notebook, so a page loaded later finds the saved buttons by this key to replace them
#: with the answer's record.
DISPLAY_ID_KEY = "iac_display_id"


#: ``ask_stdin(prompt) -> answer``: an input_request on the cell's stdin channel.
AskStdin = Callable[[str], Awaitable[str]]
#: ``on_status(call_id, status)``: lets the tool card show "awaiting_permission".
OnStatus = Callable[[str, str], None]
#: ``on_question(call_id, question)``: the card's ``question`` field (see cards.py).
OnQuestion = Callable[[str, dict[str, Any] | None], None]

DECISION_TEXT = {
    ALLOW_ONCE: "✅ **Allowed once**",
    ALLOW_ALWAYS: "✅ **Allowed always** (this session)",
    REJECT_ONCE: "⛔ **Rejected once**",
    REJECT_ALWAYS: "⛔ **Rejected always** (this session)",
}


def choose_ui(ui: str, allow_stdin: bool, policy: str) -> str:
    """Which way to ask: ``widgets``, ``stdin`` or ``policy`` (see the module docstring)."""
    if ui in ("policy", "widgets"):
        return ui
    if not allow_stdin:
        return "policy"
    return "stdin" if "stdin" in (ui, policy) else "widgets"


def policy_answer(policy: str, request: PermissionRequest, allow_stdin: bool) -> tuple[str, str]:
    """The headless policy's answer and the note the cell shows about it."""
    what = f"`{request.title}` needs approval ({request.reason.rstrip('.')})"
    if policy == "allow":
        if request.form is not None and not request.danger:
            return REJECT_ONCE, (
                f"⛔ **Denied**: {what}. It asks a person to fill in a form "
                f"({request.form.title}), which `headless_policy allow` cannot. Run the cell "
                "interactively to answer it."
            )
        if request.danger:
            return REJECT_ONCE, (
                f"⛔ **Denied**: {what}. It needs a per-call approval by a person, which "
                "`headless_policy allow` does not give. Run the cell interactively to approve it."
            )
        return ALLOW_ONCE, f"✅ **Allowed by policy** `headless_policy allow`: {what}."
    if policy == "stdin":
        why = "`headless_policy` is `stdin`, but this frontend does not allow input requests"
    elif allow_stdin:
        why = "the permission UI is set to `policy` and `headless_policy` is `deny`"
    else:
        why = (
            "nobody can answer in this run (the frontend does not allow stdin, as with "
            "nbclient, papermill or nbval) and `headless_policy` is `deny`"
        )
    return REJECT_ONCE, (
        f"⛔ **Denied by policy**: {what}; {why}. To approve such calls in unattended runs, "
        "set `%config headless_policy allow`, or run the notebook interactively."
    )


def stdin_prompt(request: PermissionRequest) -> str:
    choices = " ".join(f"[{i}] {request.label(o)}" for i, o in enumerate(request.options, 1))
    return (
        f"Allow {request.title}? ({request.reason.rstrip('.')}.) {choices}. "
        f"Answer 1-{len(request.options)}, y (allow once) or n (reject once): "
    )


def parse_stdin_answer(text: str, options: list[str]) -> str | None:
    """The option a typed answer picks, or ``None`` when it names none of them."""
    answer = text.strip().lower().replace("-", " ").replace("_", " ")
    if answer.isdigit() and 1 <= int(answer) <= len(options):
        return options[int(answer) - 1]
    shortcuts = {"y": ALLOW_ONCE, "yes": ALLOW_ONCE, "n": REJECT_ONCE, "no": REJECT_ONCE}
    if answer in shortcuts and shortcuts[answer] in options:
        return shortcuts[answer]
    for option in options:
        if answer in (option.replace("_", " "), OPTION_NAMES[option].lower()):
            return option
    return None


def stdin_field_prompt(field: FormField) -> str:
    """The input_request prompt of one field."""
    parts = [field.title]
    if field.kind == CHOICE:
        choices = " ".join(f"[{i}] {c}" for i, c in enumerate(field.choices, 1))
        parts.append(f"({choices})")
    elif field.kind == BOOLEAN:
        parts.append("(y/n)")
    elif field.kind == NUMBER:
        parts.append("(a number)")
    if field.must_equal is not None:
        parts.append(f"- type {field.must_equal} exactly to approve; a different name rejects")
    elif field.description:
        parts.append(f"- {field.description}")
    return " ".join(parts) + ": "


def parse_field(field: FormField, text: str) -> Any:
    """A typed answer as the field's value (``None`` when it gives none; a value of the
    wrong kind stays text, so :meth:`Form.mismatch` names the problem)."""
    answer = text.strip()
    if not answer:
        return None
    if field.kind == CHOICE:
        if answer.isdigit() and 1 <= int(answer) <= len(field.choices):
            return field.choices[int(answer) - 1]
        return answer
    if field.kind == BOOLEAN:
        lowered = answer.lower()
        if lowered in ("y", "yes", "true", "1"):
            return True
        if lowered in ("n", "no", "false", "0"):
            return False
        return answer
    if field.kind == NUMBER:
        try:
            return float(answer) if any(c in answer for c in ".eE") else int(answer)
        except ValueError:
            return answer
    return answer


class PermissionUI:
    """The ``ask`` callback of one cell's turn."""

    def __init__(
        self,
        out: Publisher,
        *,
        ui: str,
        allow_stdin: bool,
        policy: Callable[[], str],
        ask_stdin: AskStdin | None,
        on_status: OnStatus | None = None,
        questions: PendingQuestions | None = None,
        on_question: OnQuestion | None = None,
        card_shown: bool = False,
        displays: CallDisplays | None = None,
    ):
        self.out = out
        #: Each call's displays in their latest form (a page loaded mid-turn asks for them).
        self.displays = displays if displays is not None else CallDisplays()
        #: The frontend draws the question on the card: buttons without a second copy.
        self.card_shown = card_shown
        self.ui = ui
        self.allow_stdin = allow_stdin
        self.policy = policy
        self.ask_stdin = ask_stdin
        self.on_status = on_status or (lambda _call_id, _status: None)
        self.questions = questions if questions is not None else PendingQuestions()
        self.on_question = on_question or (lambda _call_id, _question: None)
        #: Every answer given in this cell, in order: (call id, option, how it was decided).
        self.answers: list[tuple[str, str, str]] = []

    async def ask(self, request: PermissionRequest) -> str:
        """The answer, carrying who gave it (``Answer.by``) for the audit log."""
        answer = await self._ask(request)
        how = self.answers[-1][2] if self.answers else "notebook"
        by = APPROVERS.get(how, "notebook")
        if how == "policy":
            by = f"headless policy ({self.policy()})"
        values = getattr(answer, "values", None)
        if request.form is not None and answers_form(answer) and values is None:
            values = {}  # an approval of a form question never stands without its values
        return Answer(answer, getattr(answer, "note", ""), by=by, values=values)

    def _show_plan(self, request: PermissionRequest) -> None:
        """An apply's plan (its review), every row of it, as a plan card above the answer."""
        review = request.review if isinstance(request.review, dict) else {}
        if isinstance(review.get("plan"), dict):
            card = plan_card.bundle(review["plan"], request.call_id, rows=review.get("rows"))
            display_id = f"iac-plan-{uuid.uuid4().hex}"
            self.out.display(card, display_id)
            self.displays.shown(request.call_id, display_id, card)

    async def _ask(self, request: PermissionRequest) -> str:
        self._show_plan(request)
        policy = self.policy()
        how = choose_ui(self.ui, self.allow_stdin and self.ask_stdin is not None, policy)
        if how == "policy":
            answer, note = policy_answer(policy, request, self.allow_stdin)
            self.out.markdown(note)
            self.answers.append((request.call_id, answer, "policy"))
            return answer
        self.on_status(request.call_id, "awaiting_permission")
        if how == "widgets":
            try:
                prompt = WidgetPrompt(
                    request, asyncio.get_running_loop(), card_shown=self.card_shown
                )
            except Exception as exc:  # no ipywidgets / no comm manager: nobody can click
                answer, note = policy_answer(policy, request, False)
                self.out.markdown(f"Permission buttons are unavailable ({exc}). {note}")
                self.answers.append((request.call_id, answer, "policy"))
                return answer
            answer = await self._ask_widgets(request, prompt)
        else:
            answer = await self._ask_stdin(request)
        self.answers.append((request.call_id, answer, how))
        if answer in (ALLOW_ONCE, ALLOW_ALWAYS):
            self.on_status(request.call_id, "running")
        return answer

    async def _ask_widgets(self, request: PermissionRequest, prompt: WidgetPrompt) -> str:
        question_id = uuid.uuid4().hex[:16]
        display_id = f"iac-permission-{question_id}"
        question = Question(
            question_id, request, prompt.loop, prompt.future, display_id, prompt.bundle
        )
        marker = {DISPLAY_ID_KEY: display_id}
        bundle = prompt.bundle()
        self.out.display(bundle, display_id, metadata=marker)
        self.displays.shown(request.call_id, display_id, bundle, marker)
        self.on_question(request.call_id, question_state(question_id, request, "pending"))
        self.questions.add(question)
        outcome = "⏹ **Cancelled** while waiting for approval"
        answer: str | None = None
        try:
            answer = await prompt.wait()
            outcome = DECISION_TEXT.get(answer, "⛔ **Rejected**")
            note = getattr(answer, "note", "")
            if note and getattr(answer, "values", None) is not None:
                outcome = f"⛔ **Rejected**: {note}"  # the form's values did not answer it
            elif note:
                outcome = f"⛔ **Rejected with a note** ({note})"
            return answer
        finally:
            # Gone from the registry first: a late click or a stale id does nothing.
            self.questions.remove(question_id)
            prompt.close()
            state = "cancelled" if answer is None else "answered"
            self.on_question(request.call_id, question_state(question_id, request, state, answer))
            # The same display id everywhere it is shown (this cell, a %permissions cell).
            record = {
                "text/markdown": f"{outcome}: `{request.title}`",
                "text/plain": f"{plain_text(outcome)}: {request.title}",
            }
            self.out.display(record, display_id, update=True, metadata=marker)
            self.displays.shown(request.call_id, display_id, record, marker)

    async def _ask_stdin(self, request: PermissionRequest) -> str:
        assert self.ask_stdin is not None
        text = await self.ask_stdin(stdin_prompt(request))
        answer = parse_stdin_answer(text, request.options)
        if answer is None:
            self.out.markdown(
                f"⛔ **Rejected**: the answer {text.strip()!r} is not one of the options, "
                f"so `{request.title}` was not run."
            )
            return REJECT_ONCE
        if request.form is not None and answers_form(answer):
            return await self._ask_stdin_form(request, answer)
        self.out.markdown(f"{DECISION_TEXT[answer]}: `{request.title}`")
        return answer

    async def _ask_stdin_form(self, request: PermissionRequest, option: str) -> str:
        """An approval on stdin asks for the form's values, one prompt per field; values
        that do not answer the form (a typed name that does not match) reject."""
        assert self.ask_stdin is not None and request.form is not None
        values = {}
        for field in request.form.fields:
            values[field.name] = parse_field(field, await self.ask_stdin(stdin_field_prompt(field)))
        problem = request.form.mismatch(values)
        if problem is not None:
            self.out.markdown(f"⛔ **Rejected**: {problem}, so `{request.title}` was not run.")
            return Answer(REJECT_ONCE, problem, values=values)
        self.out.markdown(f"{DECISION_TEXT[option]}: `{request.title}`")
        return Answer(option, values=values)
