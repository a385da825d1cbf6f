"""``iac-kernel acp --remote URL``: stdio on one side, a remote ACP WebSocket on the other.

Editors that only launch stdio agents (Zed, JetBrains, Neovim) reach a Jupyter server's
endpoint (:mod:`iac_kernel.server`) through this relay: each line from stdin goes out
as one text frame, each frame comes back as one line on stdout. Messages pass through
unchanged; the bridge only watches them to remember what it must restore after a
dropped connection: the ``initialize`` request and the sessions the editor opened
(``session/new``, ``load``, ``resume``, ``fork``; closed and deleted ones are dropped).

The connection is resumable (:mod:`iac_kernel.acp.remote.resume`): the bridge counts the
frames it receives and keeps the frames it sends until the server acknowledges them.
After a drop it reconnects (backing off, for up to :data:`RECONNECT_FOR` seconds or
``$IAC_KERNEL_REMOTE_RECONNECT``) with its connection id and cursor. If the server still
holds the connection, each side resends what the other lacks and nothing else: a turn
in flight goes on, its updates arrive once, and a permission question asked before
the drop is answered on the new socket. Messages the editor sends meanwhile wait.

If the server no longer holds it (it restarted, or the bridge stayed away longer than
the server keeps connections), requests that were waiting for an answer are answered
with an error, the bridge initializes again and sends ``session/resume`` for each
remembered session, without showing those answers to the editor; answers to server
requests of the old connection are dropped: nobody there waits for them. A session whose
control lease another client took meanwhile is one the editor now observes: the bridge
tells it so (:mod:`iac_kernel.acp.protocol.notices`, reason ``expired``).

:func:`run_remote` is the command: the editor's stdio, the checked URL
(:mod:`iac_kernel.acp.remote.target`), the bridge.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
from typing import Any

from iac_kernel.acp.protocol.client_features import from_initialize
from iac_kernel.acp.protocol.notices import CONTROL_METHOD as CONTROL
from iac_kernel.acp.protocol.notices import EXPIRED, lost_updates, says_lost
from iac_kernel.acp.remote.resume import (
    ACK_EVERY,
    CONNECTION_HEADER,
    NORMAL_CLOSE,
    RECEIVED_HEADER,
    Outbox,
    ack_count,
    ack_frame,
    parse_count,
)
from iac_kernel.acp.remote.target import RemoteError, Target, connect

log = logging.getLogger(__name__)

#: Seconds to keep trying to reconnect after a drop before giving up (default).
RECONNECT_FOR = 300.0
#: First and longest pause between reconnection attempts.
BACKOFF = (0.2, 5.0)
#: Hang guard for the bridge's own initialize/resume after reconnecting.
RESTORE_TIMEOUT = 60.0
LOST = -32603


def _key(request_id: Any) -> str:
    return json.dumps(request_id)


class Bridge:
    """The relay between the editor's stdio and one remote endpoint at a time."""

    def __init__(
        self,
        where: Target,
        reader: asyncio.StreamReader,
        writer: Any,
        reconnect_for: float = RECONNECT_FOR,
    ) -> None:
        self.where = where
        self.reconnect_for = reconnect_for
        self.reader = reader
        self.writer = writer
        self.conn: Any = None
        #: Bumped on every new connection; requests remember the one they went out on.
        self.generation = 0
        self.initialize: dict[str, Any] | None = None
        #: The editor's sessions, to resume after a drop.
        self.memory = Remembered()
        #: Editor requests waiting for an answer: key -> (method, params, generation).
        self.pending: dict[str, tuple[str, Any, int]] = {}
        #: Server requests on the current connection the editor has not answered yet.
        self.asked: set[str] = set()
        #: Editor lines waiting for the connection to be restored.
        self.queue: list[str] = []
        self.ready = False
        self.stdin_done = False
        self._next = 0
        #: The server's id of the logical connection, frames received on it, the last
        #: count acknowledged, and the frames sent on it the server may not have yet.
        self.link: str | None = None
        self.got = 0
        self._acked = 0
        self.outbox = Outbox()

    # -- running ---------------------------------------------------------------------

    async def run(self) -> int:
        """Relay until stdin ends (0) or the server cannot be reached again (1)."""
        try:
            await self._open()
        except RemoteError as exc:
            say(str(exc))
            return 1
        self.ready = True
        editor = asyncio.ensure_future(self._from_editor())
        try:
            return await self._from_server(editor)
        finally:
            editor.cancel()
            if self.conn is not None:
                self.conn.close(NORMAL_CLOSE)  # done: the server need not keep it

    async def _open(self) -> bool:
        """Connect; whether the server resumed the connection (else it is a new one)."""
        headers = {RECEIVED_HEADER: str(self.got)}
        if self.link is not None:
            headers[CONNECTION_HEADER] = self.link
        self.conn = await connect(self.where, headers)
        answer = getattr(self.conn, "headers", None) or {}
        link, server_has = answer.get(CONNECTION_HEADER), parse_count(answer.get(RECEIVED_HEADER))
        if self.link is not None and link == self.link and server_has is not None:
            self.outbox.ack(server_has)
            for text in self.outbox.after(server_has) or []:
                await self._write_frame(text)
            return True
        self.link, self.got, self._acked, self.outbox = link, 0, 0, Outbox()
        self.asked.clear()
        return False

    async def _read(self) -> str | None:
        """The next counted text frame (acknowledgements handled), ``None`` at a drop."""
        while True:
            frame = await self.conn.read_message()
            if frame is None:
                return None
            if isinstance(frame, bytes):
                continue  # ACP messages are text frames; binary ones are ignored
            count = ack_count(frame)
            if count is not None:
                self.outbox.ack(count)
                continue
            self.got += 1
            if self.got - self._acked >= ACK_EVERY:
                self._acked = self.got
                await self._write_frame(ack_frame(self.got))
            return frame

    async def _write_frame(self, text: str) -> None:
        """Write one frame; a lost one is sent again after resuming (from the outbox)."""
        try:
            await self.conn.write_message(text)
        except Exception as exc:  # tornado's WebSocketClosedError
            log.info("a frame waits for the connection: %s", exc)

    async def _post(self, text: str) -> None:
        """Number, keep and send a frame of the connection."""
        self.outbox.add(text)
        await self._write_frame(text)

    async def _from_server(self, editor: asyncio.Task[None]) -> int:
        while True:
            reading = asyncio.ensure_future(self._read())
            await asyncio.wait([reading, editor], return_when=asyncio.FIRST_COMPLETED)
            if editor.done() and not reading.done():
                reading.cancel()
                return 0
            message = reading.result()
            if message is not None:
                await self._to_editor(message)
                continue
            if self.stdin_done:
                return 0
            try:
                await self._restore()
            except RemoteError as exc:
                say(f"connection lost and not restored: {exc}")
                await self._fail(self.generation, f"the server is unreachable: {exc}")
                return 1

    # -- editor -> server ------------------------------------------------------------

    async def _from_editor(self) -> None:
        while True:
            line = await self.reader.readline()
            if not line:
                self.stdin_done = True
                return
            text = line.decode("utf-8", "replace").strip()
            if text:
                await self._editor_message(text)

    async def _editor_message(self, text: str) -> None:
        message = _parse(text)
        if message is not None and "method" not in message and "id" in message:
            if _key(message["id"]) not in self.asked:
                log.info("dropping an answer to a request of a previous connection")
                return
            self.asked.discard(_key(message["id"]))
        elif message is not None and "id" in message:
            method, params = message.get("method"), message.get("params")
            self.pending[_key(message["id"])] = (method, params, self.generation)
            if method == "initialize" and isinstance(params, dict):
                self.initialize = params
        await self._send(text)

    async def _send(self, text: str) -> None:
        if not self.ready:
            self.queue.append(text)
            return
        await self._post(text)

    # -- server -> editor ------------------------------------------------------------

    async def _to_editor(self, frame: str) -> None:
        text = frame.replace("\r", " ").replace("\n", " ")
        message = _parse(text)
        if message is not None and "method" not in message and "id" in message:
            waiting = self.pending.pop(_key(message["id"]), None)
            if waiting is not None:
                self.memory.learn(waiting[0], waiting[1], message)
        elif message is not None and "id" in message:
            self.asked.add(_key(message["id"]))
        elif message is not None and message.get("method") == "session/update":
            self.memory.noted(message.get("params"))
        await self._write(text)

    async def _write(self, text: str) -> None:
        self.writer.write(text.encode() + b"\n")
        await self.writer.drain()

    # -- after a drop ----------------------------------------------------------------

    async def _restore(self) -> None:
        """Reconnect; resume the connection, or fail what the old one owed and open the
        sessions again on a new one; then send what the editor sent meanwhile."""
        self.ready = False
        old = self.generation
        self.generation += 1  # what the editor sends from now on waits for the new socket
        say("connection to the server lost; reconnecting")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.reconnect_for
        pause = BACKOFF[0]
        new_link = False
        while not self.stdin_done:  # the editor left: nothing to restore for
            try:
                if not await self._open():
                    new_link = True  # and stays so if this one drops before it is set up
                    await self._fail(old, "the connection to the server was lost; retry")
                if new_link:
                    await asyncio.wait_for(self._resume_all(), RESTORE_TIMEOUT)
                break
            except (RemoteError, ConnectionError, TimeoutError) as exc:
                if isinstance(exc, RemoteError) and exc.final:
                    raise
                if loop.time() + pause > deadline:
                    raise RemoteError(str(exc) or "the server did not answer") from None
                log.info("reconnecting failed: %s", exc)
                await asyncio.sleep(pause)
                pause = min(pause * 2, BACKOFF[1])
        if self.stdin_done:
            return
        if new_link:
            say(f"reconnected; {len(self.memory.sessions)} session(s) resumed")
        else:
            say("reconnected; the connection resumed")
        self.ready = True
        queued, self.queue = self.queue, []
        for text in queued:
            await self._send(text)

    async def _fail(self, generation: int, details: str) -> None:
        """Answer the requests sent up to ``generation`` (on a connection that ended,
        through any socket it had) with an error."""
        for key, (_method, _params, sent_on) in list(self.pending.items()):
            if sent_on <= generation:
                del self.pending[key]
                await self._write(_error(key, details))

    async def _resume_all(self) -> None:
        if self.initialize is not None:
            answer = await self._call("initialize", self.initialize)
            if "error" in answer:
                raise RemoteError(f"initialize failed after reconnecting: {answer['error']}")
        for sid, how in list(self.memory.sessions.items()):
            answer = await self._call("session/resume", {"sessionId": sid, **how})
            if "error" in answer:
                self.memory.forget(sid)
                say(f"session {sid} could not be resumed: {_message(answer)}")
            elif sid not in self.memory.observing:
                await self._check_control(sid)

    async def _check_control(self, sid: str) -> None:
        """Tell the editor when another client took control of a session while the
        connection was gone (the server ended it, so the lease was free)."""
        answer = await self._call(CONTROL, {"sessionId": sid})
        result = answer.get("result")
        if not isinstance(result, dict) or result.get("controller") is not False:
            return
        self.memory.observing.add(sid)
        say(f"another client controls session {sid} now; the editor observes it")
        notices = from_initialize(self.initialize).notices
        for params in lost_updates(sid, EXPIRED, notices):
            update = {"jsonrpc": "2.0", "method": "session/update", "params": params}
            await self._write(json.dumps(update))

    async def _call(self, method: str, params: Any) -> dict[str, Any]:
        """A request of the bridge's own, read to its answer (which the editor does not
        see); everything else read meanwhile goes to the editor."""
        self._next += 1
        request_id = f"iac-kernel-bridge-{self._next}"
        await self._post(
            json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        )
        while True:
            frame = await self._read()
            if frame is None:
                raise ConnectionError("the connection dropped again")
            message = _parse(frame)
            if message is not None and message.get("id") == request_id and "method" not in message:
                return message
            await self._to_editor(frame)


