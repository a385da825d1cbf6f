# ruff: noqa: F811  (the fixtures imported from server_support are test arguments)
"""The server extension's ACP WebSocket: who may open it (token, cookie and Origin,
the operator's authorizer), TLS for the bridge, and frames that are not one request.
Against a real ``jupyter server`` on loopback."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

from server_support import (  # noqa: F401  (fixtures)
    SCRIPT,
    JupyterServer,
    bridge,
    bridge_command,
    bridge_env,
    root,
    self_signed,
    server,
    server_env,
    upgrade_status,
    work,
)
from test_acp_support import WAIT


async def test_the_upgrade_needs_the_servers_token(server: JupyterServer) -> None:
    url = server.acp_url
    assert await upgrade_status(url, {}) in (401, 403)
    assert await upgrade_status(url, {"Authorization": "token wrong-token"}) in (401, 403)
    assert await upgrade_status(url, {"Authorization": f"Bearer {server.token}"}) == 101
    assert await upgrade_status(url, {"Authorization": f"token {server.token}"}) == 101
    # With the login cookie (a browser), the Origin must be the server's own, as for
    # kernel websockets: a page of another site cannot use the user's session.
    cookie = await asyncio.to_thread(server.login_cookie)
    assert await upgrade_status(url, {"Cookie": cookie, "Origin": server.http}) == 101
    foreign = {"Cookie": cookie, "Origin": "https://evil.example"}
    assert await upgrade_status(url, foreign) == 403
    assert await upgrade_status(url, {"Cookie": "username-x=forged"}) in (401, 403)
    # Under the server's base URL only.
    other = url.replace("/iac-kernel/acp", "/iac-kernel/acpx")
    assert await upgrade_status(other, {"Authorization": f"token {server.token}"}) == 404


async def test_a_token_in_the_url_is_refused_even_a_valid_one(server: JupyterServer) -> None:
    """Jupyter itself takes ``?token=``; our endpoint takes the bearer only from the
    ``Authorization`` header: a URL with a token is refused before anything reads it,
    and the answer (and the server's log) never echoes the token."""
    from tornado.httpclient import HTTPClientError

    header = {"Authorization": f"Bearer {server.token}"}
    for query in (
        f"?token={server.token}",
        f"?access_token={server.token}",
        f"?Token={server.token}",
        f"?x=1&token={server.token}",
    ):
        url = server.acp_url + query
        for headers in ({}, header):  # with the right header too: the URL is still wrong
            with pytest.raises(HTTPClientError) as refused:
                await websocket_connect(HTTPRequest(url, headers=headers))
            answer = refused.value
            assert answer.code == 400, (query, answer.code)
            # The status line says what to do instead, without the token.
            assert "token in the Authorization header" in str(answer)
            assert server.token not in str(answer)
    # The same token in the header opens it; the plain server still takes ?token= for
    # its own pages (what Jupyter does elsewhere is not changed).
    assert await upgrade_status(server.acp_url, header) == 101
    assert await asyncio.to_thread(server.api, "GET", "/api/status")
    assert server.token not in server.log.read_text()


async def test_operators_can_refuse_the_endpoint_by_its_auth_resource(
    root: Path, tmp_path: Path, isolated_runtime_dir: Path
) -> None:
    env = server_env(tmp_path, isolated_runtime_dir, SCRIPT)
    env["PYTHONPATH"] = str(Path(__file__).parent)
    args = ("--ServerApp.authorizer_class=server_authorizer.NoAgent",)
    jupyter = JupyterServer(root, env, args=args)
    try:
        await asyncio.to_thread(jupyter.start)
        token = {"Authorization": f"token {jupyter.token}"}
        assert await upgrade_status(jupyter.acp_url, token) == 403
        assert jupyter.api("GET", "/api/kernelspecs")["kernelspecs"]  # the rest is allowed
    finally:
        await asyncio.to_thread(jupyter.stop)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
async def test_wss_with_a_certificate_the_laptop_trusts_and_one_it_does_not(
    root: Path, work: Path, tmp_path: Path, isolated_runtime_dir: Path
) -> None:
    cert, key = self_signed(tmp_path)
    env = server_env(tmp_path, isolated_runtime_dir, SCRIPT)
    jupyter = JupyterServer(root, env, tls=(cert, key))
    try:
        await asyncio.to_thread(jupyter.start)
        assert jupyter.acp_url.startswith("wss://")
        # The system's CAs do not know this certificate: one line, exit 1.
        untrusted = await asyncio.to_thread(
            subprocess.run,
            bridge_command(jupyter.acp_url),
            env=bridge_env(jupyter.token, SSL_CERT_FILE=str(tmp_path / "no-such-ca.pem")),
            input=b"",
            capture_output=True,
            timeout=WAIT * 3,
        )
        assert untrusted.returncode == 1
        lines = untrusted.stderr.decode().strip().splitlines()
        assert len(lines) == 1 and "TLS failed" in lines[0], lines
        # Told to trust it (SSL_CERT_FILE, as for any OpenSSL client), it works.
        log = tmp_path / "bridge.log"
        trusted = {"SSL_CERT_FILE": str(cert)}
        async with bridge(jupyter.acp_url, jupyter.token, log, **trusted) as (conn, *_):
            sid = (await conn.new_session(cwd=str(work), mcp_servers=[])).session_id
            answer = await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=[text_block("editor follow-up")]), WAIT
            )
            assert answer.stop_reason == "end_turn"
    finally:
        await asyncio.to_thread(jupyter.stop)


