"""The session managers' close hook: a closing session's replay lines are kept
(:func:`iac_kernel.acp.history_cache.keep_replay`), so its next ``session/load`` sends
them. The replay code (and the ACP SDK it uses) is imported only when a session closes:
a kernel and ``iac-kernel acp`` start without it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from iac_kernel.agent.session import AgentSession


def keep_replay(session: AgentSession) -> None:
    """Keep ``session``'s replay lines current (never raises)."""
    from iac_kernel.acp.history_cache import keep_replay as keep

    keep(session)
