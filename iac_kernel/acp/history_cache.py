"""``session/load``'s replay, sent from the lines a load sent before when they still hold.

Building tens of thousands of updates from a long log costs several times reading it;
the lines a load sends are therefore kept beside the log
(:mod:`iac_kernel.sessions.replay_cache`), and a later load sends them as they are,
replaying only the messages written since (and appending their lines). The kept lines
are used only when they are what a replay would send now:

* the same replay and masking code (a digest of their sources), session folder and home;
* the same known values: keyed fingerprints (:mod:`iac_kernel.masking.marks`) of the
  environment's secret values with their names and of the workspace's sensitive values.
  A value learned since means every result is masked again: a whole replay, kept anew;
* the same log: its device and inode, at least the size replayed, the same last 64 KB
  before that size, and the same last message replayed;
* a session opened from disk for this load and idle (a live one's history may hold what
  its log does not yet).

Over a pipe or socket the kept lines go out from a thread (``sendfile``) as soon as the
session's lock is taken, while the log is read: the client parses them as the agent
reads. Lines are kept only when the replay ended with every call settled (nothing a
later message could still finish). A log the store repairs drops them.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import hmac
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from iac_kernel.acp.channel import UPDATE, ClientChannel
from iac_kernel.acp.replay import ReplayEnd, replay_params
from iac_kernel.acp.transport import encode_notification
from iac_kernel.acp.updates import Numbering
from iac_kernel.agent.history import Known
from iac_kernel.agent.session import AgentSession
from iac_kernel.masking import marks
from iac_kernel.sessions.collector import collector_paused
from iac_kernel.sessions.mask_key import read_key
from iac_kernel.sessions.replay_cache import Cached, CacheWriter, LogPrefix, ReplayCache
from iac_kernel.sessions.writer import SessionWriter

log = logging.getLogger(__name__)

#: The cached lines' layout; a change makes every kept replay unused.
FORMAT = 1
#: The code that decides what a replay sends, beside the maskers (``marks.version``).
_SOURCES = (
    "acp/history_cache.py",
    "acp/replay.py",
    "acp/updates.py",
    "acp/plan.py",
    "acp/locations.py",
    "acp/transport.py",
    "agent/history.py",
    "agent/permissions.py",
    "events.py",
    "sessions/records.py",
    "textsafe.py",
    "tools",
)


class KeptReplay:
    """One load's use of the kept lines, as an ``async with`` around opening the session:
    the client's pipe or socket is held on entry (nothing else is written to it
    meanwhile), the lines start going out once the session's lock is taken
    (:meth:`begin`, before its log is read), :func:`send_history` finishes them, and the
    exit lets the held messages out. ``active=False`` (a resume): nothing is done."""

    def __init__(self, channel: ClientChannel, active: bool = True) -> None:
        self.channel = channel
        self.active = active
        self.kept: Cached | None = None
        self.known: Known | None = None
        self.inputs = ""
        self._fd: int | None = None
        self._sending: asyncio.Future[None] | None = None

    async def __aenter__(self) -> KeptReplay:
        if self.active and self.channel.transport is not None:
            self._fd = await self.channel.transport.hold()
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
        """Let what was sent meanwhile out (once nothing else writes to the client)."""
        if self._fd is not None and self.channel.transport is not None:
            if self._sending is not None and not self._sending.done():
                return
            self._fd = None
            self.channel.transport.release()

    def begin(self, writer: SessionWriter) -> None:
        """Start sending the kept lines when they hold for the log as it is now (the
        session's lock is taken, its log not read yet)."""
        try:
            key = read_key(writer.store.root)
            if self._fd is None or key is None:
                return
            cwd = Path(writer.meta.cwd)
            self.known = Known.now(cwd)
            self.inputs = inputs_key(key, cwd, self.known)
            cache = writer.store.replay_cache(writer.session_id)
            found = cache.read()
            log_path = writer.store.path(writer.session_id, ".jsonl")
            if found is None or not _log_holds(found, self.inputs, log_path):
                return
            self.kept = found
            out = os.dup(self._fd)  # the thread's own: the transport may close its fd
            loop = asyncio.get_running_loop()
            self._sending = loop.run_in_executor(None, _copy, cache, out, found.length)
        except Exception as exc:  # never a reason for the load to fail
            log.warning("not using the kept replay of %s: %s", writer.session_id, exc)

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


def _copy(cache: ReplayCache, out: int, length: int) -> None:
    try:
        cache.copy_to(out, length)
    finally:
        os.close(out)


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
    messages = session.conversation.messages
    kept, keep = None, True
    sent = await early.finish()
    early.release()
    if channel.gone:
        return
    if sent == "sent":
        kept = early.kept
        if not _messages_hold(kept, messages):  # the log's bytes held: never expected
            log.warning("the kept replay of %s shows other messages; dropped", session_id)
            keep = False
    else:
        early.known = Known.now(session.cwd)
        early.inputs = inputs_key(writer.marks.key, session.cwd, early.known)  # type: ignore[arg-type]
        found = cache.read() if sent == "none" else None
        log_path = writer.store.path(session_id, ".jsonl")
        if found and _log_holds(found, early.inputs, log_path) and _messages_hold(found, messages):
            kept = found
            await channel.forward_lines(cache.lines(kept.length))
    await _replay_rest(channel, session, cache, kept, early, keep)


async def _replay_rest(
    channel: ClientChannel,
    session: AgentSession,
    cache: ReplayCache,
    kept: Cached | None,
    early: KeptReplay,
    keep: bool,
) -> None:
    """The messages the kept lines do not show, sent and kept after them."""
    messages = session.conversation.messages
    start, end = _start(kept)
    out = _writer(cache, kept) if keep else None
    try:
        if start < len(messages):
            events = session.replay(start, early.known)
            copy = out.write if out is not None else None
            await channel.forward_updates(replay_params(events, session.session_id, end), copy)
        else:
            end.settled = True
        if out is not None and end.settled and not channel.gone:
            await asyncio.to_thread(_commit, out, session, messages, end, early.inputs)
    finally:
        if out is not None:
            out.close()
        if not keep:
            cache.drop()


def keep_replay(session: AgentSession) -> None:
    """Bring ``session``'s kept lines up to its log (it is closing, its lock held), so
    its next load sends them; never raises."""
    try:
        _keep(session)
    except Exception as exc:
        log.warning("could not keep the replay of %s: %s", session.session_id, exc)


def _keep(session: AgentSession) -> None:
    writer, session_id = session.writer, session.session_id
    store = writer.store
    key = read_key(store.root)
    log_path = store.path(session_id, ".jsonl")
    if key is None or writer.closed or not writer.log_size:
        return
    if os.stat(log_path, follow_symlinks=False).st_size != writer.log_size:
        return  # not this writer's log as it knows it
    known = Known.now(session.cwd)
    inputs = inputs_key(key, session.cwd, known)
    cache = store.replay_cache(session_id)
    found = cache.read()
    if found is not None and not _log_holds(found, inputs, log_path):
        found = None
    if found is not None and found.log.size == writer.log_size:
        return  # nothing new
    messages = store.read(session_id).messages  # as a load will read them
    kept = found if _messages_hold(found, messages) else None
    out = _writer(cache, kept) if messages else None
    if out is None:
        return
    try:
        start, end = _start(kept)
        for params in replay_params(session.replay(start, known, messages), session_id, end):
            out.write(encode_notification(UPDATE, params))
        if end.settled:
            _commit(out, session, messages, end, inputs)
    finally:
        out.close()


def _start(kept: Cached | None) -> tuple[int, ReplayEnd]:
    """The first message the kept lines do not show, and where their numbering stopped."""
    if kept is None:
        return 0, ReplayEnd()
    return kept.fields["messages"], ReplayEnd(Numbering(**kept.fields["numbering"]))


def _writer(cache: ReplayCache, kept: Cached | None) -> CacheWriter | None:
    try:
        return cache.writer(kept)
    except OSError:
        return None  # the replay goes on; nothing is kept


def _commit(
    out: CacheWriter,
    session: AgentSession,
    messages: list[dict[str, Any]],
    end: ReplayEnd,
    inputs: str,
) -> None:
    fields = {
        "format": FORMAT,
        "inputs": inputs,
        "messages": len(messages),
        "last": message_digest(messages[-1]),
        "numbering": vars(end.numbering),
    }
    log_path = session.writer.store.path(session.session_id, ".jsonl")
    out.commit(LogPrefix.of(log_path, session.writer.log_size), fields)


def _log_holds(found: Cached, inputs: str, log_path: Path) -> bool:
    """True when ``found`` was kept with ``inputs`` and for the start of the log as it
    is now."""
    fields = found.fields
    if fields.get("format") != FORMAT or fields.get("inputs") != inputs:
        return False
    try:
        Numbering(**fields["numbering"])
        size = os.stat(log_path, follow_symlinks=False).st_size
        return found.log.size <= size and LogPrefix.of(log_path, found.log.size) == found.log
    except (OSError, TypeError, KeyError):
        return False


def _messages_hold(found: Cached | None, messages: list[dict[str, Any]]) -> bool:
    """True when ``found``'s lines show the first messages of ``messages``."""
    count = found.fields.get("messages") if found is not None else None
    if type(count) is not int or not 0 < count <= len(messages):
        return False
    return found.fields.get("last") == message_digest(messages[count - 1])  # type: ignore[union-attr]


def inputs_key(key: bytes, cwd: Path, known: Known) -> str:
    """A keyed digest of everything besides the log that a replay's lines depend on."""
    parts = [
        code_version(),
        str(cwd),
        os.path.expanduser("~"),
        marks.fingerprints(key, known.values),
        sorted([marks.fingerprint(key, value), name] for value, name in known.secrets().items()),
    ]
    data = json.dumps(parts, ensure_ascii=True).encode()
    return hmac.new(key, data, hashlib.sha256).hexdigest()[:32]


def message_digest(message: dict[str, Any]) -> str:
    text = json.dumps(message, sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


@functools.cache
def code_version() -> str:
    """A digest of the replay's sources and the maskers' version."""
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256(f"{FORMAT}\n{marks.version()}\n".encode())
    for name in _SOURCES:
        path = package / name
        for each in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            try:
                digest.update(each.read_bytes())
            except OSError:
                return "unknown-" + os.urandom(8).hex()
    return digest.hexdigest()[:16]
