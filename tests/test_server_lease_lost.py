# ruff: noqa: F811  (the fixtures imported from server_support are test arguments)
"""A client that loses a session's control lease is told so: when another client claims
it (a ``session_info_update`` whose ``_meta`` says so, and a ``notice`` for a client that
declared notices), and when its connection ended and another client holds the lease by
the time it comes back (the remote bridge tells its editor after reconnecting). Real
WebSocket clients and ``iac-kernel acp --remote`` against a real ``jupyter server``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from server_support import (  # noqa: F401  (fixtures)
    JupyterServer,
    WsClient,
    bridge,
    root,
    server,
    work,
)
from test_acp_support import wait_until
from test_server_resume import Cuttable

CLAIM = "_iac/session/control"
CHECKOUT = str(Path(__file__).resolve().parents[1])


def lost(updates: list[dict[str, Any]], reason: str) -> list[dict[str, Any]]:
    """The updates that say the lease was lost for ``reason``."""
    control = {"controller": False, "reason": reason}
    return [
        u for u in updates if u.get("_meta", {}).get("iac_kernel", {}).get("control") == control
    ]


def updates(client: WsClient, sid: str) -> list[dict[str, Any]]:
    return [
        m["params"]["update"]
        for m in client.seen
        if m.get("method") == "session/update" and m["params"]["sessionId"] == sid
    ]


async def test_the_client_whose_lease_is_claimed_is_told(server: JupyterServer, work: Path):
    first = await WsClient.open(server.acp_url, server.token)
    second = await WsClient.open(server.acp_url, server.token)
    try:
        notices = {"session": {"notices": {}}}
        await first.call("initialize", {"protocolVersion": 1, "clientCapabilities": notices})
        await second.call("initialize", {"protocolVersion": 1})
        created = await first.call("session/new", {"cwd": str(work), "mcpServers": []})
        sid = created["result"]["sessionId"]
        opened = {"sessionId": sid, "cwd": str(work), "mcpServers": []}
        assert "result" in await second.call("session/resume", opened)
        # The holder claiming what it holds tells nobody anything.
        assert (await first.call(CLAIM, {"sessionId": sid, "claim": True}))["result"]["controller"]
        await asyncio.sleep(0.3)
        assert lost(updates(first, sid), "claimed") == lost(updates(second, sid), "claimed") == []

        claimed = await second.call(CLAIM, {"sessionId": sid, "claim": True})
        assert claimed["result"] == {"sessionId": sid, "controller": True}
        await wait_until(lambda: lost(updates(first, sid), "claimed"), "the notice")
        await asyncio.sleep(0.3)
        told = lost(updates(first, sid), "claimed")
        kinds = [u["sessionUpdate"] for u in told]
        assert kinds == ["session_info_update", "notice"], told
        notice = told[1]
        assert notice["severity"] == "warning"
        assert notice["title"].startswith("Another client took control of this session")
        assert CLAIM in notice.get("description", notice["title"])
        assert lost(updates(second, sid), "claimed") == []  # the new holder is not told

        # Back: the second client, which declared no notices, gets the info update only.
        assert (await first.call(CLAIM, {"sessionId": sid, "claim": True}))["result"]["controller"]
        await wait_until(lambda: lost(updates(second, sid), "claimed"), "the update")
        await asyncio.sleep(0.3)
        assert [u["sessionUpdate"] for u in lost(updates(second, sid), "claimed")] == [
            "session_info_update"
        ]
        assert len(lost(updates(first, sid), "claimed")) == 2  # nothing more for the first
    finally:
        first.close()
        second.close()


async def test_the_bridge_tells_its_editor_the_lease_went_while_it_was_away(
    root: Path, work: Path, tmp_path: Path, isolated_runtime_dir: Path
):
    """The bridge's connection ends on the server (not resumed within the window); another
    client claims the free lease; when the bridge is back it resumes the session as an
    observer and tells its editor why."""
    from server_support import SCRIPT, server_env

    jupyter = JupyterServer(
        root,
        server_env(tmp_path, isolated_runtime_dir, SCRIPT),
        args=("--IacKernelServer.resume_window=1",),
    )
    await asyncio.to_thread(jupyter.start)
    relay = await Cuttable(jupyter.port).start()
    other = await WsClient.open(jupyter.acp_url, jupyter.token)
    url = f"ws://127.0.0.1:{relay.listen}/iac-kernel/acp"
    log = tmp_path / "bridge.log"
    try:
        async with bridge(url, jupyter.token, log, PYTHONPATH=CHECKOUT) as (conn, _, _, wire):
            sid = (await conn.new_session(cwd=str(work), mcp_servers=[])).session_id
            await other.call("initialize", {"protocolVersion": 1})
            opened = {"sessionId": sid, "cwd": str(work), "mcpServers": []}
            assert "result" in await other.call("session/resume", opened)
            assert not (await other.call(CLAIM, {"sessionId": sid}))["result"]["controller"]

            relay.up = False
            relay.cut()
            await asyncio.sleep(2.5)  # the server's window (1 s) passes: the link ends

            async def claimed() -> bool:
                answer = await other.call(CLAIM, {"sessionId": sid, "claim": True})
                return answer.get("result", {}).get("controller") is True

            assert await claimed()
            relay.up = True
            await wait_until(lambda: "session(s) resumed" in log.read_text(), "the bridge")

            def told() -> list[dict[str, Any]]:
                return lost([u for _, u in wire.updates_of(sid)], "expired")

            (update,) = await wait_until(told, "the editor to be told")
            assert update["sessionUpdate"] == "session_info_update"
            assert "another client controls session" in log.read_text()
    finally:
        other.close()
        relay.close()
        await asyncio.to_thread(jupyter.stop)
