"""A small MCP server on the mcp SDK (``MCPServer`` of 2.x, ``FastMCP`` of 1.x), for the tests.

Usage: ``python demo_server.py stdio | web PORT | stateless PORT`` (web: streamable HTTP
on ``/mcp`` and SSE on ``/sse``; stateless: streamable HTTP on ``/mcp`` without sessions,
JSON answers, as a 2026-07-28 server is deployed). On 2.x every transport serves both
the 2026-07-28 spec and the ``initialize`` handshake of the earlier ones; on 1.x only the
latter. ``DEMO_PID_FILE`` names a file to write the process id to; ``DEMO_METHOD_LOG``
one to append the JSON-RPC method of each HTTP message to, one a line, with the request's
``Authorization`` header after a space (``-`` when there was none). Tools:

* ``add(a, b)``: the sum, as text;
* ``echo_env(name)``: the value of an environment variable (secret redaction tests);
* ``picture()``: an image block (comes back to the model as a marker);
* ``fail(message)``: raises ``ToolError``, so the result is an MCP error result;
* ``crash()``: the server process exits at once (a server dying mid-session).

``--hints`` marks ``add`` as read-only (a server hint the agent must not trust).
"""

from __future__ import annotations

import base64
import json
import os
import sys
from typing import Any

# jsonschema imports rfc3987_syntax (seconds of grammar building) when it is installed;
# this test server never checks IRI formats, so keep its start fast.
sys.modules.setdefault("rfc3987_syntax", None)

from mcp.types import ToolAnnotations  # noqa: E402

try:  # mcp 2.x: transport settings go to each app
    from mcp.server.mcpserver import Image, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    def new_server(port: int) -> Any:
        return MCPServer("demo", log_level="WARNING")

except ImportError:  # mcp 1.x: to the server
    from mcp.server.fastmcp import FastMCP, Image
    from mcp.server.fastmcp.exceptions import ToolError

    def new_server(port: int) -> Any:
        return FastMCP("demo", host="127.0.0.1", port=port, log_level="WARNING")


PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def build(port: int = 0) -> Any:
    server = new_server(port)

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return f"{a} + {b} = {a + b}"

    @server.tool()
    def echo_env(name: str) -> str:
        """The value of an environment variable of the server."""
        return f"{name}={os.environ.get(name, '')}"

    @server.tool()
    def picture() -> Image:
        """A one-pixel PNG."""
        return Image(data=PNG, format="png")

    @server.tool()
    def fail(message: str) -> str:
        """Always fails with ``message`` (an anticipated failure: the client sees it)."""
        raise ToolError(message)

    @server.tool()
    def crash() -> str:
        """Exit the server process immediately."""
        sys.stderr.write("demo server: crashing on purpose\n")
        sys.stderr.flush()
        os._exit(3)

    return server


def serve_web(server: Any, port: int, stateless: bool = False) -> None:
    """Streamable HTTP on ``/mcp`` and SSE on ``/sse`` from one process (stateless: only
    streamable HTTP, no sessions, JSON answers)."""
    import uvicorn

    if stateless:
        app = server.streamable_http_app(stateless_http=True, json_response=True)
    else:
        app = server.streamable_http_app()
        app.router.routes.extend(server.sse_app().routes)
    log = os.environ.get("DEMO_METHOD_LOG")
    served = _logging_methods(app, log) if log else app
    uvicorn.run(served, host="127.0.0.1", port=port, log_level="warning")


def _logging_methods(app: Any, path: str) -> Any:
    """``app``, appending the JSON-RPC method of each POSTed message to ``path``."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        auth = headers.get(b"authorization", b"-").decode("latin-1")
        body = b""

        async def reading() -> Any:
            nonlocal body
            message = await receive()
            if message["type"] == "http.request":
                body += message.get("body", b"")
                if not message.get("more_body"):
                    _log_methods(body, auth, path)
            return message

        return await app(scope, reading, send)

    return wrapped


def _log_methods(body: bytes, auth: str, path: str) -> None:
    try:
        messages = json.loads(body)
    except ValueError:
        return
    for message in messages if isinstance(messages, list) else [messages]:
        if isinstance(message, dict) and "method" in message:
            with open(path, "a") as handle:
                handle.write(f"{message['method']} {auth}\n")


def main() -> None:
    transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    pid_file = os.environ.get("DEMO_PID_FILE")
    if pid_file:
        with open(pid_file, "w") as handle:
            handle.write(str(os.getpid()))
    server = build(port)
    if transport == "stdio":
        server.run("stdio")
    elif transport in ("web", "stateless"):
        serve_web(server, port, stateless=transport == "stateless")
    else:
        raise SystemExit(f"unknown transport {transport!r}")


if __name__ == "__main__":
    main()
