# ruff: noqa: F811  (the fixtures imported from server_support are test arguments)
"""Issue 31: a bash call's sandbox cannot reach the Jupyter server at all (its own
network namespace, item 1); and, as defense in depth (item 3), the server's ACP WebSocket
refuses a sandboxed peer even with the right token: its peer on loopback is mapped to a
pid through /proc and found sandboxed. That is tried from a sandbox that shares the
host's network (bubblewrap run by the test, with a guard folder as our calls have), as
an older agent or another tool's sandbox would. Control: the same client run on the host
is upgraded."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from guard_support import Asker
from iac_kernel.guard.sandbox.bwrap import GUARD_MOUNT, own_paths_under_tmp, unusable_reason
from server_support import (  # noqa: F401  (fixtures)
    JupyterServer,
    root,
    server,
    work,
)
from test_guard_jupyter_plane import _harness

sandboxed = pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable")

#: A WebSocket upgrade by hand (argv: port, token); prints the status line.
CLIENT = """
import socket, sys
sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
sock.sendall(
    b"GET /iac-kernel/acp HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nUpgrade: websocket\\r\\n"
    b"Connection: Upgrade\\r\\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\\r\\n"
    b"Sec-WebSocket-Version: 13\\r\\nAuthorization: Bearer "
    + sys.argv[2].encode() + b"\\r\\n\\r\\n"
)
print("status:", sock.recv(200).split(b"\\r\\n")[0].decode())
"""


async def _from_a_call(server: JupyterServer, tmp_path: Path, outside_tmp: Path) -> tuple:
    """(the client's output from a bash call, the harness)."""
    harness = _harness(tmp_path, outside_tmp)
    (harness.cwd / "client.py").write_text(CLIENT)
    command = f"{sys.executable} client.py {server.port} {server.token} 2>&1"
    result = await harness.run(command, Asker())
    assert result is not None
    return result.content, harness


def _bwrap_sharing_the_network(argv: list[str]) -> list[str]:
    """A sandbox like a call's (a guard folder at GUARD_MOUNT) without its own network."""
    bwrap = shutil.which("bwrap")
    assert bwrap is not None
    command = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for path in own_paths_under_tmp():  # this Python, if it lives under /tmp
        command += ["--ro-bind", path, path]
    return [*command, "--dir", GUARD_MOUNT, "--unshare-pid", "--", *argv]


@sandboxed
async def test_a_sandboxed_peer_is_refused_by_the_acp_websocket(
    server: JupyterServer, outside_tmp: Path
) -> None:
    client = outside_tmp / "client.py"
    client.write_text(CLIENT)
    argv = [sys.executable, str(client), str(server.port), server.token]

    def run(command: list[str]) -> str:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        return done.stdout + done.stderr

    boxed = await asyncio.to_thread(run, _bwrap_sharing_the_network(argv))
    assert "status: HTTP/1.1 403" in boxed, boxed
    # Control: the same client from the host is upgraded.
    host = await asyncio.to_thread(run, argv)
    assert "status: HTTP/1.1 101" in host, host


@sandboxed
async def test_a_sandboxed_call_cannot_reach_the_server_at_all(
    server: JupyterServer, tmp_path: Path, outside_tmp: Path
) -> None:
    output, _ = await _from_a_call(server, tmp_path, outside_tmp)
    assert "status:" not in output, output
    assert "Connection refused" in output or "Network is unreachable" in output
