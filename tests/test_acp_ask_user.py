"""The agent's own questions over ACP: a client declaring ``elicitation.form`` gets an
``elicitation/create`` form and its values reach the model; other clients get
``session/request_permission`` with the choices as options, or a question they can only
dismiss (the model is told to ask in its reply). Real turns of ``iac-kernel acp`` with a
scripted model; the wire checked with the TS SDK's schema."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from iac_kernel.acp.session.permissions import PermissionAsker
from iac_kernel.agent import questions
from iac_kernel.agent.permissions import ALLOW_ONCE, REJECT_ONCE
from node_schema import schema_failures
from test_acp_support import AnsweringChannel, RawServer, server_env

FORM_CLIENT = {"elicitation": {"form": {}}}
CHOICES = {"question": "Which workspace?", "choices": ["dev", "staging"]}
FIELDS = {
    "question": "Sizing\nfor the new pool",
    "fields": [
        {"name": "count", "kind": "number", "title": "Nodes"},
        {"name": "public", "kind": "boolean"},
        {"name": "zone", "kind": "choice", "choices": ["a", "b"]},
    ],
}


def _script(path: Path, ask: dict[str, Any]) -> Path:
    path.write_text(
        json.dumps(
            {
                "name": "ask",
                "vars": {"said": {"pattern": "The user answered: (.*)", "default": "nothing"}},
                "exchanges": [
                    {
                        "match": "^deploy",
                        "turns": [
                            {"tool_use": [{"name": "ask_user", "input": ask}]},
                            {"text": "Got {{said}}."},
                        ],
                    }
                ],
            }
        )
    )
    return path


async def _turn(
    tmp_path: Path,
    workspace: Path,
    capabilities: dict,
    ask: dict[str, Any],
    answer: Callable[[dict], Any],
) -> tuple[list[dict], list[dict], str]:
    """One prompt over raw JSON-RPC; the server's requests answered by ``answer``.
    Returns the server's requests, the session updates and the reply's text."""
    script = _script(tmp_path / "script.json", ask)
    async with RawServer.start(server_env(script=script), tmp_path / "stderr.log") as server:
        await server.call("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
        made = await server.call("session/new", {"cwd": str(workspace), "mcpServers": []})
        sid = made["result"]["sessionId"]
        params = {"sessionId": sid, "prompt": [{"type": "text", "text": "deploy it"}]}
        await server.send({"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": params})
        requests: list[dict] = []
        updates: list[dict] = []
        while True:
            message = await server.read()
            if message.get("method") == "session/update":
                updates.append(message["params"])
            elif "method" in message and "id" in message:
                requests.append(message)
                reply = {"jsonrpc": "2.0", "id": message["id"], "result": answer(message)}
                await server.send(reply)
            elif message.get("id") == 1:
                assert message["result"]["stopReason"] == "end_turn", message
                break
    text = "".join(
        u["update"]["content"]["text"]
        for u in updates
        if u["update"]["sessionUpdate"] == "agent_message_chunk"
    )
    return requests, updates, text


async def test_a_form_client_answers_a_choice_and_the_model_reads_it(tmp_path, workspace):
    answer = {"action": "accept", "content": {"answer": "staging"}}
    requests, updates, text = await _turn(
        tmp_path, workspace, FORM_CLIENT, CHOICES, lambda _: answer
    )
    (request,) = requests
    assert request["method"] == "elicitation/create"
    params = request["params"]
    assert params["mode"] == "form" and params["message"] == "Which workspace?"
    assert params["requestedSchema"]["properties"]["answer"]["enum"] == ["dev", "staging"]
    call_ids = {u["update"].get("toolCallId") for u in updates} - {None}
    assert params["toolCallId"] in call_ids
    assert text == 'Got {"answer": "staging"}.'
    items = [("zCreateElicitationRequest", params), ("zCreateElicitationResponse", answer)]
    items += [("zSessionNotification", u) for u in updates]
    assert schema_failures(items) == []


async def test_a_form_client_fills_typed_values(tmp_path, workspace):
    answer = {"action": "accept", "content": {"count": 3, "public": True, "zone": "b"}}
    requests, _, text = await _turn(tmp_path, workspace, FORM_CLIENT, FIELDS, lambda _: answer)
    schema = requests[0]["params"]["requestedSchema"]
    assert {k: v["type"] for k, v in schema["properties"].items()} == {
        "count": "number",
        "public": "boolean",
        "zone": "string",
    }
    assert schema["properties"]["count"]["title"] == "Nodes"
    assert requests[0]["params"]["message"] == "Sizing\nfor the new pool"
    assert json.loads(text.removeprefix("Got ").removesuffix(".")) == answer["content"]
    assert schema_failures([("zCreateElicitationRequest", requests[0]["params"])]) == []


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_declined_form_is_no_answer(tmp_path, workspace, action):
    requests, updates, text = await _turn(
        tmp_path, workspace, FORM_CLIENT, CHOICES, lambda _: {"action": action}
    )
    assert [r["method"] for r in requests] == ["elicitation/create"]
    assert text == "Got nothing."
    results = [u["update"] for u in updates if u["update"].get("status") == "completed"]
    assert any("declined to answer" in json.dumps(u) for u in results)


async def test_other_clients_pick_a_choice_from_the_permission_question(tmp_path, workspace):
    def pick(message):
        options = message["params"]["options"]
        staging = next(o for o in options if o["name"] == "staging")
        return {"outcome": {"outcome": "selected", "optionId": staging["optionId"]}}

    requests, _, text = await _turn(tmp_path, workspace, {}, CHOICES, pick)
    (request,) = requests
    assert request["method"] == "session/request_permission"
    options = request["params"]["options"]
    assert [(o["name"], o["kind"]) for o in options] == [
        ("dev", "allow_once"),
        ("staging", "allow_once"),
        ("Decline", "reject_once"),
    ]
    assert text == 'Got {"answer": "staging"}.'
    assert schema_failures([("zRequestPermissionRequest", request["params"])]) == []


async def test_other_clients_can_only_dismiss_a_free_form_question(tmp_path, workspace):
    def dismiss(message):
        (option,) = message["params"]["options"]
        return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}

    requests, updates, text = await _turn(tmp_path, workspace, {}, FIELDS, dismiss)
    (request,) = requests
    assert request["method"] == "session/request_permission"
    assert request["params"]["options"][0]["kind"] == "reject_once"
    assert text == "Got nothing."
    assert "cannot answer free-form questions" in json.dumps(updates)
    assert schema_failures([("zRequestPermissionRequest", request["params"])]) == []


def _question(args: dict) -> Any:
    from iac_kernel.tools.ask_user import question_fields

    form = questions.question_form(args["question"], question_fields(args))
    return questions.question_request("c1", "ask_user", args["question"], form)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ({"outcome": {"outcome": "selected", "optionId": "choice-1"}}, ALLOW_ONCE),
        ({"outcome": {"outcome": "selected", "optionId": "choice-9"}}, REJECT_ONCE),
        ({"outcome": {"outcome": "selected", "optionId": "allow_once"}}, REJECT_ONCE),
        ({"outcome": {"outcome": "selected", "optionId": "reject_once"}}, REJECT_ONCE),
        ({"outcome": {"outcome": "cancelled"}}, "cancelled"),
    ],
)
async def test_only_an_offered_choice_gives_values(reply, expected):
    channel = AnsweringChannel({}, [reply])
    got = await PermissionAsker(channel, "s1")(_question(CHOICES))
    assert got == expected
    if expected == ALLOW_ONCE:
        assert got.values == {"answer": "staging"}
    else:
        assert getattr(got, "values", None) is None
