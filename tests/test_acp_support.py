"""Harness for the ACP tests (no tests here): ``iac-kernel acp`` as a subprocess.

* :func:`acp_server` drives it with the official SDK's client side
  (``spawn_agent_process`` + a recording :class:`RecordingClient`);
* :class:`RawServer` writes raw lines and reads raw lines, for input the SDK would never
  send (bad JSON, batches, wrong types).

Waits poll with a generous deadline; no test asserts on timing.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

from acp import spawn_agent_process
from acp.connection import StreamDirection, StreamEvent
from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse
from acp.utils import serialize_params

import iac_kernel
from iac_kernel.acp.protocol.client_features import ClientFeatures

SCRIPTS = Path(__file__).parent / "scripts"
MAIN_SCRIPT = SCRIPTS / "acp_main.json"
WAIT = 20.0
#: The tests' client runs on SDK 0.12 or later (else 0.11, beside jupyter-ai-acp-client).
MESSAGE_TRANSPORT = tuple(map(int, version("agent-client-protocol").split(".")[:2])) >= (0, 12)
STREAM_LIMIT = 64 * 1024 * 1024
#: The checkout under test. The server subprocess must run this code: an ``iac-kernel``
#: first on PATH may belong to another venv or checkout (a venv of main used with
#: ``PYTHONPATH=<worktree>`` runs main's code there, which is what failed the 1.25 checks).
CHECKOUT = Path(iac_kernel.__file__).resolve().parent.parent


def server_command() -> list[str]:
    """``iac-kernel acp`` as this interpreter runs it (see :data:`CHECKOUT`)."""
    return [sys.executable, "-m", "iac_kernel", "acp"]


def server_env(script: Path | None = MAIN_SCRIPT, **extra: str) -> dict[str, str]:
    env = {
        "IAC_KERNEL_SESSIONS_DIR": os.environ["IAC_KERNEL_SESSIONS_DIR"],
        "IAC_KERNEL_LOG_LEVEL": "INFO",
    }
    if script is not None:
        env["IAC_KERNEL_SCRIPT"] = str(script)
    env.update(extra)
    return env


async def wait_until(predicate: Callable[[], Any], what: str, seconds: float = WAIT) -> Any:
    """Poll ``predicate`` until it is truthy; fail with ``what`` after ``seconds``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        value = predicate()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


class RecordingClient:
    """A test ACP client: records every update and permission request.

    ``answers`` holds the permission answers to give, in order: an option id, the
    string ``"hold"`` (keep the request open until :meth:`release`), or a raw dict sent
    as is (for the alias forms). With no answers left it uses ``default``.
    """

    def __init__(self, default: str = "allow_once") -> None:
        self.default = default
        self.answers: deque[Any] = deque()
        self.updates: list[tuple[str, Any]] = []
        self.permissions: list[dict[str, Any]] = []
        self.held: asyncio.Future[Any] | None = None
        #: Updates handled so far (never cleared).
        self.handled = 0

    # -- the Client interface the SDK calls --------------------------------------------

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append((session_id, update))
        self.handled += 1

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **_: Any
    ) -> Any:
        self.permissions.append(
            {"session_id": session_id, "tool_call": tool_call, "options": options}
        )
        answer = self.answers.popleft() if self.answers else self.default
        if answer == "hold":
            self.held = asyncio.get_running_loop().create_future()
            answer = await self.held
        if isinstance(answer, dict):
            return answer
        if answer == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=answer)
        )

    # -- helpers for tests -------------------------------------------------------------

    def release(self, answer: Any) -> None:
        """Answer a held permission request (a real client answers "cancelled" after
        it sent session/cancel)."""
        if self.held is not None and not self.held.done():
            self.held.set_result(answer)

    def of(self, session_id: str, kind: str | None = None) -> list[Any]:
        return [
            u
            for sid, u in self.updates
            if sid == session_id and (kind is None or u.session_update == kind)
        ]

    def text(self, session_id: str, kind: str = "agent_message_chunk") -> str:
        return "".join(u.content.text for u in self.of(session_id, kind))

    def tool_updates(self, session_id: str, call_id: str) -> list[Any]:
        return [
            u
            for u in self.of(session_id)
            if u.session_update in ("tool_call", "tool_call_update") and u.tool_call_id == call_id
        ]

    def tool_ids(self, session_id: str) -> list[str]:
        return [u.tool_call_id for u in self.of(session_id, "tool_call")]

    def final_status(self, session_id: str, call_id: str) -> str | None:
        statuses = [u.status for u in self.tool_updates(session_id, call_id) if u.status]
        return statuses[-1] if statuses else None

    def clear(self) -> None:
        self.updates.clear()
        self.permissions.clear()


class SettlingConnection:
    """SDK 0.11's client runs each notification handler in a task of its own, so a
    request's answer can resolve before the updates sent ahead of it are handled (the
    wire order is right; 0.12's client waits for them). On 0.11 every request of the
    tests' client waits, after its answer, until the client has handled every update
    already received, as 0.12's does."""

    def __init__(self, conn: Any, client: RecordingClient, wire: Wire) -> None:
        self.inner = conn
        self._client = client
        self._wire = wire

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            result = attr(*args, **kwargs)
            return self._settled(result) if inspect.isawaitable(result) else result

        return call

    async def _settled(self, answer: Any) -> Any:
        try:
            return await answer
        finally:
            received = sum(m.get("method") == "session/update" for m in self._wire.incoming)
            await wait_until(lambda: self._client.handled >= received, "updates handled")


