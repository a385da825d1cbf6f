"""``session/load`` replay params built as plain JSON (iac_kernel.acp.replay): each update
is what the SDK's models serialize to (``to_update`` + ``serialize_params``), and the
replay shows a client what the update-by-update replay (``replay_updates``) shows, with a
call whose result follows it sent once in its final state. Every kind of replayed event:
prompts, answers, thoughts, tool calls with locations and diffs, failed and refused
calls, plans, calls left unfinished, results out of order."""

from __future__ import annotations

import uuid
from typing import Any

from acp.schema import SessionNotification
from acp.utils import serialize_params

from iac_kernel.acp.protocol.updates import (
    extra_fields,
    replay_updates,
    stored_message_id,
    to_update,
)
from iac_kernel.acp.replay import replay_params, wire_update
from iac_kernel.events import (
    Compacted,
    Diff,
    ErrorNotice,
    Location,
    TextDelta,
    ThinkingDelta,
    ToolCallInput,
    ToolCallResult,
    ToolCallStarted,
    UserMessage,
)

PLAN = {"steps": [{"step": "Plan", "status": "completed"}, {"step": "Apply", "status": "pending"}]}
STEPS = [{**step, "priority": "medium"} for step in PLAN["steps"]]


def _history() -> list[Any]:
    edit = Diff("/w/main.tf", 'a = "1"\nb = 2\n', 'a = "1"\nb = 3\n')
    return [
        UserMessage("plan it \\xe9"),
        ThinkingDelta("Look first."),
        TextDelta("Reading."),
        ToolCallStarted("c1", "read_file", "read_file: main.tf", "read"),
        ToolCallInput(
            "c1",
            "read_file",
            "read_file: main.tf",
            "read",
            {"path": "main.tf"},
            [Location("/w/main.tf", 1)],
        ),
        ToolCallResult("c1", "read_file", "completed", 'resource "x" {}'),
        ToolCallStarted("c2", "read_file", "", "read"),
        ToolCallInput("c2", "read_file", "", "read", {}, [Location("/w/a", 7), Location("/w/b")]),
        ToolCallResult("c2", "read_file", "failed", "", denied=False),
        ToolCallStarted("c3", "edit_file", "edit_file: main.tf", "edit"),
        ToolCallInput(
            "c3",
            "edit_file",
            "edit_file: main.tf",
            "edit",
            {"n": None},
            [Location("/w/main.tf", 2)],
            edit,
        ),
        ToolCallResult("c3", "edit_file", "completed", "edited", diff=edit),
        ToolCallStarted("c4", "write_file", "write_file: new.tf", "weird-kind"),
        ToolCallInput(
            "c4",
            "write_file",
            "write_file: new.tf",
            "weird-kind",
            {"x": [1, 2.5, True]},
            [],
            Diff("new.tf", None, "x"),
        ),
        ToolCallResult("c4", "write_file", "failed", "Denied by the user.", denied=True),
        ToolCallStarted("c5", "update_plan", "update_plan", "think"),
        ToolCallInput("c5", "update_plan", "update_plan", "think", PLAN, []),
        ToolCallResult("c5", "update_plan", "completed", "Plan updated.", checklist=STEPS),
        ToolCallResult("c6", "bash", "completed", "out", raw_output={"exit": 0, "plan": {"a": 1}}),
        Compacted("Older turns were summarised.", 4),
        ErrorNotice("Model error: overloaded"),
        TextDelta("It adds one bucket."),
        UserMessage("thanks"),
        TextDelta("You're welcome."),
        ToolCallStarted("c7", "bash", "bash: terraform apply", "execute"),
        ToolCallInput(
            "c7", "bash", "bash: terraform apply", "execute", {"command": "terraform apply"}, []
        ),
    ]


def _through_models(events: list[Any], session_id: str) -> list[dict[str, Any]]:
    out = []
    for update, extra in replay_updates(events, session_id):
        params = serialize_params(SessionNotification(session_id=session_id, update=update))
        if extra:
            params["update"].update(extra)
        out.append(params)
    return out


