"""Session info for status bars and consoles, pushed over a comm and in kernel_info.

The JupyterLab extension opens a comm to target :data:`STATUS_TARGET` (in a notebook or
a console). The kernel answers at once with ``{"type": "session_info", "info": {...}}``
and sends the same message again on every change (a turn starts or ends, a question
waits or is answered, ``%mode``/``%model``/``%new``/``%load``…), to every open comm. The
info is the :mod:`~iac_kernel.kernel.session_info` shape plus ``pending`` (questions
waiting for an answer), ``busy`` and ``turns`` (each running turn's execute_request
``msgId`` and notebook ``cellId``: a page loaded while a turn runs puts the rest of the
turn's output into that cell); before the first prompt there is no session yet:
``sessionId`` is ``null`` and ``model``/``mode`` are the kernel's defaults. Every
``kernel_info_reply`` carries the same info under ``"iac_kernel"`` (clients ask for it at
start, after a restart and when they reconnect). ``turnUsage`` is the running turn's so
far, else the last turn's (what the answer's metadata carries without the extension).

A client that renders some of the kernel's MIME types itself says so when it opens the
comm: ``{"renders": [MIME, ...]}``. While such a comm is open, turns stream their text as
deltas for it (``kernel/display.py``).

Requests a client may send on the comm:

* ``{"request": "session_info"}``: the info again;
* ``{"request": "full_output", "callId": ID}``: ``{"type": "full_output", "callId",
  "output": str | null, "error": str | null}``: everything a tool call printed;
* ``{"request": "answer", "questionId": ID, "option": OPTION, "note": str?, "values": {}?}``:
  answers a pending permission question (``values``: the question's form filled in, needed
  to approve a question with a ``form``); ``{"type": "answer", "ok": bool, "error": str |
  null}``.

* ``{"request": "call_outcome", "callId": ID, "sessionId": ID}``: ``{"type":
  "call_outcome", "callId", "card": <payload> | null, "outcome": str | null}``: what became
  of a call whose card a notebook saved while it asked (``done``, ``failed``, ``denied``,
  ``not_run``, ``awaiting_permission`` when it still asks, null when nobody knows).
* ``{"request": "plan_row", "key": SHA256, "address": ADDR}``: ``{"type": "plan_row",
  "key", "address", "diff": [line] | null}``: one row's attribute diff of a plan card whose
  compact rows left it out (null when this kernel showed no such plan or row).
* ``{"request": "call_card", "callId": ID?, "displayId": ID?}``: ``{"type": "call_card",
  "callId", "displayId", "outputs": [output] | null}``: every display of a call of a
  running turn, named by the call or by one of its display ids, in the order they were
  created and in their latest form (the tool card with its question, answer, output lines
  and status; the plan card shown with an apply's question; the question's buttons or the
  record of its answer), each a ``display_data`` output with its ``displayId``; null when
  no running turn has it. A page loaded mid-turn asks when an update names a display it
  never saw (:mod:`~iac_kernel.kernel.call_displays`).

The kernel also sends ``{"type": "card", "card": <toolcall+json payload>}`` on every tool
card change, so a client can update a card it restored from a saved notebook.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from iac_kernel.kernel.form_ui import form_payload
from iac_kernel.kernel.paths import sanitize, shown_model
from iac_kernel.kernel.permission_ui import button_order
from iac_kernel.kernel.question_text import button_label, reason_text
from iac_kernel.kernel.questions import PendingQuestions
from iac_kernel.kernel.session_info import session_info
from iac_kernel.kernel.state import KernelState
from iac_kernel.redact import redact_value
from iac_kernel.terraform.plan_rows import row_diff

STATUS_TARGET = "iac-kernel.status"

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


def kernel_session_info(
    state: KernelState,
    questions: PendingQuestions,
    busy: bool,
    turns: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The info of the current session, or of the defaults before there is one; ``turns``
    are the running turns' execute_request ids, cells and execution counts (``{"msgId",
    "cellId", "executionCount"}``)."""
    session = state.current
    if session is not None and not session.closed:
        info = session_info(session)
    else:
        info = {
            "version": 1,
            "sessionId": None,
            "model": shown_model(str(state.settings.model or _default_model())),
            "mode": state.settings.mode,
            "title": state.notebook_title(),
            "cwd": state.cwd,
            "usage": None,
            "turnUsage": None,
        }
    info["pending"] = len(questions)
    info["questions"] = [
        {
            "id": q.id,
            "callId": q.request.call_id,
            "title": q.request.title,
            "danger": q.danger,
            "reason": reason_text(q.request),
            "options": button_order(q.request),
            "labels": {o: button_label(q.request, o) for o in q.request.options},
            "form": form_payload(q.request.form),
            "command": (q.request.input or {}).get("command")
            if isinstance(q.request.input, dict)
            else None,
        }
        for q in list(questions.questions.values())
    ]
    info["busy"] = busy
    info["turns"] = turns or []
    return info


def _default_model() -> str:
    from iac_kernel.models.registry import default_model_id

    return default_model_id()


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
        for comm in list(self.comms):
            try:
                _send(comm, {"type": "card", "card": payload})
            except Exception:
                log.debug("status comm send failed", exc_info=True)

    def push(self) -> None:
        """Send the info to every open comm when it changed."""
        if not self.comms:
            return
        info = self.info()
        if info == self._last:
            return
        self._last = info
        for comm in list(self.comms):
            try:
                _send(comm, {"type": "session_info", "info": info})
            except Exception:
                log.debug("status comm send failed", exc_info=True)