class Wire:
    """Every raw message the client received, in order (an SDK stream observer)."""

    def __init__(self) -> None:
        self.incoming: list[dict[str, Any]] = []

    def __call__(self, event: StreamEvent) -> None:
        if event.direction is StreamDirection.INCOMING:
            self.incoming.append(event.message)

    def index_of_answer(self, method_result_check: Callable[[dict], bool]) -> int:
        for i, message in enumerate(self.incoming):
            if "method" not in message and method_result_check(message):
                return i
        raise AssertionError("answer not found on the wire")

    def updates_of(self, session_id: str) -> list[tuple[int, dict[str, Any]]]:
        return [
            (i, m["params"]["update"])
            for i, m in enumerate(self.incoming)
            if m.get("method") == "session/update" and m["params"]["sessionId"] == session_id
        ]


@contextlib.asynccontextmanager
async def acp_server(
    tmp_path: Path,
    client: RecordingClient | None = None,
    env: dict[str, str] | None = None,
    initialize: bool = True,
) -> AsyncIterator[tuple[Any, Any, RecordingClient, Wire]]:
    """Spawn ``iac-kernel acp`` and connect the SDK's client side to it."""
    client = client or RecordingClient()
    wire = Wire()
    command = server_command()
    stderr = _log_file(tmp_path / f"server-stderr-{os.urandom(3).hex()}.log")
    closing = False
    try:
        async with spawn_agent_process(
            client,
            command[0],
            *command[1:],
            env=env or server_env(),
            transport_kwargs={"stderr": stderr, "limit": STREAM_LIMIT},
            use_unstable_protocol=True,
            observers=[wire],
        ) as (conn, process):
            if initialize:
                await asyncio.wait_for(conn.initialize(protocol_version=1), WAIT)
            if not MESSAGE_TRANSPORT:
                conn = SettlingConnection(conn, client, wire)
            try:
                yield conn, process, client, wire
            finally:
                if client.held is not None and not client.held.done():
                    client.held.set_result("reject_once")
            closing = True
    except ConnectionResetError:
        # SDK 0.11's client re-raises, when it closes, a write that failed because the
        # test killed the server; 0.12 does not. Anything else still fails the test.
        if not closing:
            raise
    except RuntimeError as exc:
        # The lowest SDK's client, while it closes, fails on a notification that was
        # still arriving (e.g. the commands sent after a session/new answer): "message
        # queue already closed" (spelled "mssage" there). Only then, only at close.
        if not (closing and "queue already closed" in str(exc)):
            raise
    finally:
        stderr.close()


class RawServer:
    """``iac-kernel acp`` driven with raw lines on stdin, raw lines read from stdout."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[bytes] = []
        self._next_id = 1000

    @classmethod
    @contextlib.asynccontextmanager
    async def start(cls, env: dict[str, str], stderr_path: Path) -> AsyncIterator[RawServer]:
        command = server_command()
        with _log_file(stderr_path) as stderr:
            process = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
                env={**_base_env(), **env},
                limit=STREAM_LIMIT,
            )
            try:
                yield cls(process)
            finally:
                if process.returncode is None:
                    with contextlib.suppress(Exception):
                        process.stdin.close()
                    try:
                        await asyncio.wait_for(process.wait(), 10)
                    except TimeoutError:
                        process.kill()
                        await process.wait()

    async def send_line(self, data: bytes | str) -> None:
        if isinstance(data, str):
            data = data.encode()
        self.process.stdin.write(data.rstrip(b"\n") + b"\n")
        await self.process.stdin.drain()

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_line(json.dumps(message))

    async def read(self) -> dict[str, Any]:
        line = await asyncio.wait_for(self.process.stdout.readline(), WAIT)
        assert line, "the server closed stdout"
        self.lines.append(line)
        return json.loads(line)

    async def answer(self, request_id: Any) -> dict[str, Any]:
        """Read until the answer to ``request_id`` (notifications and requests from the
        server are kept in :attr:`seen`)."""
        while True:
            message = await self.read()
            if "method" not in message and message.get("id") == request_id:
                return message

    async def call(self, method: str, params: Any = None) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        return await self.answer(self._next_id)

    async def initialize(self) -> dict[str, Any]:
        return await self.call("initialize", {"protocolVersion": 1})


def _log_file(path: Path) -> Any:
    """Where a server's stderr goes (read it when a test fails)."""
    return open(path, "wb")  # closed by the caller


def _base_env() -> dict[str, str]:
    keep = ("HOME", "PATH", "LANG", "LC_ALL", "USER", "LOGNAME", "SHELL", "TERM")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env["PYTHONPATH"] = str(CHECKOUT)  # the code under test, not the venv's install
    return env


class AnsweringChannel:
    """A client channel with declared ``capabilities`` that answers each request with the
    next of ``answers`` and records the requests."""

    def __init__(self, capabilities: dict, answers: list) -> None:
        self.features = ClientFeatures(capabilities)
        self.answers = answers
        self.requests: list[tuple[str, dict]] = []

    async def request(self, method: str, params: dict):
        self.requests.append((method, params))
        return self.answers.pop(0)


class RecordingChannel:
    """A client channel that records every update it is asked to send."""

    def __init__(self) -> None:
        self.sent: list[dict] = []

    async def forward_update(self, params: dict) -> None:
        self.sent.append(params["update"])

    async def update(self, session_id: str, update, extra=None) -> None:
        self.sent.append({**serialize_params(update), **(extra or {})})
