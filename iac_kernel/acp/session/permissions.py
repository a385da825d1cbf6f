"""The permission gate's questions as ``session/request_permission`` or as ACP form
elicitation (schema 1.25), and the answers.

The request uses the live tool call's id, title, kind and input (plus the diff for an
edit), and offers exactly the options the gate allows for that call. Answers accepted:

* spec form: ``{"outcome": {"outcome": "selected", "optionId": "allow_once"}}`` or
  ``{"outcome": {"outcome": "cancelled"}}`` (the turn is being cancelled);
* alias forms: ``{"outcome": "allowed", "option_id": "allow_once"}`` and
  ``{"outcome": "denied"}``.

A selected ``reject_*`` option is a refusal, never an approval; anything unreadable is
a refusal too. When the turn is cancelled while the question is open, the pending
request is abandoned (the turn's task is cancelled) and the late answer is ignored.

Clients that declared ``elicitation.form`` get ``elicitation/create`` forms instead for:
the typed confirmation of a destroy or a production apply (``request.form``,
:func:`iac_kernel.agent.forms.typed_confirmation`: only the exact workspace name
approves, once; anything else, a decline or a cancel rejects), the agent's own
questions (:mod:`iac_kernel.agent.questions`) and an MCP server's forms. An MCP server's
URL elicitation is ``mode: "url"`` for clients that declared ``elicitation.url`` (then
``elicitation/complete`` once the server says it completed), declined for others
(:mod:`iac_kernel.agent.questions`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from acp import RequestError
from acp.meta import CLIENT_METHODS
from acp.schema import PermissionOption, RequestPermissionRequest, ToolCallUpdate
from acp.utils import serialize_params

from iac_kernel.acp.protocol.updates import acp_kind, diff_content, text_content
from iac_kernel.agent import questions
from iac_kernel.agent.forms import Form
from iac_kernel.agent.permissions import (
    ALLOW_ONCE,
    CANCELLED,
    REJECT_ONCE,
    Answer,
    PermissionRequest,
)
from iac_kernel.textsafe import printable, shown_lines

log = logging.getLogger(__name__)
#: Tasks forwarding ``elicitation/complete`` (kept so they are not collected early).
_PENDING: set[asyncio.Task[None]] = set()

METHOD = CLIENT_METHODS["session_request_permission"]
ELICIT = CLIENT_METHODS["elicitation_create"]
#: Agent -> client notification: a URL elicitation completed (schema 1.25).
ELICIT_COMPLETE = "elicitation/complete"
#: How long a forwarded URL elicitation may wait for the server's completion.
COMPLETE_WAIT = 900.0
#: Returned for answers we cannot read: not an offered option, so the gate refuses.
UNREADABLE = "unreadable"
#: Option ids of a question's choices for clients without forms: ``choice-0``, ...
CHOICE_PREFIX = "choice-"


def request_params(session_id: str, request: PermissionRequest) -> dict[str, Any]:
    """The ``session/request_permission`` params for one gate question."""
    tool_call = ToolCallUpdate(
        tool_call_id=request.call_id,
        title=printable(request.title or request.tool_name),
        kind=acp_kind(request.kind),
        raw_input=request.input,
        content=[diff_content(request.diff)] if request.diff else _review_content(request),
        field_meta={
            "iac_kernel": {
                "tool": request.tool_name,
                "reason": request.reason,
                **({"review": _review_meta(request.review)} if request.review is not None else {}),
            }
        },
    )
    options = [
        PermissionOption(option_id=option, name=request.label(option), kind=option)
        for option in request.options
    ]
    params = RequestPermissionRequest(session_id=session_id, tool_call=tool_call, options=options)
    return serialize_params(params)


def question_params(
    session_id: str, request: PermissionRequest, choices: list[str] | None
) -> dict[str, Any]:
    """``session/request_permission`` params for the agent's question to a client without
    form elicitation: one option per choice, then "Decline"; without choices only the
    decline (the client cannot take free-form values; the model asks in its reply)."""
    params = request_params(session_id, request)
    decline = "Decline" if choices else "Dismiss (this client cannot answer it here)"
    options = [
        PermissionOption(option_id=f"{CHOICE_PREFIX}{i}", name=choice, kind=ALLOW_ONCE)
        for i, choice in enumerate(choices or [])
    ]
    options.append(PermissionOption(option_id=REJECT_ONCE, name=decline, kind=REJECT_ONCE))
    params["options"] = [serialize_params(o) for o in options]
    return params


def _review_meta(review: Any) -> Any:
    """The review without the plan's compact rows (every row: for the notebook's plan
    card); the bounded ``plan`` stays, so a large plan keeps the question small."""
    return {k: v for k, v in review.items() if k != "rows"} if isinstance(review, dict) else review


def _review_content(request: PermissionRequest) -> list[Any] | None:
    """A reviewed call (terraform apply: the plan summary, replacements and deletes first,
    failed checks) shows its review text as the question's content."""
    text = request.review.get("text") if isinstance(request.review, dict) else None
    return [text_content(shown_lines(text))] if text else None


