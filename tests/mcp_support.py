"""Helpers for the MCP tests: the test servers and the third-party filesystem server."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
DEMO_SERVER = HERE / "mcp_servers" / "demo_server.py"
BROKEN_SERVER = HERE / "mcp_servers" / "broken_server.py"
NODE_DIR = HERE / "node"
FS_SERVER = NODE_DIR / "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
SECRET = "s3cr3t-demo-token-value"
START_WAIT = 90.0


def require_node_modules() -> None:
    """The npm packages of tests/node: .ci/run installs them; otherwise the first test
    that needs them runs ``npm ci`` there (from the lockfile)."""
    npm = shutil.which("npm")
    if not FS_SERVER.is_file() and npm and shutil.which("node"):
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=NODE_DIR,
            check=False,
            timeout=600,
            capture_output=True,
        )
    if FS_SERVER.is_file() and shutil.which("node"):
        return
    message = f"run `npm ci` in {NODE_DIR} (missing {FS_SERVER.name} or node)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def stdio_entry(name: str, command: str, args: list[str], **env: str) -> dict[str, Any]:
    """An ACP stdio mcpServers entry."""
    return {
        "name": name,
        "command": command,
        "args": args,
        "env": [{"name": k, "value": v} for k, v in env.items()],
    }


def fs_entry(root: Path) -> dict[str, Any]:
    return stdio_entry("fs", shutil.which("node") or "node", [str(FS_SERVER), str(root)])


def demo_entry(name: str = "demo", **env: str) -> dict[str, Any]:
    return stdio_entry(name, sys.executable, [str(DEMO_SERVER), "stdio"], **env)


def broken_entry(name: str = "broken") -> dict[str, Any]:
    return stdio_entry(name, sys.executable, [str(BROKEN_SERVER)])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def web_server(log: Path, mode: str = "web", **env: str) -> Iterator[str]:
    """The demo MCP server over HTTP (``/mcp``) and SSE (``/sse``), or (``mode``
    ``stateless``) over stateless streamable HTTP only; yields its base URL."""
    port = free_port()
    env = {**os.environ, "DEMO_API_TOKEN": SECRET, **env}
    with open(log, "wb") as err:
        process = subprocess.Popen(
            [sys.executable, str(DEMO_SERVER), mode, str(port)], stderr=err, env=env
        )
    try:
        deadline = time.monotonic() + START_WAIT
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the demo MCP server did not start: {log.read_text()}")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes.
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    return True
