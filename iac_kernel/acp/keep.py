"""The session managers' settle hook: a session's replay lines are kept current after
each turn and when it closes (:mod:`iac_kernel.acp.history_keep`), so its next
``session/load`` sends them.

The replay code (and the ACP SDK it uses, about 0.3 s to import) is not imported on a
turn's way: a kernel and ``iac-kernel acp`` start without it. A turn that ends before it
is in starts importing it in a thread and keeps nothing (the next settle replays what
was written since); a close imports it and keeps.
"""

from __future__ import annotations

import importlib
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from iac_kernel.agent.session import AgentSession

MODULE = "iac_kernel.acp.history_keep"
_started = threading.Lock()
_imported = threading.Event()


def keep_replay(session: AgentSession) -> None:
    """Keep ``session``'s replay lines current (never raises)."""
    if not _imported.is_set() and not session.closed:
        if _started.acquire(blocking=False):
            threading.Thread(target=_load, name="replay-import", daemon=True).start()
        return
    importlib.import_module(MODULE).keep_replay(session)


def _load() -> None:
    try:
        importlib.import_module(MODULE)
        _imported.set()
    except Exception:  # imported again, failing aloud, at the next close
        _started.release()