async def test_frames_that_are_not_one_request_are_answered(
    server: JupyterServer, work: Path
) -> None:
    """Straight on the socket: bad frames get JSON-RPC errors and the connection lives."""
    conn = await websocket_connect(
        HTTPRequest(server.acp_url, headers={"Authorization": f"Bearer {server.token}"})
    )
    assert len(conn.headers.get("Acp-Connection-Id", "")) == 36
    try:

        async def exchange(frame: str | bytes) -> dict[str, Any]:
            await conn.write_message(frame, binary=isinstance(frame, bytes))
            answer = await asyncio.wait_for(conn.read_message(), WAIT)
            return json.loads(answer)

        assert (await exchange("not json"))["error"]["code"] == -32700
        assert (await exchange("[1, 2]"))["error"]["code"] == -32600
        await conn.write_message(b"\xff\xfe", binary=True)  # ignored, as the RFD says
        # A pretty-printed request is one message, not one per line.
        pretty = json.dumps(
            {"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {"protocolVersion": 1}},
            indent=2,
        )
        answer = await exchange(pretty)
        assert answer["id"] == 7 and answer["result"]["agentCapabilities"]["loadSession"]
        missing = await exchange(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 8,
                    "method": "session/load",
                    "params": {"sessionId": "no-such", "cwd": str(work), "mcpServers": []},
                }
            )
        )
        assert missing["id"] == 8 and missing["error"]["code"] == -32602
    finally:
        conn.close()


async def test_the_bridge_passes_bad_lines_through_and_drops_stray_answers(
    server: JupyterServer, tmp_path: Path
) -> None:
    """Raw lines on the bridge's stdin: the server's JSON-RPC errors come back, an answer
    to a request the server never made gets no reply, and the relay goes on."""
    command = bridge_command(server.acp_url)
    with open(tmp_path / "bridge.log", "wb") as log:  # noqa: ASYNC230
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
            env=bridge_env(server.token),
        )
    try:

        async def send(line: str) -> None:
            process.stdin.write(line.encode() + b"\n")
            await process.stdin.drain()

        async def read() -> dict[str, Any]:
            return json.loads(await asyncio.wait_for(process.stdout.readline(), WAIT))

        await send("not json")
        assert (await read())["error"]["code"] == -32700
        await send('{"jsonrpc": "2.0", "id": "stray", "result": {}}')
        await send('[{"jsonrpc": "2.0", "id": 1, "method": "initialize"}]')
        answer = await read()  # nothing came of the stray answer
        assert answer["error"]["code"] == -32600 and "batch" in json.dumps(answer)
        await send('{"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": '
                   '{"protocolVersion": 1}}')  # fmt: skip
        assert (await read())["result"]["protocolVersion"] == 1
    finally:
        process.stdin.close()
        assert await asyncio.wait_for(process.wait(), WAIT) == 0
