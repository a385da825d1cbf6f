"""What a client that lost a session's control lease is told (:mod:`.control`).

Two ``session/update`` notifications: a ``session_info_update`` whose ``_meta`` says so
(``{"iac_kernel": {"control": {"controller": false, "reason": ...}}}``, for every client),
and a ``notice`` for the user (clients that declared ``session.notices``). The reason is
``claimed`` (another client claimed the lease) or ``expired`` (the client's connection
ended, the server no longer held it when the client came back, and another client holds
the lease now: the remote bridge tells its editor so after reconnecting).

Standard library only (the bridge uses it too).
"""

from __future__ import annotations

from typing import Any

from iac_kernel.acp.notices import notice_update

METHOD = "_iac/session/control"
CLAIMED = "claimed"
EXPIRED = "expired"
_WHY = {
    CLAIMED: "Another client took control of this session",
    EXPIRED: "This client's connection ended before it came back and another client "
    "controls this session now",
}
_AFTER = (
    ": this client now observes it (it sees the turns but cannot prompt, cancel or change "
    f"settings). To take control back, claim it with {METHOD} while no turn runs."
)


def lost_meta(reason: str) -> dict[str, Any]:
    """The ``_meta`` of the updates that tell a client it lost the lease."""
    return {"iac_kernel": {"control": {"controller": False, "reason": reason}}}


def lost_updates(session_id: str, reason: str, notices: bool) -> list[dict[str, Any]]:
    """The ``session/update`` params that tell a client it lost the lease (``notices``:
    the client declared ``session.notices``)."""
    meta = lost_meta(reason)
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
