"""Boolean config options (schema 1.25): on/off settings offered as ``type: "boolean"``
to a client that declares ``session.configOptions.boolean``, never to one that does not;
setting one changes the session's setting."""

from __future__ import annotations

from node_schema import schema_failures
from test_acp_support import RawServer, server_env

BOOLEAN_CLIENT = {"session": {"configOptions": {"boolean": {}}}}


async def _open(server: RawServer, workspace, capabilities: dict) -> dict:
    await server.call("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
    made = await server.call("session/new", {"cwd": str(workspace), "mcpServers": []})
    return made["result"]


def _booleans(options: list[dict]) -> dict[str, bool]:
    return {o["id"]: o["currentValue"] for o in options if o["type"] == "boolean"}


async def test_a_client_without_the_capability_gets_no_boolean_option(tmp_path, workspace):
    async with RawServer.start(server_env(), tmp_path / "stderr.log") as server:
        made = await _open(server, workspace, {})
        assert _booleans(made["configOptions"]) == {}
        # It may still set one, in words: the setting changes, the answer stays select-only.
        set_ = await server.call(
            "session/set_config_option",
            {"sessionId": made["sessionId"], "configId": "sandbox_network", "value": "off"},
        )
        assert _booleans(set_["result"]["configOptions"]) == {}


async def test_boolean_options_are_offered_set_and_validated(tmp_path, workspace):
    async with RawServer.start(server_env(), tmp_path / "stderr.log") as server:
        made = await _open(server, workspace, BOOLEAN_CLIENT)
        sid = made["sessionId"]
        assert _booleans(made["configOptions"]) == {
            "web_fetch_allow_private": False,
            "sandbox_network": True,
        }
        answers = [("zNewSessionResponse", made)]
        for config_id, value in (("sandbox_network", False), ("web_fetch_allow_private", True)):
            params = {"sessionId": sid, "configId": config_id, "type": "boolean", "value": value}
            answers.append(("zSetSessionConfigOptionRequest", params))
            set_ = await server.call("session/set_config_option", params)
            answers.append(("zSetSessionConfigOptionResponse", set_["result"]))
            assert _booleans(set_["result"]["configOptions"])[config_id] is value
        # The session's settings changed (a reload of its options shows them).
        loaded = await server.call(
            "session/resume", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
        )
        assert _booleans(loaded["result"]["configOptions"]) == {
            "web_fetch_allow_private": True,
            "sandbox_network": False,
        }
        bad = await server.call(
            "session/set_config_option",
            {"sessionId": sid, "configId": "sandbox_network", "value": "maybe"},
        )
        assert bad["error"]["code"] == -32602 and "true or false" in str(bad["error"])
        assert schema_failures(answers) == []
