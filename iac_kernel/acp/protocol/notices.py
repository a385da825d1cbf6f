"""Notices and compactions as schema 1.25 updates, for clients that declared them.

Without the capability (``session.notices``, ``session.compaction``) both stay what they
were: agent message text (:func:`iac_kernel.acp.protocol.updates.to_update`). With it, a live
:class:`~iac_kernel.events.ErrorNotice` (a model error, a retry, an MCP server that
stopped, what a model switch did) is a ``notice``; a compaction is a
``compaction_update`` ``in_progress`` when it starts
(:class:`~iac_kernel.events.CompactionStatus`), then the same id ``completed`` with the
notice as its summary (:class:`~iac_kernel.events.Compacted`), or ``failed`` (with the
error) or ``cancelled``. Other clients see only the finished compaction, as text.
Replays keep the text: notices are live events, not history.

A client that lost a session's control lease (:mod:`iac_kernel.acp.session.control`) is
told with two updates: a ``session_info_update`` whose ``_meta`` says so
(``{"iac_kernel": {"control": {"controller": false, "reason": ...}}}``, for every client)
and a ``notice`` (clients that declared ``session.notices``). The reason is ``claimed``
(another client claimed the lease) or ``expired`` (the client's connection ended and
another client holds the lease now: the remote bridge says so after reconnecting).
"""

from __future__ import annotations

import uuid
from typing import Any

from iac_kernel.acp.protocol.client_features import ClientFeatures
from iac_kernel.events import AgentEvent, Compacted, CompactionStatus, ErrorNotice

TITLE_LIMIT = 120
#: Notices that mean the turn's work failed (the rest are warnings: retries, notes).
ERROR_PREFIXES = ("Model error", "Could not")


def live_update(event: AgentEvent, features: ClientFeatures) -> dict[str, Any] | None:
    """The wire form of ``event`` as a notice or compaction update, if the client takes
    it; ``None`` to send it as usual."""
    if isinstance(event, ErrorNotice) and features.notices:
        return notice_update(event.message)
    if isinstance(event, Compacted) and features.compaction:
        return {
            "sessionUpdate": "compaction_update",
            "compactionId": event.compaction_id or str(uuid.uuid4()),
            "status": "completed",
            "summary": [{"type": "text", "text": event.notice}],
            "_meta": {"iac_kernel": {"summarizedMessages": event.summarized_messages}},
        }
    if isinstance(event, CompactionStatus) and features.compaction:
        update: dict[str, Any] = {
            "sessionUpdate": "compaction_update",
            "compactionId": event.compaction_id,
            "status": event.status,
        }
        if event.error:
            update["error"] = event.error
        return update
    return None


def notice_update(message: str) -> dict[str, Any]:
    """A ``notice``: its first line as the title, the whole text as the description."""
    text = message.strip() or "Notice"
    first = text.splitlines()[0]
    title = first if len(first) <= TITLE_LIMIT else first[: TITLE_LIMIT - 1] + "…"
    update: dict[str, Any] = {
        "sessionUpdate": "notice",
        "severity": "error" if text.startswith(ERROR_PREFIXES) else "warning",
        "title": title,
    }
    if title != text:
        update["description"] = text
    return update


#: The request a client claims a session's control with (:mod:`iac_kernel.acp.session.control`).
CONTROL_METHOD = "_iac/session/control"
CLAIMED = "claimed"
EXPIRED = "expired"
_WHY = {
    CLAIMED: "Another client took control of this session",
    EXPIRED: "This client's connection ended before it came back and another client "
    "controls this session now",
}
_AFTER = (
    ": this client now observes it (it sees the turns but cannot prompt, cancel or change "
    f"settings). To take control back, claim it with {CONTROL_METHOD} while no turn runs."
)


def lost_updates(session_id: str, reason: str, notices: bool) -> list[dict[str, Any]]:
    """The ``session/update`` params that tell a client it lost the lease (``notices``:
    the client declared ``session.notices``)."""
    meta = {"iac_kernel": {"control": {"controller": False, "reason": reason}}}
    updates = [{"sessionUpdate": "session_info_update", "_meta": meta}]
    if notices:
        updates.append({**notice_update(_WHY[reason] + _AFTER), "_meta": meta})
    return [{"sessionId": session_id, "update": update} for update in updates]


def says_lost(params: Any) -> str | None:
    """The session id of ``session/update`` params that tell the lease was lost."""
    if not isinstance(params, dict) or not isinstance(params.get("update"), dict):
        return None
    meta = params["update"].get("_meta")
    control = meta.get("iac_kernel", {}).get("control") if isinstance(meta, dict) else None
    if isinstance(control, dict) and control.get("controller") is False:
        sid = params.get("sessionId")
        return sid if isinstance(sid, str) else None
    return None
