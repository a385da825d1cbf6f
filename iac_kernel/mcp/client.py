"""One MCP server connection on the official ``mcp`` SDK (stdio, streamable HTTP, SSE).

The SDK's transports are anyio context managers that must be entered and left in one
task, so each server runs in a task of its own (:meth:`McpServer._run`) that opens the
connection (:func:`~iac_kernel.mcp.sdk.connect`: the 2026-07-28 spec or the
``initialize`` handshake of the earlier ones), lists the tools, then waits until it is
told to stop. Tool calls are made from the turn's task through the open connection;
the server's elicitations during a call go to the user through that call
(``ToolContext.elicit``), and are declined outside calls.

A server that cannot start (bad command, refused connection, no answer within
:data:`START_TIMEOUT`) or that stops later is ``failed`` with one readable line saying
why (a stdio server's last stderr lines included); it never raises into the session
that uses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
from collections.abc import Awaitable, Callable
from typing import Any

from mcp import types

from iac_kernel.mcp import sdk
from iac_kernel.mcp.config import ServerSpec

log = logging.getLogger(__name__)


def _seconds(name: str, default: float) -> float:
    """A positive number of seconds from the environment; a bad value keeps the default
    (the kernel's first cell and ``iac-kernel acp``'s log already name it)."""
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


#: Seconds a server has to start and list its tools.
START_TIMEOUT = _seconds("IAC_KERNEL_MCP_START_TIMEOUT", 30.0)
#: Seconds one tool call may take.
CALL_TIMEOUT = _seconds("IAC_KERNEL_MCP_CALL_TIMEOUT", 300.0)
STOP_TIMEOUT = 5.0
#: URL elicitations whose completion is still awaited, per server (oldest dropped).
MAX_COMPLETIONS = 64
#: The error a server answers a call with until the user completes URL elicitations.
URL_ELICITATION_REQUIRED = -32042
#: ``ToolContext.elicit``: ``(params, completed) -> result`` (agent/questions.py).
Elicit = Callable[[dict[str, Any], asyncio.Event | None], Awaitable[dict[str, Any]]]
STDERR_TAIL = 400


class McpServer:
    """A running (or failed) MCP server and the tools it offers."""

    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        #: ``starting``, ``running``, ``failed`` or ``stopped``.
        self.state = "starting"
        self.error = ""
        self.tools: list[types.Tool] = []
        self.server_info: str = ""
        #: The spec version agreed with the server (``2026-07-28`` needs no handshake).
        self.protocol: str = ""
        self._session: sdk.Connection | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._stderr: Any = None
        #: The elicitation forwarders of the calls in flight (the latest answers).
        self._elicitors: list[Elicit] = []
        #: The server's id of each URL elicitation forwarded -> set when it completes.
        self._completions: dict[str, asyncio.Event] = {}

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def running(self) -> bool:
        return self.state == "running"

    # -- life cycle ----------------------------------------------------------------------

    async def start(self, within: float = START_TIMEOUT) -> None:
        """Connect and list the tools; on failure :attr:`state` is ``failed``."""
        self._task = asyncio.ensure_future(self._run())
        try:
            await asyncio.wait_for(asyncio.shield(self._ready.wait()), within)
        except TimeoutError:
            self._fail(f"did not start within {within:g}s")
            await self.stop()
            self.state = "failed"

    async def stop(self) -> None:
        """Close the connection (a stdio server's process ends with it)."""
        if self.state in ("starting", "running"):
            self.state = "stopped"
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), STOP_TIMEOUT)
            except (TimeoutError, Exception):
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        self._session = None
        if self._stderr is not None:
            with contextlib.suppress(OSError):
                self._stderr.close()
            self._stderr = None

    async def _run(self) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                if self.spec.transport == "stdio":
                    self._stderr = tempfile.TemporaryFile(
                        mode="w+", encoding="utf-8", errors="replace"
                    )
                hooks = sdk.elicitation_hooks(self._on_elicit, self._on_complete)
                session = await sdk.connect(stack, self.spec, self._stderr, hooks)
                self.server_info, self.protocol = session.server_info, session.protocol
                self.tools = await session.list_tools()
                self._session = session
                self.state = "running"
                self._ready.set()
                await self._stop.wait()
        except asyncio.CancelledError:
            if not self._stop.is_set():  # the transport gave up (e.g. an SSE stream ended)
                self._fail("stopped (connection lost)")
        except BaseException as exc:  # any failure is reported, never raised
            self._fail(_reason(exc, started=self.state == "running"))
        finally:
            self._session = None
            if self.state == "running":
                self._fail("stopped unexpectedly")
            self._ready.set()

    def _fail(self, reason: str) -> None:
        if self.state in ("failed", "stopped"):
            return
        tail = self._stderr_tail()
        self.state = "failed"
        self.error = reason + (f" (stderr: {tail})" if tail else "")
        log.warning("MCP server %s %s", self.name, self.error)

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.flush()
            self._stderr.seek(0)
            text = self._stderr.read()
        except (OSError, ValueError):
            return ""
        lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
        return " / ".join(lines[-3:])[-STDERR_TAIL:]

    # -- elicitation -----------------------------------------------------------------------

    async def _on_elicit(self, params: dict[str, Any]) -> dict[str, Any]:
        """The server's ``elicitation/create``: forwarded to the user by the call in flight
        (``ToolContext.elicit``); declined when no call can ask (none in flight, or one
        whose session has nobody to ask)."""
        if not self._elicitors:
            return {"action": "decline"}
        completed = None
        elicitation_id = params.get("elicitationId")
        if params.get("mode") == "url" and isinstance(elicitation_id, str):
            completed = asyncio.Event()
            self._completions[elicitation_id] = completed
            while len(self._completions) > MAX_COMPLETIONS:
                self._completions.pop(next(iter(self._completions)))
        try:
            return await self._elicitors[-1](params, completed)
        except Exception:  # a front that failed: the server gets a decline, not a crash
            log.exception("MCP server %s: elicitation not forwarded", self.name)
            return {"action": "decline"}

    async def _send_to_urls(self, tool: str, wanted: list[dict[str, Any]]) -> str:
        """A call refused until the user completes URL elicitations (``-32042``): each is
        forwarded as the server's own would be; what the model reads."""
        lines = []
        for params in wanted:
            result = await self._on_elicit({**params, "mode": "url"})
            went = "was sent there" if result.get("action") == "accept" else "did not go there"
            lines.append(
                f"- {params.get('message', '')} ({params.get('url', '')}): the user {went}"
            )
        return (
            f"MCP server {self.name!r} needs the user to finish a step in a browser before "
            f"{tool} can run:\n" + "\n".join(lines) + "\nCall the tool again once the user "
            "says it is done; do not call it again before."
        )

    def _on_complete(self, elicitation_id: str) -> None:
        event = self._completions.pop(elicitation_id, None)
        if event is not None:
            event.set()

    # -- calls -----------------------------------------------------------------------------

    async def call(
        self, tool: str, arguments: dict[str, Any], elicit: Elicit | None = None
    ) -> types.CallToolResult:
        """Call one tool; raises :class:`McpCallError` with a readable reason. While it
        runs, the server's elicitations go to ``elicit`` (None: declined)."""
        session = self._session
        if session is None or not self.running:
            raise McpCallError(self.status_line())
        if elicit is not None:
            self._elicitors.append(elicit)
        try:
            return await self._call_or_die(session, tool, arguments)
        except sdk.MCPError as exc:
            wanted = url_elicitations(exc)
            if wanted is not None:  # the server needs the user in a browser first
                raise McpCallError(await self._send_to_urls(tool, wanted)) from None
            if (self._task is not None and self._task.done()) or sdk.closed(exc):
                self._fail(f"stopped while {tool} was running")
                raise McpCallError(self.status_line()) from None
            raise McpCallError(f"MCP server {self.name!r}: {exc}") from None
        except McpCallError:
            raise
        except Exception as exc:  # closed streams, transport errors: the server is gone
            self._fail(f"connection lost ({type(exc).__name__})")
            raise McpCallError(self.status_line()) from None
        finally:
            if elicit is not None:
                self._elicitors.remove(elicit)

    async def _call_or_die(
        self, session: sdk.Connection, tool: str, arguments: dict[str, Any]
    ) -> types.CallToolResult:
        """The call's result; :class:`McpCallError` as soon as the connection's task ends
        (a transport that fails does not fail the pending request itself)."""
        call = asyncio.ensure_future(session.call_tool(tool, arguments, CALL_TIMEOUT))
        try:
            watch = {call} if self._task is None else {call, self._task}
            await asyncio.wait(watch, return_when=asyncio.FIRST_COMPLETED)
            if not call.done():
                self._fail(f"stopped while {tool} was running")
                raise McpCallError(self.status_line())
            return call.result()
        finally:
            if not call.done():
                call.cancel()

    def status_line(self) -> str:
        if self.running:
            return f"MCP server {self.name!r} is running ({len(self.tools)} tools)"
        if self.state == "failed":
            return f"MCP server {self.name!r} failed: {self.error}"
        return f"MCP server {self.name!r} is {self.state}"


class McpCallError(Exception):
    """A tool call could not be made or did not get an answer."""


def url_elicitations(exc: BaseException) -> list[dict[str, Any]] | None:
    """The URL elicitations of a ``-32042`` (URL elicitation required) error, else None."""
    error = getattr(exc, "error", None)
    if getattr(error, "code", None) != URL_ELICITATION_REQUIRED:
        return None
    data = getattr(error, "data", None)
    found = data.get("elicitations") if isinstance(data, dict) else None
    if not isinstance(found, list):
        return None
    return [e for e in found if isinstance(e, dict)] or None


def _reason(exc: BaseException, started: bool) -> str:
    """One readable line for a failure (the first leaf of an exception group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"could not start: command not found ({exc.filename or exc})"
    if sdk.closed(exc):
        return "stopped (connection closed)" if started else "exited before it answered"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    prefix = "stopped" if started else "could not start"
    return f"{prefix}: {type(exc).__name__}: {text}"[:300]
