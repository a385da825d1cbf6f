"""A small MCP server on the mcp SDK's FastMCP, for the tests.

Usage: ``python demo_server.py stdio | web PORT`` (web: streamable HTTP on ``/mcp`` and
SSE on ``/sse``). ``DEMO_PID_FILE`` names a file to write the process id to. Tools:

* ``add(a, b)``: the sum, as text;
* ``echo_env(name)``: the value of an environment variable (secret redaction tests);
* ``picture()``: an image block (comes back to the model as a marker);
* ``fail(message)``: raises, so the result is an MCP error result;
* ``crash()``: the server process exits at once (a server dying mid-session).

``--hints`` marks ``add`` as read-only (a server hint the agent must not trust).
"""

from __future__ import annotations

import base64
import os
import sys

# jsonschema imports rfc3987_syntax (seconds of grammar building) when it is installed;
# this test server never checks IRI formats, so keep its start fast.
sys.modules.setdefault("rfc3987_syntax", None)

from mcp.server.fastmcp import FastMCP, Image  # noqa: E402
from mcp.types import ToolAnnotations  # noqa: E402

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def build(port: int = 0) -> FastMCP:
    server = FastMCP("demo", host="127.0.0.1", port=port, log_level="WARNING")

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
        """Always fails with ``message``."""
        raise ValueError(message)

    @server.tool()
    def crash() -> str:
        """Exit the server process immediately."""
        sys.stderr.write("demo server: crashing on purpose\n")
        sys.stderr.flush()
        os._exit(3)

    return server


def serve_web(server: FastMCP, port: int) -> None:
    """Streamable HTTP on ``/mcp`` and SSE on ``/sse`` from one process."""
    import uvicorn

    app = server.streamable_http_app()
    app.router.routes.extend(server.sse_app().routes)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


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
    elif transport == "web":
        serve_web(server, port)
    else:
        raise SystemExit(f"unknown transport {transport!r}")


if __name__ == "__main__":
    main()
