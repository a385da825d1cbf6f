"""Notices and compactions as schema 1.25 updates, for clients that declared them.

Without the capability (``session.notices``, ``session.compaction``) both stay what they
were: agent message text (:func:`iac_kernel.acp.updates.to_update`). With it, a live
:class:`~iac_kernel.events.ErrorNotice` (a model error, a retry, an MCP server that
stopped, what a model switch did) is a ``notice``; a compaction is a
``compaction_update`` ``in_progress`` when it starts
(:class:`~iac_kernel.events.CompactionStatus`), then the same id ``completed`` with the
notice as its summary (:class:`~iac_kernel.events.Compacted`), or ``failed`` (with the
error) or ``cancelled``. Other clients see only the finished compaction, as text.
Replays keep the text: notices are live events, not history.
"""

from __future__ import annotations

import uuid
from typing import Any

from iac_kernel.acp.client_features import ClientFeatures
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