def parse_answer(result: Any) -> str:
    """An option id, ``"cancelled"``, or :data:`UNREADABLE`, from the client's answer."""
    if not isinstance(result, dict):
        return UNREADABLE
    outcome = result.get("outcome")
    if isinstance(outcome, dict):
        kind = outcome.get("outcome")
        if kind == "cancelled":
            return CANCELLED
        if kind == "selected":
            return _option_id(outcome) or UNREADABLE
        return UNREADABLE
    if outcome == "allowed":
        return _option_id(result) or ALLOW_ONCE
    if outcome == "denied":
        option = _option_id(result)
        return option if option and option.startswith("reject") else REJECT_ONCE
    if outcome == "cancelled":
        return CANCELLED
    if outcome == "selected":
        return _option_id(result) or UNREADABLE
    return UNREADABLE


def _option_id(data: dict[str, Any]) -> str | None:
    value = data.get("optionId", data.get("option_id"))
    return value if isinstance(value, str) else None


def form_params(session_id: str, request: PermissionRequest, form: Form) -> dict[str, Any]:
    """The ``elicitation/create`` params (form mode, tied to the tool call): the agent's
    own question as it asked it, else the call, its review and what to type."""
    message = request.reason
    if request.kind != questions.QUESTION:
        text = request.review.get("text") if isinstance(request.review, dict) else None
        target = form.confirms
        ask = f"To approve this one call, type the workspace name `{target}`." if target else ""
        message = "\n\n".join(part for part in (request.title, message, text, ask) if part)
    return {
        "sessionId": session_id,
        "toolCallId": request.call_id,
        "mode": "form",
        "message": message,
        "requestedSchema": form.schema(),
    }


def url_params(session_id: str, request: PermissionRequest) -> dict[str, Any]:
    """The ``elicitation/create`` params (url mode, tied to the tool call) of an MCP
    server's URL elicitation (``request.url``)."""
    link = request.url
    return {
        "sessionId": session_id,
        "toolCallId": request.call_id,
        "mode": "url",
        "elicitationId": link.elicitation_id,
        "url": link.url,
        "message": request.reason,
    }


def form_answer(result: Any, form: Form, by: str, *, check: bool = True) -> Answer:
    """The answer an ``elicitation/create`` result gives: an accepted form carries its
    values, checked against ``form`` when ``check`` (the agent's own question leaves that
    to the tool, which tells the model what did not fit); a decline or cancel rejects."""
    if not isinstance(result, dict) or result.get("action") != "accept":
        return Answer(REJECT_ONCE, by=by)
    content = result.get("content")
    values = dict(content) if isinstance(content, dict) else {}
    problem = form.mismatch(values) if check else None
    if problem is not None:
        return Answer(REJECT_ONCE, note=problem, by=by)
    return Answer(ALLOW_ONCE, by=by, values=values)


class _NoAnswer(Exception):
    """The client gave no answer to read: ``outcome`` is the gate's."""

    def __init__(self, outcome: Any) -> None:
        super().__init__(outcome)
        self.outcome = outcome


