"""An MCP server's elicitations during a tool call, forwarded to the ACP client: form ->
``elicitation/create`` form (for ``elicitation.form``), url -> ``elicitation/create`` url
and then ``elicitation/complete`` (for ``elicitation.url``); the server gets the user's
answer, or a decline where the client cannot show it. A real MCP server (the installed
``mcp`` SDK's line) and real turns of ``iac-kernel acp``; the wire checked with the TS
SDK's schema."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from iac_kernel.agent import questions
from iac_kernel.agent.forms import BOOLEAN, CHOICE, NUMBER, TEXT
from iac_kernel.mcp import sdk
from mcp_support import stdio_entry
from node_schema import schema_failures
from test_acp_support import RawServer, server_env

SERVER = Path(__file__).parent / "mcp_servers" / "elicit_server.py"
SIGN_IN_URL = "https://login.example.test/device?code=ABCD-1234"
BOTH = {"elicitation": {"form": {}, "url": {}}}
ALLOW = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


def _script(path: Path, tool: str) -> Path:
    path.write_text(
        json.dumps(
            {
                "name": "mcp-elicit",
                "vars": {"said": {"pattern": "((?:sizing|sign_in): .*)", "default": "nothing"}},
                "exchanges": [
                    {
                        "match": "^go",
                        "turns": [
                            {"tool_use": [{"name": f"mcp__elicit__{tool}", "input": {}}]},
                            {"text": "Server said {{said}}"},
                        ],
                    }
                ],
            }
        )
    )
    return path


async def _turn(
    tmp_path: Path, workspace: Path, capabilities: dict, tool: str, answer: Callable[[dict], Any]
) -> tuple[list[dict], list[dict], str]:
    """One prompt calling the MCP tool; the server's requests answered by ``answer``.
    Returns every message from the agent, the requests among them, and the reply."""
    env = server_env(script=_script(tmp_path / "script.json", tool))
    entry = stdio_entry("elicit", sys.executable, [str(SERVER)])
    async with RawServer.start(env, tmp_path / "stderr.log") as server:
        await server.call("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
        made = await server.call("session/new", {"cwd": str(workspace), "mcpServers": [entry]})
        assert "result" in made, made
        sid = made["result"]["sessionId"]
        params = {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
        await server.send({"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": params})
        messages: list[dict] = []
        while True:
            message = await server.read()
            messages.append(message)
            if "method" in message and "id" in message:
                reply = {"jsonrpc": "2.0", "id": message["id"], "result": answer(message)}
                await server.send(reply)
            elif message.get("id") == 1:
                assert message["result"]["stopReason"] == "end_turn", message
                break
    requests = [m for m in messages if "method" in m and "id" in m]
    text = "".join(
        m["params"]["update"]["content"]["text"]
        for m in messages
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )
    return messages, requests, text


def _answers(elicited: dict) -> Callable[[dict], Any]:
    def answer(message: dict) -> Any:
        if message["method"] == "session/request_permission":
            return ALLOW  # the MCP tool's own approval
        return elicited

    return answer


async def test_a_form_reaches_the_client_and_its_values_the_server(tmp_path, workspace):
    values = {"workspace": "staging", "replicas": 3, "public": True}
    reply = {"action": "accept", "content": values}
    _, requests, text = await _turn(tmp_path, workspace, BOTH, "sizing", _answers(reply))
    assert [r["method"] for r in requests] == ["session/request_permission", "elicitation/create"]
    params = requests[1]["params"]
    assert params["mode"] == "form" and params["message"] == "Sizing for the deployment"
    assert params["toolCallId"] == requests[0]["params"]["toolCall"]["toolCallId"]
    kinds = {k: v["type"] for k, v in params["requestedSchema"]["properties"].items()}
    assert kinds == {"workspace": "string", "replicas": "number", "public": "boolean"}
    assert "sizing: accept" in text
    assert "'workspace': 'staging'" in text and "'replicas': 3" in text and "True" in text
    items = [("zCreateElicitationRequest", params), ("zCreateElicitationResponse", reply)]
    assert schema_failures(items) == []


async def test_a_declined_form_is_declined_to_the_server(tmp_path, workspace):
    _, _, text = await _turn(tmp_path, workspace, BOTH, "sizing", _answers({"action": "decline"}))
    assert "sizing: decline" in text


#: Over stdio, mcp 2.x speaks the 2026-07-28 spec, where a server has no channel for a
#: request mid-call other than a form in an InputRequiredResult.
HANDSHAKE_ONLY = pytest.mark.skipif(
    sdk.LINE == 2, reason="mcp 2.x speaks 2026-07-28 here: no URL elicitation mid-call"
)


@HANDSHAKE_ONLY
async def test_a_url_goes_to_the_client_and_its_completion_follows(tmp_path, workspace):
    reply = {"action": "accept"}
    messages, requests, text = await _turn(tmp_path, workspace, BOTH, "sign_in", _answers(reply))
    (elicit,) = [r for r in requests if r["method"] == "elicitation/create"]
    params = elicit["params"]
    assert params["mode"] == "url" and params["url"] == SIGN_IN_URL
    assert "Sign in to the demo cloud" in params["message"]
    assert params["elicitationId"] != "login-1"  # ours, not the server's
    assert "sign_in: accept" in text
    (done,) = [m for m in messages if m.get("method") == "elicitation/complete"]
    assert done["params"] == {"elicitationId": params["elicitationId"]}
    assert "id" not in done  # a notification
    items = [
        ("zCreateElicitationRequest", params),
        ("zCreateElicitationResponse", reply),
        ("zCompleteElicitationNotification", done["params"]),
    ]
    assert schema_failures(items) == []


@HANDSHAKE_ONLY
@pytest.mark.parametrize("capabilities", [{}, {"elicitation": {"form": {}}}])
async def test_a_client_without_url_elicitation_declines_it_unasked(
    tmp_path, workspace, capabilities
):
    messages, requests, text = await _turn(
        tmp_path, workspace, capabilities, "sign_in", _answers({"action": "accept"})
    )
    assert [r["method"] for r in requests] == ["session/request_permission"]
    assert "sign_in: decline" in text
    assert not any(m.get("method") == "elicitation/complete" for m in messages)


@pytest.mark.parametrize(
    ("capabilities", "went"), [(BOTH, "was sent there"), ({}, "did not go there")]
)
async def test_a_call_refused_until_a_sign_in_sends_the_user_there(
    tmp_path, workspace, capabilities, went
):
    """``-32042`` (URL elicitation required), on every spec: each URL is forwarded like
    the server's own elicitation, and the model reads that the call needs it first."""
    messages, requests, _ = await _turn(
        tmp_path, workspace, capabilities, "needs_login", _answers({"action": "accept"})
    )
    elicits = [r["params"] for r in requests if r["method"] == "elicitation/create"]
    assert [p["url"] for p in elicits] == ([SIGN_IN_URL] if capabilities else [])
    results = [
        m["params"]["update"]
        for m in messages
        if m.get("method") == "session/update" and m["params"]["update"].get("status") == "failed"
    ]
    (failed,) = results
    text = json.dumps(failed)
    assert "needs the user to finish a step in a browser" in text and went in text
    assert "Call the tool again once the user says it is done" in text
    if elicits:
        assert schema_failures([("zCreateElicitationRequest", elicits[0])]) == []


