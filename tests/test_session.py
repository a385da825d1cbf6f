"""Live sessions through the manager: the API both front ends use."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from core_support import assert_history_valid, write_script
from iac_kernel.agent.manager import SessionManager
from iac_kernel.agent.session import SessionBusyError, SessionClosedError
from iac_kernel.config import Settings
from iac_kernel.events import TextDelta, ToolCallResult, UserMessage
from iac_kernel.sessions.store import SessionLockedError, SessionNotFoundError


@pytest.fixture
def script(tmp_path: Path) -> Path:
    return write_script(
        tmp_path / "s.json",
        [
            {"match": "slow", "turns": [{"text": "a b c d e f g h", "delay": 0.1}]},
            {
                "match": "write",
                "turns": [
                    {
                        "tool_use": [
                            {
                                "name": "write_file",
                                "input": {"path": "main.tf", "content": "# new\n"},
                            }
                        ]
                    },
                    {"text": "written"},
                ],
            },
            {"match": "hello", "turns": [{"thinking": "greet", "text": "hello there"}]},
        ],
    )


def _settings(script: Path) -> Settings:
    settings = Settings.from_env()
    settings.script = str(script)
    return settings


async def prompt(session, text: str, ask=None) -> tuple[Any, list[Any]]:
    events: list[Any] = []
    ended = await session.prompt([{"type": "text", "text": text}], events.append, ask)
    return ended, events


async def test_new_prompt_persist_and_reload(script: Path, workspace: Path):
    mgr = SessionManager(_settings(script), holder="t")
    session = mgr.new(str(workspace))
    ended, events = await prompt(session, "hello")
    assert ended.stop_reason == "end_turn"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "hello there"
    assert session.meta.title == "hello"
    await mgr.close(session.session_id)
    with pytest.raises(SessionNotFoundError):
        mgr.get(session.session_id)

    again = SessionManager(_settings(script), holder="t2").load(session.session_id)
    replay = again.replay()
    assert isinstance(replay[0], UserMessage) and replay[0].text == "hello"
    assert any(isinstance(e, TextDelta) and e.text == "hello there" for e in replay)
    await again.close()


async def test_cwd_must_be_absolute_and_exist(script: Path, tmp_path: Path):
    mgr = SessionManager(_settings(script), holder="t")
    with pytest.raises(ValueError, match="absolute"):
        mgr.new("relative/dir")
    with pytest.raises(ValueError, match="not a directory"):
        mgr.new(str(tmp_path / "missing"))


async def test_a_second_prompt_while_running_is_refused(script: Path, workspace: Path):
    session = SessionManager(_settings(script), holder="t").new(str(workspace))
    first = asyncio.ensure_future(prompt(session, "slow"))
    await asyncio.sleep(0.05)
    with pytest.raises(SessionBusyError):
        await prompt(session, "hello")
    ended, _ = await first
    assert ended.stop_reason == "end_turn"


async def test_cancel_then_prompt_again(script: Path, workspace: Path):
    session = SessionManager(_settings(script), holder="t").new(str(workspace))
    first = asyncio.ensure_future(prompt(session, "slow"))
    await asyncio.sleep(0.15)
    assert session.cancel()
    ended, _ = await first
    assert ended.stop_reason == "cancelled"
    ended, _ = await prompt(session, "hello")
    assert ended.stop_reason == "end_turn"
    assert_history_valid(session.conversation.messages)


async def test_modes_change_behaviour(script: Path, workspace: Path):
    session = SessionManager(_settings(script), holder="t").new(str(workspace))
    session.set_mode("read_only")
    asked = []

    async def ask(request):
        asked.append(request)
        return "allow_once"

    await prompt(session, "write it", ask)
    assert not (workspace / "main.tf").exists() and asked == []
    session.set_mode("accept_edits")
    await prompt(session, "write it", ask)
    assert (workspace / "main.tf").read_text() == "# new\n" and asked == []
    with pytest.raises(ValueError):
        session.set_mode("yolo")


async def test_model_switch_changes_answers(script: Path, workspace: Path, tmp_path: Path):
    other = write_script(tmp_path / "other.json", [{"turns": [{"text": "other model"}]}])
    session = SessionManager(_settings(script), holder="t").new(str(workspace))
    session.set_model(f"scripted:{other}")
    _, events = await prompt(session, "hello")
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "other model"
    assert session.writer.meta.model == f"scripted:{other}"
    with pytest.raises(ValueError):
        session.set_model(f"scripted:{tmp_path / 'missing.json'}")


async def test_config_changes(script: Path, workspace: Path):
    session = SessionManager(_settings(script), holder="t").new(str(workspace))
    session.set_config("max_turn_requests", "3")
    assert session.settings.max_turn_requests == 3
    for key, value in [("max_turn_requests", "-1"), ("no_such_key", "1"), ("mode", "nope")]:
        with pytest.raises(ValueError):
            session.set_config(key, value)


async def test_observers_see_every_turn(script: Path, workspace: Path):
    session = SessionManager(_settings(script), holder="t").new(str(workspace))
    seen: list[Any] = []
    session.observers.append(seen.append)
    await prompt(session, "hello")
    assert isinstance(seen[0], UserMessage)
    assert any(isinstance(e, TextDelta) for e in seen)


async def test_one_runtime_per_id_and_lock_across_managers(script: Path, workspace: Path):
    mgr = SessionManager(_settings(script), holder="kernel 1")
    session = mgr.new(str(workspace))
    assert mgr.load(session.session_id) is session
    with pytest.raises(SessionLockedError, match="kernel 1"):
        SessionManager(_settings(script), holder="editor").load(session.session_id)


async def test_fork_is_independent(script: Path, workspace: Path):
    mgr = SessionManager(_settings(script), holder="t")
    session = mgr.new(str(workspace))
    await prompt(session, "hello")
    fork = mgr.fork(session.session_id)
    assert fork.conversation.messages == session.conversation.messages
    await prompt(fork, "hello")
    assert len(fork.conversation.messages) == 2 * len(session.conversation.messages)


async def test_closed_session_refuses_prompts(script: Path, workspace: Path):
    mgr = SessionManager(_settings(script), holder="t")
    session = mgr.new(str(workspace))
    await mgr.close(session.session_id)
    with pytest.raises(SessionClosedError):
        await prompt(session, "hello")


async def test_load_repairs_an_interrupted_tool_call(script: Path, workspace: Path):
    mgr = SessionManager(_settings(script), holder="t")
    session = mgr.new(str(workspace))
    session.writer.append_message({"role": "user", "content": [{"type": "text", "text": "x"}]})
    session.writer.append_message(
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "tu1", "name": "bash", "input": {"command": "ls"}}
            ],
        }
    )
    await mgr.close(session.session_id)
    loaded = SessionManager(_settings(script), holder="t2").load(session.session_id)
    assert loaded.repairs
    assert_history_valid(loaded.conversation.messages)
    results = [e for e in loaded.replay() if isinstance(e, ToolCallResult)]
    assert results[0].status == "failed"


async def test_cancel_before_the_turn_starts(script: Path, workspace: Path):
    session = SessionManager(_settings(script), holder="t").new(str(workspace))
    events: list[Any] = []
    turn = asyncio.ensure_future(
        session.prompt([{"type": "text", "text": "hello"}], events.append, None)
    )
    await asyncio.sleep(0)  # prompt() has created the turn's task, which has not run yet
    assert session.busy
    session.cancel()
    ended = await turn
    assert ended.stop_reason == "cancelled"
    assert session.conversation.messages[-1]["content"][0]["text"] == "hello"
    assert events[-1] is ended


async def test_relative_script_paths_are_stored_absolute(script: Path, workspace: Path):
    (workspace / "mine.json").write_text('{"exchanges": [{"turns": [{"text": "mine"}]}]}')
    session = SessionManager(_settings(script), holder="t").new(str(workspace))
    session.set_model("scripted:mine.json")
    assert session.model_id == f"scripted:{workspace / 'mine.json'}"
    session.set_config("script", "mine.json")
    assert session.settings.script == str(workspace / "mine.json")


async def test_set_cwd_moves_the_session_and_its_metadata(script: Path, workspace: Path):
    mgr = SessionManager(_settings(script), holder="t")
    session = mgr.new(str(workspace))
    sub = workspace / "modules"
    sub.mkdir()
    session.set_cwd(str(sub))
    assert session.cwd == sub
    assert [m.session_id for m in mgr.list(str(sub))] == [session.session_id]
    assert mgr.list(str(workspace)) == []
