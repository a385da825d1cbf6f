"""Session info for status bars and consoles: in display metadata, over a comm and in
kernel_info.

The info (:func:`session_info`; camelCase keys, usage counts as
:class:`~iac_kernel.events.Usage` writes them)::

    {"version": 1, "sessionId", "model", "provider", "mode", "title": str | null, "cwd",
     "usage": {...},        # this kernel's total for the session
     "turnUsage": {...} | null}

rides under ``metadata[SESSION_MIME]`` on every magic's output and on the answer's final
update when the turn does not stream deltas, so other frontends never show it.

The status comm (target :data:`STATUS_TARGET`, opened by the JupyterLab extension in a
notebook or console) gets ``{"type": "session_info", "info"}`` at once and again on every
change, to every open comm; every ``kernel_info_reply`` carries the same under
``"iac_kernel"``. There the info adds ``pending``, ``questions`` (each waiting question's
card ``question`` field with its ``callId``, ``title`` and ``command``), ``busy`` and
``turns`` (each running turn's ``msgId``, ``cellId`` and ``executionCount``: a page
loaded mid-turn puts the rest of the turn into that cell) and ``approvals`` (each apply
of this kernel that waits for other people's approval: ``{id, waiting, rule}``, its
``waiting`` the record's ``waiting_text()``, :func:`iac_kernel.terraform.gate.waiting`)
and ``pullRequests`` (the pull or merge requests this kernel opened, newest last:
``{number, url, noun}``, :func:`iac_kernel.forge.clients.opened_here`; a new one is
pushed at once); before the first prompt
``sessionId`` is null and ``model``/``mode`` are the kernel's defaults. ``turnUsage`` is
the running turn's so far, else the last turn's. Opening the comm with ``{"renders":
[MIME, ...]}`` says what the client renders itself: while it is open, turns stream text
as deltas (:mod:`~iac_kernel.kernel.render.display`). The kernel also sends ``{"type":
"card", "card": <toolcall payload>}`` on every tool card change.

Requests (``{"request": NAME, ...}``) and their replies (``{"type": NAME, ...}``):

* ``session_info``: the info again.
* ``full_output`` ``{callId}``: ``{callId, output: str | null, error: str | null}``:
  everything a tool call printed.
* ``answer`` ``{questionId, option, note?, values?}``: ``{ok, error}``: answers a pending
  question (``values``: its form filled in, needed to approve a question with a form).
* ``call_outcome`` ``{callId, sessionId}``: ``{callId, card | null, outcome}``: what
  became of a call whose card a notebook saved while it asked (``done``, ``failed``,
  ``denied``, ``not_run``, ``awaiting_permission``, null when nobody knows).
* ``plan_row`` ``{key, address}``: ``{key, address, diff: [line] | null}``: a plan row's
  attribute diff that its card's compact rows left out.
* ``call_card`` ``{callId?, displayId?}``: ``{callId, displayId, outputs | null}``: every
  display of a call of a running turn in its latest form, in creation order, each a
  ``display_data`` output with its ``displayId``
  (:mod:`~iac_kernel.kernel.render.turn`): a page loaded mid-turn asks when an
  update names a display it never saw.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from iac_kernel.agent.session import AgentSession
from iac_kernel.events import Usage
from iac_kernel.forge import clients as forge_clients
from iac_kernel.kernel.ask.questions import PendingQuestions, question_state
from iac_kernel.kernel.io.paths import sanitize, shown, shown_model
from iac_kernel.kernel.session.state import KernelState, RunningTurn
from iac_kernel.models.registry import default_model_id
from iac_kernel.redact import redact_value
from iac_kernel.terraform import gate
from iac_kernel.terraform.summary import row_diff

STATUS_TARGET = "iac-kernel.status"
SESSION_MIME = "application/vnd.iac-kernel.session+json"

log = logging.getLogger(__name__)

#: ``full_output(call_id) -> (text, error)``.
FullOutput = Callable[[str], tuple[str | None, str | None]]
#: ``answer(question_id, option, note, values) -> error or None``.
Answer = Callable[[str, str, str, dict[str, Any] | None], str | None]
#: ``call_outcome(call_id, session_id) -> {"card", "outcome"}``.
CallOutcome = Callable[[str, str], dict[str, Any]]
#: ``call_card(call_id, display_id) -> (call_id, outputs) or None``.
CallCard = Callable[[str | None, str | None], tuple[str, list[dict[str, Any]]] | None]


def _send(comm: Any, data: dict[str, Any]) -> None:
    """Send on a status comm; paths are written relatively as in the cells (paths.sanitize)."""
    comm.send(sanitize(data))


def session_info(session: AgentSession, turn_usage: Usage | None = None) -> dict[str, Any]:
    return {
        "version": 1,
        "sessionId": session.session_id,
        "model": shown_model(session.model_id),
        "provider": session.provider,
        "mode": session.mode,
        "title": session.title,
        "cwd": shown(session.cwd),
        "usage": session.usage.to_dict(),
        "turnUsage": turn_usage.to_dict() if turn_usage is not None else None,
    }


def metadata(session: AgentSession | None, turn_usage: Usage | None = None) -> dict[str, Any]:
    """Display metadata carrying the session info (empty without a session)."""
    if session is None or session.closed:
        return {}
    return {SESSION_MIME: session_info(session, turn_usage)}


def ending_metadata(session: AgentSession, turn_usage: Usage) -> dict[str, Any]:
    """:func:`metadata` as a turn ends: the session's total counts the turn already (it
    is added to the session only after ``prompt()`` returns)."""
    total = Usage()
    total.add(session.usage)
    total.add(turn_usage)
    info = metadata(session, turn_usage)
    info[SESSION_MIME]["usage"] = total.to_dict()
    return info


def kernel_session_info(
    state: KernelState,
    questions: PendingQuestions,
    running: list[RunningTurn],
    last_turn: tuple[str, Usage] | None = None,
) -> dict[str, Any]:
    """The info of the current session, or of the defaults before there is one, with the
    waiting questions and the running turns; ``last_turn``: the session and usage of the
    last turn that ended."""
    session = state.current
    if session is not None and not session.closed:
        info = session_info(session)
        live = [t.usage for t in running if t.usage is not None]
        if live:  # mid-turn: the session's total includes the turn's finished model calls
            total, turn = Usage(), Usage()
            for usage in live:
                turn.add(usage)
            total.add(session.usage)
            total.add(turn)
            info["usage"], info["turnUsage"] = total.to_dict(), turn.to_dict()
        elif not running and last_turn and last_turn[0] == session.session_id:
            # As the answer's metadata carries it without the extension.
            info["turnUsage"] = last_turn[1].to_dict()
    else:
        info = {
            "version": 1,
            "sessionId": None,
            "model": shown_model(str(state.settings.model or default_model_id())),
            "mode": state.settings.mode,
            "title": state.notebook_title(),
            "cwd": state.cwd,
            "usage": None,
            "turnUsage": None,
        }
    info["pending"] = len(questions)
    info["questions"] = [
        {
            **question_state(q.id, q.request, "pending"),
            "callId": q.request.call_id,
            "title": q.request.title,
            "command": q.request.input.get("command")
            if isinstance(q.request.input, dict)
            else None,
        }
        for q in list(questions.questions.values())
    ]
    info["busy"] = bool(running)
    info["turns"] = [
        {"msgId": t.msg_id, "cellId": t.cell_id, "executionCount": t.execution_count}
        for t in running
        if t.msg_id
    ]
    info["approvals"] = gate.waiting()
    info["pullRequests"] = forge_clients.opened_here()
    return info


class StatusChannel:
    """The open status comms of this kernel."""

    def __init__(
        self,
        info: Callable[[], dict[str, Any]],
        full_output: FullOutput,
        answer: Answer,
        call_outcome: CallOutcome | None = None,
        *,
        call_card: CallCard | None = None,
    ):
        self.info = info
        self.full_output = full_output
        self.answer = answer
        self.call_outcome = call_outcome
        self.call_card = call_card
        self.comms: list[Any] = []
        #: What each open comm said it renders (``{"renders": [...]}`` in its open message).
        self._renders: dict[int, frozenset[str]] = {}
        self._last: dict[str, Any] | None = None

    def register(self, comm_manager: Any) -> None:
        comm_manager.register_target(STATUS_TARGET, self._opened)
        gate.listeners.append(self.push)  # an apply starts or stops waiting for approvals
        forge_clients.listeners.append(self.push)  # a pull or merge request was opened

    def renders(self, mime: str) -> bool:
        """Whether an open comm's client renders ``mime`` itself."""
        return any(mime in self._renders.get(id(comm), ()) for comm in self.comms)

    def _opened(self, comm: Any, msg: dict[str, Any]) -> None:
        self.comms.append(comm)
        data = msg.get("content", {}).get("data") if isinstance(msg, dict) else None
        renders = data.get("renders") if isinstance(data, dict) else None
        if isinstance(renders, list):
            self._renders[id(comm)] = frozenset(r for r in renders if isinstance(r, str))
        comm.on_msg(lambda msg: self._received(comm, msg))
        comm.on_close(lambda _msg: self._closed(comm))
        _send(comm, {"type": "session_info", "info": self.info()})

    def _closed(self, comm: Any) -> None:
        if comm in self.comms:
            self.comms.remove(comm)
        self._renders.pop(id(comm), None)

    def _received(self, comm: Any, msg: dict[str, Any]) -> None:
        data = msg.get("content", {}).get("data") or {}
        request = data.get("request") if isinstance(data, dict) else None
        try:
            if request == "session_info":
                _send(comm, {"type": "session_info", "info": self.info()})
            elif request == "full_output":
                call_id = str(data.get("callId", ""))
                text, error = self.full_output(call_id)
                _send(
                    comm, {"type": "full_output", "callId": call_id, "output": text, "error": error}
                )
            elif request == "answer":
                values = data.get("values")
                error = self.answer(
                    str(data.get("questionId", "")),
                    str(data.get("option", "")),
                    str(data.get("note") or ""),
                    values if isinstance(values, dict) else None,
                )
                _send(comm, {"type": "answer", "ok": error is None, "error": error})
            elif request == "plan_row":  # a row's diff that did not fit its plan card
                key, address = str(data.get("key", "")), str(data.get("address", ""))
                diff = row_diff(key, address)
                shown = redact_value(diff) if diff is not None else None
                _send(comm, {"type": "plan_row", "key": key, "address": address, "diff": shown})
            elif request == "call_card":  # a page loaded mid-turn: a card it never saw
                self._send_call_card(comm, data)
            elif request == "call_outcome" and self.call_outcome is not None:
                call_id = str(data.get("callId", ""))
                found = self.call_outcome(call_id, str(data.get("sessionId", "")))
                _send(comm, {"type": "call_outcome", "callId": call_id, **found})
            else:
                _send(comm, {"type": "error", "error": f"unknown request {request!r}"})
        except Exception as exc:  # a bad request must not break the comm
            log.exception("status comm request failed")
            _send(comm, {"type": "error", "error": str(exc)})

    def _send_call_card(self, comm: Any, data: dict[str, Any]) -> None:
        call_id = data.get("callId") if isinstance(data.get("callId"), str) else None
        display_id = data.get("displayId") if isinstance(data.get("displayId"), str) else None
        found = self.call_card(call_id, display_id) if self.call_card is not None else None
        reply = {"type": "call_card", "callId": call_id, "displayId": display_id, "outputs": None}
        if found is not None:
            reply["callId"], reply["outputs"] = found
        _send(comm, reply)

    def push_card(self, payload: dict[str, Any]) -> None:
        """Every card change, so a client can update a card restored from a saved notebook."""
        self._broadcast({"type": "card", "card": payload})

    def push(self) -> None:
        """Send the info to every open comm when it changed."""
        if not self.comms:
            return
        info = self.info()
        if info != self._last:
            self._last = info
            self._broadcast({"type": "session_info", "info": info})

    def _broadcast(self, data: dict[str, Any]) -> None:
        for comm in list(self.comms):
            try:
                _send(comm, data)
            except Exception:
                log.debug("status comm send failed", exc_info=True)