async def test_a_client_without_forms_can_only_dismiss_a_form(tmp_path, workspace):
    def answer(message: dict) -> Any:
        if (
            message["params"]["toolCall"].get("kind") != "other"
            or len(message["params"]["options"]) != 1
        ):
            return ALLOW
        (option,) = message["params"]["options"]
        return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}

    _, requests, text = await _turn(tmp_path, workspace, {}, "sizing", answer)
    assert [r["method"] for r in requests] == ["session/request_permission"] * 2
    assert requests[1]["params"]["options"][0]["kind"] == "reject_once"
    assert "sizing: decline" in text


def test_a_flat_schema_becomes_a_form_and_anything_else_none():
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name\x1b[2J"},
            "size": {"type": "integer"},
            "ok": {"type": "boolean", "default": True},
            "tier": {"type": "string", "enum": ["a", "b"]},
            "zone": {"type": "string", "oneOf": [{"const": "x", "title": "X"}]},
        },
        "required": ["name", "tier"],
    }
    form = questions.schema_form("t", schema)
    assert [(f.name, f.kind, f.required) for f in form.fields] == [
        ("name", TEXT, True),
        ("size", NUMBER, False),
        ("ok", BOOLEAN, False),
        ("tier", CHOICE, True),
        ("zone", CHOICE, False),
    ]
    assert "\x1b" not in form.fields[0].title and form.fields[2].default is True
    many = {"type": "array", "items": {"type": "string", "enum": ["a"]}}
    assert questions.schema_form("t", {"properties": {"tags": many}}) is None
    assert questions.schema_form("t", {"properties": {"n": {"type": "object"}}}) is None
    assert questions.schema_form("t", "nope") is None


async def test_nobody_to_ask_and_odd_urls_are_declined():
    assert await questions.elicit(None, "c", "t", {"mode": "form"}) == {"action": "decline"}

    async def ask(request):  # would approve anything
        return "allow_once"

    for url in ("javascript:alert(1)", "file:///etc/passwd", None):
        params = {"mode": "url", "url": url, "message": "m", "elicitationId": "e"}
        assert await questions.elicit(ask, "c", "t", params) == {"action": "decline"}
    form = {"mode": "form", "message": "m", "requestedSchema": {"properties": {}}}
    assert await questions.elicit(ask, "c", "t", form) == {"action": "decline"}
    # an approval without values (a headless policy) is not an answer to a form
    form["requestedSchema"] = {"properties": {"n": {"type": "string"}}, "required": ["n"]}
    assert await questions.elicit(ask, "c", "t", form) == {"action": "decline"}
