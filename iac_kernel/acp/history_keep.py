"""Kept replay lines brought up to a session's log when it settles (after a turn, at
close; its lock held), replaying only what was written since, so even its first load
sends kept lines (docs/sessions.md, "Kept replay")."""

from __future__ import annotations

import logging
import os

from iac_kernel.acp.channel import UPDATE
from iac_kernel.acp.history_cache import Shown, commit, first_unkept, open_writer
from iac_kernel.acp.replay import replay_params
from iac_kernel.acp.replay_key import inputs_key, log_holds
from iac_kernel.acp.transport import encode_notification
from iac_kernel.agent.history import Known
from iac_kernel.agent.session import AgentSession
from iac_kernel.sessions.mask_key import install_key

log = logging.getLogger(__name__)

#: A session's lines are kept whole after a turn or at close (no kept lines yet) only
#: up to this log size; a longer log gets them at its next load (a whole replay of it
#: would hold up the event loop).
KEEP_WHOLE_BYTES = 4 << 20


def keep_replay(session: AgentSession) -> None:
    """Bring ``session``'s kept lines up to its log (after a turn or at close, its lock
    held), replaying only what was written since they were kept; never raises."""
    try:
        _keep(session)
    except Exception as exc:
        log.warning("could not keep the replay of %s: %s", session.session_id, exc)


def _keep(session: AgentSession) -> None:
    writer, session_id = session.writer, session.session_id
    store = writer.store
    log_path = store.path(session_id, ".jsonl")
    if writer.closed or session.busy or not writer.log_size:
        return
    key = install_key(store.root)  # a log with no tool result yet has made none
    if os.stat(log_path, follow_symlinks=False).st_size != writer.log_size:
        return  # not this writer's log as it knows it
    known = Known.now(session.cwd)
    inputs = inputs_key(key, session.cwd, known)
    cache = store.replay_cache(session_id)
    found = cache.read()
    if found is not None and not log_holds(found, inputs, log_path):
        found = None
    if found is not None and found.log.size == writer.log_size:
        return  # nothing new
    if found is not None:
        messages = store.messages_after(session_id, found.log.size, writer.log_size)
    elif writer.log_size <= KEEP_WHOLE_BYTES:
        messages = store.read(session_id).messages
    else:
        return
    if not messages:
        return
    out = open_writer(cache, found)
    if out is None:
        return
    try:
        start, end = first_unkept(found)
        count = start + len(messages)
        for params in replay_params(session.replay(0, known, messages), session_id, end):
            out.write(encode_notification(UPDATE, params))
        if end.settled:
            commit(out, session, Shown(messages, writer.log_size, 0), end, inputs, count)
    finally:
        out.close()
