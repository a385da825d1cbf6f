# ruff: noqa: F811  (the fixtures imported from server_support are test arguments)
"""Two editors on one session through the server's endpoint: one holds the control lease
(the first to open the session), the other observes: it sees the controller's turns
but cannot cancel them, prompt, change the mode or options, or answer a permission
question (a clear JSON-RPC error); it takes the lease with ``_iac/session/control``
when no turn runs. Two real WebSocket clients against a real ``jupyter server``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from server_support import (  # noqa: F401  (fixtures)
    JupyterServer,
    WsClient,
    root,
    server,
    work,
)
from test_acp_support import WAIT, wait_until

CONTROL = "controlled by another client"
CLAIM = "_iac/session/control"
UPDATE = "session/update"


def refused(answer: dict, method: str) -> bool:
    error = answer.get("error") or {}
    return (
        error.get("code") == -32602 and CONTROL in json.dumps(error) and method in json.dumps(error)
    )


async def test_a_second_client_cannot_steer_a_turn_it_did_not_start(
    server: JupyterServer, work: Path
) -> None:
    first = await WsClient.open(server.acp_url, server.token)
    second = await WsClient.open(server.acp_url, server.token)
    try:
        for client in (first, second):
            await client.call("initialize", {"protocolVersion": 1})
        created = await first.call("session/new", {"cwd": str(work), "mcpServers": []})
        sid = created["result"]["sessionId"]
        resumed = await second.call(
            "session/resume", {"sessionId": sid, "cwd": str(work), "mcpServers": []}
        )
        assert "result" in resumed, resumed
        control = {"sessionId": sid}
        assert (await first.call(CLAIM, control))["result"]["controller"] is True
        assert (await second.call(CLAIM, control))["result"]["controller"] is False
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "run the slow check"}]}
        turn = first.start("session/prompt", prompt)
        asked = await wait_until(
            lambda: first.requests("session/request_permission"), "the permission question"
        )
        question = asked[0]

        # The question went to the client that started the turn only; an answer from the
        # other one (its id guessed) is nobody's answer: the question stays open.
        assert second.requests("session/request_permission") == []
        await second.send(
            {"id": question["id"], "result": {"outcome": {"outcome": "selected",
                                                          "optionId": "allow_once"}}}
        )  # fmt: skip

        async def steer_is_refused() -> None:
            for method, params in (
                ("session/cancel", {"sessionId": sid}),
                ("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}),
                ("session/set_mode", {"sessionId": sid, "modeId": "accept_edits"}),
                (
                    "session/set_config_option",
                    {"sessionId": sid, "configId": "mode", "value": "accept_edits"},
                ),
            ):
                answer = await second.call(method, params)
                assert refused(answer, method), (method, answer)
            # As a notification, a cancel has no answer; it changes nothing either.
            await second.send({"method": "session/cancel", "params": {"sessionId": sid}})

        await steer_is_refused()
        # No claim while the controller's turn runs.
        assert refused(await second.call(CLAIM, {**control, "claim": True}), CLAIM)
        await asyncio.sleep(0.5)  # the stray answer and the cancel had their chance
        assert not turn.done()
        await first.send(
            {"id": question["id"], "result": {"outcome": {"outcome": "selected",
                                                          "optionId": "allow_once"}}}
        )  # fmt: skip
        await wait_until(
            lambda: any(
                m.get("params", {}).get("update", {}).get("status") == "in_progress"
                and "rawInput" in m["params"]["update"]
                for m in first.seen
                if m.get("method") == "session/update"
            ),
            "the slow command to run",
        )
        await steer_is_refused()  # while the command runs, too
        assert not turn.done()
        # The controlling client's own cancel works.
        await first.send({"method": "session/cancel", "params": {"sessionId": sid}})
        answer = await asyncio.wait_for(turn, WAIT)
        assert answer["result"]["stopReason"] == "cancelled"
        # The observer saw the turn: the prompt, and the controller's updates.
        updates = [m["params"]["update"] for m in second.seen if m.get("method") == UPDATE]
        asked = [u for u in updates if u["sessionUpdate"] == "user_message_chunk"]
        assert [u["content"]["text"] for u in asked] == ["run the slow check"]
        calls = [u for u in updates if u["sessionUpdate"] == "tool_call"]
        assert [c["toolCallId"] for c in calls] == [question["params"]["toolCall"]["toolCallId"]]
        # Between turns the lease still holds: the observer must claim it first.
        assert refused(await second.call("session/prompt", prompt), "session/prompt")
        claimed = await second.call(CLAIM, {**control, "claim": True})
        assert claimed["result"] == {"sessionId": sid, "controller": True}
        assert (await first.call(CLAIM, control))["result"]["controller"] is False
        assert refused(await first.call("session/prompt", prompt), "session/prompt")
        # The mode stayed; the other client now controls the session.
        state = await second.call(
            "session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "default"}
        )
        assert "result" in state, state
        after = await second.call(
            "session/prompt",
            {"sessionId": sid, "prompt": [{"type": "text", "text": "editor follow-up"}]},
        )
        assert after["result"]["stopReason"] == "end_turn"
        # Its own turn, its own cancel: a cancel with nothing running is fine.
        assert "result" in await second.call("session/cancel", {"sessionId": sid})
    finally:
        first.close()
        second.close()