def _parse(text: str) -> dict[str, Any] | None:
    try:
        message = json.loads(text)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def _error(key: str, details: str) -> str:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": json.loads(key),
            "error": {"code": LOST, "message": "Internal error", "data": {"details": details}},
        }
    )


def _message(answer: dict[str, Any]) -> str:
    error = answer.get("error") or {}
    data = error.get("data")
    return str(data or error.get("message") or error)[:200]


def say(line: str) -> None:
    """One line for the person reading the editor's agent log."""
    with contextlib.suppress(Exception):
        print(f"iac-kernel acp --remote: {line}", file=sys.stderr, flush=True)


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


RECONNECT_VAR = "IAC_KERNEL_REMOTE_RECONNECT"


def reconnect_window(value: str | None) -> float:
    """Seconds to keep reconnecting: ``value`` if it is a number >= 0, else the default
    (a bad value is reported in one line)."""
    if value is None or not value.strip():
        return RECONNECT_FOR
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        say(f"{RECONNECT_VAR}={value!r} is not a number of seconds; using {RECONNECT_FOR:g}")
        return RECONNECT_FOR
    return seconds


def run_remote(url: str, *, allow_insecure: bool = False) -> int:
    """The ``--remote`` command: check the URL, relay stdio, return the exit status."""
    from iac_kernel.acp.remote.target import target
    from iac_kernel.acp.serve.stdio import claim_stdout, open_reader, open_writer, setup_logging

    protocol_fd = claim_stdout()
    setup_logging()
    if logging.getLogger().level > logging.DEBUG:
        # The bridge says itself, in one line, why a connection failed.
        logging.getLogger("tornado.general").setLevel(logging.CRITICAL)
    try:
        where = target(url, allow_insecure=allow_insecure)
    except RemoteError as exc:
        say(str(exc))
        return 2

    window = reconnect_window(os.environ.get(RECONNECT_VAR))

    async def main() -> int:
        try:
            reader = await open_reader(0)
            writer = await open_writer(protocol_fd)
        except (ValueError, OSError) as exc:
            say(str(exc))
            return 2
        return await Bridge(where, reader, writer, window).run()

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        return 0