def _without_notice_ids(params: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A notice is a message of its own, with a new random messageId each time."""
    for p in params:
        content = p["update"].get("content")
        if isinstance(content, dict) and content["text"].startswith("\n\n"):
            assert p["update"].pop("messageId")
    return params


def _client_view(params: list[dict[str, Any]]) -> list[Any]:
    """What a client shows: each tool call where it first appeared, holding what its
    updates said (a later field replaces an earlier one), the other updates in order."""
    view: list[Any] = []
    calls: dict[str, dict[str, Any]] = {}
    for p in params:
        assert p["sessionId"] == "sess-1"
        update = dict(p["update"])
        kind = update.pop("sessionUpdate")
        if kind in ("tool_call", "tool_call_update"):
            call = update["toolCallId"]
            if call not in calls:
                calls[call] = {}
                view.append(calls[call])
            calls[call].update(update)
        else:
            view.append((kind, update))
    return view


def test_each_replayed_update_is_what_the_models_serialize_to():
    for event in _history():
        model = to_update(event)
        if model is None:
            continue
        theirs = serialize_params(SessionNotification(session_id="", update=model))["update"]
        theirs.update(extra_fields(event, "m-1") or {})
        ours = wire_update(event, "m-1")
        assert ours is not None
        if isinstance(event, Compacted | ErrorNotice):
            assert ours.pop("messageId") != theirs.pop("messageId")
        assert ours == theirs, event


def test_a_replay_shows_what_the_update_by_update_replay_shows():
    wire = _without_notice_ids(list(replay_params(_history(), "sess-1")))
    models = _without_notice_ids(_through_models(_history(), "sess-1"))
    assert _client_view(wire) == _client_view(models)
    kinds = [p["update"]["sessionUpdate"] for p in wire]
    assert {"plan", "user_message_chunk", "agent_thought_chunk", "tool_call"} <= set(kinds)
    # The unfinished call is closed as interrupted, last.
    assert wire[-1]["update"]["toolCallId"] == "c7" and wire[-1]["update"]["status"] == "failed"


def test_a_call_whose_result_follows_is_one_update_in_its_final_state():
    wire = list(replay_params(_history(), "sess-1"))
    per_call: dict[str, list[dict[str, Any]]] = {}
    for p in wire:
        if "toolCallId" in p["update"]:
            per_call.setdefault(p["update"]["toolCallId"], []).append(p["update"])
    for call in ("c1", "c2", "c3", "c4", "c5"):
        (only,) = per_call[call]
        assert only["sessionUpdate"] == "tool_call" and only["status"] in ("completed", "failed")
        assert "rawInput" in only and "rawOutput" not in only  # the text is in content
    assert per_call["c1"][0]["locations"] == [{"path": "/w/main.tf", "line": 1}]
    # c3's result replaced the input's diff with its own text and diff
    assert [c["type"] for c in per_call["c3"][0]["content"]] == ["content", "diff"]
    # a result without a started call, and a call without a result
    assert [u["sessionUpdate"] for u in per_call["c6"]] == ["tool_call_update"]
    assert [u["status"] for u in per_call["c7"]] == ["in_progress", "failed"]


def test_a_call_is_sent_as_it_stands_when_something_comes_before_its_result():
    events = [
        ToolCallStarted("a", "bash", "bash: ls", "execute"),
        ToolCallInput("a", "bash", "bash: ls", "execute", {"command": "ls"}, []),
        ToolCallStarted("b", "bash", "bash: pwd", "execute"),
        ToolCallInput("b", "bash", "bash: pwd", "execute", {"command": "pwd"}, []),
        ToolCallResult("b", "bash", "completed", "/w"),  # b finished first
        TextDelta("Meanwhile."),
        ToolCallResult("a", "bash", "completed", "main.tf"),
    ]
    wire = [p["update"] for p in replay_params(events, "sess-1")]
    assert [(u["sessionUpdate"], u.get("toolCallId"), u.get("status")) for u in wire] == [
        ("tool_call", "a", "in_progress"),
        ("tool_call", "b", "completed"),
        ("agent_message_chunk", None, None),
        ("tool_call_update", "a", "completed"),
    ]
    models = _through_models(events, "sess-1")
    assert _client_view([{"sessionId": "sess-1", "update": u} for u in wire]) == _client_view(
        models
    )


def test_replay_params_of_an_empty_history():
    assert list(replay_params([], "s")) == []


def test_stored_message_ids_are_the_uuid5_of_session_and_index():
    for session_id in ("s1", "9b2f0c1e-aaaa-4bbb-8ccc-0123456789ab", "ünï ✓"):
        for index in (0, 1, 9, 10, 12345):
            expected = uuid.uuid5(uuid.NAMESPACE_URL, f"iac-kernel:{session_id}:{index}")
            assert stored_message_id(session_id, index) == str(expected)