class PermissionAsker:
    """The ``ask`` coroutine the agent core calls, bound to one session and connection."""

    def __init__(self, channel: Any, session_id: str, by: str = "ACP client") -> None:
        self.channel = channel
        self.session_id = session_id
        #: Who answers, for audit records (``ACP client (Zed)``, ``editor via the kernel
        #: endpoint (...)``).
        self.by = by

    async def __call__(self, request: PermissionRequest) -> str:
        try:
            return await self._ask(request)
        except _NoAnswer as no:
            return no.outcome

    async def _ask(self, request: PermissionRequest) -> Any:
        features = getattr(self.channel, "features", None)
        if request.url is not None:
            return await self._url(request, features)
        if request.form is not None and features is not None and features.elicitation_form:
            return await self._form(request, request.form)
        if request.kind == questions.QUESTION:
            return await self._plain_question(request)
        params = request_params(self.session_id, request)
        answer = parse_answer(await self._request(METHOD, params, "permission request"))
        if answer == UNREADABLE:
            log.warning("unreadable permission answer; treating it as a refusal")
        return Answer(answer, by=self.by)

    async def _request(
        self, method: str, params: dict[str, Any], what: str, failed: Any = UNREADABLE
    ) -> Any:
        """The client's answer; :class:`_NoAnswer` with ``failed`` when it answered with
        an error, with ``cancelled`` when it is gone (nobody can approve, and the turn is
        being torn down)."""
        try:
            return await self.channel.request(method, params)
        except RequestError as exc:
            log.warning("client failed the %s: %s", what, exc)
            raise _NoAnswer(failed) from None
        except ConnectionError:
            raise _NoAnswer(CANCELLED) from None

    async def _url(self, request: PermissionRequest, features: Any) -> Any:
        """An MCP server's URL elicitation: ``elicitation/create`` url for a client that
        declared ``elicitation.url`` (its ``elicitation/complete`` follows the server's),
        a decline without asking for any other."""
        by = f"{self.by}, url elicitation"
        if features is None or not features.elicitation_url:
            return Answer(REJECT_ONCE, note="the client cannot open URLs for the user", by=by)
        params = url_params(self.session_id, request)
        declined = Answer(REJECT_ONCE, by=by)
        result = await self._request(ELICIT, params, "url elicitation", declined)
        accepted = isinstance(result, dict) and result.get("action") == "accept"
        if accepted and request.url.completed is not None:
            task = asyncio.ensure_future(self._complete(request.url))
            _PENDING.add(task)
            task.add_done_callback(_PENDING.discard)
        return Answer(ALLOW_ONCE if accepted else REJECT_ONCE, by=by)

    async def _complete(self, link: Any) -> None:
        """``elicitation/complete`` once the MCP server says the URL's interaction is done."""
        notify = getattr(self.channel, "notify", None)
        if notify is None:
            return
        try:
            await asyncio.wait_for(link.completed.wait(), COMPLETE_WAIT)
        except TimeoutError:
            return
        await notify(ELICIT_COMPLETE, {"elicitationId": link.elicitation_id})

    async def _plain_question(self, request: PermissionRequest) -> Any:
        """The agent's question to a client without form elicitation: the choices of a
        single choice field as options; otherwise a question it can only decline."""
        choices = questions.plain_choices(request)
        params = question_params(self.session_id, request, choices)
        declined = Answer(REJECT_ONCE, by=self.by)
        picked = parse_answer(await self._request(METHOD, params, "question", declined))
        if picked == CANCELLED:
            return CANCELLED
        if choices is None:
            return Answer(questions.UNSUPPORTED, by=self.by)
        index = picked.removeprefix(CHOICE_PREFIX)
        if picked.startswith(CHOICE_PREFIX) and index.isdigit() and int(index) < len(choices):
            values = questions.choice_values(request, choices[int(index)])
            return Answer(ALLOW_ONCE, by=self.by, values=values)
        return declined

    async def _form(self, request: PermissionRequest, form: Form) -> Any:
        """Ask the question's form (a typed confirmation, or the agent's question)."""
        params = form_params(self.session_id, request, form)
        result = await self._request(ELICIT, params, "form")
        what = "typed confirmation" if form.confirms is not None else "form"
        by = f"{self.by}, {what}"
        return form_answer(result, form, by, check=request.kind != questions.QUESTION)


def approver(origin: str, client_info: Any) -> str:
    """Who answers this connection's questions: an ACP client, or an editor attached to
    a kernel's endpoint (the session manager's origin is then ``kernel``)."""
    name = getattr(client_info, "name", None)
    if name is None and isinstance(client_info, dict):
        name = client_info.get("name")
    what = "editor via the kernel endpoint" if origin == "kernel" else "ACP client"
    return f"{what} ({name})" if isinstance(name, str) and name else what
