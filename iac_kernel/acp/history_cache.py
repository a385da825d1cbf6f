"""``session/load``'s replay, sent from the lines a load sent before when they still hold.

Building tens of thousands of updates from a long log costs several times reading it;
the lines a load sends are therefore kept beside the log
(:mod:`iac_kernel.sessions.replay_cache`), and a later load sends them as they are,
replaying only the messages written since (and appending their lines). They are used
only when they are what a whole replay would send now (:mod:`.replay_key`), for a
session opened from disk for this load and idle (a live one's history may hold what its
log does not yet). Sessions keep them current as they settle (:mod:`.history_keep`).

Over a pipe or socket the kept lines go out from a thread (``sendfile``) as soon as the
session's lock is taken, while the log is read: the client parses them as the agent
reads. Lines are kept only when the replay ended with every call settled (nothing a
later message could still finish).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iac_kernel.acp.channel import ClientChannel
from iac_kernel.acp.replay import ReplayEnd, replay_params
from iac_kernel.acp.replay_key import FORMAT, inputs_key, log_holds, message_digest, messages_hold
from iac_kernel.acp.updates import Numbering
from iac_kernel.agent.history import Known
from iac_kernel.agent.session import AgentSession
from iac_kernel.sessions.collector import collector_paused
from iac_kernel.sessions.mask_key import read_key
from iac_kernel.sessions.replay_cache import Cached, CacheWriter, LogPrefix, ReplayCache
from iac_kernel.sessions.writer import SessionWriter

log = logging.getLogger(__name__)


class KeptReplay:
    """One load's use of the kept lines, as an ``async with`` around opening the session:
    once the session's lock is taken (:meth:`begin`, before its log is read) the lines
    go out from a thread, the client's pipe or socket held meanwhile (what else is sent
    waits); :func:`send_history` finishes the replay, and the exit lets what waited out
    once the thread is done. ``active=False`` (a resume): nothing is done."""

    def __init__(self, channel: ClientChannel, active: bool = True) -> None:
        self.channel = channel
        self.active = active
        self.kept: Cached | None = None
        self.known: Known | None = None
        self.inputs = ""
        self._held = False
        self._sending: asyncio.Future[None] | None = None
        self._thread_done = threading.Event()
        self._release_when_done = False

    async def __aenter__(self) -> KeptReplay:
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._sending is not None and not self._sending.done():
            await asyncio.wait([self._sending])  # its bytes go first, whatever failed
        self.release()

    @property
    def on_lock(self) -> Callable[[SessionWriter], None] | None:
        """What the session manager calls once the lock is taken (``None``: inactive)."""
        return self.begin if self.active else None

    def release(self) -> None:
        """Let what waited out, now or (the thread still writing) when it is done."""
        if not self._held or self.channel.transport is None:
            return
        if self._sending is not None and not self._thread_done.is_set():
            self._release_when_done = True
            return
        self._held = False
        self.channel.transport.release()

    def begin(self, writer: SessionWriter) -> None:
        """Start sending the kept lines when they hold for the log as it is now (the
        session's lock is taken, its log not read yet) and the client's pipe or socket
        can be held."""
        try:
            key = read_key(writer.store.root)
            transport = self.channel.transport
            if key is None or transport is None:
                return
            cwd = Path(writer.meta.cwd)
            self.known = Known.now(cwd)
            self.inputs = inputs_key(key, cwd, self.known)
            cache = writer.store.replay_cache(writer.session_id)
            found = cache.read()
            log_path = writer.store.path(writer.session_id, ".jsonl")
            if found is None or not log_holds(found, self.inputs, log_path):
                return
            fd = transport.try_hold()
            if fd is None:
                return
            self._held, self.kept = True, found
            self._start_sending(
                cache, os.dup(fd), found.length
            )  # its own: the transport's may close
        except Exception as exc:  # never a reason for the load to fail
            log.warning("not using the kept replay of %s: %s", writer.session_id, exc)

    def _start_sending(self, cache: ReplayCache, out: int, length: int) -> None:
        """Send from a daemon thread (a client that stops reading must not keep the
        process from exiting)."""
        loop = asyncio.get_running_loop()
        sending = self._sending = loop.create_future()

        def done(error: BaseException | None) -> None:
            if sending.done():
                pass
            elif error is None:
                sending.set_result(None)
            else:
                sending.set_exception(error)
            if self._release_when_done:
                self.release()

        def run() -> None:
            error: BaseException | None = None
            try:
                cache.copy_to(out, length)
            except BaseException as exc:
                error = exc
            finally:
                os.close(out)
                self._thread_done.set()
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
                loop.call_soon_threadsafe(done, error)

        threading.Thread(target=run, name="kept-replay", daemon=True).start()

    async def finish(self) -> str:
        """Wait for the kept lines to be sent: ``"sent"``, ``"none"`` (not begun) or
        ``"failed"`` (some may have gone out: the client is gone, or the file failed)."""
        if self._sending is None:
            return "none"
        try:
            await self._sending
            return "sent"
        except (BrokenPipeError, ConnectionError) as exc:
            self.channel.lost(exc)
        except Exception as exc:
            log.warning("the kept replay could not be sent: %s", exc)
        return "failed"


async def send_history(
    channel: ClientChannel, session: AgentSession, early: KeptReplay | None = None
) -> None:
    """Replay ``session``'s stored history to ``channel``'s client (``session/load``);
    ``early``: the kept lines' use begun when the session was opened."""
    early = early or KeptReplay(channel, active=False)
    with collector_paused():
        if channel.transport is None or not _cacheable(session):
            await early.finish()  # nothing was begun for such a session
            early.release()
            await channel.forward_updates(replay_params(session.replay(), session.session_id))
            return
        await _send_kept(channel, session, early)


def _cacheable(session: AgentSession) -> bool:
    writer = session.writer
    return (
        writer.appended == 0
        and not session.busy
        and writer.marks.key is not None
        and bool(session.conversation.messages)
    )


async def _send_kept(channel: ClientChannel, session: AgentSession, early: KeptReplay) -> None:
    writer, session_id = session.writer, session.session_id
    cache = writer.store.replay_cache(session_id)
    # What is replayed and kept: the history as it is now (a turn may start meanwhile).
    shown = Shown(list(session.conversation.messages), writer.log_size, writer.appended)
    kept, keep = None, True
    sent = await early.finish()
    early.release()
    if channel.gone:
        return
    if sent == "sent":
        kept = early.kept
        if not messages_hold(kept, shown.messages):  # the log's bytes held: not expected
            log.warning("the kept replay of %s shows other messages; dropped", session_id)
            keep = False
    else:
        if early.known is None:  # not read when the session was opened
            early.known = Known.now(session.cwd)
            early.inputs = inputs_key(writer.marks.key, session.cwd, early.known)  # type: ignore[arg-type]
        found = cache.read() if sent == "none" else None  # again: the load may have repaired
        log_path = writer.store.path(session_id, ".jsonl")
        if found and log_holds(found, early.inputs, log_path):
            if messages_hold(found, shown.messages):
                kept = found
                await channel.forward_lines(cache.lines(kept.length))
    await _replay_rest(channel, session, shown, kept, early, keep)


@dataclass
class Shown:
    """The history a load replays: its messages, the log's size and the writer's count
    of records when they were taken."""

    messages: list[dict[str, Any]]
    log_size: int
    appended: int


async def _replay_rest(
    channel: ClientChannel,
    session: AgentSession,
    shown: Shown,
    kept: Cached | None,
    early: KeptReplay,
    keep: bool,
) -> None:
    """The messages the kept lines do not show, sent (and, with ``keep``, kept) after
    them."""
    cache = session.writer.store.replay_cache(session.session_id)
    start, end = first_unkept(kept)
    out = open_writer(cache, kept) if keep else None
    try:
        if start < len(shown.messages):
            events = session.replay(start, early.known, shown.messages)
            copy = out.write if out is not None else None
            await channel.forward_updates(replay_params(events, session.session_id, end), copy)
        else:
            end.settled = True
        unchanged = session.writer.appended == shown.appended and not session.busy
        if out is not None and end.settled and unchanged and not channel.gone:
            try:
                await asyncio.to_thread(commit, out, session, shown, end, early.inputs)
            except OSError as exc:  # never a reason for the load to fail
                log.warning("could not keep the replay of %s: %s", session.session_id, exc)
    finally:
        if out is not None:
            out.close()
        if not keep:
            cache.drop()


def first_unkept(kept: Cached | None) -> tuple[int, ReplayEnd]:
    """The first message the kept lines do not show, and where their numbering stopped."""
    if kept is None:
        return 0, ReplayEnd()
    return kept.fields["messages"], ReplayEnd(Numbering(**kept.fields["numbering"]))


def open_writer(cache: ReplayCache, kept: Cached | None) -> CacheWriter | None:
    try:
        return cache.writer(kept)
    except OSError:
        return None  # the replay goes on; nothing is kept


def commit(
    out: CacheWriter,
    session: AgentSession,
    shown: Shown,
    end: ReplayEnd,
    inputs: str,
    count: int | None = None,
) -> None:
    """Make what ``out`` wrote the kept lines of the first ``count`` messages (default:
    all of ``shown``'s), whose last is ``shown``'s last."""
    fields = {
        "format": FORMAT,
        "inputs": inputs,
        "messages": len(shown.messages) if count is None else count,
        "last": message_digest(shown.messages[-1]),
        "numbering": vars(end.numbering),
    }
    log_path = session.writer.store.path(session.session_id, ".jsonl")
    out.commit(LogPrefix.of(log_path, shown.log_size), fields)
