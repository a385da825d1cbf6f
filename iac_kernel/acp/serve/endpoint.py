"""The kernel's ACP endpoint: a private unix socket that serves the kernel's live sessions.

While a kernel runs it listens on ``kernel-<pid>.sock`` in the runtime directory (mode
0700, socket 0600) and advertises the socket and a random token in its runtime file
(:mod:`iac_kernel.acp.attach.runtime`). ``iac-kernel acp`` uses it to attach an editor to a
session the kernel holds, so the editor's turns run in the kernel, on the same
:class:`~iac_kernel.agent.session.AgentSession`, and there is never a second writer.

Authentication: the first line of every connection must be ``{"token": "..."}``. A
wrong, missing or late token (:data:`AUTH_TIMEOUT`) gets one JSON-RPC error line
(``-32600 "unauthorized"``) and the connection is closed; nothing else is read or
served. On Linux the peer must also run as the same user (``SO_PEERCRED``), and must
not be a sandboxed process (:mod:`iac_kernel.guard.sandbox.processes`: the peer's pid and its
ancestors against the kernel's calls' shells and guarded programs, or another agent's
sandbox by its mount namespace and guard folder), so a
tool call can never attach to the session that runs it, answer its questions or raise
its mode. The runtime file and socket are also hidden from every bash call's sandbox
(:mod:`iac_kernel.guard.sandbox.hidden`).

After that the connection speaks ACP (the full server of :mod:`iac_kernel.acp.serve.server`,
imported with the ACP SDK when the first editor connects, not at kernel start)
over :class:`EndpointSessions`: ``session/load``/``resume`` attach to a session the
kernel holds (the live runtime, history replayed from memory); the endpoint never
loads other sessions from disk, never creates or forks sessions, and
``session/close`` only detaches (the notebook keeps its session).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import importlib
import json
import logging
import os
import secrets
import shutil
import socket
import stat
import struct
import sys
import tempfile
from pathlib import Path
from typing import Any

from iac_kernel.acp.attach.runtime import (
    EndpointInfo,
    ensure_private_dir,
    info_path,
    remove_info,
    write_info,
)
from iac_kernel.acp.attach.runtime import runtime_dir as default_runtime_dir
from iac_kernel.acp.wire.transport import READ_LIMIT
from iac_kernel.agent.manager import SessionManager
from iac_kernel.agent.session import AgentSession
from iac_kernel.guard.sandbox import hidden, processes
from iac_kernel.peercred import peer_pid
from iac_kernel.sessions.store import SessionMeta, SessionNotFoundError, now_iso

log = logging.getLogger(__name__)

#: Seconds a new connection has to send its token line.
AUTH_TIMEOUT = 10.0
#: Longest unix socket path used as is (the OS limit is about 107 bytes).
MAX_SOCKET_PATH = 100
UNAUTHORIZED = -32600
#: Folder (in the temp dir) of a socket whose runtime path is too long; hidden from
#: every bash call (guard/sandbox/hidden.py globs it).
SCRATCH_PREFIX = "iac-kernel-endpoint-"
#: The module that brings the ACP SDK in (:func:`load_server`).
ROUTER = "iac_kernel.acp.wire.router"
NO_NEW_SESSIONS = (
    "the kernel's endpoint serves only the sessions the kernel holds; "
    "create new sessions with iac-kernel acp"
)


class EndpointSessions:
    """The kernel's :class:`SessionManager` as its endpoint exposes it: live sessions only.

    Duck-types the manager for :class:`~iac_kernel.acp.agent.IacAgent`.
    """

    def __init__(self, manager: SessionManager) -> None:
        self.manager = manager

    @property
    def store(self) -> Any:
        return self.manager.store

    @property
    def origin(self) -> str:
        return self.manager.origin

    @property
    def sessions(self) -> dict[str, AgentSession]:
        return self.manager.sessions

    def new(self, cwd: str, **_meta: Any) -> AgentSession:
        raise ValueError(NO_NEW_SESSIONS)

    def get(self, session_id: str) -> AgentSession:
        return self.manager.get(session_id)

    def load(self, session_id: str) -> AgentSession:
        """The live session; SessionNotFoundError when the kernel does not hold it."""
        session = self.manager.sessions.get(session_id) if isinstance(session_id, str) else None
        if session is None or session.closed:
            raise SessionNotFoundError(session_id)
        return session

    def fork(self, session_id: str) -> AgentSession:
        # ``iac-kernel acp`` forks from the store itself; a fork made here would be a
        # kernel-owned session that no notebook shows.
        raise SessionNotFoundError(session_id)

    def list(self, cwd: str | None = None) -> list[SessionMeta]:
        return self.manager.list(cwd)

    async def close(self, session_id: str) -> None:
        """Detach: the session stays open in the kernel."""
        if session_id not in self.manager.sessions:
            raise SessionNotFoundError(session_id)


class Endpoint:
    """A running endpoint: its unix server, token and runtime file."""

    def __init__(
        self,
        manager: SessionManager,
        directory: Path,
        socket_path: Path,
        *,
        cwd: str = "",
        scratch: Path | None = None,
    ) -> None:
        self.sessions_view = EndpointSessions(manager)
        self.directory = directory
        self.socket_path = socket_path
        self.token = secrets.token_urlsafe(32)
        self.cwd = cwd
        self.started = now_iso()
        self.session_ids: list[str] = []
        self.server: asyncio.AbstractServer | None = None
        self._scratch = scratch
        self._connections: set[asyncio.Task[Any]] = set()
        self._closed = False

    @property
    def info(self) -> EndpointInfo:
        return EndpointInfo(
            pid=os.getpid(),
            socket=str(self.socket_path),
            token=self.token,
            started=self.started,
            sessions=list(self.session_ids),
            cwd=self.cwd,
        )

    def set_sessions(self, session_ids: list[str]) -> None:
        """Advertise the sessions the kernel holds now (rewrites the runtime file)."""
        self.session_ids = list(session_ids)
        if not self._closed:
            write_info(self.directory, self.info)

    def _hidden(self) -> list[Path]:
        return [p for p in (self.directory, self.socket_path, self._scratch) if p is not None]

    async def _listen(self) -> None:
        for path in self._hidden():
            hidden.register(path)
        _remove_socket(self.socket_path)
        self.server = await asyncio.start_unix_server(
            self._on_connection, path=str(self.socket_path), limit=READ_LIMIT
        )
        os.chmod(self.socket_path, 0o600)
        write_info(self.directory, self.info)

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            if await self._authenticate(reader, writer):
                serve = await load_server()
                await serve(reader, writer, self.sessions_view)  # type: ignore[arg-type]
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("endpoint connection failed")
        finally:
            with contextlib.suppress(Exception):
                writer.close()
            if task is not None:
                self._connections.discard(task)

    async def _authenticate(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        if not _same_user(writer):
            await _refuse(writer, None, "the endpoint serves only its own user")
            return False
        try:
            line = await asyncio.wait_for(reader.readline(), AUTH_TIMEOUT)
        except (TimeoutError, ValueError, ConnectionError, asyncio.LimitOverrunError):
            line = b""
        token, request_id = parse_token_line(line)
        if _from_a_call(writer):  # checked after the token line: the call is registered
            log.warning("endpoint connection refused: the peer runs inside a tool call")
            await _refuse(writer, request_id, "a tool call cannot attach to the kernel")
            return False
        if token is not None and hmac.compare_digest(token.encode(), self.token.encode()):
            return True
        reason = "wrong token" if token is not None else 'the first line must be {"token": ...}'
        log.warning("endpoint connection refused: %s", reason)
        await _refuse(writer, request_id, reason)
        return False

    async def close(self) -> None:
        """Stop listening, end the connections, remove the socket and runtime file."""
        if self._closed:
            return
        self._closed = True
        if self.server is not None:
            self.server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=5)
        self.remove_files()

    def remove_files(self) -> None:
        """Remove the runtime file and socket (safe from any thread, and repeatable)."""
        self._closed = True
        for path in self._hidden():
            hidden.unregister(path)
        remove_info(self.directory)
        _remove_socket(self.socket_path)
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)


async def start_endpoint(
    manager: SessionManager,
    *,
    runtime_dir: Path | None = None,
    cwd: str = "",
    sessions: list[str] | None = None,
) -> Endpoint:
    """Listen on a private unix socket and write the runtime file (see the module doc).

    Raises :class:`~iac_kernel.acp.attach.runtime.RuntimeDirError` or OSError when the endpoint
    cannot be set up; the kernel then runs without one.
    """
    if not hasattr(socket, "AF_UNIX"):
        raise OSError("this platform has no unix sockets; the kernel runs without an endpoint")
    directory = ensure_private_dir(Path(runtime_dir) if runtime_dir else default_runtime_dir())
    socket_path = info_path(directory).with_suffix(".sock")
    scratch = None
    if len(str(socket_path)) > MAX_SOCKET_PATH:
        scratch = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))  # mode 0700
        socket_path = scratch / "kernel.sock"
    endpoint = Endpoint(manager, directory, socket_path, cwd=cwd, scratch=scratch)
    endpoint.session_ids = list(sessions or [])
    try:
        await endpoint._listen()
    except BaseException:
        endpoint.remove_files()
        raise
    return endpoint


async def load_server() -> Any:
    """:func:`iac_kernel.acp.serve.server.serve`, the first time with the ACP SDK (the
    router's models) imported in a worker thread: the kernel and the Jupyter server
    start without it, and their loops keep running meanwhile."""
    if ROUTER not in sys.modules:
        await asyncio.to_thread(importlib.import_module, ROUTER)
    from iac_kernel.acp.serve.server import serve

    return serve


def parse_token_line(line: bytes) -> tuple[str | None, Any]:
    """The token of an auth line, and the JSON-RPC id to refuse with (when the client
    sent a request instead)."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(data, dict):
        return None, None
    request_id = data.get("id")
    if not (isinstance(request_id, str) or type(request_id) is int):
        request_id = None
    token = data.get("token")
    return (token if isinstance(token, str) else None), request_id


def unauthorized(request_id: Any, reason: str) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": UNAUTHORIZED, "message": "unauthorized", "data": {"details": reason}},
    }
    return json.dumps(message).encode() + b"\n"


async def _refuse(writer: asyncio.StreamWriter, request_id: Any, reason: str) -> None:
    with contextlib.suppress(Exception):
        writer.write(unauthorized(request_id, reason))
        await writer.drain()


def _from_a_call(writer: asyncio.StreamWriter) -> bool:
    """The peer is a process of a running tool call, of this kernel or any agent's
    sandbox (guard/sandbox/processes.py; Linux; False when unknown)."""
    sock = writer.get_extra_info("socket")
    if sock is None or not sys.platform.startswith("linux"):
        return False
    return processes.sandboxed(peer_pid(sock) or 0)


def _same_user(writer: asyncio.StreamWriter) -> bool:
    """False only when the OS says the peer runs as another user."""
    sock = writer.get_extra_info("socket")
    if sock is None or not sys.platform.startswith("linux") or not hasattr(os, "getuid"):
        return True
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return True
    _pid, uid, _gid = struct.unpack("3i", raw)
    return uid == os.getuid()


def _remove_socket(path: Path) -> None:
    with contextlib.suppress(OSError):
        if stat.S_ISSOCK(path.lstat().st_mode):
            path.unlink()
