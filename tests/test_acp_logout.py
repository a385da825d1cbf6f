"""``logout`` (schema 1.25): the agent's auth methods only say which environment variable
to set; it holds no login to end. So it does not advertise ``agentCapabilities.auth.logout``
and ``logout`` answers -32601, as the schema has it for an agent without the capability."""

from __future__ import annotations

from test_acp_support import RawServer, server_env


async def test_logout_is_not_advertised_and_not_found(tmp_path):
    async with RawServer.start(server_env(), tmp_path / "stderr.log") as server:
        init = (await server.initialize())["result"]
        assert "logout" not in (init["agentCapabilities"].get("auth") or {})
        answer = await server.call("logout", {})
        assert answer["error"]["code"] == -32601, answer
        assert "result" in await server.call("session/list", {})  # still serving
