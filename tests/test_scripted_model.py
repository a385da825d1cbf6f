"""The offline scripted model: script loading, turn selection, streaming, limits."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from core_support import write_script
from iac_kernel.models.base import (
    MessageDone,
    ModelError,
    ModelRequest,
    TextChunk,
    ThinkingChunk,
    ToolUseBegin,
    ToolUseEnd,
)
from iac_kernel.models.registry import create_model, default_model_id
from iac_kernel.models.scripted import Script, ScriptedModel, ScriptError


def user(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


async def collect(model: ScriptedModel, messages: list[dict], **kwargs) -> list:
    return [e async for e in model.stream(ModelRequest(system="", messages=messages, **kwargs))]


@pytest.fixture
def model(tmp_path: Path) -> ScriptedModel:
    path = write_script(
        tmp_path / "s.json",
        [
            {
                "match": "security group",
                "turns": [
                    {
                        "thinking": "grep it",
                        "text": "Searching.",
                        "tool_use": [{"name": "grep", "input": {"pattern": "0.0.0.0/0"}}],
                    },
                    {"text": "One group is open."},
                ],
            },
            {"turns": [{"text": "second prompt answer"}]},
        ],
        fallback="no idea",
    )
    return ScriptedModel(Script.load(path))


async def test_matching_exchange_streams_thinking_text_and_tool_use(model):
    events = await collect(model, [user("check the security group rules")])
    assert [type(e) for e in events] == [
        ThinkingChunk,
        ThinkingChunk,
        TextChunk,
        ToolUseBegin,
        ToolUseEnd,
        MessageDone,
    ]
    done = events[-1]
    assert done.stop_reason == "tool_use"
    tool_use = done.content[-1]
    assert tool_use["input"] == {"pattern": "0.0.0.0/0"} and tool_use["id"].startswith("toolu_")
    assert done.usage.input_tokens > 0 and done.usage.output_tokens > 0


async def test_turn_follows_the_assistant_messages_since_the_prompt(model):
    first = await collect(model, [user("security group please")])
    history = [
        user("security group please"),
        {"role": "assistant", "content": first[-1].content},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": first[-1].content[-1]["id"], "content": "x"}
            ],
        },
    ]
    second = await collect(model, history)
    assert "".join(e.text for e in second if isinstance(e, TextChunk)) == "One group is open."
    assert second[-1].stop_reason == "end_turn"


async def test_position_and_fallback(model):
    history = [user("a"), {"role": "assistant", "content": "x"}, user("b")]
    events = await collect(model, history)
    assert "".join(e.text for e in events if isinstance(e, TextChunk)) == "second prompt answer"
    events = await collect(model, [user("unmatched first prompt")])
    assert "".join(e.text for e in events if isinstance(e, TextChunk)) == "no idea"


async def test_max_tokens_truncates(model):
    events = await collect(model, [user("security group")], max_tokens=1)
    assert events[-1].stop_reason == "max_tokens"
    assert not any(isinstance(e, ToolUseBegin) for e in events)


async def test_error_turn_raises(tmp_path: Path):
    model = ScriptedModel(
        Script.load(write_script(tmp_path / "e.json", [{"turns": [{"error": "boom"}]}]))
    )
    with pytest.raises(ModelError, match="boom"):
        await collect(model, [user("x")])


async def test_a_trace_file_gets_when_each_text_chunk_was_yielded(tmp_path: Path):
    trace = tmp_path / "t.trace"
    turn = {"thinking": "hmm", "text": "Three words here.", "trace": str(trace)}
    model = ScriptedModel(Script.load(write_script(tmp_path / "t.json", [{"turns": [turn]}])))
    before = time.monotonic()
    await collect(model, [user("x")])
    lines = [line.split() for line in trace.read_text().splitlines()]
    times = [float(at) for at, _n in lines]
    # One line per text chunk (none for thinking): the monotonic time, the text so far.
    assert [int(n) for _at, n in lines] == [6, 12, 17]
    assert before <= times[0] <= times[-1] <= time.monotonic() and times == sorted(times)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not valid JSON"),
        ('{"exchanges": [{"x": 1}]}', "needs a 'turns' list"),
        ('{"exchanges": [{"match": "(", "turns": []}]}', "match"),
    ],
)
def test_bad_scripts_are_clear_errors(tmp_path: Path, text: str, message: str):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ScriptError, match=message):
        Script.load(path)
    with pytest.raises(ScriptError, match="cannot read"):
        Script.load(tmp_path / "missing.json")


def test_registry_defaults_to_scripted_without_a_key():
    assert default_model_id() == "scripted"
    model = create_model("scripted")
    assert model.model_id == "scripted" and model.script.name == "default"


async def test_packaged_default_script_lists_files():
    model = create_model("scripted")
    events = await collect(model, [user("list the files here")])
    names = [e.name for e in events if isinstance(e, ToolUseBegin)]
    assert names == ["list_files"]


async def test_merged_prompts_match_on_the_newest(model):
    merged = {
        "role": "user",
        "content": [
            {"type": "text", "text": "security group"},
            {"type": "text", "text": "second one"},
        ],
    }
    events = await collect(model, [merged])
    assert "".join(e.text for e in events if isinstance(e, TextChunk)) == "no idea"


# -- branching on a tool's outcome -------------------------------------------------------

BRANCHING = [
    {
        "match": "unlock",
        "turns": [
            {"text": "Unlocking.", "tool_use": [{"name": "touch", "input": {"path": "lock"}}]},
            {
                "on": {
                    "done": {"text": "Released."},
                    "failed": {"text": "It failed."},
                    "denied": [
                        {"text": "Rejected; reading instead.", "tool_use": [{"name": "echo"}]},
                        {"text": "Nothing was changed."},
                    ],
                }
            },
            {"text": "Done path, second turn."},
        ],
    }
]


def tool_result(call_id: str, text: str, is_error: bool = False) -> dict:
    block = {"type": "tool_result", "tool_use_id": call_id, "content": text}
    if is_error:
        block["is_error"] = True
    return block


async def replay(model: ScriptedModel, results: list[tuple[str, bool]]) -> list[str]:
    """Play the exchange, answering each tool call with the next (text, is_error)."""
    messages = [user("please unlock it")]
    texts = []
    pending = list(results)
    while True:
        done = (await collect(model, messages))[-1]
        texts.append("".join(b.get("text", "") for b in done.content if b["type"] == "text"))
        calls = [b for b in done.content if b["type"] == "tool_use"]
        if not calls:
            return texts
        messages.append({"role": "assistant", "content": done.content})
        text, is_error = pending.pop(0)
        messages.append(
            {"role": "user", "content": [tool_result(c["id"], text, is_error) for c in calls]}
        )


@pytest.fixture
def branching(tmp_path: Path) -> ScriptedModel:
    return ScriptedModel(Script.load(write_script(tmp_path / "b.json", BRANCHING)))


async def test_branch_done_goes_on_with_the_rest_of_the_exchange(branching):
    texts = await replay(branching, [("created lock", False)])
    assert texts == ["Unlocking.", "Released."]
    # "Released." ends the turn (no tool call); the turn after it belongs to the done path.
    messages = [user("please unlock it")]
    first = (await collect(branching, messages))[-1]
    messages += [
        {"role": "assistant", "content": first.content},
        {"role": "user", "content": [tool_result(first.content[-1]["id"], "ok")]},
        {"role": "assistant", "content": [{"type": "text", "text": "Released."}]},
        {"role": "user", "content": [tool_result("x", "more")]},
    ]
    assert (await collect(branching, messages))[-1].content[0]["text"] == "Done path, second turn."


async def test_branch_failed(branching):
    assert await replay(branching, [("exit status 1", True)]) == ["Unlocking.", "It failed."]


async def test_branch_denied_list_replaces_the_rest(branching):
    texts = await replay(branching, [("Permission denied.", True), ("hello", False)])
    assert texts == ["Unlocking.", "Rejected; reading instead.", "Nothing was changed."]


async def test_denied_wins_over_failed_and_a_note_still_counts_as_denied(branching):
    messages = [user("please unlock it")]
    first = (await collect(branching, messages))[-1]
    messages += [
        {"role": "assistant", "content": first.content},
        {
            "role": "user",
            "content": [
                tool_result("a", "boom", True),
                tool_result("b", "Rejected by the user: not on a Friday", True),
            ],
        },
    ]
    assert (await collect(branching, messages))[-1].content[0]["text"].startswith("Rejected")


async def test_missing_outcome_uses_else_or_says_the_outcome(tmp_path: Path):
    script = write_script(
        tmp_path / "e.json",
        [
            {
                "match": "a",
                "turns": [{"tool_use": [{"name": "t"}]}, {"on": {"done": {"text": "ok"}}}],
            },
            {
                "match": "b",
                "turns": [
                    {"tool_use": [{"name": "t"}]},
                    {"on": {"done": {"text": "ok"}, "else": {"text": "not ok"}}},
                ],
            },
        ],
    )
    model = ScriptedModel(Script.load(script))
    for prompt, expected in (("a", "ended as **failed**"), ("b", "not ok")):
        first = (await collect(model, [user(prompt)]))[-1]
        messages = [
            user(prompt),
            {"role": "assistant", "content": first.content},
            {"role": "user", "content": [tool_result(first.content[-1]["id"], "x", True)]},
        ]
        assert expected in (await collect(model, messages))[-1].content[0]["text"]


@pytest.mark.parametrize(
    ("turns", "message"),
    [
        ([{"on": {"rejected": {"text": "x"}}}], "unknown outcome 'rejected'"),
        ([{"on": {}}], "'on' must be a non-empty object"),
        ([{"on": {"done": "text"}}], "must be a turn object or a list of turns"),
        ([{"on": {"done": [{"on": {"maybe": {}}}]}}], "unknown outcome 'maybe'"),
    ],
)
def test_bad_branches_are_clear_errors(tmp_path: Path, turns: list, message: str):
    path = write_script(tmp_path / "bad.json", [{"turns": turns}])
    with pytest.raises(ScriptError, match=message):
        Script.load(path)


async def test_real_loop_rejection_takes_the_denied_branch(tmp_path: Path):
    """The agent loop and permission gate for real: a Reject leads to the denied words."""
    from core_support import TouchTool, make_loop
    from iac_kernel.agent.permissions import REJECT_ONCE
    from iac_kernel.events import TextDelta

    script = write_script(
        tmp_path / "s.json",
        [
            {
                "turns": [
                    {"text": "Touching. ", "tool_use": [{"name": "touch", "input": {"path": "f"}}]},
                    {"on": {"done": {"text": "Touched now."}, "denied": {"text": "Not touched."}}},
                ]
            }
        ],
    )

    async def reject(_request) -> str:
        return REJECT_ONCE

    loop, _persist = make_loop(script, tmp_path, [TouchTool()])
    events: list = []
    await loop.run_turn([{"type": "text", "text": "go"}], events.append, reject)
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "Touching. Not touched." and not (tmp_path / "f").exists()

    async def allow(_request) -> str:
        return "allow_once"

    loop, _persist = make_loop(script, tmp_path, [TouchTool()])
    events = []
    await loop.run_turn([{"type": "text", "text": "go"}], events.append, allow)
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "Touching. Touched now." and (tmp_path / "f").exists()


SHIPPED = [*sorted(Path(__file__).resolve().parents[1].glob("notebooks/scripts/*.json")), None]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name if p else "default.json")
async def test_every_shipped_script_answers_a_rejection(path: Path | None):
    """Wherever a script calls a tool that asks permission (commands, edits), a Reject there
    gets an answer of its own that says so, never the words written for the approved path."""
    from iac_kernel.tools.base import Category
    from iac_kernel.tools.registry import build_tools

    asks = {t.name for t in build_tools() if t.category is not Category.READ}
    model = ScriptedModel(Script.load(path))
    for exchange in model.script.exchanges:
        prompt = exchange.get("match") or "prompt"
        prompt = {"scratch copy": "make a scratch copy"}.get(prompt, prompt)
        messages = [user(prompt)]
        for _step in range(20):
            done = (await collect(model, messages))[-1]
            calls = [b for b in done.content if b["type"] == "tool_use"]
            if not calls:
                break
            messages.append({"role": "assistant", "content": done.content})
            if any(c["name"] in asks for c in calls):
                denied = [tool_result(c["id"], "Permission denied.", True) for c in calls]
                reply = (await collect(model, [*messages, {"role": "user", "content": denied}]))[-1]
                said = "".join(b.get("text", "") for b in reply.content if b["type"] == "text")
                assert re.search(r"reject|denied|refused", said, re.IGNORECASE), (prompt, said)
                assert not [b for b in reply.content if b["type"] == "tool_use"], said
            # The triage plan is meant to fail on the lock: follow that path.
            ok = [tool_result(c["id"], "ok", "plan" in str(c["input"])) for c in calls]
            messages.append({"role": "user", "content": ok})
