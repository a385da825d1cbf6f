"""Session info for the JupyterLab extension's status bar, carried in display metadata.

The kernel puts it under ``metadata["application/vnd.iac-kernel.session+json"]`` of every
magic's output and of the answer display's final update (not when the turn streams deltas
for the extension, which gets it over its status comm: ``kernel/status.py``), so other
frontends never show it. Shape (camelCase keys; usage counts in snake_case as
:class:`Usage` writes them)::

    {"version": 1, "sessionId": str, "model": str, "mode": str, "title": str | null,
     "cwd": str, "usage": {input_tokens, output_tokens, cache_read_tokens,
     cache_write_tokens, total_tokens},          # this kernel's total for the session
     "turnUsage": {...} | null}                  # the last turn, after a turn
"""

from __future__ import annotations

from typing import Any

from iac_kernel.agent.session import AgentSession
from iac_kernel.events import Usage
from iac_kernel.kernel.paths import shown, shown_model

SESSION_MIME = "application/vnd.iac-kernel.session+json"


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
