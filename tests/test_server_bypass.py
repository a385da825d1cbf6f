# ruff: noqa: F811  (the fixtures imported from server_support are test arguments)
"""Issue 31, item 3: a WebSocket client of the Jupyter server cannot raise a session to
bypass mode unless the server's owner allows it (``allow_remote_bypass``): every route
(``session/set_mode``, the mode config option and its ``config/set`` alias, ``/mode
bypass``) gets a JSON-RPC error and the mode stays. Controls: other modes change, and
with the opt-in bypass is set."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

from server_support import (  # noqa: F401  (fixtures)
    SCRIPT,
    JupyterServer,
    root,
    server,
    server_env,
    work,
)
from test_acp_support import WAIT


class Socket:
    """JSON-RPC straight on the server's ACP WebSocket."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.ids = itertools.count(1)
        self.updates: list[dict[str, Any]] = []

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = next(self.ids)
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        await self.conn.write_message(json.dumps(message))
        while True:
            frame = json.loads(await asyncio.wait_for(self.conn.read_message(), WAIT))
            if frame.get("id") == request_id and "method" not in frame:
                return frame
            self.updates.append(frame)

    async def mode(self, sid: str) -> str:
        """The session's mode, as ``/mode`` says it."""
        self.updates.clear()
        answer = await self.call("session/prompt", {"sessionId": sid, "prompt": _text("/mode")})
        assert "result" in answer, answer
        text = json.dumps(self.updates)
        return next(
            m for m in ("accept_edits", "read_only", "bypass", "default") if f"`{m}`" in text
        )


def _text(text: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": text}]


async def _connect(server: JupyterServer, work: Path) -> tuple[Socket, str]:
    conn = await websocket_connect(
        HTTPRequest(server.acp_url, headers={"Authorization": f"Bearer {server.token}"})
    )
    socket = Socket(conn)
    assert "result" in await socket.call("initialize", {"protocolVersion": 1})
    new = await socket.call("session/new", {"cwd": str(work), "mcpServers": []})
    return socket, new["result"]["sessionId"]


ROUTES = [
    ("session/set_mode", lambda sid: {"sessionId": sid, "modeId": "bypass"}, "modeId"),
    (
        "session/set_config_option",
        lambda sid: {"sessionId": sid, "configId": "mode", "value": "bypass"},
        "value",
    ),
    ("config/set", lambda sid: {"sessionId": sid, "configId": "mode", "value": " bypass"}, "value"),
    ("session/prompt", lambda sid: {"sessionId": sid, "prompt": _text("/mode bypass")}, "prompt"),
]


async def test_bypass_from_a_websocket_client_needs_the_owners_opt_in(
    server: JupyterServer, work: Path
) -> None:
    socket, sid = await _connect(server, work)
    try:
        for method, params, field in ROUTES:
            answer = await socket.call(method, params(sid))
            assert answer["error"]["code"] == -32602, (method, answer)
            assert "allow_remote_bypass" in answer["error"]["data"][field], answer
            assert await socket.mode(sid) == "default", method
        # Controls: another mode changes, and the connection still works.
        answer = await socket.call("session/set_mode", {"sessionId": sid, "modeId": "read_only"})
        assert "result" in answer, answer
        assert await socket.mode(sid) == "read_only"
    finally:
        socket.conn.close()


@pytest.mark.parametrize("route", range(len(ROUTES)))
async def test_the_owner_can_allow_bypass_from_remote_clients(
    root: Path, tmp_path: Path, isolated_runtime_dir: Path, work: Path, route: int
) -> None:
    env = server_env(tmp_path, isolated_runtime_dir, SCRIPT)
    jupyter = JupyterServer(root, env, args=("--IacKernelServer.allow_remote_bypass=True",))
    await asyncio.to_thread(jupyter.start)
    try:
        socket, sid = await _connect(jupyter, work)
        method, params, _field = ROUTES[route]
        answer = await socket.call(method, params(sid))
        assert "result" in answer, answer
        assert await socket.mode(sid) == "bypass"
        socket.conn.close()
    finally:
        await asyncio.to_thread(jupyter.stop)
