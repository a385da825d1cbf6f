"""What the remote bridge remembers of the editor's sessions (:mod:`.bridge`): the ones
to resume after a drop (opened, not closed) and the ones the editor observes (another
client holds their control lease, :mod:`.lease_notice`)."""

from __future__ import annotations

from typing import Any

from iac_kernel.acp.client_features import from_initialize
from iac_kernel.acp.lease_notice import METHOD as CONTROL
from iac_kernel.acp.lease_notice import says_lost

OPENS = ("session/new", "session/load", "session/resume", "session/fork")
CLOSES = ("session/close", "session/delete")


class Remembered:
    """The editor's sessions, learnt from the answers and updates the bridge relays."""

    def __init__(self) -> None:
        #: Sessions to resume after a drop: id -> {"cwd", "mcpServers"}.
        self.sessions: dict[str, dict[str, Any]] = {}
        #: Sessions the editor is known to observe (another client holds the lease).
        self.observing: set[str] = set()

    def learn(self, method: str, params: Any, answer: dict[str, Any]) -> None:
        """Remember opened sessions, forget closed ones (from a successful answer)."""
        result = answer.get("result")
        if not isinstance(params, dict) or not isinstance(result, dict):
            return
        sid = result.get("sessionId") if method in ("session/new", "session/fork") else None
        sid = sid or params.get("sessionId")
        if not isinstance(sid, str):
            return
        if method == CONTROL and isinstance(result.get("controller"), bool):
            (self.observing.discard if result["controller"] else self.observing.add)(sid)
        elif method in OPENS and isinstance(params.get("cwd"), str):
            self.sessions[sid] = {
                "cwd": params["cwd"],
                "mcpServers": params.get("mcpServers") or [],
            }
        elif method in CLOSES:
            self.forget(sid)

    def noted(self, params: Any) -> None:
        """A ``session/update`` relayed to the editor (one saying the lease was lost)."""
        lost = says_lost(params)
        if lost is not None:
            self.observing.add(lost)

    def forget(self, sid: str) -> None:
        self.sessions.pop(sid, None)
        self.observing.discard(sid)


def declared_notices(initialize: dict[str, Any] | None) -> bool:
    """Whether the editor's ``initialize`` declared ``session.notices``."""
    return from_initialize(initialize or {}).notices
